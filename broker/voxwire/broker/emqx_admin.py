"""Closing a revoked key's connections on EMQX, through EMQX's REST API.

EMQX asks the gateway's hooks (:mod:`voxwire.gateway.emqx`) when a client
connects and when it publishes or subscribes, so a revoked key cannot connect
again and is refused new topics (once EMQX's authorization cache, 30 s in
``emqx/emqx.conf``, has let go). A connection already open would keep its
subscriptions, though: :class:`EmqxAdmin` closes the connections of a revoked
key (username = the key id) with the API of EMQX 5::

    GET    /api/v5/clients?username=<key id>   the key's connections (clientid each)
    DELETE /api/v5/clients/<clientid>          close one (204; 404: gone already)

authenticated with an API key of EMQX's (HTTP basic: key, secret), which the
``emqx_api_url`` setting carries: ``http://<API key>:<secret>@emqx:18083``.
Keys, sessions and tokens need nothing else: the hooks read the store.
"""

from __future__ import annotations

from urllib.parse import quote, unquote, urlsplit, urlunsplit

import httpx

from voxwire.access.tokens import SessionToken
from voxwire.core.errors import ConfigError, MqttError

API_PATH = "/api/v5"
PAGE = 1000
"""Connections of one key listed at once (EMQX's largest page)."""


class EmqxAdmin:
    """EMQX's REST API, for what the hooks cannot do: close open connections."""

    def __init__(self, api_url: str, *, timeout_s: float = 10.0) -> None:
        parts = urlsplit(api_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                "emqx_api_url must be http(s)://<API key>:<secret>@host:port",
                hint="create an API key in EMQX's dashboard (System > API Key) and set "
                "VOXWIRE_EMQX_API_URL",
            )
        auth = None
        if parts.username is not None:
            auth = httpx.BasicAuth(unquote(parts.username), unquote(parts.password or ""))
        netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
        base = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/") or API_PATH, "", ""))
        self._http = httpx.AsyncClient(base_url=base, auth=auth, timeout=timeout_s)
        self.where = f"{parts.scheme}://{netloc}"
        """The API's address, without the credentials (for messages)."""

    async def close(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, **params: str | int) -> httpx.Response:
        try:
            response = await self._http.request(method, path, params=params or None)
        except httpx.HTTPError as exc:
            raise MqttError(
                f"EMQX's API at {self.where} cannot be reached: {exc}",
                hint="check VOXWIRE_EMQX_API_URL and that EMQX's dashboard listener is up",
            ) from exc
        if response.status_code in (401, 403):
            raise MqttError(
                f"EMQX's API at {self.where} refused the API key ({response.status_code})",
                hint="VOXWIRE_EMQX_API_URL needs an API key and secret of EMQX's",
            )
        return response

    async def connections_of(self, username: str) -> list[str]:
        """The client ids connected with ``username`` now."""
        response = await self._call("GET", "/clients", username=username, limit=PAGE)
        if response.status_code != 200:
            raise MqttError(f"EMQX's API: listing clients answered {response.status_code}")
        rows = response.json().get("data", [])
        return [str(row["clientid"]) for row in rows if row.get("username") == username]

    async def kick(self, clientid: str) -> bool:
        """Close one connection; False when it was gone already."""
        response = await self._call("DELETE", f"/clients/{quote(clientid, safe='')}")
        if response.status_code == 404:
            return False
        if response.status_code not in (200, 204):
            raise MqttError(f"EMQX's API: closing {clientid} answered {response.status_code}")
        return True

    # -- AccessControl ------------------------------------------------------------

    async def add_key(
        self, tenant_id: str, key_id: str, plaintext: str, *, device: bool = False
    ) -> None:
        return None  # the hooks read the store

    async def remove_key(self, key_id: str) -> None:
        for clientid in await self.connections_of(key_id):
            await self.kick(clientid)

    async def grant_session(self, tenant_id: str, sid: str, device_key: str | None = None) -> None:
        return None

    async def add_token(self, grant: SessionToken) -> None:
        return None
