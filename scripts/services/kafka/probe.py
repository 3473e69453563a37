#!/usr/bin/env python3
"""Ask a Kafka broker for its metadata over the wire protocol (stdlib only).

Used by scripts/services.sh to decide that the broker is ready: it must answer an ApiVersions
request and then a Metadata request that lists at least one broker and a controller.

usage: probe.py HOST PORT [TIMEOUT_S]
Prints `cluster_id=... brokers=N controller=ID` and exits 0 when ready, 1 otherwise.
"""

from __future__ import annotations

import socket
import struct
import sys

API_METADATA = 3
API_VERSIONS = 18
CLIENT_ID = b"voxwire-services-probe"


def _request(sock: socket.socket, api_key: int, version: int, corr: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", api_key, version, corr, len(CLIENT_ID)) + CLIENT_ID
    payload = header + body
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    size = struct.unpack(">i", _read(sock, 4))[0]
    data = _read(sock, size)
    if struct.unpack(">i", data[:4])[0] != corr:
        raise RuntimeError("correlation id mismatch")
    return data[4:]


def _read(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise RuntimeError("connection closed")
        buf += chunk
    return buf


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        value = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value[0]

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s


def probe(host: str, port: int, timeout: float) -> str:
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        # ApiVersions v0: every broker answers it, whatever else it supports.
        r = _Reader(_request(sock, API_VERSIONS, 0, 1, b""))
        error = r.take(">h")
        if error:
            raise RuntimeError(f"ApiVersions error {error}")
        versions = {}
        for _ in range(r.take(">i")):
            key, lo, hi = r.take(">h"), r.take(">h"), r.take(">h")
            versions[key] = (lo, hi)
        lo, hi = versions.get(API_METADATA, (0, 0))
        version = max(lo, min(4, hi))  # v4 where offered; v9+ is the flexible encoding
        if version > 8:
            raise RuntimeError(f"broker needs Metadata v{lo}+ (flexible): not supported here")
        body = struct.pack(">i", 0)  # no topics, only brokers and controller
        if version >= 4:
            body += struct.pack(">?", False)  # allow_auto_topic_creation
        if version >= 8:
            body += struct.pack(">??", False, False)  # include authorized operations
        r = _Reader(_request(sock, API_METADATA, version, 2, body))
        if version >= 3:
            r.take(">i")  # throttle_time_ms
        brokers = []
        for _ in range(r.take(">i")):
            node, bhost, bport = r.take(">i"), r.string(), r.take(">i")
            if version >= 1:
                r.string()  # rack
            brokers.append(f"{node}@{bhost}:{bport}")
        cluster_id = r.string() if version >= 2 else None
        controller = r.take(">i") if version >= 1 else -1
        if not brokers or controller < 0:
            raise RuntimeError(f"not ready: brokers={brokers} controller={controller}")
        listed = ",".join(brokers)
        return f"cluster_id={cluster_id} brokers={listed} controller={controller} v={version}"


def main() -> int:
    host, port = sys.argv[1], int(sys.argv[2])
    timeout = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0
    try:
        print(probe(host, port, timeout))
        return 0
    except Exception as exc:
        print(f"not ready: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
