"""Queues between real processes: exactly-once delivery, waiting, stream end, recovery."""
import itertools
import os
import struct
import time

import numpy as np
import pytest

import refshare
from refshare import queue as qm
from refshare.errors import ProducersGoneError, QueueClosedError

from conftest import kill, line
from peer import pattern


def message(rs, ident, size):
    t = rs.allocate("uint8", (size,))
    a = t.numpy()
    a[:8] = np.frombuffer(struct.pack("<q", ident), dtype=np.uint8)
    a[8:] = pattern(ident, size - 8)
    return t


def settle(rs, seconds=5.0):
    deadline = time.monotonic() + seconds
    while rs.stats().limbo_blocks and time.monotonic() < deadline:
        time.sleep(0.01)
    return rs.stats().limbo_blocks


def test_put_take_poll_in_one_process(shmdir):
    with refshare.open(directory=shmdir) as rs, rs.create_queue(capacity=4) as q:
        assert q.poll(0.05) is None
        for i in range(4):
            with rs.from_numpy(np.full(3, i, dtype=np.int16)) as t:
                assert q.offer(t, 0)
        with rs.from_numpy(np.zeros(1)) as t:
            start = time.monotonic()
            assert not q.offer(t, 0.1), "full queue"
            assert time.monotonic() - start >= 0.09
        for i in range(4):
            with q.take() as t:
                assert t.dtype == "int16" and t.numpy().tolist() == [i] * 3
        q.end_of_stream()
        with pytest.raises(QueueClosedError):
            q.take()
        assert list(q) == []
        assert settle(rs) == 0


def test_consumer_close_does_not_end_the_stream_and_messages_wait(shmdir):
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=8)
        with refshare.open(directory=shmdir) as other:
            c = other.open_queue(q.name)
            with rs.from_numpy(np.arange(5)) as t:
                q.put(t)
            c.close()
        with rs.from_numpy(np.arange(6)) as t:
            q.put(t)
        with refshare.open(directory=shmdir) as other, other.open_queue(q.name) as c:
            assert c.take().numpy().tolist() == list(range(5))
            assert c.take().numpy().tolist() == list(range(6))
        q.close()
        assert settle(rs) == 0


def test_stream_ended_with_no_consumer_returns_the_references(shmdir):
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=8)
        for i in range(5):
            with rs.from_numpy(np.arange(i + 1)) as t:
                q.put(t)
        assert rs.stats().limbo_blocks == 5
        q.close()
        rs.collect()
        assert settle(rs) == 0 and rs.stats().collected == 5


def test_many_messages_to_two_consumer_processes_each_exactly_once(shmdir, peers):
    n = 600
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=16)
        cs = [peers.start("consume", shmdir, q.name, 0) for _ in range(2)]
        for c in cs:
            assert line(c) == ["READY"]
        for i in range(n):
            with message(rs, i, 64 + (i % 7) * 1000) as t:
                q.put(t)
        q.close()
        seen = []
        for c in cs:
            words = line(c)
            assert words[0] == "DONE" and words[2] == "0", "bytes verified"
            seen += [int(x) for x in words[3:]]
            assert int(words[1]) == len(words) - 3
        assert sorted(seen) == list(range(n))
        assert settle(rs) == 0
    peers.finish()
    refshare.gc(directory=shmdir)


def test_python_consumer_of_a_python_producer_process(shmdir, peers):
    p = peers.start("produce", shmdir, 8, 40, 2048)
    name = line(p)[1]
    got = []
    with refshare.open(directory=shmdir) as rs, rs.open_queue(name) as q:
        while len(got) < 40:
            with q.take() as t:
                a = t.numpy()
                ident = int(a[:8].view(np.int64)[0])
                assert np.array_equal(a[8:], pattern(ident, a.size - 8))
                assert np.array_equal(t.torch().numpy(), a)
                got.append(ident)
        assert line(p) == ["PUT", "40"]
        p.stdin.write("close\n")
        p.stdin.flush()
        with pytest.raises(QueueClosedError) as e:
            q.take()
        assert not isinstance(e.value, ProducersGoneError)
    p.wait()
    assert got == list(range(40))


