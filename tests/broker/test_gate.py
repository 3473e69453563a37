"""The embedded broker's connection gate on its own: CONNECT bytes in, a decision out."""

from __future__ import annotations

import pytest
from amqtt.adapters import BufferReader, WriterAdapter
from amqtt.errors import NoDataError

from voxwire.access.principal import Principal
from voxwire.broker.connect import Refused
from voxwire.broker.gate import CLIENT_BYTES_PER_S, MAX_PACKET_BYTES, AccessGate, ReplayReader

from .conftest import USERS, DictAuthenticator, PrefixAuthorizer

PEER = ("127.0.0.1", 40000)


def _connect(client_id: str, username: str, password: str, level: int = 4) -> bytes:
    def text(value: str) -> bytes:
        data = value.encode()
        return len(data).to_bytes(2, "big") + data

    body = text("MQTT") + bytes([level, 0x80 | 0x40 | 0x02, 0, 30])
    body += text(client_id) + text(username) + text(password)
    return bytes([0x10, len(body)]) + body


def _gate() -> AccessGate:
    return AccessGate(DictAuthenticator(USERS), PrefixAuthorizer())


async def test_the_gate_admits_good_credentials_and_keeps_the_principal() -> None:
    gate = _gate()
    packet = _connect("alice-1", "alice", "alice-pw")
    assert await gate.admit(BufferReader(packet), PEER, lambda _: None) == packet
    assert gate.admitted[PEER] == Principal("alice")
    limits = gate.limits_for(PEER)
    assert limits is not None and limits.rate_per_s == CLIENT_BYTES_PER_S


async def test_services_are_not_rate_limited() -> None:
    gate = _gate()
    await gate.admit(BufferReader(_connect("s", "service", "service-pw")), PEER, lambda _: None)
    assert gate.limits_for(PEER) is None


@pytest.mark.parametrize(
    ("packet", "connack"),
    [
        (_connect("alice-1", "alice", "wrong"), bytes([0x20, 2, 0, 0x04])),
        (_connect("bob-1", "alice", "alice-pw"), bytes([0x20, 2, 0, 0x02])),  # bob's client id
        (_connect("alice-1", "alice", "alice-pw", level=5), bytes([0x20, 3, 0, 0x84, 0])),
        (_connect("alice-1", "alice", "alice-pw", level=3), bytes([0x20, 2, 0, 0x01])),
    ],
)
async def test_the_gate_refuses_with_the_right_connack(packet: bytes, connack: bytes) -> None:
    gate = _gate()
    holders = {"bob-1": Principal("bob")}
    with pytest.raises(Refused) as refused:
        await gate.admit(BufferReader(packet), PEER, holders.get)
    assert refused.value.connack == connack
    assert PEER not in gate.admitted


class _Writer(WriterAdapter):  # type: ignore[misc]
    closed = False

    def write(self, data: bytes) -> None:
        pass

    async def drain(self) -> None:
        pass

    def get_peer_info(self) -> tuple[str, int]:
        return PEER

    def get_ssl_info(self) -> None:
        return None

    async def close(self) -> None:
        self.closed = True


async def test_after_an_oversized_packet_the_connection_reads_nothing_more() -> None:
    writer = _Writer()
    rest = b"\x00" * 64  # the oversized packet's bytes already received
    reader = ReplayReader(b"\x30", BufferReader(rest), writer, PEER, _gate(), None)
    assert await reader.read(1) == b"\x30"
    with pytest.raises(NoDataError):
        await reader.read(MAX_PACKET_BYTES + 1)
    assert writer.closed
    with pytest.raises(NoDataError):
        await reader.read(1)
