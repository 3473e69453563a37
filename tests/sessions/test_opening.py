"""A new session whose topics the broker cannot open (Mosquitto restarting as
the request comes) fails in the store with the broker's error: it never stays
queued with nothing to run it, and the caller gets the error."""

from __future__ import annotations

from pathlib import Path

import pytest

from voxwire.access.control import NoAccessSync
from voxwire.core.errors import MqttError
from voxwire.sessions.opening import open_session
from voxwire.store.sqlite import SqliteStore
from voxwire_client.messages import ErrorMessage, SessionStatus


class BrokerGone(NoAccessSync):
    """Access control whose broker does not answer (what DynsecAccess raises then)."""

    async def grant_session(self, tenant_id: str, sid: str, device_key: str | None = None) -> None:
        raise MqttError("dynsec createRole: no answer from Mosquitto", topic="$CONTROL")


async def test_a_session_whose_topics_cannot_be_opened_is_failed_not_left_queued(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "store.sqlite3")
    tenant = await store.create_tenant("acme")
    with pytest.raises(MqttError, match="no answer") as raised:
        await open_session(store, BrokerGone(), tenant, prompts=(), sid="s-broker-gone")
    assert raised.value.sid == "s-broker-gone"
    session = await store.get_session("s-broker-gone")
    assert session is not None and session.status is SessionStatus.FAILED
    [error] = await store.messages_after("s-broker-gone", 0)
    assert isinstance(error, ErrorMessage) and error.code == "mqtt" and error.fatal
    await store.close()


async def test_a_session_opened_normally_is_queued(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "store.sqlite3")
    tenant = await store.create_tenant("acme")
    sid = await open_session(store, NoAccessSync(), tenant, prompts=())
    session = await store.get_session(sid)
    assert session is not None and session.status is SessionStatus.QUEUED
    await store.close()
