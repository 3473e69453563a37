"""Accepting an upload: validate, decode, store, enqueue. Independent of HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath

from pydantic import TypeAdapter, ValidationError

from voxwire.access.control import AccessControl, NoAccessSync
from voxwire.access.keys import KeyGrant
from voxwire.audio.decoding import DecodedAudio, decode, float32_to_pcm16le
from voxwire.blobs import BlobStore
from voxwire.bus import Bus
from voxwire.core.config import Settings
from voxwire.core.errors import AudioError, InvalidRequestError, PayloadTooLargeError
from voxwire.sessions.languages import choose
from voxwire.sessions.opening import announce, open_session, stored
from voxwire.sessions.pools import PoolCheck
from voxwire.store import SessionRecord, Store, Tenant
from voxwire.text.standing_prompts import (
    MAX_PROMPTS,
    StandingPrompts,
    check_speakers,
    prompt_of,
)
from voxwire.wire.pools import Lane
from voxwire.wire.records import GATEWAY_SEQ, FileJob
from voxwire.wire.topics import JOBS_TOPIC
from voxwire_client.api import MAX_SPEAKERS, PromptSpec, RedactMode, SpeakerBounds, Vocabulary
from voxwire_client.messages import (
    ErrorMessage,
    ProgressMessage,
    SessionStatus,
)

_PROMPT_LIST = TypeAdapter(list[PromptSpec | str])
_VOCABULARY: TypeAdapter[tuple[str, ...]] = TypeAdapter(Vocabulary)


@dataclass(frozen=True, slots=True)
class Upload:
    filename: str | None
    data: bytes
    prompts: str | None
    language: str | None
    redact: str | None = None
    model: str | None = None
    diarize: str | None = None
    min_speakers: str | None = None
    max_speakers: str | None = None
    vocabulary: str | None = None
    task: str | None = None


def redact_mode(raw: str | None) -> RedactMode | None:
    """The mode an upload asks for (None: it does not say)."""
    if raw is None or not raw.strip():
        return None
    try:
        return RedactMode(raw.strip().lower())
    except ValueError:
        choices = ", ".join(m.value for m in RedactMode)
        raise InvalidRequestError(
            f"invalid redact {raw[:40]!r}", hint=f"use one of: {choices}"
        ) from None


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off", "")


def _speaker_count(name: str, raw: str | None) -> int | None:
    if raw is None or not raw.strip():
        return None
    try:
        return int(raw.strip())
    except ValueError:
        raise InvalidRequestError(
            f"invalid {name} {raw[:20]!r}", hint=f"a whole number from 1 to {MAX_SPEAKERS}"
        ) from None


def speaker_bounds(upload: Upload) -> SpeakerBounds | None:
    """The diarization an upload asks for (None: off); InvalidRequestError for
    bad bounds, or bounds without ``diarize``."""
    flag = (upload.diarize or "").strip().lower()
    if flag not in _TRUE + _FALSE:
        raise InvalidRequestError(f"invalid diarize {flag[:20]!r}", hint="use true or false")
    low = _speaker_count("min_speakers", upload.min_speakers)
    high = _speaker_count("max_speakers", upload.max_speakers)
    if flag not in _TRUE:
        if low is not None or high is not None:
            raise InvalidRequestError(
                "min_speakers and max_speakers need diarize", hint="add diarize=true"
            )
        return None
    try:
        return SpeakerBounds(min_speakers=low, max_speakers=high)
    except ValidationError as exc:
        raise InvalidRequestError(
            f"invalid speaker bounds: {exc.errors()[0]['msg']}",
            hint=f"1 <= min_speakers <= max_speakers <= {MAX_SPEAKERS}",
        ) from None


def parse_vocabulary(raw: str | None) -> tuple[str, ...]:
    """``raw`` is a JSON list of words, or words separated by commas."""
    if raw is None or not raw.strip():
        return ()
    text = raw.strip()
    try:
        words = (
            _VOCABULARY.validate_json(text)
            if text.startswith("[")
            else (
                _VOCABULARY.validate_python(tuple(w.strip() for w in text.split(",") if w.strip()))
            )
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "".join(f"[{p}]" for p in first["loc"])
        raise InvalidRequestError(
            f"invalid vocabulary{where}: {first['msg']}",
            hint='send at most 50 words or names of up to 64 characters, as "ComfyUI, Kubernetes" '
            'or ["ComfyUI", "Kubernetes"]',
        ) from None
    return words


def parse_prompts(raw: str | None) -> tuple[PromptSpec, ...]:
    """``raw`` is a JSON list of strings or ``{"id", "text"}`` objects."""
    if not raw:
        return ()
    try:
        items = _PROMPT_LIST.validate_json(raw)
    except ValidationError as exc:
        raise InvalidRequestError(
            f"invalid prompts: {exc.errors()[0]['msg']}",
            hint='send a JSON list such as ["ask not", {"id": "p2", "text": "country"}]',
        ) from None
    if len(items) > MAX_PROMPTS:
        raise InvalidRequestError(f"too many prompts ({len(items)} > {MAX_PROMPTS})")
    specs = []
    for i, item in enumerate(items):
        try:
            specs.append(
                item if isinstance(item, PromptSpec) else PromptSpec(id=f"p{i + 1}", text=item)
            )
        except ValidationError:
            raise InvalidRequestError(
                f"invalid prompt #{i + 1}: empty or longer than 500 characters"
            ) from None
    return check_prompts(specs)


def check_prompts(specs: Sequence[PromptSpec]) -> tuple[PromptSpec, ...]:
    """``specs`` if a session can listen for them all, else InvalidRequestError
    (duplicate ids, a prompt without words, ``within`` shorter than the prompt, more
    than :data:`~voxwire.text.standing_prompts.MAX_PROMPTS`)."""
    try:
        StandingPrompts().change([prompt_of(p) for p in specs], (), limit=MAX_PROMPTS)
    except ValueError as exc:
        raise InvalidRequestError(
            f"invalid prompts: {exc}", hint="a prompt needs words; ids must be unique"
        ) from None
    return tuple(specs)


def check_prompt_speakers(specs: Sequence[PromptSpec], *, diarized: bool) -> None:
    """InvalidRequestError for a prompt limited to a speaker in a session
    without diarization: no final would carry a speaker, so it would never match."""
    try:
        check_speakers(specs, diarized=diarized)
    except ValueError as exc:
        raise InvalidRequestError(
            f"invalid prompts: {exc}", hint="ask for diarization too, or drop the prompt's speaker"
        ) from None


def safe_extension(filename: str | None) -> str:
    """An extension for the stored original, never a path."""
    suffix = PurePath((filename or "").replace("\\", "/")).suffix.lower().lstrip(".")
    return suffix if suffix.isalnum() and len(suffix) <= 5 else "bin"


class UploadService:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        bus: Bus,
        blobs: BlobStore,
        access: AccessControl | None = None,
        pools: PoolCheck | None = None,
    ) -> None:
        """``pools``: asks whether a worker runs the upload's model (None: not asked)."""
        self._settings = settings
        self._access = access or NoAccessSync()
        self._store = store
        self._bus = bus
        self._blobs = blobs
        self._pools = pools

    def check_size(self, size: int) -> None:
        limit = int(self._settings.limits.max_upload_mb * 1024 * 1024)
        if size > limit:
            raise PayloadTooLargeError(
                f"upload of {size} bytes exceeds the limit of {limit} bytes",
                hint="split the audio or raise max_upload_mb",
            )

    async def accept(
        self,
        tenant: Tenant,
        upload: Upload,
        *,
        sid: str | None = None,
        key: KeyGrant | None = None,
    ) -> SessionRecord:
        """Create the session (opened with ``key``) and enqueue its job; AudioError when
        the audio is unusable (the session then exists, failed, with an error message
        published on it). ``sid``: the new session's id (else a new one)."""
        self.check_size(len(upload.data))
        prompts = parse_prompts(upload.prompts)
        vocabulary = parse_vocabulary(upload.vocabulary)
        choice = choose(
            self._settings, model=upload.model, task=upload.task, language=upload.language
        )
        if self._pools is not None:
            await self._pools.require(choice.model, Lane.FILES)
        redact = self._settings.security.redact_for(tenant.name, redact_mode(upload.redact))
        diarize = speaker_bounds(upload)
        check_prompt_speakers(prompts, diarized=diarize is not None)
        sid = await open_session(
            self._store,
            self._access,
            tenant,
            prompts=prompts,
            filename=_display_name(upload.filename),
            sid=sid,
            key=key,
            redact=redact,
        )
        try:
            decoded = await asyncio.to_thread(
                decode,
                upload.data,
                max_seconds=self._settings.limits.max_audio_s,
                name=upload.filename,
            )
        except AudioError as exc:
            exc.sid = sid
            error = ErrorMessage(
                sid=sid, seq=GATEWAY_SEQ, code=exc.code, message=exc.message, hint=exc.hint
            )
            await announce(self._store, self._bus, error)
            raise
        audio_key = await asyncio.to_thread(self._save_audio, sid, upload, decoded)
        job = FileJob(
            sid=sid,
            tenant_id=tenant.id,
            audio_key=audio_key,
            duration_ms=round(decoded.duration_s * 1000),
            language=choice.language,
            model=choice.model,
            prompts=prompts,
            redact=redact,
            diarize=diarize,
            vocabulary=vocabulary,
            task=choice.task,
        )
        queued = ProgressMessage(
            sid=sid,
            seq=GATEWAY_SEQ,
            status=SessionStatus.QUEUED,
            percent=0,
            duration_ms=job.duration_ms,
        )
        await announce(self._store, self._bus, queued)
        await self._bus.produce(JOBS_TOPIC, sid, job.model_dump_json().encode())
        return await stored(self._store, sid)

    def _save_audio(self, sid: str, upload: Upload, decoded: DecodedAudio) -> str:
        """Keep the original (for playback) and the decoded 16 kHz PCM (for workers)."""
        original = self._blobs.key(sid, f"original.{safe_extension(upload.filename)}")
        self._blobs.put(original, upload.data)
        audio_key = self._blobs.key(sid, "audio.pcm")
        self._blobs.put(audio_key, float32_to_pcm16le(decoded.samples))
        return audio_key


def _display_name(filename: str | None) -> str | None:
    if not filename:
        return None
    name = PurePath(filename.replace("\\", "/")).name
    return json.dumps(name)[1:-1][:200] or None
