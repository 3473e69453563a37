"""Field types of what a session may ask for, shared by its requests and records."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

Vocabulary = Annotated[
    tuple[Annotated[str, Field(min_length=1, max_length=64, pattern=r"\S")], ...],
    Field(
        max_length=50,
        description="words the session expects (names, product terms; at most 50 of 64 "
        "characters): the decoder is prompted with them, so it writes them as given",
    ),
]
