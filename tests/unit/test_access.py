from voxwire.access import SERVICE_USER, PlatformAuthenticator, SessionAuthorizer
from voxwire.broker.embedded import Principal

OWNERS = {"s_a": "t_alice", "s_b": "t_bob"}
auth = PlatformAuthenticator("secret", {"key-alice": "t_alice"}.get)
authz = SessionAuthorizer(OWNERS.get)
alice = Principal("t_alice")


def test_authentication() -> None:
    assert auth.authenticate("c", "apikey", "key-alice") == alice
    assert auth.authenticate("c", "apikey", "wrong") is None
    assert auth.authenticate("c", None, None) is None
    assert auth.authenticate("c", SERVICE_USER, "secret") == Principal(SERVICE_USER, True)
    assert auth.authenticate("c", SERVICE_USER, "key-alice") is None


def test_tenants_reach_only_their_sessions() -> None:
    assert authz.allow(alice, "transcription/s_a/+", "subscribe")
    assert authz.allow(alice, "transcription/s_a/result", "receive")
    assert not authz.allow(alice, "transcription/s_b/+", "subscribe")
    assert not authz.allow(alice, "transcription/+/result", "subscribe")
    assert not authz.allow(alice, "transcription/#", "subscribe")
    assert not authz.allow(alice, "transcription/s_a/#", "subscribe")
    assert not authz.allow(alice, "transcription/s_a/result", "publish")
    assert authz.allow(Principal(SERVICE_USER, True), "transcription/s_b/result", "publish")
