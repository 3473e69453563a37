"""Free loopback ports for servers that tests and benchmarks start."""

from __future__ import annotations

import random
import socket

_PORTS = range(20000, 32768)
"""Where :func:`free_port` looks: below Linux's ephemeral range (32768-60999), so
no outgoing connection takes a port between its choice and the server's bind."""
_handed_out: set[int] = set()
_pick = random.Random()  # its own: tests that seed random do not repeat ports


def free_port() -> int:
    """A port nothing listens on, handed out once per process."""
    for _ in range(1000):
        port = _pick.choice(_PORTS)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in {_PORTS}")
