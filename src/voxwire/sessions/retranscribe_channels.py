"""The channels of a re-transcription: a session uploaded with separate channels
is transcribed again channel by channel, with its labels.

An upload with ``channels: separate`` keeps each channel's audio as
``track<n>.pcm`` (:mod:`voxwire.sessions.audio`) beside the mono mix. A
re-transcription of it (:mod:`voxwire.sessions.retranscribe`) passes those
blobs to the worker as the job's ``track_keys``, so its finals keep their
``channel`` and ``speaker``. The labels are the request's ``channel_labels``
when it gives them, else those the session's finals carry (channel n's
speaker), else ``ch1``, ``ch2``...

The mix is transcribed instead when the request says ``channels: mixed`` or
asks for diarization (it wants the speakers found by voice), and when the
tracks are gone: a redacted session keeps its channels only until its first
transcript is done (its stored audio is the redacted mix). A session that had
channels but whose tracks are gone is logged, so that a transcript without
labels is explained.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass

from voxwire.blobs import BlobStore
from voxwire.core.errors import InvalidRequestError
from voxwire.sessions.audio import TRACK
from voxwire.store import Store
from voxwire_client.options import ChannelMode, default_channel_labels
from voxwire_client.versions import RetranscribeRequest

log = logging.getLogger(__name__)

_TRACK_NAME = re.compile(rf"{TRACK}(\d+)\.pcm")


@dataclass(frozen=True, slots=True)
class Channels:
    """What a re-transcription transcribes: the tracks' blob keys in channel
    order and their labels (both empty: the mix)."""

    track_keys: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()


def stored_tracks(blobs: BlobStore, sid: str) -> tuple[str, ...]:
    """The blob keys of ``sid``'s channel tracks in channel order; empty when it
    has none (a mono upload, a live stream, a redacted session's after its
    transcript), or when one channel's is missing."""
    found = {}
    for name in blobs.names(sid, TRACK):
        match = _TRACK_NAME.fullmatch(name)
        if match:
            found[int(match.group(1))] = blobs.key(sid, name)
    if sorted(found) != list(range(1, len(found) + 1)):
        return ()
    return tuple(found[channel] for channel in sorted(found))


async def channels_again(
    blobs: BlobStore, store: Store, sid: str, request: RetranscribeRequest
) -> Channels:
    """The channels ``request`` re-transcribes session ``sid`` with (module doc);
    :class:`InvalidRequestError` when it gives labels for another number of
    channels than the session has."""
    asked = request.model_fields_set
    mixed = "channels" in asked and request.channels is ChannelMode.MIXED
    if mixed or request.diarize is not None:
        return Channels()
    keys = await asyncio.to_thread(stored_tracks, blobs, sid)
    if not keys:
        if request.channels is ChannelMode.SEPARATE or await _had_channels(store, sid):
            log.info(
                "session %s: its channel tracks are no longer stored (a redacted session "
                "keeps them only until its first transcript): transcribing the mix, "
                "without channel labels",
                sid,
            )
        return Channels()
    if request.channel_labels is not None:
        try:
            return Channels(keys, request.labels_for(len(keys)))
        except ValueError as exc:
            raise InvalidRequestError(
                f"{exc}: the session has {len(keys)}",
                hint="give one channel_label per channel, or leave them out to keep the session's",
                sid=sid,
            ) from None
    return Channels(keys, await _labels(store, sid, len(keys)))


async def _labels(store: Store, sid: str, count: int) -> tuple[str, ...]:
    """The labels the session's finals carry, channel by channel; a channel none
    of them was said on gets its default label."""
    said: dict[int, str] = {}
    for segment in await store.segments(sid):
        if segment.channel is not None and segment.speaker is not None:
            said.setdefault(segment.channel, segment.speaker)
    defaults = default_channel_labels(count)
    labels = tuple(said.get(channel, defaults[channel - 1]) for channel in range(1, count + 1))
    return labels if len(set(labels)) == count else defaults


async def _had_channels(store: Store, sid: str) -> bool:
    return any(segment.channel is not None for segment in await store.segments(sid))
