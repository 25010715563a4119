"""Counter files: every token transition is one CAS of the whole word, range-tagged."""
import os

import pytest

import refshare
from refshare import counter as c
from refshare import descriptor as dc
from refshare import shm
from refshare.errors import InvalidDataError, RefshareError, ResourceLimitError

from conftest import kill, line


@pytest.fixture
def cnt(shmdir):
    d = shm.ShmDirectory(shmdir)
    f = c.CounterFile.create(d, 8, 2)
    yield d, f
    f.file.unlink()
    f.close()
    d.release_life_lock()


def test_layout_of_a_new_file(cnt):
    d, f = cnt
    assert f.file.size == 128 + 16 * 2 + 8 * 8
    assert f.file.load64(0) == c.MAGIC and f.owner == shm.current()
    reopened = c.CounterFile.open(d, f.name)
    assert reopened.slot_capacity == 8 and reopened.peer_capacity == 2 and reopened.owner == shm.current()
    reopened.close()


def test_hand_out_claim_release_with_the_range_tag(cnt):
    _, f = cnt
    tag = 0xA8C4D61E
    s = f.hand_out(tag)
    assert s == 0 and f.word(0) == c.IN_FLIGHT | tag << 32
    assert not f.claim(0, tag ^ 1), "a genuine token presented with another range must fail"
    before = f.releases()
    assert f.claim(0, tag)
    assert f.word(0) == c.held_word(f.self_peer()) | tag << 32
    assert not f.claim(0, tag), "claimed twice"
    assert not f.cancel(0, tag), "a held token cannot be cancelled"
    assert f.release(0, tag)
    assert not f.release(0, tag), "released twice"
    assert f.word(0) == c.RELEASED | tag << 32 and f.releases() == before + 1


def test_a_claim_its_holder_cannot_finish_goes_back_in_flight(cnt):
    """Section 8.4's unclaim: only the holder's, the tag kept, not counted, claimable again."""
    d, f = cnt
    tag = 0x5EED0001
    s = f.hand_out(tag)
    assert not f.unclaim(s, tag), "a token in flight has no claim to give back"
    assert f.claim(s, tag)
    other = c.CounterFile.open(d, f.name)  # another peer entry, as another process would have
    try:
        assert not other.unclaim(s, tag), "only its holder gives a claim back"
        before = f.releases()
        assert f.unclaim(s, tag) and not f.unclaim(s, tag)
        assert f.word(s) == c.IN_FLIGHT | tag << 32 and f.releases() == before
        assert other.claim(s, tag), "the next receiver takes it"
        assert other.release(s, tag) and not other.unclaim(s, tag)
        assert f.word(s) == c.RELEASED | tag << 32 and f.releases() == before + 1
    finally:
        other.leave()
        other.close()


def test_cancel_and_retirement(cnt):
    _, f = cnt
    for i in range(8):
        assert f.hand_out(i) == i
    assert f.is_retired() and f.hand_out(9) is None
    assert f.cancel(3, 3) and not f.cancel(3, 3)
    assert f.live() == 7


def test_out_of_range_slots_are_invalid_data(cnt):
    _, f = cnt
    with pytest.raises(InvalidDataError):
        f.claim(8, 0)
    with pytest.raises(InvalidDataError):
        f.state(-1)


def test_a_full_peer_table_is_a_resource_limit(cnt):
    _, f = cnt
    me = shm.current()
    for i in range(2):  # both entries taken by live processes (ourselves, as a stand-in)
        f.file.store64(128 + 16 * i, me.pid)
        f.file.store64(136 + 16 * i, me.start)
    f.hand_out(5)
    with pytest.raises(ResourceLimitError, match="all 2 peer entries"):
        f.claim(0, 5)
    assert f.state(0) == c.IN_FLIGHT, "nothing consumed on a refusal"


def test_leaving_gives_back_tokens_and_frees_the_entry(cnt):
    _, f = cnt
    for tag in (1, 2, 3):
        f.hand_out(tag)
    assert f.claim(0, 1) and f.claim(2, 3)
    assert f.held_by_index(f.self_peer()) == 2
    assert f.leave() == 2
    assert f.file.load64(128) == 0 and f.file.load64(136) == 0
    assert f.state(0) == c.RELEASED and f.state(1) == c.IN_FLIGHT and f.state(2) == c.RELEASED


def test_damaged_headers_are_refused(shmdir):
    d = shm.ShmDirectory(shmdir)
    f = c.CounterFile.create(d, 4, 1)
    try:
        for off, value in ((0, 1), (8, 99), (32, 0), (36, 1 << 20)):
            old = f.file.read(off, 8 if off == 0 else 4)
            f.file.write(off, value.to_bytes(len(old), "little"))
            with pytest.raises(InvalidDataError):
                c.CounterFile.open(d, f.name)
            f.file.write(off, old)
        c.CounterFile.open(d, f.name).close()
    finally:
        f.file.unlink()
        f.close()
        d.release_life_lock()


def test_a_sigkilled_holders_tokens_are_reclaimed_exactly(shmdir, peers):
    with refshare.open(directory=shmdir) as rs:
        tensors = [rs.from_numpy([i] * 16) for i in range(5)]
        msgs = [rs.share(t).hex() for t in tensors[:3]]
        spare = rs.share(tensors[3])  # in flight, never received: not the dead process's
        p = peers.start("receive", shmdir, *msgs)
        assert line(p) == ["HELD", "3", str(16 * 3)]
        for t in tensors:
            t.close()
        assert rs.stats().limbo_blocks == 4
        kill(p)
        rs._sharing.housekeeping()
        assert rs.stats().reclaimed == 3
        rs.collect()
        assert rs.stats().limbo_blocks == 1, "the in-flight message still keeps its block"
        assert rs.cancel(spare)
        rs.collect()
        assert rs.stats().limbo_blocks == 0
        cnt = rs._sharing._own[-1]
        assert all(cnt.file.load64(128 + 16 * i) == 0 for i in range(cnt.peer_capacity)), "dead entry recycled"
    refshare.gc(directory=shmdir)


def test_a_scribbled_released_state_with_the_wrong_tag_frees_nothing(shmdir):
    with refshare.open(directory=shmdir) as rs:
        t = rs.from_numpy([1, 2, 3])
        d = rs._sharing.share_descriptor(t)
        t.close()
        cnt = rs._sharing._own[-1]
        off = cnt._slots + 8 * d.slot
        cnt.file.store64(off, c.RELEASED)  # a hostile writer: RELEASED, but no range tag
        cnt._released()
        rs.collect()
        assert rs.stats().limbo_blocks == 1, "the block is not reused on a forged word"
        cnt.file.store64(off, c.IN_FLIGHT | d.range_tag() << 32)
        assert rs.cancel(dc.encode(d))
        rs.collect()
        assert rs.stats().limbo_blocks == 0
