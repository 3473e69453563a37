"""Keeping Mosquitto's dynamic-security plugin in step with voxwire's tenants.

In distributed mode with Mosquitto, the broker itself enforces who may do what:

- every API key is a dynsec *client* (username = key id, password = the key),
  with the role of its tenant; a revoked key's client is deleted; a device key
  has no tenant role, only its own (below), which gets the topics of each
  session the device opens;
- every session token (:mod:`voxwire.access.tokens`) is a client (username
  ``tok-<expires at>-<id>``, password = the token) with a role of its own
  for its sessions' topics; :meth:`DynsecAccess.remove_expired_tokens`
  deletes them once expired (Mosquitto itself does not know JWTs);
- every tenant is a dynsec *role*; creating a session adds ACLs to the role so
  the tenant may subscribe to ``transcription/<sid>/#`` and publish to
  ``audio/<sid>/#``; every key has a role of its own for its search topics
  (publish ``query/<key id>/+/request`` and upload parts ``query/<key id>/+/part/+``,
  subscribe ``query/<key id>/+/result``);
  anything not allowed is denied (the plugin's defaults are set to deny by
  ``scripts/services.sh``).

Commands go to ``$CONTROL/dynamic-security/v1`` as voxwire's service user and
each waits for its answer on ``.../response`` (matched by correlation data),
over a :class:`~voxwire.broker.connection.BrokerConnection` with a clean session
(the answers are read on paho's thread; commands block, so the
:class:`~voxwire.access.control.AccessControl` methods run them in a worker thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import ssl
import threading
from collections.abc import Iterable
from concurrent.futures import Future, InvalidStateError
from typing import Any

from voxwire.access.tokens import USERNAME_PREFIX, SessionToken
from voxwire.broker.connection import BrokerConnection, ConnectOptions, Received
from voxwire.core.errors import MqttError
from voxwire.core.liveness import Silence

CONTROL_TOPIC = "$CONTROL/dynamic-security/v1"
RESPONSE_TOPIC = f"{CONTROL_TOPIC}/response"
_ALREADY = ("already exists", "Client already exists", "Role already exists")


def key_role_name(key_id: str) -> str:
    """The dynsec role holding one API key's own topics (its search queries)."""
    return f"vx-key-{key_id}"


def role_name(tenant_id: str) -> str:
    return f"tenant-{tenant_id}"


class _CommandAck:
    """Fails a command at once when its publish fails (refused, or the connection closed)."""

    def __init__(self, future: Future[dict[str, Any]]) -> None:
        self.future = future

    def settle(self, error: MqttError | None) -> None:
        if error is not None:
            with contextlib.suppress(InvalidStateError):  # answered already
                self.future.set_exception(error)


