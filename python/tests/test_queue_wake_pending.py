"""The wake-pending flag of protocol.md 9.5 against a sleeper that registers.

A sleeper reads the futex sequence it will wait on *before* it clears the flag. Cleared first,
a Java signaller could set the flag and bump the sequence between the clearing and the read,
for a message that another consumer then took: its wake-up reached nobody (the sleeper was not
yet in ``futex_wait``), the sleeper waited on the bumped sequence, and every later Java
signaller skipped its wake-up for the flag still set, so a message published meanwhile waited
for the end of the sleeper's slice. This test forces that interleaving inside the real
``_sleep``: its first read of the sequence first lets a producer publish m1 and signal as a Java
producer does (flag set, sequence bumped) and another consumer take m1; m2 is then published
10 ms later, signalled the Java way (protocol steps, since the Python package never sets the
flag). The sleeper's slice is made a second long, so that a lost wake-up is told from a late
thread by far. The Java side of the same race: jcstress ``WakePendingVsRegisteringSleeper``."""
import threading
import time

import refshare
from refshare import native
from refshare import queue as qm


def publish_as_java(f, q, pos, payload, claimant):
    """A Java producer's offer of ``payload`` at ``pos`` (section 9.3), then its signal (9.5)."""
    cell = q._cells + (pos % q.capacity) * q._cell_len
    assert f.cas64(cell, qm._word(pos), qm._word(pos, qm.WRITING, claimant))
    f.cas64(qm.TAIL, pos, pos + 1)
    native.store32(f.addr + cell + 8, len(payload))
    f.write(cell + 16, payload)
    f.store64(cell, qm._word(pos, qm.FULL))
    if (f.load32(qm.CONSUMERS_SLEEPING) > 0 and f.load32(qm.CONSUMERS_SPINNING) <= 0
            and native.cas32(f.addr + qm.CONSUMER_WAKE_PENDING, 0, 1)):
        f.fetch_add32(qm.NOT_EMPTY_SEQ, 1)
        native.futex_wake(f.addr + qm.NOT_EMPTY_SEQ, 1)


class _RaceAtTheSequenceRead:
    """The sleeper's mapped file, whose first read of the not-empty sequence runs the race first."""

    def __init__(self, f, producer, other_consumer):
        self._f, self._producer, self._other = f, producer, other_consumer
        self.raced = False
        self.later = None

    def __getattr__(self, name):
        return getattr(self._f, name)

    def load32(self, off):
        if off == qm.NOT_EMPTY_SEQ and not self.raced:
            self.raced = True
            f = self._f
            assert self._producer.offer_bytes(b"m1", 0)  # publishes; its own wake-up bumps the sequence
            native.cas32(f.addr + qm.CONSUMER_WAKE_PENDING, 0, 1)  # as a Java signaller's, which sets the flag
            assert self._other.poll_message(0, bytes) == b"m1"
            self.later = threading.Timer(0.010, publish_as_java,
                                         (f, self._producer, 1, b"m2", self._producer._entry))
            self.later.start()
        return self._f.load32(off)


def test_a_sleeper_is_woken_for_a_message_published_while_it_sleeps(shmdir, monkeypatch):
    monkeypatch.setattr(qm, "SLICE_S", 1.0)
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=4)
        producer = rs.open_queue(q.name)
        other = rs.open_queue(q.name)
        sleeper = rs.open_queue(q.name)
        try:
            sleeper._next_sweep = sleeper._next_gone_check = time.monotonic() + 60  # straight to _sleep
            race = _RaceAtTheSequenceRead(sleeper._f, producer, other)
            sleeper._f = race
            start = time.monotonic()
            got = sleeper.poll_message(2.0, bytes)
            waited = time.monotonic() - start
            race.later.join()
            sleeper._f = race._f
            assert race.raced and got == b"m2"
            assert waited < 0.5, "m2 waited %.0f ms for the sleeper's slice to end" % (waited * 1e3)
        finally:
            for h in (sleeper, other, producer, q):
                h.close(timeout=0)
