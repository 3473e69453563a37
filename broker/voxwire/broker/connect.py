"""The first packet of an MQTT connection, read and parsed before amqtt sees it.

:func:`read_first_packet` reads it bounded in size (the caller bounds the
time); :func:`parse_connect` takes from an MQTT 3.1.1 CONNECT what the
embedded broker's gate needs (:mod:`voxwire.broker.gate`) and stops at the
protocol level when it is not 4. A connection the gate refuses raises
:class:`Refused`, carrying the CONNACK to send first.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from amqtt.adapters import ReaderAdapter
from amqtt.codecs_amqtt import read_or_raise

MAX_CONNECT_BYTES = 64 * 1024

# CONNACK return codes (MQTT 3.1.1 section 3.2.2.3) and the MQTT 5 refusal.
UNACCEPTABLE_PROTOCOL = 0x01
IDENTIFIER_REJECTED = 0x02
SERVER_UNAVAILABLE = 0x03
BAD_CREDENTIALS = 0x04
NOT_AUTHORIZED = 0x05
CONNACK_V5_UNSUPPORTED = bytes([0x20, 0x03, 0x00, 0x84, 0x00])


@dataclass(frozen=True, slots=True)
class ConnectFields:
    """The fields of an MQTT 3.1.1 CONNECT the gate needs."""

    level: int
    client_id: str
    username: str | None
    password: str | None


class Refused(ValueError):
    """The gate refuses a connection; ``connack`` is sent first when not empty."""

    def __init__(self, reason: str, connack: bytes = b"") -> None:
        super().__init__(reason)
        self.connack = connack


def connack(code: int) -> bytes:
    """A CONNACK packet (MQTT 3.1.1) with return code ``code``."""
    return bytes([0x20, 0x02, 0x00, code])


def parse_connect(body: bytes) -> ConnectFields:
    """Parse a CONNECT body (after the fixed header); stops at the level unless it is 4.

    Raises ValueError on a malformed packet.
    """

    def text(pos: int) -> tuple[str, int]:
        if pos + 2 > len(body):
            raise Refused("truncated CONNECT")
        (size,) = struct.unpack_from("!H", body, pos)
        end = pos + 2 + size
        if end > len(body):
            raise Refused("truncated CONNECT")
        try:
            return body[pos + 2 : end].decode("utf-8"), end
        except UnicodeDecodeError as exc:
            raise Refused("CONNECT string is not UTF-8") from exc

    name, pos = text(0)
    if name not in ("MQTT", "MQIsdp") or pos + 4 > len(body):
        raise Refused(f"not an MQTT CONNECT (protocol name {name!r})")
    level, flags = body[pos], body[pos + 1]
    if level != 4:
        return ConnectFields(level, "", None, None)
    pos += 4  # level, flags, keep-alive
    client_id, pos = text(pos)
    if flags & 0x04:  # will flag: topic and message
        _, pos = text(pos)
        _, pos = text(pos)
    username = password = None
    if flags & 0x80:
        username, pos = text(pos)
    if flags & 0x40:
        password, pos = text(pos)
    return ConnectFields(level, client_id, username, password)


async def read_first_packet(reader: ReaderAdapter) -> tuple[bytes, bytes]:
    """Read the fixed header and body of the first packet, which must be a CONNECT."""
    head = bytearray(await read_or_raise(reader, 1))
    if head[0] != 0x10:
        raise Refused(f"first packet is not CONNECT (0x{head[0]:02x})")
    length, multiplier = 0, 1
    for _ in range(4):
        byte = (await read_or_raise(reader, 1))[0]
        head.append(byte)
        length += (byte & 0x7F) * multiplier
        if not byte & 0x80:
            break
        multiplier *= 128
    if length > MAX_CONNECT_BYTES:
        raise Refused(f"CONNECT of {length} bytes is too large")
    return bytes(head), await read_or_raise(reader, length)