class DynsecAccess:
    """Sends dynamic-security commands over one MQTT connection."""

    def __init__(
        self,
        host: str,
        port: int,
        username: str,
        password: str,
        *,
        timeout_s: float = 10.0,
        tls: ssl.SSLContext | None = None,
        keepalive_s: int = 30,
    ) -> None:
        self._timeout_s = timeout_s
        self._waiting: dict[str, Future[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._connection = BrokerConnection(
            ConnectOptions(
                host,
                port,
                f"voxwire-dynsec-{secrets.token_hex(4)}",
                username=username,
                password=password,
                tls=tls,
                session_expiry_s=None,
                connect_timeout_s=timeout_s,
                keepalive_s=keepalive_s,
            )
        )
        self._connection.subscribe([RESPONSE_TOPIC], self._on_response)

    def connect(self) -> None:
        try:
            self._connection.connect()
        except MqttError as exc:
            raise MqttError(
                f"Mosquitto did not accept the dynsec admin connection: {exc.message}",
                hint=exc.hint,
            ) from exc

    @property
    def connected(self) -> bool:
        """Whether the admin connection to the broker is up now."""
        return self._connection.connected

    @property
    def silence(self) -> Silence:
        """Liveness: whether the broker has been heard lately (see the connection)."""
        return self._connection.silence

    def close(self) -> None:
        self._connection.close()

    def _on_response(self, message: Received) -> None:
        try:
            responses = json.loads(message.payload).get("responses", [])
        except (ValueError, AttributeError):
            return
        for response in responses:
            with self._lock:
                future = self._waiting.pop(str(response.get("correlationData")), None)
            if future is not None and not future.done():
                with contextlib.suppress(InvalidStateError):  # failed by its publish meanwhile
                    future.set_result(response)

    def command(self, name: str, **fields: Any) -> dict[str, Any]:
        """Run one command; raise MqttError on an error other than 'already exists'."""
        correlation = secrets.token_hex(8)
        future: Future[dict[str, Any]] = Future()
        with self._lock:
            self._waiting[correlation] = future
        body = {"commands": [{"command": name, "correlationData": correlation, **fields}]}
        try:
            self._connection.publish(
                CONTROL_TOPIC, json.dumps(body).encode(), qos=1, ack=_CommandAck(future)
            )
            response = future.result(self._timeout_s)
        except TimeoutError:
            raise MqttError(
                f"dynsec {name}: no answer from Mosquitto", topic=CONTROL_TOPIC
            ) from None
        finally:
            with self._lock:
                self._waiting.pop(correlation, None)
        error = response.get("error")
        if error and not any(text in str(error) for text in _ALREADY):
            raise MqttError(f"dynsec {name} failed: {error}", topic=CONTROL_TOPIC)
        return response

    # -- AccessControl ------------------------------------------------------------

    def _ensure_role(self, tenant_id: str) -> None:
        self.command("createRole", rolename=role_name(tenant_id))

    def _key_role(self, key_id: str) -> str:
        """The key's own role (its query topics, and a device key's sessions), made or
        completed; its name."""
        own = key_role_name(key_id)
        self.command("createRole", rolename=own)
        for acltype, topic in (
            ("publishClientSend", f"query/{key_id}/+/request"),
            ("publishClientSend", f"query/{key_id}/+/part/+"),
            ("subscribePattern", f"query/{key_id}/+/result"),
            ("publishClientReceive", f"query/{key_id}/+/result"),
        ):
            self.command(
                "addRoleACL", rolename=own, acltype=acltype, topic=topic, allow=True, priority=0
            )
        return own

    async def complete_key_roles(self, key_ids: Iterable[str]) -> None:
        """Give the roles of keys made before a topic was added that topic (a
        gateway does it when it starts; what a role has already is left as is)."""
        await asyncio.to_thread(lambda: [self._key_role(key_id) for key_id in key_ids])

    async def add_key(
        self, tenant_id: str, key_id: str, plaintext: str, *, device: bool = False
    ) -> None:
        def go() -> None:
            self._ensure_role(tenant_id)
            own = self._key_role(key_id)
            self.command(
                "createClient",
                username=key_id,
                password=plaintext,
                roles=[{"rolename": own}]
                if device
                else [{"rolename": role_name(tenant_id)}, {"rolename": own}],
            )

        await asyncio.to_thread(go)

    async def remove_key(self, key_id: str) -> None:
        def go() -> None:
            self.command("deleteClient", username=key_id)
            self.command("deleteRole", rolename=key_role_name(key_id))

        await asyncio.to_thread(go)

    async def grant_session(self, tenant_id: str, sid: str, device_key: str | None = None) -> None:
        role = role_name(tenant_id)

        def go() -> None:
            self._ensure_role(tenant_id)
            self._allow_session(role, sid)
            if device_key is not None:
                self._allow_session(key_role_name(device_key), sid)

        await asyncio.to_thread(go)

    def _allow_session(self, role: str, sid: str) -> None:
        """Let ``role`` follow session ``sid`` and send its audio."""
        for acltype, topic in (
            ("subscribePattern", f"transcription/{sid}/#"),
            ("publishClientReceive", f"transcription/{sid}/#"),
            ("publishClientSend", f"audio/{sid}/#"),
        ):
            self.command(
                "addRoleACL", rolename=role, acltype=acltype, topic=topic, allow=True, priority=0
            )

    async def add_token(self, grant: SessionToken) -> None:
        role = f"vx-{grant.username}"

        def go() -> None:
            self.command("createRole", rolename=role)
            for sid in sorted(grant.sids):
                self._allow_session(role, sid)
            self.command(
                "createClient",
                username=grant.username,
                password=grant.token,
                roles=[{"rolename": role}],
            )

        await asyncio.to_thread(go)

    async def remove_expired_tokens(self, now: float) -> int:
        """Delete the clients (and roles) of tokens expired by ``now``; how many."""

        def go() -> int:
            listed = self.command("listClients", verbose=False, count=-1, offset=0)
            removed = 0
            for username in listed.get("data", {}).get("clients", []):
                if not str(username).startswith(USERNAME_PREFIX):
                    continue
                expires = str(username)[len(USERNAME_PREFIX) :].split("-", 1)[0]
                if expires.isdigit() and int(expires) <= now:
                    self.command("deleteClient", username=username)
                    self.command("deleteRole", rolename=f"vx-{username}")
                    removed += 1
            return removed

        return await asyncio.to_thread(go)