def test_sigkilled_consumer_holding_references_is_reclaimed_exactly(shmdir, peers):
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=32)
        c = peers.start("consume", shmdir, q.name, 5)
        assert line(c) == ["READY"]
        for i in range(5):
            with message(rs, i, 4096) as t:
                q.put(t)
        assert line(c) == ["HELD", "5", "0"]
        assert rs.stats().limbo_blocks == 5
        kill(c)
        deadline = time.monotonic() + 5
        while rs.stats().reclaimed < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert rs.stats().reclaimed == 5, "exactly the dead consumer's references"
        assert settle(rs) == 0
        q.close()
    refshare.gc(directory=shmdir)


def test_producers_gone_when_the_producer_process_is_killed(shmdir, peers):
    p = peers.start("produce", shmdir, 8, 3, 100)
    name = line(p)[1]
    assert line(p) == ["PUT", "3"]
    with refshare.open(directory=shmdir) as rs, rs.open_queue(name) as q:
        kill(p)
        for i in range(3):  # what was queued is still delivered, with valid bytes
            with q.take() as t:
                assert int(t.numpy()[:8].view(np.int64)[0]) == i
        start = time.monotonic()
        with pytest.raises(ProducersGoneError):
            q.take()
        assert time.monotonic() - start < 2.0
        with pytest.raises(ProducersGoneError):
            q.poll(0.1)
    refshare.gc(directory=shmdir)


def test_a_dead_claimants_reading_cell_is_delivered_to_another_consumer(shmdir):
    """Simulates a consumer killed between claiming a cell and finishing its poll: its entry names
    a dead process and the cell is READING in its name."""
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=4)
        with rs.from_numpy(np.arange(7)) as t:
            q.put(t)
        f = q._f
        dead = refshare.shm.ProcessIdentity(os.getpid(), refshare.shm.current().start + 12345)
        open(os.path.join(shmdir, rs.directory.life_name(dead)), "wb").close()  # a life file nobody locks: DEAD
        entry = 5
        f.store64(q._e(entry), dead.packed())
        cell = q._cell(0)
        w = f.load64(cell)
        assert f.cas64(cell, w, qm._word(0, qm.READING, entry))
        f.cas64(qm.HEAD, 0, 1)
        with refshare.open(directory=shmdir) as other, other.open_queue(q.name) as c:
            with c.poll(2.0) as t:
                assert t.numpy().tolist() == list(range(7))
            assert c.poll(0.05) is None
        assert f.load64(q._e(entry)) == 0, "the dead entry was reclaimed"
        q.close()
        os.unlink(os.path.join(shmdir, rs.directory.life_name(dead)))
        assert settle(rs) == 0


def test_a_dead_participants_sleeper_and_spinner_shares_leave_the_counts(shmdir):
    """A Java consumer killed while spinning (or asleep) leaves its share in the global counts; a
    Python sweep removes it, or Java producers would skip waking sleepers for a spinner that
    is gone (protocol section 9.5)."""
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=4)
        f = q._f
        dead = refshare.shm.ProcessIdentity(os.getpid(), refshare.shm.current().start + 12345)
        open(os.path.join(shmdir, rs.directory.life_name(dead)), "wb").close()  # a life file nobody locks: DEAD
        entry = 5
        f.store64(q._e(entry), dead.packed())
        shares = ((qm.E_CSLEEP, qm.CONSUMERS_SLEEPING), (qm.E_PSLEEP, qm.PRODUCERS_SLEEPING),
                  (qm.E_CSPIN, qm.CONSUMERS_SPINNING), (qm.E_PSPIN, qm.PRODUCERS_SPINNING))
        for n, (share, count) in enumerate(shares, start=1):
            f.fetch_add32(q._e(entry, share), n)
            f.fetch_add32(count, n)
        q._sweep(fresh=True, adopt=False)
        assert f.load64(q._e(entry)) == 0, "the dead entry was reclaimed"
        for share, count in shares:
            assert (f.load32(q._e(entry, share)), f.load32(count)) == (0, 0)
        q.close()
        os.unlink(os.path.join(shmdir, rs.directory.life_name(dead)))


class _RecordingFile:
    """A queue's mapped file that notes the "given back" count at each CAS that returns a cell."""

    def __init__(self, f):
        self._f = f
        self.count_at_return = []

    def __getattr__(self, name):
        return getattr(self._f, name)

    def cas64(self, off, old, new):
        if qm._state(new) == qm.READING and qm._claimant(new) == qm.RETURNED:
            self.count_at_return.append(self._f.load64(qm.GIVEN_BACK))
        return self._f.cas64(off, old, new)


def _resource_limit(payload):
    raise refshare.ResourceLimitError("every peer entry of the sender's counter file is held (test)")


