"""The webhook settings' checks. The settings themselves are in their groups:
``webhook_allow`` (security: where a callback may go besides public addresses)
and ``webhook_ttl_h``, ``webhook_timeout_s``, ``webhook_retry_s``,
``webhook_retry_max_s``, ``webhook_interval_s`` (limits: how long and how often
deliveries are tried). Every gateway of an installation should have the same."""

from __future__ import annotations

import ipaddress
import json
from typing import Annotated

from pydantic import BeforeValidator

ALLOW_DESCRIPTION = (
    "hosts, addresses or networks (CIDR) a webhook callback may reach besides public "
    "addresses: loopback, private, link-local, multicast and unspecified addresses are refused "
    "unless listed (e.g. 127.0.0.1, 10.0.0.0/8, hooks.internal; comma separated)"
)


def allow_entries(value: object) -> object:
    """``webhook_allow`` as given: a comma-separated string (the environment), a
    JSON list, or a list; each entry checked (ValueError naming a bad one)."""
    if isinstance(value, str):
        text = value.strip()
        value = json.loads(text) if text.startswith("[") else text.split(",")
    if not isinstance(value, list | tuple):
        return value
    entries = tuple(str(e).strip().lower() for e in value if str(e).strip())
    for entry in entries:
        if "/" in entry:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError as exc:
                raise ValueError(f"{entry!r} is not a network: {exc}") from None
        elif any(c in entry for c in " @?#") or (":" in entry and not _is_ip(entry)):
            raise ValueError(f"{entry!r} is not a host name, an address or a network")
    return entries


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


WebhookAllow = Annotated[tuple[str, ...], BeforeValidator(allow_entries)]
"""The type of ``webhook_allow``."""
