"""Deepgram's query parameters, parsed once where they enter into a
:class:`DeepgramRequest`: the session's options (a
:class:`~voxwire_client.api.StreamRequest` for a live connection) and how its
answers are shaped (:class:`Listening`). Pure: no I/O.

Each parameter is used, ignored or refused (docs/deepgram.md has the table):

- ``model``: a model the platform serves is used as named; Deepgram's own
  (``nova-3``, ``nova-2``, ``nova``, ``enhanced``, ``base``, with any suffix such
  as ``-general`` or ``-phonecall``) stand for the platform's choice, as a
  native session naming no model gets; ``whisper-<size>`` is the served model of
  that size (``whisper-tiny``: ``tiny.en`` or ``tiny``); any other name is
  Deepgram's 400 for a model it does not have;
- ``language`` (its primary subtag: ``en-US`` is ``en``; ``multi`` and
  ``detect_language=true`` detect it), ``diarize``, ``keyterm`` and ``keywords``
  (the session's vocabulary), ``redact``, ``encoding``/``sample_rate``/``channels``,
  ``endpointing`` (the silence that ends an utterance, 100 ms to 10 s; ``false``:
  no ``speech_final``), ``utterance_end_ms``, ``interim_results``, ``vad_events``,
  ``punctuate``/``smart_format``, ``utterances``, ``paragraphs``, ``multichannel``
  (a file's channels transcribed apart) are used;
- the audio intelligence features (``summarize``, ``topics``, ``intents``,
  ``sentiment``, ``detect_entities``, ``search``, ``replace``) and
  ``profanity_filter``, when turned on, are refused with Deepgram's 400 naming
  them; ``callback`` is a pre-recorded request's webhook (the route hands it to
  the upload), refused live;
- anything else (``numerals``, ``tag``, ``extra``, ``version``, ``mip_opt_out``...)
  is accepted and ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError

from voxwire.core.config import Settings
from voxwire.gateway.deepgram_api.errors import DeepgramError, unsupported
from voxwire.sessions.languages import served_models
from voxwire_client.api import StreamRequest
from voxwire_client.encodings import NATIVE_RATES, AudioEncoding, check_format
from voxwire_client.options import (
    ChannelMode,
    Endpointing,
    RedactMode,
    SessionOptions,
    SpeakerBounds,
)

DEEPGRAM_MODELS = re.compile(r"(?:nova-3|nova-2|nova|enhanced|base|general)(?:-[a-z0-9-]+)?")
"""Deepgram's own model names: each stands for the platform's choice."""
WHISPER_SIZES = re.compile(r"whisper-(tiny|base|small|medium|large)")
"""Deepgram's names of the Whisper models: the served model of that size."""

ENCODINGS = {
    "linear16": AudioEncoding.PCM16,
    "mulaw": AudioEncoding.MULAW,
    "alaw": AudioEncoding.ALAW,
}
"""Deepgram's raw encodings that voxwire takes as they are."""

REFUSED_FEATURES = {
    "summarize": "summaries are not made here",
    "topics": "topic detection is not done here",
    "intents": "intent recognition is not done here",
    "sentiment": "sentiment analysis is not done here",
    "detect_entities": "entity detection is not done here (redact takes personal data out)",
    "detect_topics": "topic detection is not done here",
    "search": "search the stored transcripts instead: POST /v1/search",
    "replace": "word replacement is not done here",
    "profanity_filter": "profanity is not filtered here",
    "custom_topic": "topic detection is not done here",
    "custom_intent": "intent recognition is not done here",
}
"""Deepgram features voxwire does not have, refused when turned on."""

SILENCE_MS = (100, 10_000)
"""The silence an utterance may end after (voxwire's endpointing bounds)."""

_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off", "")


@dataclass(frozen=True, slots=True)
class Listening:
    """How the answers of one request are shaped."""

    model: str = "base"
    """The model as the request named it (``metadata.model_info.name`` says the served one)."""
    interim_results: bool = False
    punctuate: bool = False
    """``punctuate`` or ``smart_format``: transcripts as written (else lower case,
    without punctuation)."""
    speech_final: bool = True
    """False with ``endpointing=false``: no result ends a turn."""
    vad_events: bool = False
    utterance_end: bool = False
    """``utterance_end_ms`` given: an ``UtteranceEnd`` after each utterance."""
    utterances: bool = False
    paragraphs: bool = False
    diarize: bool = False


