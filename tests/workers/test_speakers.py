"""Diarization: who spoke when, in files and in live streams, on voices whose
turns are known (espeak-ng), with the real segmentation network, speaker encoder and Silero VAD."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from evaluation.speech import have_espeak
from tests.workers.speech import LINES, VOICES, Turn, conversation, say
from tests.workers.stream.test_session import Clock, OneStream, ScriptedEngine, feed
from voxwire.audio.decoding import SAMPLE_RATE
from voxwire.core.errors import ModelError
from voxwire.models import segmentation, speaker
from voxwire.workers.engine import EngineOptions, TranscriptionAborted
from voxwire.workers.speakers import files
from voxwire.workers.speakers.encoder import FrameReader, SpeakerEncoder, shared_encoder
from voxwire.workers.speakers.files import split_segment
from voxwire.workers.speakers.segmentation import powerset_classes
from voxwire.workers.speakers.segmented import DiarizationOptions, diarize
from voxwire.workers.speakers.tracker import SpeakerTracker, TrackerConfig
from voxwire.workers.stream.checkpoints import StreamCheckpoint
from voxwire.workers.stream.session import Resume, StreamConfig
from voxwire.workers.vad import SileroVad
from voxwire_client.messages import Message, SegmentMessage

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed"),
]


@pytest.fixture(scope="module")
def encoder() -> SpeakerEncoder:
    return shared_encoder()


def _who(turns: list[Turn], found: list[files.Turn]) -> list[str]:
    """The label that covers most of each known turn."""
    labels = []
    for turn in turns:
        spoken: Counter[str] = Counter()
        for got in found:
            spoken[got.speaker] += max(
                0, min(turn.end_ms, got.end_ms) - max(turn.start_ms, got.start_ms)
            )
        labels.append(spoken.most_common(1)[0][0] if spoken else "none")
    return labels


def test_two_voices_alternating_get_two_labels_that_follow_the_turns(
    encoder: SpeakerEncoder, tmp_path: Path
) -> None:
    audio, turns = conversation([0, 1, 0, 1, 0, 1], tmp_path)
    found = diarize(audio, encoder)
    assert {t.speaker for t in found} == {"S1", "S2"}
    assert _who(turns, found) == ["S1", "S2", "S1", "S2", "S1", "S2"]


def test_one_voice_gets_one_label(encoder: SpeakerEncoder, tmp_path: Path) -> None:
    audio, turns = conversation([1, 1, 1, 1], tmp_path)
    found = diarize(audio, encoder)
    assert {t.speaker for t in found} == {"S1"}
    assert _who(turns, found) == ["S1"] * 4


def test_two_voices_at_once_are_both_heard_where_they_overlap(
    encoder: SpeakerEncoder, tmp_path: Path
) -> None:
    """A woman starts while a man is still talking: the overlap carries both labels,
    and the segment over it goes to the one who was talking first."""
    man = say(LINES[0], VOICES[0], tmp_path)
    woman = say(LINES[1], VOICES[1], tmp_path)
    lead = SAMPLE_RATE // 2
    joins = lead + len(man) - 2 * SAMPLE_RATE  # she starts 2 s before he ends
    audio = np.zeros(joins + len(woman) + SAMPLE_RATE, np.float32)
    audio[lead : lead + len(man)] += man
    audio[joins : joins + len(woman)] += woman
    found = diarize(audio, encoder)
    assert {t.speaker for t in found} == {"S1", "S2"}
    middle = (joins + SAMPLE_RATE) * 1000 // SAMPLE_RATE  # of the 2 s they overlap
    overlap = (middle - 500, middle + 500)
    heard = {t.speaker for t in found if t.start_ms <= overlap[0] and t.end_ms >= overlap[1]}
    assert heard == {"S1", "S2"}
    before = split_segment(lead * 1000 // SAMPLE_RATE, overlap[1], "the man says it", found)
    assert [p.speaker for p in before] == ["S1"]


def test_bounds_on_the_number_of_speakers_are_kept(encoder: SpeakerEncoder, tmp_path: Path) -> None:
    audio, _ = conversation([0, 1, 0, 1], tmp_path)
    one = diarize(audio, encoder, DiarizationOptions(max_speakers=1))
    assert {t.speaker for t in one} == {"S1"}
    three = diarize(audio, encoder, DiarizationOptions(min_speakers=3))
    assert {t.speaker for t in three} == {"S1", "S2", "S3"}


def test_a_segment_over_a_change_of_speaker_is_split_there(
    encoder: SpeakerEncoder, tmp_path: Path
) -> None:
    audio, turns = conversation([0, 1], tmp_path)
    found = diarize(audio, encoder)
    first, second = turns
    text = "Good morning everyone, thank you for joining. Thanks for having me here."
    pieces = split_segment(first.start_ms, second.end_ms, text, found)
    assert [p.speaker for p in pieces] == ["S1", "S2"]
    assert " ".join(p.text for p in pieces) == text
    assert pieces[0].text.endswith("joining.")
    assert pieces[0].end_ms == pieces[1].start_ms
    assert first.end_ms - 500 <= pieces[0].end_ms <= second.start_ms + 500
    inside = split_segment(first.start_ms + 500, first.end_ms - 500, "good morning", found)
    assert [(p.speaker, p.text) for p in inside] == [("S1", "good morning")]


def _stream(
    audio: np.ndarray, config: StreamConfig, sid: str = "diarized"
) -> tuple[list[SegmentMessage], OneStream]:
    got: list[Message] = []
    clock = Clock()
    session = OneStream(
        sid, ScriptedEngine(), EngineOptions(), config, (), got.append, vad=SileroVad(), now=clock
    )
    feed(session, audio, clock)
    finals = [m for m in got if isinstance(m, SegmentMessage) and m.type == "final"]
    return finals, session


def test_live_labels_stay_the_same_after_a_long_pause(tmp_path: Path) -> None:
    voices = [0, 1, 0, 1, 1, 0]
    audio, turns = conversation(voices, tmp_path, pauses={4: 150.0})  # 2.5 minutes of silence
    finals, _ = _stream(audio, StreamConfig(diarize=True))
    assert len(finals) == len(turns)
    for final, turn in zip(finals, turns, strict=True):
        assert turn.start_ms - 500 <= final.segment.start_ms <= turn.end_ms
    assert [f.segment.speaker for f in finals] == ["S1", "S2", "S1", "S2", "S2", "S1"]


def test_live_one_voice_one_label_and_no_label_unless_asked(tmp_path: Path) -> None:
    audio, turns = conversation([1, 1, 1], tmp_path)
    finals, _ = _stream(audio, StreamConfig(diarize=True))
    assert [f.segment.speaker for f in finals] == ["S1"] * len(turns)
    plain, _ = _stream(audio, StreamConfig())
    assert [f.segment.speaker for f in plain] == [None] * len(turns)


def test_a_resumed_stream_keeps_its_speakers(tmp_path: Path) -> None:
    """Another worker going on from the checkpoint names the voices as before."""
    first, _ = conversation([0, 1], tmp_path)
    finals, session = _stream(first, StreamConfig(diarize=True))
    assert [f.segment.speaker for f in finals] == ["S1", "S2"]
    resume = session.resume_point()
    assert [label for label, _, _ in resume.speakers] == ["S1", "S2"]
    tracker = SpeakerTracker.restore(TrackerConfig(), resume.speakers)
    later, _ = conversation([1, 0], tmp_path)
    encoder = shared_encoder()
    half = len(later) // 2
    labels = [
        tracker.assign(encoder.embed_utterance(p), 3000) for p in (later[:half], later[half:])
    ]
    assert labels == ["S2", "S1"]


def test_the_tracker_never_renames_and_keeps_its_limits() -> None:
    """Pure: vectors in, labels out."""
    a, b, c = np.eye(3, dtype=np.float32)
    tracker = SpeakerTracker(TrackerConfig(max_speakers=2, min_new_ms=1000))
    assert tracker.assign(a, 2000) == "S1"
    assert tracker.assign(b, 500) == "S1"  # too short to open a speaker
    assert tracker.assign(b, 2000) == "S2"
    assert tracker.assign(c, 2000) in ("S1", "S2")  # at most two
    assert tracker.assign(a, 2000) == "S1"
    assert tracker.labels == ("S1", "S2")


def test_the_weights_are_read_without_torch_and_checked() -> None:
    weights = speaker.MODEL.load_or_install()
    assert weights["head.conv1.weight"].shape == (32, 1, 3, 3)
    assert weights["xvector.block3.tdnnd16.cam_layer.linear_local.weight"].shape == (32, 128, 3)
    assert weights["xvector.dense.linear.weight"].shape == (192, 1024, 1)
    with pytest.raises(ModelError, match="checksum"):
        speaker.MODEL.convert(b"\x80\x02not the weights")


def test_one_voice_is_nearer_to_itself_than_to_another(tmp_path: Path) -> None:
    """The encoder's embeddings of two sentences by one espeak-ng voice are more alike
    than the live tracker's threshold; of a man's and a woman's voice, less."""
    encoder = shared_encoder()
    man = [encoder.embed_utterance(say(line, VOICES[0], tmp_path)) for line in LINES[:2]]
    woman = encoder.embed_utterance(say(LINES[2], VOICES[1], tmp_path))
    threshold = TrackerConfig().threshold
    assert float(man[0] @ man[1]) > threshold > float(man[0] @ woman)
    assert np.allclose(np.linalg.norm(woman), 1.0, atol=1e-5)


