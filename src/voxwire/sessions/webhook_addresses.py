"""Where a callback may go: an ``http`` or ``https`` URL whose host resolves only
to public addresses, unless the operator allows more (``webhook_allow``: host
names, addresses or networks).

Not public: loopback, private (RFC 1918, unique local), link-local (the cloud
metadata address 169.254.169.254 among them), multicast, unspecified, reserved
and shared (carrier-grade NAT) addresses, and an IPv6 address that maps one of
them. A name is resolved and every address it resolves to is checked: one
address not allowed refuses the URL. The check is made when the upload names the
URL and again before each delivery (the name may resolve elsewhere by then:
DNS rebinding), and the delivery connects to an address checked then
(:class:`Target`), not to what a second lookup would give.

:func:`refusal` is the pure rule; :func:`check_callback` parses, resolves and
applies it, raising :class:`CallbackRefusedError` (a 400) for an address not
allowed and :class:`~voxwire.core.errors.InvalidRequestError` for a URL that is
malformed or a host that does not resolve.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from voxwire.core.errors import InvalidRequestError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

MAX_URL_CHARS = 2000
RESOLVE_TIMEOUT_S = 5.0
_ALLOW_HINT = (
    "use a public http(s) address, or ask the operator to allow this host or network "
    "(the webhook_allow setting)"
)


class CallbackRefusedError(InvalidRequestError):
    """A callback URL whose host is (or resolves to) an address the operator has not allowed."""

    code = "callback_refused"


@dataclass(frozen=True, slots=True)
class AllowList:
    """What ``webhook_allow`` lets a callback reach besides public addresses."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def of(cls, entries: Sequence[str]) -> AllowList:
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for entry in entries:
            text = entry.strip().lower()
            try:
                networks.append(ipaddress.ip_network(text, strict=False))
            except ValueError:
                hosts.add(text.rstrip("."))
        return cls(frozenset(hosts), tuple(networks))

    def allows(self, address: IPAddress) -> bool:
        return any(address in network for network in self.networks)


@dataclass(frozen=True, slots=True)
class Target:
    """A callback URL checked: where to connect (an address checked, never resolved again)."""

    url: str
    host: str
    port: int
    address: str
    """The address to connect to (one of those the host resolved to, all allowed)."""

    @property
    def https(self) -> bool:
        return self.url.startswith("https:")

    def connect_url(self) -> str:
        """The URL with its host replaced by :attr:`address` (the ``Host`` header and,
        over TLS, the server name keep the host)."""
        parts = urlsplit(self.url)
        ip = ipaddress.ip_address(self.address)
        literal = f"[{ip}]" if ip.version == 6 else str(ip)
        return parts._replace(netloc=f"{literal}:{self.port}").geturl()

    def host_header(self) -> str:
        default = 443 if self.https else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def restriction(address: IPAddress) -> str | None:
    """What kind of non-public address ``address`` is (None: a public one)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return restriction(address.ipv4_mapped)
    for kind in ("loopback", "link_local", "multicast", "unspecified", "private", "reserved"):
        if getattr(address, f"is_{kind}"):
            return kind.replace("_", "-")
    return None if address.is_global else "non-public"


def refusal(host: str, addresses: Sequence[IPAddress], allow: AllowList) -> str | None:
    """Why a callback to ``host`` (resolving to ``addresses``) is refused; None: it is not."""
    if host.lower().rstrip(".") in allow.hosts:
        return None
    for address in addresses:
        kind = restriction(address)
        if kind is not None and not allow.allows(address) and str(address) not in allow.hosts:
            shown = host if host == str(address) else f"{host} ({address})"
            return f"callback host {shown} is a {kind} address"
    return None


def parse_callback(url: str) -> SplitResult:
    """``url`` split, if it is an absolute http(s) URL with a host; else InvalidRequestError."""
    text = url.strip()
    if len(text) > MAX_URL_CHARS:
        raise InvalidRequestError(
            f"callback URL of {len(text)} characters", hint=f"at most {MAX_URL_CHARS}"
        )
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise InvalidRequestError(f"invalid callback URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequestError(
            f"invalid callback URL {text[:80]!r}",
            hint="an absolute http:// or https:// URL, e.g. https://example.com/hooks/voxwire",
        )
    if parts.username is not None or parts.password is not None:
        raise InvalidRequestError(
            "a callback URL must not carry credentials",
            hint="the platform signs each delivery (Voxwire-Signature): verify that instead",
        )
    if port == 0:
        raise InvalidRequestError("invalid callback URL: port 0")
    return parts


async def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to; InvalidRequestError when it resolves to none."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(
            loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT_S
        )
    except (OSError, TimeoutError) as exc:
        raise InvalidRequestError(
            f"callback host {host} does not resolve: {exc}", hint="check the callback URL"
        ) from None
    found = dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos)
    if not found:
        raise InvalidRequestError(f"callback host {host} does not resolve")
    return list(found)


async def check_callback(url: str, allow: AllowList) -> Target:
    """``url`` checked and resolved now: :class:`Target`; CallbackRefusedError for
    an address not allowed, InvalidRequestError for a malformed URL or unknown host."""
    parts = parse_callback(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    addresses = await resolve(host, port)
    why = refusal(host, addresses, allow)
    if why is not None:
        raise CallbackRefusedError(why, hint=_ALLOW_HINT)
    return Target(url=parts.geturl(), host=host, port=port, address=str(addresses[0]))
