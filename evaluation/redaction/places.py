"""Places (``LOCATION``, the ``redact_places`` setting) said aloud: sentences of
the kind a caller says, with the place words of each as patterns that also match
how an engine may spell them, and the scoring of a finder on what an engine
wrote for them (benchmarks/bench_places.py). Some sentences say no place: what
is found in them is a false positive. Two say a building or an airport (the
model's ``FAC``), to weigh that label; one says a person's name beside a place.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from evaluation.redaction.names import NameScore, Span, score_spans

PLACES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("I live in Springfield, Illinois.", (r"spring\s?field", r"illinois")),
    ("We moved here from Manchester last spring.", (r"manchester",)),
    ("My parents are in Boston this week.", (r"boston",)),
    ("I was born in Ireland, near Dublin.", (r"ireland", r"dublin")),
    ("The package should go to Denver, Colorado.", (r"denver", r"colorado")),
    ("She flew to Paris on Monday.", (r"paris",)),
    ("I'm calling from Toronto about my order.", (r"toronto",)),
    ("Our office is in Austin, Texas.", (r"austin", r"texas")),
    ("He grew up in Glasgow, Scotland.", (r"glasgow", r"scotland")),
    ("I am staying with my sister in Seattle.", (r"seattle",)),
    ("We spent the summer in Italy.", (r"italy",)),
    ("The delivery address is in Leeds.", (r"leeds",)),
    ("My daughter studies in Berlin.", (r"berlin",)),
    ("I drove down from Chicago this morning.", (r"chicago",)),
    ("We hiked in the Rocky Mountains last year.", (r"rocky", r"mountains")),
    ("The farm is near the Mississippi River.", (r"mississippi",)),
    ("Hello, this is Mary from Phoenix, Arizona.", (r"phoenix", r"arizona")),
    ("I used to work in London before moving to Sydney.", (r"london", r"sydney")),
    ("Could you send it to my home in Nashville?", (r"nashville",)),
    ("My flight from Atlanta was delayed.", (r"atlanta",)),
    ("We met at Heathrow Airport.", (r"heathrow",)),
    ("I work at the Empire State Building.", (r"empire", r"state")),
    ("I would like to change the date of my appointment.", ()),
    ("The weather has been very cold this week.", ()),
    ("Can you tell me the balance on my account?", ()),
    ("Thank you for calling, have a nice day.", ()),
    ("My order arrived broken and I want a refund.", ()),
    ("Please call me back tomorrow afternoon.", ()),
)
"""What is said -> a pattern per place word said in it (matched whole, case ignored)."""


def place_words(patterns: Sequence[str], text: str) -> list[Span]:
    """Where ``text`` holds the place words of ``patterns``."""
    return [
        (m.start(), m.end())
        for pattern in patterns
        for m in re.finditer(rf"\b{pattern}\b", text, re.IGNORECASE)
    ]


def score_places(
    texts: Sequence[tuple[Sequence[str], str]], find: Callable[[str], list[Span]]
) -> NameScore:
    """Recall over place words and precision over findings of ``find`` on
    ``texts`` (the patterns of what was said, what the engine wrote)."""
    return score_spans(texts, place_words, find)
