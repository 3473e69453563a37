"""API keys: generated once, shown once, stored as a SHA-256 hash.

A key reads ``vxk_<key id>_<secret>``. The id locates the stored hash; the
secret has 256 bits of entropy, so a fast hash is as safe as a slow one and
keeps every request and MQTT CONNECT cheap. Comparison is constant-time.

A key has a role (:data:`KeyRole`): a tenant key acts for its whole tenant; a
device key (``voxwire keys create --device NAME``) only opens sessions (live
streams, uploads) and reaches the sessions it opened (:mod:`voxwire.access.rules`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Literal

from voxwire.core.errors import ForbiddenError

PREFIX = "vxk"


@dataclass(frozen=True, slots=True)
class NewKey:
    key_id: str
    plaintext: str
    digest: str

    def __repr__(self) -> str:
        return f"NewKey(key_id={self.key_id!r})"


def digest(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def generate_key() -> NewKey:
    key_id = secrets.token_hex(4)
    plaintext = f"{PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
    return NewKey(key_id=key_id, plaintext=plaintext, digest=digest(plaintext))


def key_id_of(plaintext: str) -> str | None:
    """The id part of a well-formed key, else None."""
    parts = plaintext.split("_", 2)
    if len(parts) != 3 or parts[0] != PREFIX or len(parts[1]) != 8:
        return None
    return parts[1]


def matches(plaintext: str, stored_digest: str) -> bool:
    return hmac.compare_digest(digest(plaintext), stored_digest)


KeyRole = Literal["tenant", "device"]
"""What a key may do: ``tenant`` acts for its whole tenant; ``device`` may only open
sessions (live streams, uploads) and follow and read the sessions it opened itself."""

KEY_ROLES: tuple[KeyRole, ...] = ("tenant", "device")


def device_refusal(what: str) -> ForbiddenError:
    """The error a device key gets for ``what`` (e.g. ``"searching"``), saying what it may do."""
    return ForbiddenError(
        f"{what} is not allowed with a device key: a device key may only open sessions "
        "(POST /v1/streams, POST /v1/sessions, or over MQTT open_stream and finish_upload), "
        "send their audio and prompt changes, and follow and read the sessions it opened",
        hint="use a tenant key (`voxwire keys create` without --device) for this",
    )


@dataclass(frozen=True, slots=True)
class KeyGrant:
    """What an active key acts as."""

    key_id: str
    tenant_id: str
    role: KeyRole = "tenant"

    @property
    def device(self) -> bool:
        return self.role == "device"
