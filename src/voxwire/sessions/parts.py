"""Files uploaded over MQTT, in parts: kept until the file is finished, then
accepted as an upload over HTTP is (:class:`~voxwire.sessions.uploads.UploadService`).

A device cuts the file into parts of at most
:data:`~voxwire_client.api.MAX_UPLOAD_PART_BYTES` and publishes part ``n`` as
raw bytes on ``query/<key id>/<upload id>/part/<n>``; the upload id is its own
choice, so a device that reconnects knows what it was sending. Each part is
kept as a blob of the session the upload will become (its sid is derived from
the key and the upload id), so a part delivered twice is kept once. A device
that reconnects asks which parts are held (:meth:`PartUploads.status`) and
publishes only the others; finishing (:meth:`PartUploads.finish`) joins parts
0 to n-1, checks the file's SHA-256 when given, opens the session and drops
the parts. A finish delivered twice answers with the same session, and a part
that comes after its upload was finished is dropped.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging

from voxwire.access.keys import KeyGrant
from voxwire.blobs import BlobStore
from voxwire.core.errors import AudioError, InvalidRequestError, PayloadTooLargeError
from voxwire.sessions.uploads import Upload, UploadService
from voxwire.store import SessionRecord, Store, Tenant
from voxwire_client.api import MAX_UPLOAD_PART_BYTES, FinishUpload, UploadParts

log = logging.getLogger(__name__)

_PREFIX = "part_"


def stream_sid(key_id: str, qid: str) -> str:
    """The sid of the stream a request opens: the same for the same request."""
    return "s_" + hashlib.sha256(f"{key_id}/{qid}".encode()).hexdigest()[:16]


def upload_sid(key_id: str, upload: str) -> str:
    """The sid of the session an upload over MQTT becomes (never a stream's)."""
    return stream_sid(key_id, f"upload/{upload}")


def _part_name(part: int) -> str:
    return f"{_PREFIX}{part:05d}"


def _ranges(numbers: list[int]) -> str:
    """``[3, 4, 5, 9]`` -> ``"3-5, 9"``."""
    out: list[str] = []
    start = previous = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == previous + 1:
            previous = n
            continue
        out.append(str(start) if start == previous else f"{start}-{previous}")
        if n is not None:
            start = previous = n
    return ", ".join(out)


class PartUploads:
    def __init__(self, blobs: BlobStore, uploads: UploadService, store: Store) -> None:
        self._blobs = blobs
        self._uploads = uploads
        self._store = store

    async def put(self, key_id: str, upload: str, part: int, data: bytes) -> None:
        """Keep part ``part`` of ``upload``; PayloadTooLargeError for a part too big."""
        if len(data) > MAX_UPLOAD_PART_BYTES:
            raise PayloadTooLargeError(
                f"part {part} of upload {upload} has {len(data)} bytes, more than "
                f"{MAX_UPLOAD_PART_BYTES}",
                hint="cut the file into smaller parts",
            )
        if not data:
            raise InvalidRequestError(f"part {part} of upload {upload} is empty")
        sid = upload_sid(key_id, upload)
        if await self._store.get_session(sid) is not None:
            log.info("part %d of upload %s came after it was finished; dropped", part, upload)
            return
        key = self._blobs.key(sid, _part_name(part))
        await asyncio.to_thread(self._blobs.put, key, data)

    async def status(self, key_id: str, upload: str) -> UploadParts:
        held = await self._held(upload_sid(key_id, upload))
        return UploadParts(upload=upload, parts=tuple(held), bytes=sum(held.values()))

    async def finish(self, tenant: Tenant, key: KeyGrant, request: FinishUpload) -> SessionRecord:
        """Open the session of a file whose parts are all held (see the module
        doc), opened with ``key``; InvalidRequestError names the parts missing or
        a checksum that differs, PayloadTooLargeError a file over the upload limit."""
        sid = upload_sid(key.key_id, request.upload)
        existing = await self._store.get_session(sid)
        if existing is not None and existing.tenant_id == tenant.id:
            return existing  # finished before: asked again
        held = await self._held(sid)
        missing = [n for n in range(request.parts) if n not in held]
        extra = [n for n in held if n >= request.parts]
        if missing:
            raise InvalidRequestError(
                f"parts {_ranges(missing)} of {request.parts} have not arrived",
                hint="publish them on query/<key id>/<upload id>/part/<n>, then finish again",
            )
        if extra:
            raise InvalidRequestError(
                f"the upload holds parts past the {request.parts} it was finished with "
                f"({_ranges(extra)})",
                hint="finish with the number of parts the file was cut into",
            )
        self._uploads.check_size(sum(held.values()))
        data = b"".join(
            [
                await asyncio.to_thread(self._blobs.get, self._blobs.key(sid, _part_name(n)))
                for n in range(request.parts)
            ]
        )
        if request.sha256 is not None and hashlib.sha256(data).hexdigest() != request.sha256:
            raise InvalidRequestError(
                f"the {request.parts} parts of upload {request.upload} do not make the file "
                "with the SHA-256 given",
                hint="publish every part again, then finish again",
            )
        try:
            session = await self._uploads.accept(
                tenant, Upload(request.filename, data, request), sid=sid, key=key
            )
        except AudioError:  # the session exists, failed: its parts are done with too
            await self._drop(sid, request.parts)
            raise
        await self._drop(sid, request.parts)
        return session

    async def _drop(self, sid: str, parts: int) -> None:
        for n in range(parts):
            await asyncio.to_thread(self._blobs.delete, self._blobs.key(sid, _part_name(n)))

    async def _held(self, sid: str) -> dict[int, int]:
        """Part number -> size of the parts of the upload that becomes ``sid``."""
        names = await asyncio.to_thread(self._blobs.names, sid, _PREFIX)
        return {int(name[len(_PREFIX) :]): size for name, size in names.items()}
