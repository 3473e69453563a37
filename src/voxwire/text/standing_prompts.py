"""Standing prompts of one session: matched on every committed final, across
segment boundaries, each occurrence reported once.

Pure code, no I/O, no clock::

    prompts = StandingPrompts([Prompt(id="p1", text="ask not what")])
    for final in finals:                      # in commit order
        for hit in prompts.on_final(final.id, final.text, final.start_ms, final.end_ms):
            ...                               # publish a match message

Each final is matched together with the finals just before it (``window``
finals in all), so a phrase split by the endpointer ("ask not" | "what your
country") is still found when its last word commits. A match must include a
word of the newest final (what lay wholly in earlier finals was reported
then) and must not overlap an earlier match of the same prompt, so every
occurrence is reported once, as soon as its last word is committed. Windows
compete before that filter, so the exact phrase in an earlier final beats a
fuzzy window that stretches it by a word into the newest one. Words are
normalised over the joined text of the window (:func:`voxwire.text.normalization.normalize`),
so a number spoken across a boundary ("twenty" | "five") is one number.

A prompt limited to a speaker (``Prompt.speaker``, sessions with diarization)
is matched only on that speaker's finals, each together with that speaker's
finals just before it: "ask not" (S1) | "mm-hm" (S2) | "what your country"
(S1) is "ask not what your country" for a prompt of S1, and a final of S2
never matches it.

Prompts can be added and removed while the session runs; a new prompt
matches from the next final on (with the window before it, so a phrase that
ends in the next final is found).

A match's ``start_ms``/``end_ms`` are those of its first and last words when
the finals carry word times (:mod:`voxwire.text.words`), else estimated from
the characters' position in the final's time span.

The state is a function of the finals and prompt changes given so far, so a
session resumed elsewhere rebuilds it by replaying them (:meth:`replay`).
"""

from __future__ import annotations

import html
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from voxwire.text.matching import (
    CompiledPrompt,
    Prompt,
    candidates,
    select,
)
from voxwire.text.normalization import Token, normalize
from voxwire.text.words import span_times
from voxwire_client.api import PromptSpec
from voxwire_client.messages import MatchData, WordData

Words = tuple[WordData, ...]

DEFAULT_WINDOW = 3
"""Finals matched together: the newest and the two before it."""


@dataclass(frozen=True, slots=True)
class _Final:
    segment_id: str
    text: str
    start_ms: int
    end_ms: int
    words: tuple[WordData, ...] = ()
    speaker: str | None = None


def prompt_of(spec: PromptSpec | Prompt) -> Prompt:
    """The matcher's prompt for a prompt as the API carries it."""
    if isinstance(spec, Prompt):
        return spec
    return Prompt(
        spec.id,
        spec.text,
        fuzzy=spec.fuzzy,
        slop=spec.slop,
        within=spec.within,
        speaker=spec.speaker,
    )


def spec_of(prompt: Prompt) -> PromptSpec:
    """The API's form of a prompt (to store it, e.g. in a stream checkpoint)."""
    return PromptSpec(
        id=prompt.id,
        text=prompt.text,
        fuzzy=prompt.fuzzy,
        slop=prompt.slop,
        within=prompt.within,
        speaker=prompt.speaker,
    )


def check_speakers(prompts: Iterable[PromptSpec | Prompt], *, diarized: bool) -> None:
    """Raise ValueError when a prompt is limited to a speaker in a session
    without diarization (where no final has a speaker, so it would never match)."""
    if diarized:
        return
    for prompt in prompts:
        if prompt.speaker is not None:
            raise ValueError(
                f"prompt {prompt.id!r} is limited to speaker {prompt.speaker}, "
                "but the session has no diarization"
            )


MAX_PROMPTS = 100
"""Prompts one session may have at once: an upload's, and a live stream's after
every change (checked by the gateway and by the stream worker)."""


