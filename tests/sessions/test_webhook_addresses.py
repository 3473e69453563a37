"""Where a callback may go: the address rule, the URL's parsing and the check."""

from __future__ import annotations

import ipaddress

import pytest

from voxwire.core.config import Settings
from voxwire.core.errors import InvalidRequestError
from voxwire.sessions.webhook_addresses import (
    AllowList,
    CallbackRefusedError,
    Target,
    check_callback,
    parse_callback,
    refusal,
    restriction,
)

NONE = AllowList()


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.9", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("224.0.0.1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::ffff:127.0.0.1", "loopback"),
        ("100.64.0.1", "non-public"),
        ("93.184.216.34", None),
        ("2606:4700::1111", None),
    ],
)
def test_what_is_not_public(address: str, kind: str | None) -> None:
    assert restriction(ipaddress.ip_address(address)) == kind


def test_one_address_not_allowed_refuses_the_host() -> None:
    public, private = ipaddress.ip_address("93.184.216.34"), ipaddress.ip_address("10.0.0.5")
    assert refusal("hooks.example", [public], NONE) is None
    why = refusal("hooks.example", [public, private], NONE)
    assert why == "callback host hooks.example (10.0.0.5) is a private address"


def test_the_operator_allows_networks_addresses_and_hosts() -> None:
    allow = AllowList.of(
        Settings(webhook_allow="10.0.0.0/8, 127.0.0.1,Hooks.Internal").security.webhook_allow
    )
    ten, loop = ipaddress.ip_address("10.9.8.7"), ipaddress.ip_address("127.0.0.1")
    assert refusal("10.9.8.7", [ten], allow) is None
    assert refusal("127.0.0.1", [loop], allow) is None
    assert refusal("hooks.internal", [ipaddress.ip_address("192.168.0.2")], allow) is None
    assert refusal("other", [ipaddress.ip_address("192.168.0.2")], allow) is not None
    assert refusal("::1", [ipaddress.ip_address("::1")], allow) is not None


def test_a_bad_allow_entry_is_a_setting_error() -> None:
    with pytest.raises(ValueError, match="not a network"):
        Settings(webhook_allow=("10.0.0.0/99",))


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.com/x", "invalid callback URL"),
        ("/relative/path", "invalid callback URL"),
        ("https://", "invalid callback URL"),
        ("https://user:pw@example.com/", "credentials"),
        ("http://example.com:99999/", "invalid callback URL"),
        ("https://example.com/" + "a" * 2000, "characters"),
    ],
)
def test_a_malformed_url_is_refused_with_a_hint(url: str, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message) as caught:
        parse_callback(url)
    assert not isinstance(caught.value, CallbackRefusedError)


async def test_loopback_and_private_literals_are_refused_by_default() -> None:
    for url in (
        "http://127.0.0.1:9/x",
        "http://[::1]/x",
        "https://10.0.0.1/",
        "http://169.254.169.254/",
    ):
        with pytest.raises(CallbackRefusedError) as caught:
            await check_callback(url, NONE)
        assert caught.value.code == "callback_refused"
        assert "webhook_allow" in (caught.value.hint or "")


async def test_localhost_is_resolved_and_refused() -> None:
    with pytest.raises(CallbackRefusedError, match="localhost"):
        await check_callback("http://localhost:8080/hook", NONE)


async def test_an_unknown_host_is_an_invalid_request() -> None:
    with pytest.raises(InvalidRequestError, match="does not resolve") as caught:
        await check_callback("https://no-such-host.invalid/hook", NONE)
    assert not isinstance(caught.value, CallbackRefusedError)


async def test_an_allowed_target_connects_to_the_address_checked() -> None:
    allow = AllowList.of(["127.0.0.0/8"])
    target = await check_callback("http://127.0.0.1:8443/hooks?token=abc", allow)
    assert target == Target("http://127.0.0.1:8443/hooks?token=abc", "127.0.0.1", 8443, "127.0.0.1")
    assert target.connect_url() == "http://127.0.0.1:8443/hooks?token=abc"
    assert target.host_header() == "127.0.0.1:8443"
    named = Target("https://hooks.example/h", "hooks.example", 443, "2606:4700::1111")
    assert named.connect_url() == "https://[2606:4700::1111]:443/h"
    assert named.host_header() == "hooks.example" and named.https