def test_give_back_counts_first_then_returns_the_cell_for_another_consumer(shmdir):
    """Section 9.8 as Java's ShmQueue.giveBack: fetch-add "given back" (offset 56), then CAS
    READING(p, self) -> READING(p, 0xFFFF); another consumer then delivers it exactly once."""
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=4)
        with refshare.open(directory=shmdir) as a, a.open_queue(q.name) as ca, \
                refshare.open(directory=shmdir) as b, b.open_queue(q.name) as cb:
            assert cb.poll(0.15) is None  # cb has swept (every 100 ms) and seen the count at 0
            with rs.from_numpy(np.arange(3)) as t:
                q.put(t)
            recording = ca._f = _RecordingFile(ca._f)
            with pytest.raises(refshare.ResourceLimitError):
                ca.poll_message(1.0, _resource_limit)
            ca._f = recording._f
            assert recording.count_at_return == [1], "the count goes up before the cell is returned"
            assert q._f.load64(qm.GIVEN_BACK) == 1
            assert q._f.load64(q._cell(0)) & qm.M64 == qm._word(0, qm.READING, qm.RETURNED)
            with cb.poll(2.0) as t:
                assert t.numpy().tolist() == [0, 1, 2]
            assert cb.poll(0.25) is None and ca.poll(0.25) is None, "delivered exactly once"
            assert q._f.load64(qm.GIVEN_BACK) == 1
        q.close()
        assert settle(rs) == 0


def test_a_consumer_out_of_open_files_gives_the_message_back_and_takes_it_later(shmdir):
    """A receive that meets this process's limit (its open files) while it opens the sender's
    files: not the message's fault, so a ResourceLimitError that names the limit, the message
    back in the queue, and received intact once files can be opened again (as Java's
    ProcessLimitsTest; before 2026-11-28 the message was rejected: dropped)."""
    import resource
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=4)
        with refshare.open(directory=shmdir) as other, other.open_queue(q.name) as c:
            with rs.from_numpy(np.arange(6)) as t:  # a segment and a counter file c has not opened
                q.put(t)
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) - 1, hard))
            try:
                with pytest.raises(refshare.ResourceLimitError, match="EMFILE"):
                    c.poll(0)
            finally:
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
            assert c.rejected == 0
            with c.poll(2.0) as t:
                assert t.numpy().tolist() == list(range(6))
        q.close()
        assert settle(rs) == 0


@pytest.mark.parametrize("failure", [MemoryError, KeyboardInterrupt])
def test_a_receive_stopped_after_its_claim_gives_the_message_back(shmdir, monkeypatch, failure):
    """Out of memory, or interrupted from the keyboard, after the token was claimed (making the
    tensor): not the message's fault, so the claim is undone (section 8.4, unclaim), the message
    goes back to the queue and is received intact by the next poll (before 2026-11-28 it was
    lost, its token held until the consumer's close)."""
    from refshare import sharing
    real = sharing.HeldBlock
    failures = [failure]

    def failing_once(*args):
        if failures:
            raise failures.pop()("injected after the claim (test)")
        return real(*args)

    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=4)
        with refshare.open(directory=shmdir) as other, other.open_queue(q.name) as c:
            with rs.from_numpy(np.arange(6)) as t:
                q.put(t)
            monkeypatch.setattr(sharing, "HeldBlock", failing_once)
            with pytest.raises(failure, match="after the claim"):
                c.poll(0)
            assert not failures, "the failure struck after the claim"
            assert c.rejected == 0 and other.stats().received == 0
            assert q._f.load64(qm.GIVEN_BACK) == 1
            with c.poll(2.0) as t:
                assert t.numpy().tolist() == list(range(6))
            assert other.stats().received == 1
        q.close()
        assert settle(rs) == 0


def test_returned_cells_are_looked_for_when_the_given_back_count_moves(shmdir):
    """As Java's Recovery: a consumer scans the cells for returned ones only when the count
    moved since its last scan that found none, so a queue nothing was given back to costs no
    scan. A returned cell whose give-back was not counted stays unseen until the count moves."""
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=4)
        with rs.from_numpy(np.arange(3)) as t:
            q.put(t)
        f = q._f
        cell = q._cell(0)
        assert f.cas64(cell, f.load64(cell), qm._word(0, qm.READING, qm.RETURNED))
        f.cas64(qm.HEAD, 0, 1)
        with refshare.open(directory=shmdir) as other, other.open_queue(q.name) as c:
            assert c.poll(0.35) is None, "swept three times, the count never moved: no cell scan"
            f.fetch_add64(qm.GIVEN_BACK, 1)
            with c.poll(2.0) as t:
                assert t.numpy().tolist() == [0, 1, 2]
            assert c._given_back_scanned == 0, "the scan that adopted a cell does not count as one that found none"
            assert c.poll(0.25) is None
            assert c._given_back_scanned == 1
        q.close()
        assert settle(rs) == 0