def test_the_segmentation_weights_are_read_without_torch_and_checked() -> None:
    """pyannote's segmentation-3.0, a zip-format checkpoint, and the network's
    powerset: nobody, each of three speakers, each pair."""
    weights = segmentation.MODEL.load_or_install()
    assert weights["lstm.weight_ih_l0"].shape == (512, 60)
    assert weights["lstm.weight_hh_l3_reverse"].shape == (512, 128)
    assert weights["classifier.weight"].shape == (7, 128)
    with pytest.raises(ModelError, match="checksum"):
        segmentation.MODEL.convert(b"PK\x03\x04not the weights")
    classes = powerset_classes()
    assert classes.sum(axis=1).tolist() == [0, 1, 1, 1, 2, 2, 2]
    assert classes[4].tolist() == [True, True, False]


def test_diarizing_stops_when_the_worker_stops() -> None:
    """A stopping worker's abort is heard during diarization too, not only by the engine."""
    asked: list[int] = []

    def abort() -> bool:
        asked.append(1)
        return len(asked) >= 2

    with pytest.raises(TranscriptionAborted):  # 31 windows: two batches
        diarize(np.zeros(40 * SAMPLE_RATE, np.float32), shared_encoder(), abort=abort)
    assert len(asked) == 2


def test_a_long_recording_is_read_a_piece_at_a_time(tmp_path: Path) -> None:
    """The encoder's rows of a recording are let go once the windows have passed
    them (a file of hours would take gigabytes), and are the rows of a whole read."""
    encoder = shared_encoder()
    audio, _ = conversation([0, 1, 0, 1, 0], tmp_path)
    whole = encoder.frame_features(audio)
    reader = FrameReader(encoder, audio)
    early = reader.covering(0, 5 * SAMPLE_RATE)
    late = reader.covering(len(audio) - 5 * SAMPLE_RATE, len(audio))
    assert late.centres[0] > early.centres[-1]
    assert len(late.values) < len(whole.values)
    assert np.allclose(whole.values[np.isin(whole.centres, late.centres)], late.values)


