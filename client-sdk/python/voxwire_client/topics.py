"""The MQTT topic contract: names, validation and parsing. Pure code.

Server -> client (QoS 1, retained, MQTT 5 message expiry where supported)::

    transcription/<sid>/result     partial and final segments, then the transcript
    transcription/<sid>/progress   status and percent; errors
    transcription/<sid>/match      prompt matches

A ``<sid>`` is 1-64 characters of ``[A-Za-z0-9_-]``: never ``/ + #``, NUL,
whitespace or anything a topic filter or a file path could misread.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from enum import StrEnum

from voxwire_client.errors import InvalidSessionIdError

ROOT = "transcription"
_SID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class TopicKind(StrEnum):
    """The per-session topics a subscriber can receive."""

    RESULT = "result"
    PROGRESS = "progress"
    MATCH = "match"


def validate_sid(sid: str) -> str:
    """Return ``sid`` if it is safe in a topic and a path, else raise."""
    if not isinstance(sid, str) or not _SID.fullmatch(sid):
        raise InvalidSessionIdError(
            f"invalid session id {sid!r}: use 1-64 characters of A-Z, a-z, 0-9, '_' or '-'"
        )
    return sid


def new_sid() -> str:
    """A fresh random session id (URL- and topic-safe)."""
    return "s_" + secrets.token_hex(8)


def session_topic(sid: str, kind: TopicKind) -> str:
    """``transcription/<sid>/<kind>``."""
    return f"{ROOT}/{validate_sid(sid)}/{kind.value}"


def session_filter(sid: str) -> str:
    """The filter that receives every message of one session."""
    return f"{ROOT}/{validate_sid(sid)}/+"


@dataclass(frozen=True, slots=True)
class SessionTopic:
    """A parsed per-session topic."""

    sid: str
    kind: TopicKind


def parse_topic(topic: str) -> SessionTopic:
    """Parse ``transcription/<sid>/<kind>``; raise ValueError for anything else."""
    parts = topic.split("/")
    if len(parts) != 3 or parts[0] != ROOT:
        raise ValueError(f"not a voxwire session topic: {topic!r}")
    try:
        kind = TopicKind(parts[2])
    except ValueError:
        raise ValueError(f"unknown topic kind in {topic!r}") from None
    return SessionTopic(sid=validate_sid(parts[1]), kind=kind)


# -- client -> server: live audio ------------------------------------------------------

AUDIO_ROOT = "audio"


@dataclass(frozen=True, slots=True)
class AudioTopic:
    """A parsed ``audio/<sid>/chunk/<n>`` (``chunk`` = n) or ``audio/<sid>/control``
    (``chunk`` = None)."""

    sid: str
    chunk: int | None


def audio_chunk_prefix(sid: str) -> str:
    """Chunk n of the session is published on ``<prefix>/<n>``."""
    return f"{AUDIO_ROOT}/{validate_sid(sid)}/chunk"


def audio_control_topic(sid: str) -> str:
    return f"{AUDIO_ROOT}/{validate_sid(sid)}/control"


def parse_audio_topic(topic: str) -> AudioTopic:
    """Parse a client's audio topic; raise ValueError for anything else."""
    parts = topic.split("/")
    if parts[0] == AUDIO_ROOT and len(parts) == 4 and parts[2] == "chunk" and parts[3].isdigit():
        return AudioTopic(sid=validate_sid(parts[1]), chunk=int(parts[3]))
    if parts[0] == AUDIO_ROOT and len(parts) == 3 and parts[2] == "control":
        return AudioTopic(sid=validate_sid(parts[1]), chunk=None)
    raise ValueError(f"not a voxwire audio topic: {topic!r}")


# -- client <-> server: ad-hoc search over MQTT ----------------------------------------

QUERY_ROOT = "query"


MAX_UPLOAD_PARTS = 10_000
"""Parts of one file uploaded over MQTT: numbered 0 to 9999 (at most four digits)."""


@dataclass(frozen=True, slots=True)
class QueryTopic:
    """A parsed ``query/<key id>/<qid>/request`` or ``.../result``, or a part of a
    file uploaded over MQTT, ``query/<key id>/<upload id>/part/<n>``. The key id
    level lets the broker give each API key its own queries and nothing else."""

    key_id: str
    qid: str
    kind: str  # "request", "result" or "part"
    part: int | None = None


def query_request_topic(key_id: str, qid: str) -> str:
    """Where a client with API key ``key_id`` publishes a search (a SearchQuery)."""
    return f"{QUERY_ROOT}/{validate_sid(key_id)}/{validate_sid(qid)}/request"


def query_result_topic(key_id: str, qid: str) -> str:
    """Where the answer (a QueryResult) comes, retained for a minute."""
    return f"{QUERY_ROOT}/{validate_sid(key_id)}/{validate_sid(qid)}/result"


def upload_part_topic(key_id: str, upload: str, part: int) -> str:
    """Where a client with API key ``key_id`` publishes part ``part`` (from 0) of
    file ``upload`` (an id it chose), as raw bytes."""
    if not 0 <= part < MAX_UPLOAD_PARTS:
        raise ValueError(f"part {part} is not in 0-{MAX_UPLOAD_PARTS - 1}")
    return f"{QUERY_ROOT}/{validate_sid(key_id)}/{validate_sid(upload)}/part/{part}"


def parse_query_topic(topic: str) -> QueryTopic:
    """Parse a query topic or an upload part's; raise ValueError for anything else."""
    parts = topic.split("/")
    if len(parts) == 5 and parts[0] == QUERY_ROOT and parts[3] == "part":
        if not (parts[4].isascii() and parts[4].isdigit() and len(parts[4]) <= 4):
            raise ValueError(f"not an upload part number: {topic!r}")
        key_id, upload = validate_sid(parts[1]), validate_sid(parts[2])
        return QueryTopic(key_id=key_id, qid=upload, kind="part", part=int(parts[4]))
    if len(parts) != 4 or parts[0] != QUERY_ROOT or parts[3] not in ("request", "result"):
        raise ValueError(f"not a voxwire query topic: {topic!r}")
    return QueryTopic(key_id=validate_sid(parts[1]), qid=validate_sid(parts[2]), kind=parts[3])