def test_a_handle_that_never_polled_is_no_consumer_at_the_last_producer_close(shmdir):
    """Java's ShareQueue.close: only handles that offered or polled count; the creator's close
    then finds no consumer, ends the stream and returns the queued references at once."""
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=8)
        with refshare.open(directory=shmdir) as other, other.open_queue(q.name) as idle:
            for i in range(3):
                with rs.from_numpy(np.arange(i + 1)) as t:
                    q.put(t)
            start = time.monotonic()
            q.close()
            assert time.monotonic() - start < 2.0, "no wait for a handle that is no consumer"
            rs.collect()
            assert settle(rs) == 0 and rs.stats().collected == 3
            with pytest.raises(QueueClosedError):
                idle.poll(0.1)


def test_an_attached_consumer_keeps_the_messages_at_the_last_producer_close(shmdir):
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=8)
        with refshare.open(directory=shmdir) as other, other.open_queue(q.name) as c:
            assert c.poll(0) is None  # polled: a consumer from now on
            for i in range(3):
                with rs.from_numpy(np.arange(i + 1)) as t:
                    q.put(t)
            start = time.monotonic()
            q.close(timeout=0.2)
            assert 0.19 <= time.monotonic() - start < 2.0, "waits while the consumer has messages queued"
            assert rs.stats().limbo_blocks == 3, "the messages stay for the consumer"
            assert [t.numpy().tolist() for t in c] == [[0], [0, 1], [0, 1, 2]]
        assert settle(rs) == 0


def test_a_producer_outliving_its_killed_creator_ends_the_stream_at_its_close(shmdir, peers):
    """The creator is DEAD, the stream still open: the last producer-side close (no consumer)
    ends it itself and returns the references of what it queued, as Java does."""
    p = peers.start("produce", shmdir, 8, 0, 64)
    name = line(p)[1]
    assert line(p) == ["PUT", "0"]
    with refshare.open(directory=shmdir) as rs:
        q = rs.open_queue(name)
        for i in range(3):
            with rs.from_numpy(np.arange(i + 1)) as t:
                q.put(t)
        kill(p)
        assert q._f.load32(qm.CLOSED) == 0
        q.close()
        rs.collect()
        assert settle(rs) == 0 and rs.stats().collected == 3
        with rs.open_queue(name) as late, pytest.raises(QueueClosedError):
            late.poll(0.1)
    # what the killed creator left (it shared nothing, so it has no status file)
    assert sorted(n.split("-")[1] for n in refshare.gc(directory=shmdir)) == ["life", "q"]


def test_corrupt_queue_headers_are_refused(shmdir):
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=4)
        f = q._f
        for off, value in ((8, 9), (32, 0), (40, 17), (44, 0)):
            old = f.read(off, 4)
            f.write(off, value.to_bytes(4, "little"))
            with pytest.raises(refshare.InvalidDataError):
                rs.open_queue(q.name)
            f.write(off, old)
        q.close()


def test_garbage_messages_are_rejected_and_the_queue_serves_on(shmdir):
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=8)
        for junk in (b"\x00" * 80, b"RFSD" + b"\xff" * 100, b"x"):
            assert q.offer_bytes(junk, 0)
        with rs.from_numpy(np.arange(4)) as t:
            q.put(t)
        with refshare.open(directory=shmdir) as other, other.open_queue(q.name) as c:
            with c.poll(1.0) as t:
                assert t.numpy().tolist() == [0, 1, 2, 3]
            assert c.rejected == 3
        f = q._f
        cell = q._cell(q._f.load64(qm.TAIL))
        assert q.offer_bytes(b"y" * 10, 0)
        f.write(cell + 8, (5000).to_bytes(4, "little"))  # an impossible length
        with refshare.open(directory=shmdir) as other, other.open_queue(q.name) as c:
            assert c.poll(0.1) is None
        assert f.load64(qm.REJECTED) == 1
        q.close()


