"""API keys: generated once, shown once, stored as a SHA-256 hash.

A key reads ``vxk_<key id>_<secret>``. The id locates the stored hash; the
secret has 256 bits of entropy, so a fast hash is as safe as a slow one and
keeps every request and MQTT CONNECT cheap. Comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

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