class StandingPrompts:
    """The prompts of one session and what they matched (see the module doc)."""

    def __init__(self, prompts: Sequence[Prompt] = (), *, window: int = DEFAULT_WINDOW) -> None:
        if window < 1:
            raise ValueError(f"window must be at least 1 final, got {window}")
        self._prompts: dict[str, CompiledPrompt] = {}
        self._window = window
        self._recent: deque[_Final] = deque(maxlen=window)
        # the newest finals of each speaker, for prompts limited to one
        self._by_speaker: dict[str, deque[_Final]] = {}
        # per prompt: (segment id, character offset) of every word it matched
        self._taken: dict[str, set[tuple[str, int]]] = {}
        for prompt in prompts:
            self.add(prompt)

    @property
    def prompts(self) -> list[Prompt]:
        return [c.prompt for c in self._prompts.values()]

    def add(self, prompt: Prompt) -> None:
        """Listen for ``prompt`` from the next final on; raise ValueError for a
        duplicate id or a prompt without words."""
        if prompt.id in self._prompts:
            raise ValueError(f"duplicate prompt id {prompt.id!r}")
        self._prompts[prompt.id] = CompiledPrompt.of(prompt)
        self._taken[prompt.id] = set()

    def change(self, add: Sequence[Prompt], remove: Sequence[str], *, limit: int) -> None:
        """Remove, then add, all or nothing: raise ValueError (duplicate id, a
        prompt without words, more than ``limit`` prompts) and change nothing."""
        ids = [p for p in self._prompts if p not in remove] + [p.id for p in add]
        if len(ids) != len(set(ids)):
            raise ValueError("prompt ids must be unique")
        if len(ids) > limit:
            raise ValueError(f"at most {limit} prompts per session, this would make {len(ids)}")
        for prompt in add:
            CompiledPrompt.of(prompt)  # raises for a prompt without words
        for prompt_id in remove:
            self.remove(prompt_id)
        for prompt in add:
            self.add(prompt)

    def remove(self, prompt_id: str) -> bool:
        """Stop listening for a prompt; False when there was none with this id."""
        self._taken.pop(prompt_id, None)
        return self._prompts.pop(prompt_id, None) is not None

    def on_final(
        self,
        segment_id: str,
        text: str,
        start_ms: int,
        end_ms: int,
        timed: Sequence[WordData] = (),
        speaker: str | None = None,
    ) -> list[MatchData]:
        """The prompts heard once this final (of ``speaker``, when diarized) is
        committed, by prompt then position. With the final's words (``timed``), a
        match's times are those of its words."""
        final = _Final(segment_id, text, start_ms, end_ms, tuple(timed), speaker)
        self._recent.append(final)
        everyone = [c for c in self._prompts.values() if c.prompt.speaker is None]
        matches = self._heard(list(self._recent), everyone)
        if speaker is not None:
            own = self._by_speaker.setdefault(speaker, deque(maxlen=self._window))
            own.append(final)
            theirs = [c for c in self._prompts.values() if c.prompt.speaker == speaker]
            matches += self._heard(list(own), theirs)
        order = {prompt_id: i for i, prompt_id in enumerate(self._prompts)}
        return sorted(matches, key=lambda m: order[m.prompt_id])  # stable: by position within

    def _heard(self, finals: list[_Final], prompts: Sequence[CompiledPrompt]) -> list[MatchData]:
        """What ``prompts`` match in ``finals`` (the newest last) with a word of the newest."""
        if not prompts:
            return []
        joined, offsets = _join(finals)
        tokens = normalize(joined)
        if not tokens:
            return []
        newest = offsets[-1]
        words = [t.text for t in tokens]
        keys = [_key(finals, offsets, t.start) for t in tokens]
        live = {f.segment_id for f in finals}
        matches: list[MatchData] = []
        for compiled in prompts:
            prompt_id = compiled.prompt.id
            taken = {k for k in self._taken[prompt_id] if k[0] in live}  # forget old finals
            self._taken[prompt_id] = taken
            blocked = {i for i, key in enumerate(keys) if key in taken}
            for score, i, j in select(candidates(compiled, words), blocked):
                if tokens[j - 1].end <= newest:
                    continue  # wholly in earlier finals: reported then, or not wanted then
                taken.update(keys[i:j])
                matches.append(_match(compiled.prompt, score, tokens[i:j], finals, offsets, joined))
        return matches

    def replay(
        self,
        finals: Iterable[
            tuple[str, str, int, int]
            | tuple[str, str, int, int, Words]
            | tuple[str, str, int, int, Words, str | None]
        ],
    ) -> None:
        """Rebuild the state after these finals (segment id, text, start, end, words,
        speaker) were committed and their matches published: nothing is returned."""
        for final in finals:
            self.on_final(*final)


def _join(finals: Sequence[_Final]) -> tuple[str, list[int]]:
    """The finals' texts joined by spaces, and where each one starts in it."""
    offsets, pos = [], 0
    for final in finals:
        offsets.append(pos)
        pos += len(final.text) + 1
    return " ".join(f.text for f in finals), offsets


def _owner(offsets: Sequence[int], pos: int) -> int:
    """The index of the final that the joined text's character ``pos`` belongs to."""
    index = 0
    for i, start in enumerate(offsets):
        if start <= pos:
            index = i
    return index


def _key(finals: Sequence[_Final], offsets: Sequence[int], pos: int) -> tuple[str, int]:
    owner = _owner(offsets, pos)
    return finals[owner].segment_id, pos - offsets[owner]


def _ms(final: _Final, pos: int, *, end: bool = False) -> int:
    """A character position of a final's text in time: the start (``end``: the
    end) of the word there when the final has word times, else mapped
    proportionally onto its time span."""
    text = final.text
    around = (pos - 1, pos) if end else (pos, pos + 1)
    timed = span_times(text, final.words, *around) if final.words else None
    if timed is not None:
        return timed[1] if end else timed[0]
    lo, hi = len(text) - len(text.lstrip()), len(text.rstrip())
    chars = max(1, hi - lo)
    share = min(max(pos - lo, 0), chars) / chars
    return final.start_ms + round(max(0, final.end_ms - final.start_ms) * share)


def _match(
    prompt: Prompt,
    score: float,
    span: Sequence[Token],
    finals: Sequence[_Final],
    offsets: Sequence[int],
    joined: str,
) -> MatchData:
    first, last = span[0].start, span[-1].end
    a, b = _owner(offsets, first), _owner(offsets, last - 1)
    context_start = offsets[a]
    context_end = offsets[b] + len(finals[b].text)
    speakers = {f.speaker for f in finals[a : b + 1]}
    return MatchData(
        prompt_id=prompt.id,
        prompt=prompt.text,
        score=score,
        start_ms=_ms(finals[a], first - offsets[a]),
        end_ms=_ms(finals[b], last - offsets[b], end=True),
        text=joined[first:last],
        highlight=(
            _escape(joined[context_start:first])
            + f"<em>{_escape(joined[first:last])}</em>"
            + _escape(joined[last:context_end])
        ),
        segment_ids=tuple(f.segment_id for f in finals[a : b + 1]),
        speaker=speakers.pop() if len(speakers) == 1 else None,
    )


def _escape(text: str) -> str:
    return html.escape(text, quote=False)
