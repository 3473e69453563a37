"""Put a session's messages in ``seq`` order, drop duplicates, notice gaps.

Pure code: the SDK feeds it what MQTT and the history API deliver and acts on
what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from voxwire_client.messages import Message


@dataclass
class Sequencer:
    """Releases messages strictly in ``seq`` order, each exactly once."""

    last_seq: int = 0
    _pending: dict[int, Message] = field(default_factory=dict)

    def offer(self, message: Message) -> list[Message]:
        """Take one message; return those now ready, in order (maybe none)."""
        if message.seq <= self.last_seq or message.seq in self._pending:
            return []
        self._pending[message.seq] = message
        ready: list[Message] = []
        while self.last_seq + 1 in self._pending:
            self.last_seq += 1
            ready.append(self._pending.pop(self.last_seq))
        return ready

    @property
    def has_gap(self) -> bool:
        """True when a later message arrived before an earlier one."""
        return bool(self._pending)