def test_cells_two_laps_ahead_are_corruption_not_a_hang(shmdir):
    """A queue whose every cell claims a position two laps ahead (a hostile writer): take and
    put each answer InvalidDataError instead of skipping forever."""
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=4)
        for c in range(q.capacity):
            q._f.store64(q._cell(c), qm._word(c + 3 * q.capacity, qm.FREE))
        with pytest.raises(refshare.InvalidDataError, match="ahead of the tail"):
            q.offer_bytes(b"x", 0)
        for c in range(q.capacity):
            q._f.store64(q._cell(c), qm._word(c + 3 * q.capacity, qm.FULL))
        with pytest.raises(refshare.InvalidDataError, match="ahead of the head"):
            q.poll(0)
        for c in range(q.capacity):  # repaired, so that close finds a queue it can drain
            q._f.store64(q._cell(c), qm._word(q._f.load64(qm.TAIL) + c))
        q.close()


def test_timeouts_hold(shmdir):
    with refshare.open(directory=shmdir) as rs, rs.create_queue(capacity=1) as q:
        for timeout in (0.0, 0.05, 0.2):
            start = time.monotonic()
            assert q.poll(timeout) is None
            assert timeout <= time.monotonic() - start < timeout + 0.2
        with rs.from_numpy(np.arange(2)) as t:
            q.put(t)
            start = time.monotonic()
            assert not q.offer(t, 0.1)
            assert 0.1 <= time.monotonic() - start < 0.4
        with q.take():
            pass


def test_a_producer_closing_right_after_its_last_put_loses_nothing(shmdir, peers):
    """The README's producer: put, leave the with blocks, exit. Its close waits while a consumer is
    attached and messages are queued: their files go with the producer's Refshare. (A consumer is
    a handle that has polled, section 9.7: this one takes its first message before the close.)"""
    p = peers.start("produce", shmdir, 8, 8, 1_500_000)  # 8 messages, each in a segment of its own
    name = line(p)[1]
    assert line(p) == ["PUT", "8"]
    with refshare.open(directory=shmdir) as rs, rs.open_queue(name) as q:
        first = q.take()
        p.stdin.write("close\n")
        p.stdin.flush()
        time.sleep(1.0)  # a producer that did not wait would be gone with its files by now
        got = []
        for t in itertools.chain([first], q):
            with t:
                a = t.numpy()
                got.append(int(a[:8].view(np.int64)[0]))
                assert np.array_equal(a[8:], pattern(got[-1], a.size - 8))
    assert got == list(range(8))
    assert p.wait(timeout=30) == 0


def test_janitor_keeps_a_dead_producers_files_while_its_messages_wait(shmdir, peers):
    p = peers.start("produce", shmdir, 8, 5, 5000)
    name = line(p)[1]
    assert line(p) == ["PUT", "5"]
    with refshare.open(directory=shmdir) as rs, rs.open_queue(name) as q:
        kill(p)
        before = set(os.listdir(shmdir))
        removed = refshare.gc(directory=shmdir)
        assert [n.split("-")[1] for n in removed] == ["proc"], "only its status file: nothing keeps that"
        assert set(os.listdir(shmdir)) == before - set(removed), "queued messages keep its segments, counters"
        for i in range(5):  # every byte still valid after the producer's death
            with q.take() as t:
                a = t.numpy()
                assert int(a[:8].view(np.int64)[0]) == i and np.array_equal(a[8:], pattern(i, a.size - 8))
        with pytest.raises(ProducersGoneError):
            q.take()
    removed = refshare.gc(directory=shmdir)
    kinds = sorted(n.split("-")[1] for n in removed)
    assert kinds == ["cnt", "life", "q", "seg"], removed


def _spawned_consumer(directory, name, out):
    import refshare as rs_module
    with rs_module.open(directory=directory) as rs, rs.open_queue(name) as q:
        out.put([int(t.numpy().sum()) for t in q])


def test_a_consumer_started_by_multiprocessing_with_spawn(shmdir):
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=4)
        child = ctx.Process(target=_spawned_consumer, args=(shmdir, q.name, out))
        child.start()
        for i in range(10):
            with rs.from_numpy(np.full(10, i)) as t:
                q.put(t)
        q.close()
        assert out.get(timeout=30) == [10 * i for i in range(10)]
        child.join(30)
        assert child.exitcode == 0
        assert settle(rs) == 0
