"""Accepting an upload: validate, decode, store, enqueue. Independent of HTTP."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import PurePath

from voxwire.access.control import AccessControl, NoAccessSync
from voxwire.access.keys import KeyGrant
from voxwire.access.quotas import Ask, QuotaExceededError
from voxwire.audio.decoding import DecodedAudio, decode, float32_to_pcm16le, raw_format
from voxwire.blobs import BlobStore
from voxwire.bus import Bus
from voxwire.core.config import Settings
from voxwire.core.errors import AudioError, PayloadTooLargeError, UnsupportedAudioError
from voxwire.sessions.audio import AUDIO_BLOB, INCOMING_BLOB, ORIGINAL, UNREDACTED, track_blob
from voxwire.sessions.opening import announce, open_session, stored
from voxwire.sessions.options import resolve
from voxwire.sessions.pools import PoolCheck
from voxwire.sessions.quotas import QuotaGuard
from voxwire.sessions.webhooks import Webhooks
from voxwire.store import SessionRecord, Store, Tenant
from voxwire.wire.pools import Lane
from voxwire.wire.records import GATEWAY_SEQ, FileJob, ResolvedOptions
from voxwire.wire.topics import JOBS_TOPIC
from voxwire_client.messages import ErrorMessage, ProgressMessage, SessionStatus
from voxwire_client.options import ChannelMode, RedactMode, SessionOptions


@dataclass(frozen=True, slots=True)
class Upload:
    """A file to transcribe, as it came, and what its session asks for."""

    filename: str | None
    data: bytes
    options: SessionOptions = field(default_factory=SessionOptions)
    sample_rate: int | None = None
    """The sample rate of a headerless file (raw G.711:
    :func:`~voxwire.audio.decoding.raw_format`); None: its default."""
    callback: str | None = None
    """A URL that gets the transcript once it is stored (:mod:`voxwire.sessions.webhooks`)."""


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
        quotas: QuotaGuard | None = None,
    ) -> None:
        """``pools``: asks whether a worker runs the upload's model (None: not asked);
        ``quotas``: the tenants' quotas (None: a guard of its own on ``store``)."""
        self._settings = settings
        self._access = access or NoAccessSync()
        self._store = store
        self._bus = bus
        self._blobs = blobs
        self._pools = pools
        self.webhooks = Webhooks(settings, store)
        self._quotas = quotas or QuotaGuard(store)

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
        published on it). ``sid``: the new session's id (else a new one).
        QuotaExceededError over a quota of the tenant or key: before the session
        exists, or (audio longer than ``upload_seconds``) as an AudioError is.
        ``upload.callback`` is checked before the session exists (InvalidRequestError,
        CallbackRefusedError) and its delivery recorded before the job is queued."""
        self.check_size(len(upload.data))
        options = resolve(self._settings, tenant.name, upload.options)
        callback = await self.webhooks.check(upload.callback, key) if upload.callback else None
        if self._pools is not None:
            await self._pools.require(options.model, Lane.FILES)
        key_id = key.key_id if key else None
        async with self._quotas.admit(tenant.id, key_id, Ask("upload", len(upload.data))):
            sid = await open_session(
                self._store,
                self._access,
                tenant,
                prompts=options.prompts,
                filename=_display_name(upload.filename),
                sid=sid,
                key=key,
                redact=options.redact,
            )
        try:
            decoded = await asyncio.to_thread(
                decode,
                upload.data,
                max_seconds=self._settings.limits.max_audio_s,
                name=upload.filename,
                raw=raw_format(upload.filename, upload.sample_rate),
                separate=options.channels is ChannelMode.SEPARATE,
            )
            options = _with_labels(options, decoded)
            length = Ask("decoded", upload_seconds=decoded.duration_s)
            await self._quotas.check(tenant.id, key_id, length)
        except (AudioError, QuotaExceededError) as exc:
            exc.sid = sid
            error = ErrorMessage(
                sid=sid, seq=GATEWAY_SEQ, code=exc.code, message=exc.message, hint=exc.hint
            )
            await announce(self._store, self._bus, error)
            raise
        audio_key = await asyncio.to_thread(self._save_audio, sid, upload, decoded, options)
        track_keys = await asyncio.to_thread(self._save_tracks, sid, decoded, options)
        job = FileJob(
            **dict(options),
            sid=sid,
            tenant_id=tenant.id,
            audio_key=audio_key,
            track_keys=track_keys,
            duration_ms=round(decoded.duration_s * 1000),
        )
        queued = ProgressMessage(
            sid=sid,
            seq=GATEWAY_SEQ,
            status=SessionStatus.QUEUED,
            percent=0,
            duration_ms=job.duration_ms,
        )
        await announce(self._store, self._bus, queued)
        if callback is not None and key is not None:
            await self.webhooks.register(sid, key, callback, datetime.now(UTC))
        await self._bus.produce(JOBS_TOPIC, sid, job.model_dump_json().encode())
        return await stored(self._store, sid)

    def _save_audio(
        self, sid: str, upload: Upload, decoded: DecodedAudio, options: ResolvedOptions
    ) -> str:
        """Keep the original (for playback) and the decoded 16 kHz PCM (for workers).
        A redacted session keeps its original only when it asks to, and its PCM
        waits as ``incoming.pcm`` until the worker has stored it redacted
        (:mod:`voxwire.sessions.audio`)."""
        redacted = options.redact is not RedactMode.OFF
        if not redacted or options.keep_original_audio:
            kept = UNREDACTED if redacted else ORIGINAL
            original = self._blobs.key(sid, f"{kept}{safe_extension(upload.filename)}")
            self._blobs.put(original, upload.data)
        audio_key = self._blobs.key(sid, INCOMING_BLOB if redacted else AUDIO_BLOB)
        self._blobs.put(audio_key, float32_to_pcm16le(decoded.samples))
        return audio_key

    def _save_tracks(
        self, sid: str, decoded: DecodedAudio, options: ResolvedOptions
    ) -> tuple[str, ...]:
        """Each channel's 16 kHz PCM, of a session with separate channels (a
        redacted one's as incoming, until the worker has its transcript)."""
        if options.channels is not ChannelMode.SEPARATE:
            return ()
        incoming = options.redact is not RedactMode.OFF
        keys = []
        for channel, samples in enumerate(decoded.tracks, start=1):
            key = self._blobs.key(sid, track_blob(channel, incoming=incoming))
            self._blobs.put(key, float32_to_pcm16le(samples))
            keys.append(key)
        return tuple(keys)


def _with_labels(options: ResolvedOptions, decoded: DecodedAudio) -> ResolvedOptions:
    """A session with separate channels: its labels, one per channel of the audio
    (``ch1``, ``ch2``... where it gave none); UnsupportedAudioError when it gave
    labels for another number of channels."""
    if options.channels is not ChannelMode.SEPARATE:
        return options
    try:
        labels = options.labels_for(len(decoded.tracks))
    except ValueError as exc:
        raise UnsupportedAudioError(
            f"{exc}: the file has {len(decoded.tracks)}",
            hint="give as many channel_labels as the file has channels, or leave them out",
        ) from None
    return options.model_copy(update={"channel_labels": labels})


def _display_name(filename: str | None) -> str | None:
    if not filename:
        return None
    name = PurePath(filename.replace("\\", "/")).name
    return json.dumps(name)[1:-1][:200] or None
