from tests.access.lookups import lookup, owners
from voxwire.access.keys import KeyGrant, device_refusal
from voxwire.access.owners import CachedOwners, SessionOwner
from voxwire.access.principal import Principal
from voxwire.access.rules import (
    SERVICE_USER,
    PlatformAuthenticator,
    SessionAuthorizer,
    may_take_client_id,
    token_grants,
)

OWNERS = {"s_a": "t_alice", "s_b": "t_bob"}
auth = PlatformAuthenticator("secret", lookup({"key-alice": KeyGrant("0a1b2c3d", "t_alice")}))
authz = SessionAuthorizer(owners(OWNERS))
alice = Principal("t_alice")


async def test_authentication() -> None:
    assert await auth.authenticate("c", "apikey", "key-alice") == Principal(
        "t_alice", key_id="0a1b2c3d"
    )
    assert await auth.authenticate("c", "apikey", "wrong") is None
    assert await auth.authenticate("c", None, None) is None
    assert await auth.authenticate("c", SERVICE_USER, "secret") == Principal(SERVICE_USER, True)
    assert await auth.authenticate("c", SERVICE_USER, "key-alice") is None


async def test_tenants_reach_only_their_sessions() -> None:
    assert await authz.allow(alice, "transcription/s_a/+", "subscribe")
    assert await authz.allow(alice, "transcription/s_a/result", "receive")
    assert not await authz.allow(alice, "transcription/s_b/+", "subscribe")
    assert not await authz.allow(alice, "transcription/+/result", "subscribe")
    assert not await authz.allow(alice, "transcription/#", "subscribe")
    assert not await authz.allow(alice, "transcription/s_a/#", "subscribe")
    assert not await authz.allow(alice, "transcription/s_a/result", "publish")
    assert await authz.allow(Principal(SERVICE_USER, True), "transcription/s_b/result", "publish")


async def test_a_key_reaches_only_its_own_query_topics() -> None:
    key = "vxk_0a1b2c3d_secretsecret"
    keyed = await PlatformAuthenticator(
        "secret", lookup({key: KeyGrant("0a1b2c3d", "t_alice")})
    ).authenticate("c", "x", key)
    assert keyed == Principal("t_alice", key_id="0a1b2c3d")
    assert await authz.allow(keyed, "query/0a1b2c3d/q1/request", "publish")
    assert await authz.allow(keyed, "query/0a1b2c3d/q1/result", "subscribe")
    assert await authz.allow(keyed, "query/0a1b2c3d/+/result", "subscribe")
    assert await authz.allow(keyed, "query/0a1b2c3d/q1/result", "receive")
    assert await authz.allow(keyed, "query/0a1b2c3d/rec1/part/0", "publish")  # an upload's part
    assert await authz.allow(keyed, "query/0a1b2c3d/rec1/part/9999", "publish")
    for topic, action in (
        ("query/ffffffff/rec1/part/0", "publish"),  # another key's upload
        ("query/0a1b2c3d/rec1/part/10000", "publish"),
        ("query/0a1b2c3d/rec1/part/-1", "publish"),
        ("query/0a1b2c3d/rec1/part/+", "publish"),
        ("query/0a1b2c3d/rec1/part/0", "subscribe"),
        ("query/0a1b2c3d/rec1/part/0", "receive"),
        ("query/0a1b2c3d/../part/0", "publish"),
        ("query/0a1b2c3d/q1/result", "publish"),  # answers come from voxwire only
        ("query/0a1b2c3d/q1/request", "subscribe"),
        ("query/0a1b2c3d/#", "subscribe"),
        ("query/ffffffff/q1/result", "subscribe"),  # another key's answers
        ("query/ffffffff/q1/request", "publish"),
        ("query/+/q1/result", "subscribe"),
        ("query/#", "subscribe"),
        ("query/0a1b2c3d/../result", "subscribe"),
    ):
        assert not await authz.allow(keyed, topic, action), (topic, action)  # type: ignore[arg-type]
    assert not await authz.allow(alice, "query/0a1b2c3d/q1/result", "subscribe")  # no key id


async def test_found_owners_are_kept_a_while_and_missing_ones_are_not() -> None:
    alice_s, bob_s = SessionOwner("t_alice"), SessionOwner("t_bob", "0a1b2c3d")
    table, asked, now = {"s_a": alice_s}, [], [0.0]

    async def owner_of(sid: str) -> SessionOwner | None:
        asked.append(sid)
        return table.get(sid)

    cached = CachedOwners(owner_of, ttl_s=10, clock=lambda: now[0])
    assert await cached("s_a") == alice_s and await cached("s_a") == alice_s
    assert await cached("s_new") is None
    table["s_new"] = bob_s  # created after a miss: found at once
    assert await cached("s_new") == bob_s
    assert asked == ["s_a", "s_new", "s_new"]
    now[0] = 10.0
    assert await cached("s_a") == alice_s  # expired: asked again
    assert asked == ["s_a", "s_new", "s_new", "s_a"]

    asked.clear()
    table["s_c"] = SessionOwner("t_carol")
    small = CachedOwners(owner_of, ttl_s=100, max_size=2, clock=lambda: now[0])
    for sid in ("s_a", "s_new", "s_c", "s_new", "s_c", "s_a"):  # s_c makes s_a go
        assert await small(sid) == table[sid]
    assert asked == ["s_a", "s_new", "s_c", "s_a"]


