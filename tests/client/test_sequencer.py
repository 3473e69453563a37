from voxwire_client.messages import ProgressMessage, SessionStatus
from voxwire_client.sequencer import Sequencer


def _msg(seq: int) -> ProgressMessage:
    return ProgressMessage(sid="s1", seq=seq, status=SessionStatus.TRANSCRIBING, percent=1)


def test_in_order_messages_pass_through() -> None:
    seq = Sequencer()
    assert [m.seq for m in seq.offer(_msg(1))] == [1]
    assert [m.seq for m in seq.offer(_msg(2))] == [2]
    assert not seq.has_gap


def test_duplicates_are_dropped() -> None:
    seq = Sequencer()
    seq.offer(_msg(1))
    assert seq.offer(_msg(1)) == []
    seq.offer(_msg(3))
    assert seq.offer(_msg(3)) == []


def test_gap_is_held_until_filled() -> None:
    seq = Sequencer()
    assert seq.offer(_msg(1))
    assert seq.offer(_msg(3)) == []
    assert seq.has_gap
    assert [m.seq for m in seq.offer(_msg(2))] == [2, 3]
    assert not seq.has_gap and seq.last_seq == 3


def test_resume_after_a_known_seq() -> None:
    seq = Sequencer(last_seq=5)
    assert seq.offer(_msg(4)) == []
    assert [m.seq for m in seq.offer(_msg(6))] == [6]
