"""Short-lived session tokens: what a browser connects to the broker with.

An API key must never reach a browser. The app's back end asks the gateway
for a token (``POST /v1/tokens`` with its key) naming the sessions the page
may follow, and hands the token to the page, which connects to the broker
with it as password. A token is a JWT (HS256, signed with the platform's
token secret) and grants only:

- subscribe to ``transcription/<sid>/...`` of its sessions;
- publish ``audio/<sid>/chunk/<n>`` and ``audio/<sid>/control`` of its sessions
  (a browser streaming its microphone);

until it expires (at most a day; an hour by default). The broker checks it
itself: the embedded broker verifies it, EMQX asks the gateway's
authentication endpoint (which answers with the token's ACL and
``expire_at``), and Mosquitto gets a dynamic-security client for it.

Claims: ``iss`` ``voxwire``, ``sub`` the tenant id, ``sids``, ``iat``, ``exp``,
``jti`` (a random id, the token's Mosquitto username ``tok-<jti>``).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jwt

from voxwire.core.errors import AuthError, ConfigError
from voxwire_client.topics import validate_sid

ISSUER = "voxwire"
ALGORITHM = "HS256"
DEFAULT_TTL_S = 3600
MAX_TTL_S = 24 * 3600
MAX_SIDS = 50
USERNAME_PREFIX = "tok-"


class TokenError(AuthError):
    """A token that is not ours, was tampered with, or has expired."""

    code = "bad_token"


@dataclass(frozen=True, slots=True)
class SessionToken:
    token: str
    tenant_id: str
    sids: frozenset[str]
    expires_at: int
    """Unix seconds."""
    token_id: str

    @property
    def username(self) -> str:
        """The MQTT username to connect with (Mosquitto needs it; others ignore
        it): ``tok-<expires_at>-<token id>``, so expired ones can be swept."""
        return f"{USERNAME_PREFIX}{self.expires_at}-{self.token_id}"


class TokenIssuer:
    def __init__(self, secret: bytes, now: Callable[[], float] = time.time) -> None:
        if len(secret) < 32:
            raise ValueError("a token secret needs at least 32 bytes")
        self._secret = secret
        self._now = now

    def issue(self, tenant_id: str, sids: list[str], ttl_s: int = DEFAULT_TTL_S) -> SessionToken:
        if not 1 <= len(sids) <= MAX_SIDS:
            raise ValueError(f"a token names 1 to {MAX_SIDS} sessions")
        if not 1 <= ttl_s <= MAX_TTL_S:
            raise ValueError(f"a token lives 1 to {MAX_TTL_S} s")
        now = int(self._now())
        claims = {
            "iss": ISSUER,
            "sub": tenant_id,
            "sids": sorted({validate_sid(s) for s in sids}),
            "iat": now,
            "exp": now + ttl_s,
            "jti": secrets.token_hex(8),
        }
        token = jwt.encode(claims, self._secret, algorithm=ALGORITHM)
        return self._claims(token, claims)

    def verify(self, token: str) -> SessionToken:
        """The token's grant; raises TokenError for anything else."""
        try:
            claims = jwt.decode(
                token,
                self._secret,
                algorithms=[ALGORITHM],
                issuer=ISSUER,
                # expiry is checked below, against this issuer's clock
                options={
                    "require": ["exp", "iat", "sub", "jti", "iss"],
                    "verify_exp": False,
                    "verify_iat": False,
                },
            )
            grant = self._claims(token, claims)
        except (jwt.InvalidTokenError, KeyError, TypeError, ValueError) as exc:
            raise TokenError(
                f"invalid token ({type(exc).__name__})", hint="ask the gateway for a new one"
            ) from None
        if self.expired(grant):
            raise TokenError("the token has expired", hint="ask the gateway for a new one")
        return grant

    def expired(self, grant: SessionToken) -> bool:
        return self._now() >= grant.expires_at

    @staticmethod
    def _claims(token: str, claims: dict[str, object]) -> SessionToken:
        sids = claims["sids"]
        if not isinstance(sids, list) or not sids:
            raise ValueError("sids")
        return SessionToken(
            token=token,
            tenant_id=str(claims["sub"]),
            sids=frozenset(validate_sid(str(s)) for s in sids),
            expires_at=int(claims["exp"]),  # type: ignore[call-overload]
            token_id=str(claims["jti"]),
        )


def looks_like_token(password: str) -> bool:
    """A JWT (three base64url parts), not an API key."""
    return password.startswith("eyJ") and password.count(".") == 2


def issuer_for(secret_hex: str, data_dir: Path) -> TokenIssuer:
    """The platform's issuer: ``secret_hex`` (the ``token_secret`` setting) or,
    when empty, the secret kept in ``data_dir/token.secret``."""
    if secret_hex:
        try:
            return TokenIssuer(bytes.fromhex(secret_hex))
        except ValueError as exc:
            raise ConfigError(
                f"token_secret: {exc}", hint="use 64 hex digits, e.g. `openssl rand -hex 32`"
            ) from None
    return TokenIssuer(load_secret(data_dir / "token.secret"))


def load_secret(path: Path) -> bytes:
    """The token secret kept at ``path``, made (readable by its owner only) if missing."""
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        secret = secrets.token_bytes(32)
        path.touch(mode=0o600)
        path.write_text(secret.hex())
        return secret
