from voxwire.access.principal import Principal
from voxwire.access.rules import SERVICE_USER, PlatformAuthenticator, SessionAuthorizer

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


def test_a_key_reaches_only_its_own_query_topics() -> None:
    key = "vxk_0a1b2c3d_secretsecret"
    keyed = PlatformAuthenticator("secret", {key: "t_alice"}.get).authenticate("c", "x", key)
    assert keyed == Principal("t_alice", key_id="0a1b2c3d")
    assert authz.allow(keyed, "query/0a1b2c3d/q1/request", "publish")
    assert authz.allow(keyed, "query/0a1b2c3d/q1/result", "subscribe")
    assert authz.allow(keyed, "query/0a1b2c3d/+/result", "subscribe")
    assert authz.allow(keyed, "query/0a1b2c3d/q1/result", "receive")
    for topic, action in (
        ("query/0a1b2c3d/q1/result", "publish"),  # answers come from voxwire only
        ("query/0a1b2c3d/q1/request", "subscribe"),
        ("query/0a1b2c3d/#", "subscribe"),
        ("query/ffffffff/q1/result", "subscribe"),  # another key's answers
        ("query/ffffffff/q1/request", "publish"),
        ("query/+/q1/result", "subscribe"),
        ("query/#", "subscribe"),
        ("query/0a1b2c3d/../result", "subscribe"),
    ):
        assert not authz.allow(keyed, topic, action), (topic, action)  # type: ignore[arg-type]
    assert not authz.allow(alice, "query/0a1b2c3d/q1/result", "subscribe")  # no key id