async def test_a_key_may_have_to_connect_with_its_id_as_username() -> None:
    key = "vxk_0a1b2c3d_secretsecret"
    strict = PlatformAuthenticator(
        "secret", lookup({key: KeyGrant("0a1b2c3d", "t_alice")}), key_id_as_username=True
    )
    assert await strict.authenticate("c", "0a1b2c3d", key) == Principal(
        "t_alice", key_id="0a1b2c3d"
    )
    assert await strict.authenticate("c", "ffffffff", key) is None
    assert await strict.authenticate("c", None, key) is None
    assert await strict.authenticate("c", SERVICE_USER, "secret") == Principal(SERVICE_USER, True)


async def test_service_passwords_are_compared_as_bytes() -> None:
    assert await auth.authenticate("c", SERVICE_USER, "sécret") is None
    no_secret = PlatformAuthenticator("", lookup({}))
    assert await no_secret.authenticate("c", SERVICE_USER, "anything") is None


async def test_a_tokens_grants_as_filters_match_the_topic_rules() -> None:
    grants = token_grants(frozenset({"s_b", "s_a"}))
    assert grants == [
        ("subscribe", "transcription/s_a/+"),
        ("publish", "audio/s_a/chunk/+"),
        ("publish", "audio/s_a/control"),
        ("subscribe", "transcription/s_b/+"),
        ("publish", "audio/s_b/chunk/+"),
        ("publish", "audio/s_b/control"),
    ]
    holder = Principal("t_alice", sids=frozenset({"s_a"}))
    assert await authz.allow(holder, "transcription/s_a/+", "subscribe")
    assert await authz.allow(holder, "audio/s_a/chunk/3", "publish")
    assert await authz.allow(holder, "audio/s_a/control", "publish")


def test_a_client_id_goes_only_to_the_principal_whose_session_holds_it() -> None:
    assert may_take_client_id(alice, None)
    assert may_take_client_id(alice, Principal("t_alice", key_id="0a1b2c3d"))
    assert not may_take_client_id(alice, Principal("t_bob"))


DEVICE_OWNERS = {
    "s_d1": SessionOwner("t_alice", "d1d1d1d1"),  # opened by device key d1
    "s_d2": SessionOwner("t_alice", "d2d2d2d2"),  # opened by device key d2
    "s_app": SessionOwner("t_alice", "0a1b2c3d"),  # opened by alice's tenant key
    "s_old": SessionOwner("t_alice"),  # made before keys were recorded
    "s_bob": SessionOwner("t_bob", "d1d1d1d1"),
}


async def test_a_device_key_reaches_only_the_sessions_it_opened() -> None:
    key = "vxk_d1d1d1d1_secretsecret"
    authn = PlatformAuthenticator(
        "secret", lookup({key: KeyGrant("d1d1d1d1", "t_alice", "device")})
    )
    device = await authn.authenticate("c", "x", key)
    assert device == Principal("t_alice", key_id="d1d1d1d1", device=True)
    rules = SessionAuthorizer(lookup(DEVICE_OWNERS))
    assert await rules.allow(device, "transcription/s_d1/+", "subscribe")
    assert await rules.allow(device, "transcription/s_d1/result", "receive")
    assert await rules.allow(device, "audio/s_d1/chunk/0", "publish")
    assert await rules.allow(device, "audio/s_d1/control", "publish")
    assert await rules.allow(device, "query/d1d1d1d1/q1/request", "publish")  # open_stream
    for sid in ("s_d2", "s_app", "s_old", "s_bob", "s_unknown"):
        for topic, action in (
            (f"transcription/{sid}/+", "subscribe"),
            (f"transcription/{sid}/result", "receive"),
            (f"audio/{sid}/chunk/0", "publish"),
            (f"audio/{sid}/control", "publish"),
        ):
            assert not await rules.allow(device, topic, action), (topic, action)  # type: ignore[arg-type]
    # the tenant's own keys still reach every session of the tenant, devices' too
    tenant_key = Principal("t_alice", key_id="0a1b2c3d")
    for sid in ("s_d1", "s_d2", "s_app", "s_old"):
        assert await rules.allow(tenant_key, f"transcription/{sid}/+", "subscribe")
    assert not await rules.allow(tenant_key, "transcription/s_bob/+", "subscribe")


def test_a_device_key_neither_takes_nor_gives_up_another_keys_client_id() -> None:
    d1 = Principal("t_alice", key_id="d1d1d1d1", device=True)
    d2 = Principal("t_alice", key_id="d2d2d2d2", device=True)
    tenant_key = Principal("t_alice", key_id="0a1b2c3d")
    assert may_take_client_id(d1, d1)
    assert may_take_client_id(d1, None)
    assert not may_take_client_id(d2, d1)
    assert not may_take_client_id(tenant_key, d1)
    assert not may_take_client_id(d1, tenant_key)


def test_a_device_key_is_refused_with_what_it_may_do() -> None:
    refusal = device_refusal("searching")
    assert refusal.code == "forbidden"
    assert "device key" in refusal.message and "may only open sessions" in refusal.message
    assert refusal.hint is not None and "--device" in refusal.hint