def test_silence_has_no_speaker() -> None:
    assert diarize(np.zeros(12 * SAMPLE_RATE, np.float32), shared_encoder()) == []


def test_speakers_of_an_earlier_encoder_keep_their_labels() -> None:
    """A checkpoint whose centroids have another size (GE2E's 256 numbers): no
    crash, the labels stay taken, a new voice gets the next one."""
    old = (("S1", (1.0,) * 256, 2.0), ("S2", (0.5,) * 256, 3.0))
    tracker = SpeakerTracker.restore(TrackerConfig(), old)
    voice = np.eye(1, 192, dtype=np.float32)[0]
    assert tracker.assign(voice, 2000) == "S3"
    assert tracker.assign(voice, 2000) == "S3"
    full = SpeakerTracker.restore(TrackerConfig(max_speakers=2), old)
    assert full.assign(voice, 2000) in ("S1", "S2")
    assert full.assign(voice, 2000) in ("S1", "S2")


def test_the_speakers_survive_the_checkpoint_encoding() -> None:
    """What Redis keeps for a stream carries its speakers (a takeover names them alike)."""
    tracker = SpeakerTracker()
    a, b = np.eye(2, 256, dtype=np.float32)
    assert [tracker.assign(a, 2000), tracker.assign(b, 2000)] == ["S1", "S2"]
    saved = StreamCheckpoint(b"start", Resume(5, speakers=tracker.state())).encode()
    restored = SpeakerTracker.restore(
        TrackerConfig(), StreamCheckpoint.decode(saved).resume.speakers
    )
    assert restored.labels == ("S1", "S2")
    assert restored.assign(b, 1500) == "S2" and restored.assign(a, 1500) == "S1"