@dataclass(frozen=True, slots=True)
class RawAudio:
    """Headerless audio as ``encoding``, ``sample_rate`` and ``channels`` declare it."""

    encoding: AudioEncoding = AudioEncoding.PCM16
    sample_rate: int = 16_000
    channels: int = 1


@dataclass(frozen=True, slots=True)
class DeepgramRequest:
    """What a Deepgram request asks for, checked."""

    options: SessionOptions
    """A :class:`StreamRequest` for a live connection."""
    listening: Listening = field(default_factory=Listening)
    raw: RawAudio | None = None
    """The declared raw audio (always, live); None: the body has a container."""
    callback: str | None = None


class Query:
    """The query's parameters by name (a name may repeat: ``keyterm``)."""

    def __init__(self, items: Iterable[tuple[str, str]]) -> None:
        self._values: dict[str, list[str]] = {}
        for name, value in items:
            self._values.setdefault(name, []).append(value)

    def get(self, name: str) -> str | None:
        values = self._values.get(name)
        return values[-1].strip() if values else None

    def all(self, name: str) -> list[str]:
        return [v.strip() for v in self._values.get(name, []) if v.strip()]

    def flag(self, name: str, default: bool = False) -> bool:
        raw = self.get(name)
        if raw is None:
            return default
        if raw.lower() not in _TRUE + _FALSE:
            raise DeepgramError(400, f"Bad Request: {name} must be true or false, not {raw!r:.30}")
        return raw.lower() in _TRUE

    def number(self, name: str, low: int, high: int) -> int | None:
        raw = self.get(name)
        if raw is None or raw == "":
            return None
        try:
            value = int(raw)
        except ValueError:
            value = low - 1
        if not low <= value <= high:
            raise DeepgramError(
                400,
                f"Bad Request: {name} must be a whole number from {low} to {high}, not {raw!r:.30}",
            )
        return value


def live_request(items: Iterable[tuple[str, str]], settings: Settings) -> DeepgramRequest:
    """A live connection's request (``WS /v1/listen``); DeepgramError naming what is wrong."""
    query = Query(items)
    raw = _raw_audio(query, live=True)
    assert raw is not None
    if query.flag("multichannel") and raw.channels > 1:
        raise unsupported("multichannel", "a live stream is transcribed as one channel")
    if raw.channels != 1:
        raise unsupported(
            f"channels={raw.channels}", "a live stream is one channel: mix it down, send channels=1"
        )
    listening, endpointing = _listening(query, live=True)
    common = _common(query, settings)
    try:
        options = StreamRequest(
            **common,
            encoding=raw.encoding,
            sample_rate=raw.sample_rate,
            endpointing=endpointing,
        )
    except ValidationError as exc:
        raise _invalid(exc) from None
    return DeepgramRequest(options, listening, raw, _callback(query))


def file_request(items: Iterable[tuple[str, str]], settings: Settings) -> DeepgramRequest:
    """A pre-recorded request's (``POST /v1/listen``); DeepgramError naming what is wrong."""
    query = Query(items)
    raw = _raw_audio(query, live=False)
    listening, _ = _listening(query, live=False)
    common = _common(query, settings)
    if query.flag("multichannel"):
        common["channels"] = ChannelMode.SEPARATE
    try:
        options = SessionOptions(**common)
    except ValidationError as exc:
        raise _invalid(exc) from None
    return DeepgramRequest(options, listening, raw, _callback(query))


def served_model(name: str | None, settings: Settings) -> str | None:
    """The served model ``name`` asks for; None for Deepgram's own names (the
    platform chooses); DeepgramError 400 for any other."""
    name = (name or "").strip()
    served = served_models(settings)
    if not name or DEEPGRAM_MODELS.fullmatch(name):
        return None
    if name in served:
        return name
    size = WHISPER_SIZES.fullmatch(name)
    if size is not None:
        sized = [m for m in served if re.match(rf"{size.group(1)}(?:$|[.-])", m)]
        if sized:
            return sized[0]
    raise DeepgramError(
        400,
        f"Bad Request: No such model/version/tier combination found: model {name!r:.60} is not "
        f"served here. Models served: {', '.join(served)}; nova-3, nova-2, nova, enhanced and "
        "base stand for the platform's choice.",
    )


def spoken_language(query: Query) -> str | None:
    """The language asked for: a BCP-47 tag's primary subtag (``en-US``: ``en``);
    ``multi`` or ``detect_language=true``: ``auto``; None: the platform's default."""
    language = (query.get("language") or "").lower()
    if language == "multi" or (not language and query.flag("detect_language")):
        return "auto"
    return language.split("-")[0] or None


