"""Session tokens (voxwire.access.tokens) and what the broker's rules let them do."""

from __future__ import annotations

import jwt
import pytest

from tests.access.lookups import lookup, owners
from voxwire.access.principal import Principal
from voxwire.access.rules import PlatformAuthenticator, SessionAuthorizer
from voxwire.access.tokens import MAX_TTL_S, TokenError, TokenIssuer, load_secret, looks_like_token
from voxwire.core.errors import AuthError
from voxwire.core.ratelimit import RateLimitedError
from voxwire_client.errors import InvalidSessionIdError

SECRET = b"k" * 32
OWNERS = {"s_a": "t_alice", "s_b": "t_alice", "s_c": "t_bob"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_token_carries_its_grant_and_nothing_can_change_it() -> None:
    clock = Clock()
    issuer = TokenIssuer(SECRET, now=clock)
    grant = issuer.issue("t_alice", ["s_a"], ttl_s=60)
    assert looks_like_token(grant.token)
    assert issuer.verify(grant.token) == grant
    assert grant.username == f"tok-{int(clock.now) + 60}-{grant.token_id}"
    claims = jwt.decode(grant.token, options={"verify_signature": False})
    for changed in (
        {**claims, "sids": ["s_a", "s_c"]},
        {**claims, "sub": "t_bob"},
        {**claims, "exp": claims["exp"] + 3600},
    ):
        forged = jwt.encode(changed, b"x" * 32, algorithm="HS256")
        with pytest.raises(TokenError, match="invalid token"):
            issuer.verify(forged)
    unsigned = jwt.encode(claims, key=None, algorithm="none")  # type: ignore[arg-type]
    with pytest.raises(TokenError):
        issuer.verify(unsigned)
    with pytest.raises(TokenError):
        TokenIssuer(b"o" * 32, now=clock).verify(grant.token)
    with pytest.raises(TokenError):
        issuer.verify("vxk_notatoken")
    clock.now += 61
    with pytest.raises(TokenError, match="expired"):
        issuer.verify(grant.token)


def test_tokens_are_bounded() -> None:
    issuer = TokenIssuer(SECRET)
    with pytest.raises(ValueError):
        issuer.issue("t", [], 60)
    with pytest.raises(ValueError):
        issuer.issue("t", ["s_a"], MAX_TTL_S + 1)
    with pytest.raises(InvalidSessionIdError):
        issuer.issue("t", ["s_a/#"], 60)
    with pytest.raises(ValueError):
        TokenIssuer(b"short")


async def test_the_broker_lets_a_token_reach_only_its_sessions_until_it_expires() -> None:
    clock = Clock()
    issuer = TokenIssuer(SECRET, now=clock)
    grant = issuer.issue("t_alice", ["s_a", "s_c"], ttl_s=60)  # s_c is not alice's
    authn = PlatformAuthenticator("svc", lookup({}), issuer)
    principal = await authn.authenticate("b", "x", grant.token)
    assert principal == Principal(
        "t_alice", sids=frozenset({"s_a", "s_c"}), expires_at=grant.expires_at
    )
    authz = SessionAuthorizer(owners(OWNERS), now=clock)
    assert await authz.allow(principal, "transcription/s_a/+", "subscribe")
    assert await authz.allow(principal, "audio/s_a/chunk/0", "publish")
    assert not await authz.allow(
        principal, "transcription/s_b/+", "subscribe"
    )  # alice's, not named
    assert not await authz.allow(
        principal, "transcription/s_c/+", "subscribe"
    )  # named, not alice's
    assert not await authz.allow(principal, "query/abc/q1/request", "publish")
    clock.now = grant.expires_at
    assert not await authz.allow(principal, "transcription/s_a/result", "receive")
    tampered = grant.token[:-2] + "xx"
    assert await authn.authenticate("b", "x", tampered) is None


def test_the_secret_is_made_once_and_kept_private(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "token.secret"  # type: ignore[operator]
    secret = load_secret(path)
    assert len(secret) == 32 and load_secret(path) == secret
    assert path.stat().st_mode & 0o077 == 0


def test_a_bad_token_is_an_auth_error() -> None:
    assert issubclass(TokenError, AuthError)
    assert not issubclass(TokenError, RateLimitedError)
    assert TokenError("x").code == "bad_token"