def vocabulary(terms: Sequence[str]) -> tuple[str, ...]:
    """``keyterm`` and ``keywords`` (less a ``:boost``) as vocabulary entries of
    at most 64 characters, cut at words."""
    entries: list[str] = []
    for term in terms:
        run = ""
        for word in term.split():
            if run and len(run) + 1 + len(word) > 64:
                entries.append(run)
                run = ""
            run = f"{run} {word}" if run else word[:64]
        if run and run not in entries:
            entries.append(run)
    return tuple(entries)


def _common(query: Query, settings: Settings) -> dict[str, object]:
    """The options live and pre-recorded requests share."""
    for name, why in REFUSED_FEATURES.items():
        value = query.get(name)
        if value is not None and value.lower() not in _FALSE:
            raise unsupported(name, why)
    keywords = [re.sub(r":-?[0-9.]+$", "", k) for k in query.all("keywords")]
    terms = vocabulary([*query.all("keyterm"), *keywords])
    if len(terms) > 50:
        raise DeepgramError(400, f"Bad Request: {len(terms)} keyterms; at most 50 are taken")
    diarize = query.flag("diarize") or query.get("diarize_model") is not None
    return {
        "model": served_model(query.get("model"), settings),
        "language": spoken_language(query),
        "vocabulary": terms,
        "diarize": SpeakerBounds() if diarize else None,
        "redact": _redact(query.all("redact")),
    }


def _redact(values: Sequence[str]) -> RedactMode | None:
    """Deepgram's ``redact`` values: ``numbers`` takes out every long number too;
    ``pci``, ``pii``, ``ssn``, ``true`` and entity names take out personal data;
    ``false``: the tenant's policy."""
    asked = {v.lower() for v in values} - set(_FALSE)
    if not asked:
        return None
    return RedactMode.NUMBERS if "numbers" in asked else RedactMode.ENTITY


def _raw_audio(query: Query, *, live: bool) -> RawAudio | None:
    """The declared raw audio; a live connection without ``encoding`` is linear16."""
    name = (query.get("encoding") or "").lower()
    channels = query.number("channels", 1, 8) or 1
    if not name and not live:
        return None
    encoding = ENCODINGS.get(name or "linear16")
    if encoding is None:
        if not live:
            return None  # the file's container says how it is encoded
        raise unsupported(
            f"encoding={name}",
            "a live stream takes raw linear16, mulaw or alaw audio "
            "(containers are not unpacked live); upload a file with POST /v1/listen",
        )
    rate = query.number("sample_rate", 1, 192_000) or NATIVE_RATES[encoding]
    try:
        check_format(encoding, rate, 20)
    except ValueError as exc:
        raise DeepgramError(400, f"Bad Request: {exc}") from None
    return RawAudio(encoding, rate, channels)


def _listening(query: Query, *, live: bool) -> tuple[Listening, Endpointing]:
    """How answers are shaped, and a live stream's endpointing."""
    interim = query.flag("interim_results")
    raw_endpointing = (query.get("endpointing") or "").lower()
    speech_final = raw_endpointing not in _FALSE or raw_endpointing == ""
    silence = None if raw_endpointing in _FALSE + _TRUE else query.number("endpointing", 0, 60_000)
    utterance_end = query.number("utterance_end_ms", 0, 60_000)
    if live and utterance_end is not None and not interim:
        raise DeepgramError(400, "Bad Request: utterance_end_ms needs interim_results=true")
    if silence is None:
        silence = utterance_end
    endpointing = Endpointing()
    if silence is not None:
        low, high = SILENCE_MS
        endpointing = Endpointing(min_silence_ms=min(max(silence, low), high))
    listening = Listening(
        model=query.get("model") or "base",
        interim_results=interim,
        punctuate=query.flag("punctuate") or query.flag("smart_format"),
        speech_final=speech_final,
        vad_events=query.flag("vad_events"),
        utterance_end=utterance_end is not None,
        utterances=query.flag("utterances"),
        paragraphs=query.flag("paragraphs"),
        diarize=query.flag("diarize") or query.get("diarize_model") is not None,
    )
    return listening, endpointing


def _callback(query: Query) -> str | None:
    return query.get("callback") or None


def _invalid(exc: ValidationError) -> DeepgramError:
    errors = exc.errors()
    if not errors:
        return DeepgramError(400, "Bad Request: invalid parameters")
    where = ".".join(str(p) for p in errors[0]["loc"])
    return DeepgramError(400, f"Bad Request: {where}: {errors[0]['msg']}")
