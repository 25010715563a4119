"""Queues: a bounded multi-producer multi-consumer ring of descriptors in a shared file, with
futex wake-ups, recovery of dead claimants and stream semantics (docs/protocol.md section 9;
Java: io.refshare.channel.ShmQueue, ShareQueue, Participants, Recovery, QueueSignal)."""
import ctypes
import os
import sys
import time

from . import native, shm
from .errors import (NOT_THE_MESSAGES_FAULT, InvalidDataError, ProducersGoneError, QueueClosedError,
                     RefshareError, ResourceLimitError)

MAGIC = 0x3145554555515352  # "RSQUEUE1"
VERSION = 1
HEADER_LENGTH = 640
CAPACITY, MAX_MESSAGE, CELL_LENGTH, PARTICIPANT_CAPACITY, CLOSED = 32, 36, 40, 44, 48
GIVEN_BACK = 56
OFFERED_BY_DEPARTED, TAKEN_BY_DEPARTED, REJECTED = 64, 72, 80
TAIL, HEAD = 128, 256
NOT_EMPTY_SEQ, CONSUMERS_SLEEPING, CONSUMERS_SPINNING, CONSUMER_WAKE_PENDING = 384, 388, 448, 452
NOT_FULL_SEQ, PRODUCERS_SLEEPING, PRODUCERS_SPINNING, PRODUCER_WAKE_PENDING = 512, 516, 576, 580
_WAKE_PENDING = {NOT_EMPTY_SEQ: CONSUMER_WAKE_PENDING, NOT_FULL_SEQ: PRODUCER_WAKE_PENDING}
ENTRY = 64
E_IDENTITY, E_ROLE, E_OFFERED, E_TAKEN, E_CSLEEP, E_PSLEEP, E_PIDNS, E_CSPIN, E_PSPIN = 0, 8, 16, 24, 32, 36, 40, 48, 52
ROLE_PRODUCER, ROLE_CONSUMER = 1, 2
FREE, WRITING, FULL, READING = 0, 1, 2, 3
RETURNED = 0xFFFF
MAX_CAPACITY = 1 << 20
MAX_MESSAGE_BYTES = 1 << 16
MAX_PARTICIPANTS = 65535
DESCRIPTOR_MESSAGE_BYTES = 1024
POS_BITS = 46
POS_MASK = (1 << POS_BITS) - 1
MARK = 1 << 63
M64 = (1 << 64) - 1
SLICE_S = 0.050
SWEEP_S = 0.100
SPIN_S = 0.000050
CLOSE_TIMEOUT_S = 10.0
GONE_CHECK_S = 0.200
_EMPTY, _DRAINED, _NO_ROOM, _REJECTED = object(), object(), object(), object()


def cell_length(max_message):
    return (16 + max_message + 63) // 64 * 64


def _word(pos, state=FREE, claimant=0):
    return (pos & POS_MASK) | state << POS_BITS | claimant << (POS_BITS + 2)


def _state(w):
    return (w >> POS_BITS) & 3


def _claimant(w):
    return (w >> (POS_BITS + 2)) & 0xFFFF


def _dist(w, p):
    x = (w - p) & POS_MASK
    return x - (1 << POS_BITS) if x >= 1 << (POS_BITS - 1) else x


def _pid_namespace():
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


class TensorQueue:
    """A queue of tensors: ``put`` shares a tensor with exactly one consumer, ``take`` receives
    one. Each handle is a participant with its own entry in the file."""

    def __init__(self, rs, f, creator):
        self._rs = rs
        self._sharing = rs._sharing
        self._dir = rs.directory
        self._f = f
        self.name = f.name
        self._creator = creator
        self._closed = False
        self.rejected = 0
        self._quiet_until = 0.0
        self._suppressed = 0
        g = [int.from_bytes(f.read(o, 4), "little") for o in (CAPACITY, MAX_MESSAGE, CELL_LENGTH,
                                                               PARTICIPANT_CAPACITY)]
        self.capacity, self.max_message, self._cell_len, self._parts = g
        self._cells = HEADER_LENGTH + ENTRY * self._parts
        self._me = shm.current()
        self._packed = self._me.packed()
        self._role = 0
        self._offered = False  # this handle has offered: it is on the producer side
        # the "given back" count at the start of this handle's last cell scan that found no
        # returned cell: returned cells are looked for only when the count moved (section 9.6)
        self._given_back_scanned = 0
        self._next_sweep = 0.0
        self._next_gone_check = 0.0
        self._dead_cache = set()
        self._owner = shm.ProcessIdentity(f.load64(16), f.load64(24))
        self._entry = self._attach()
        # the one-call hot paths (native.queue_offer, queue_claim, queue_free) and their out array
        self._offering = native.QueueHandle(f.addr, self._cells, self.capacity, self._cell_len, self._entry,
                                            self._e(self._entry, E_OFFERED))
        self._taking = native.QueueHandle(f.addr, self._cells, self.capacity, self._cell_len, self._entry,
                                          self._e(self._entry, E_TAKEN))
        self._offering_at, self._taking_at = self._offering.address, self._taking.address
        self._claimed = (ctypes.c_int64 * 3)()
        self._claimed_at = ctypes.addressof(self._claimed)

    # ---------------------------------------------------------------- create / open

    @classmethod
    def create(cls, rs, capacity=64, participants=128, max_message=DESCRIPTOR_MESSAGE_BYTES):
        if not 1 <= capacity <= MAX_CAPACITY:
            raise ValueError("queue capacity must be in 1..%d: %d" % (MAX_CAPACITY, capacity))
        if not 1 <= participants <= MAX_PARTICIPANTS:
            raise ValueError("participant capacity must be in 1..%d: %d" % (MAX_PARTICIPANTS, participants))
        cl = cell_length(max_message)
        f = rs.directory.create("q", HEADER_LENGTH + ENTRY * participants + capacity * cl)
        try:
            me = shm.current()
            f.write(8, VERSION.to_bytes(4, "little") + HEADER_LENGTH.to_bytes(4, "little"))
            f.store64(16, me.pid)
            f.store64(24, me.start)
            f.write(32, b"".join(v.to_bytes(4, "little") for v in (capacity, max_message, cl, participants)))
            cells = HEADER_LENGTH + ENTRY * participants
            for c in range(capacity):
                f.store64(cells + c * cl, _word(c))
            f.store64(0, MAGIC)
            return cls(rs, f, True)
        except BaseException:
            f.unlink()
            f.close()
            raise

    @classmethod
    def open(cls, rs, name):
        f = rs.directory.open(name, "q", HEADER_LENGTH)
        try:
            hlen, cap, maxm, cl, parts = f.check_layout(MAGIC, VERSION, "queue", (12, 32, 36, 40, 44))
            if (hlen != HEADER_LENGTH or not 1 <= cap <= MAX_CAPACITY or not 1 <= maxm <= MAX_MESSAGE_BYTES
                    or not 1 <= parts <= MAX_PARTICIPANTS or cl != cell_length(maxm)):
                raise InvalidDataError("%s has a corrupt queue header: header length %d, capacity %d, max message "
                                       "%d, cell length %d, %d participant entries" % (f.path, hlen, cap, maxm, cl,
                                                                                      parts))
            if f.size < HEADER_LENGTH + ENTRY * parts + cap * cl:
                raise InvalidDataError("%s is truncated: %d bytes, its header describes %d"
                                       % (f.path, f.size, HEADER_LENGTH + ENTRY * parts + cap * cl))
            return cls(rs, f, False)
        except BaseException:
            f.close()
            raise

    # ---------------------------------------------------------------- participants

    def _e(self, i, field=0):
        return HEADER_LENGTH + ENTRY * i + field

    def _attach(self):
        self._dir.hold_life_lock()
        for attempt in (0, 1):
            for i in range(self._parts):
                if self._f.load64(self._e(i)) == 0 and self._f.cas64(self._e(i), 0, self._packed):
                    self._f.store64(self._e(i, E_PIDNS), _pid_namespace())
                    return i
            if attempt == 0:
                self._sweep(fresh=True, adopt=False, me_index=-1)
        raise ResourceLimitError("all %d participant entries of queue %s are held by live processes"
                                 % (self._parts, self.name))

    def _verdict(self, ident):
        if ident in self._dead_cache:
            return shm.DEAD
        v = self._dir.verdict(ident)
        if v == shm.DEAD:
            self._dead_cache.add(ident)  # DEAD is final
        return v

    def _set_role(self, role):
        if not self._role & role:
            native.fetch_or32(self._f.addr + self._e(self._entry, E_ROLE), role)
            self._role |= role

    def _fold(self, i):
        f = self._f
        f.fetch_add64(OFFERED_BY_DEPARTED, f.exchange64(self._e(i, E_OFFERED), 0))
        f.fetch_add64(TAKEN_BY_DEPARTED, f.exchange64(self._e(i, E_TAKEN), 0))
        for share, count in ((E_CSLEEP, CONSUMERS_SLEEPING), (E_PSLEEP, PRODUCERS_SLEEPING),
                             (E_CSPIN, CONSUMERS_SPINNING), (E_PSPIN, PRODUCERS_SPINNING)):
            n = native.exchange32(f.addr + self._e(i, share), 0)
            if n:
                f.fetch_add32(count, -n)
        native.store32(f.addr + self._e(i, E_ROLE), 0)
        f.store64(self._e(i, E_PIDNS), 0)

    def _participants(self):
        """(index, identity, role) of attached entries other than ours, marks and garbage left out."""
        out = []
        for i in range(self._parts):
            if i == self._entry:
                continue
            w = self._f.load64(self._e(i)) & M64
            if w == 0 or w & MARK or w & ((1 << 22) - 1) == 0:
                continue
            out.append((i, shm.ProcessIdentity.unpacked(w), self._f.load32(self._e(i, E_ROLE))))
        return out

    # ---------------------------------------------------------------- signals

    def _signal(self, seq, sleeping):
        if self._f.load32(sleeping) > 0:
            self._f.fetch_add32(seq, 1)
            native.futex_wake(self._f.addr + seq, 1)

    def _signal_all(self):
        for seq in (NOT_EMPTY_SEQ, NOT_FULL_SEQ):
            self._f.fetch_add32(seq, 1)
            native.futex_wake(self._f.addr + seq, 0x7FFFFFFF)

    @staticmethod
    def _spin(ready, seconds):
        """Yields the processor until ``ready()`` or ``seconds`` passed: a message that arrives
        within microseconds costs no futex sleep and wake-up (a local choice, section 9.5)."""
        end = time.monotonic() + seconds
        while True:
            os.sched_yield()
            if ready():
                return True
            if time.monotonic() >= end:
                return False

    def _sleep(self, seq, sleeping, share, ready, timeout):
        """Sleeps on ``seq`` (section 9.5). The wake-pending flag is cleared after registering and
        after waking, each time before ``ready()`` is looked at again: Java signallers skip their
        wake-up while it is set. The sequence is read before the first clearing: a signaller that
        set the flag after the read bumps the sequence after it too, so the sleep ends at once."""
        f = self._f
        pending = _WAKE_PENDING[seq]
        f.fetch_add32(sleeping, 1)
        f.fetch_add32(self._e(self._entry, share), 1)
        try:
            s = f.load32(seq)
            native.store32(f.addr + pending, 0)
            if ready():
                return
            native.futex_wait(f.addr + seq, s, int(max(0.0, min(timeout, SLICE_S)) * 1e9))
        finally:
            f.fetch_add32(self._e(self._entry, share), -1)
            f.fetch_add32(sleeping, -1)
            native.store32(f.addr + pending, 0)

    def _cell(self, pos):
        return self._cells + (pos % self.capacity) * self._cell_len

    def _message_at_head(self):
        return native.queue_message_at_head(self._taking_at) != 0

    def _room_at_tail(self):
        return native.queue_room_at_tail(self._offering_at) != 0

    # ---------------------------------------------------------------- producing

    def _try_put(self, payload):
        """One attempt to put (section 9.3): True, or _NO_ROOM when the queue is full."""
        r = native.queue_offer(self._offering_at, payload, len(payload))
        if r == 1:
            return True
        if r == 0:
            return _NO_ROOM
        if r == 2:
            raise QueueClosedError("queue %s: the stream has ended" % self.name)
        raise InvalidDataError("queue %s is corrupt: cells ahead of the tail by more than two laps" % self.name)

    def offer_bytes(self, payload, timeout=None):
        """Puts one message, waiting up to ``timeout`` seconds (None: forever); False on timeout."""
        self._check()
        self._offered = True
        if not 1 <= len(payload) <= self.max_message:
            raise ValueError("message of %d bytes; this queue takes 1..%d" % (len(payload), self.max_message))
        payload = bytes(payload)  # one private copy, as the native put reads it
        self._set_role(ROLE_PRODUCER)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            r = self._try_put(payload)
            if r is True:
                return True
            now = time.monotonic()
            if now >= self._next_sweep:
                self._next_sweep = now + SWEEP_S
                self._sweep(fresh=False, adopt=False)
                continue
            left = SLICE_S if deadline is None else deadline - now
            if left <= 0:
                if self._f.load32(PRODUCERS_SLEEPING) > 0 and self._room_at_tail():
                    self._signal(NOT_FULL_SEQ, PRODUCERS_SLEEPING)  # pass on a wake-up we did not use
                return False
            if self._spin(self._room_at_tail, min(left, SPIN_S)):
                continue
            self._sleep(NOT_FULL_SEQ, PRODUCERS_SLEEPING, E_PSLEEP, self._room_at_tail, left)

    def put(self, tensor):
        """Shares ``tensor`` with one consumer, waiting while the queue is full. The caller keeps
        its tensor and may close it at once."""
        if not self.offer(tensor, None):
            raise AssertionError("an unbounded offer timed out")

    def offer(self, tensor, timeout=0.0):
        """Like put, giving up after ``timeout`` seconds (None: forever); False when it did
        (nothing counted then: the reference is cancelled)."""
        self._check()
        self._offered = True  # as Java's ShareQueue: even an offer that fails puts us on the producer side
        message = self._sharing.share(tensor)
        sent = False
        try:
            sent = self.offer_bytes(message, timeout)
            return sent
        finally:
            if not sent:
                self._sharing.cancel(message)

    def end_of_stream(self):
        """No more puts from anyone; consumers drain what is left. Idempotent."""
        self._check()
        self._end_stream()

    # ---------------------------------------------------------------- consuming

    def _try_take(self, receive):
        """One attempt to take (section 9.4): the delivered result, _EMPTY or _DRAINED."""
        r = native.queue_claim(self._taking_at, self._claimed_at)
        if r == 1:
            cell, pos, n = self._claimed
            return self._deliver(cell, pos, receive, n)
        if r == 0:
            return _EMPTY
        if r == 2:
            return _DRAINED
        raise InvalidDataError("queue %s is corrupt: cells ahead of the head by more than two laps" % self.name)

    def _deliver(self, cell, pos, receive, n=None):
        """Receives the message of the cell we claimed (READING) and frees the cell."""
        f = self._f
        result = _REJECTED
        try:
            if n is None:
                n = f.load32(cell + 8)
            if n < 0 or n > self.max_message:
                f.fetch_add64(REJECTED, 1)
                self._warn("a message with the impossible length %d" % n)
            else:
                payload = f.buffer()[cell + 16:cell + 16 + n]  # a copy (mmap slices are bytes)
                try:
                    result = receive(payload)
                except NOT_THE_MESSAGES_FAULT:  # a claimed token was put back in flight by the receive
                    self._give_back(cell, pos)
                    cell = None  # no longer ours to free, whether or not the give-back took
                    raise
                except RefshareError as e:
                    self.rejected += 1
                    self._warn("rejected a message: %s" % e)
        finally:
            if cell is not None:
                native.queue_free(self._taking_at, cell, pos)
        return result

    def _give_back(self, cell, pos):
        """Hands a message we claimed back to the queue unconsumed, for another consumer: it is not
        the message's fault (a resource limit, section 9.8). The "given back" count goes up first,
        so a sweeper that sees the returned cell also sees that it must scan for it; consumers
        (Java's and ours) look for returned cells only when that count moves."""
        f = self._f
        f.fetch_add64(GIVEN_BACK, 1)
        if f.cas64(cell, _word(pos, READING, self._entry), _word(pos, READING, RETURNED)):
            self._signal(NOT_EMPTY_SEQ, CONSUMERS_SLEEPING)
        # else: the cell is not ours any more (a hostile writer); whoever holds it deals with it

    def _warn(self, what):
        """Reports to stderr, at most once a second per handle; repeats are counted, not printed."""
        now = time.monotonic()
        if now < self._quiet_until:
            self._suppressed += 1
            return
        more = " (%d similar warnings suppressed)" % self._suppressed if self._suppressed else ""
        self._suppressed = 0
        self._quiet_until = now + 1.0
        print("refshare: queue %s: %s%s" % (self.name, what, more), file=sys.stderr)

    def poll_message(self, timeout, receive):
        """The next message through ``receive`` (run while the cell is claimed), or None after
        ``timeout`` seconds (None: forever); QueueClosedError once the stream ended and is drained."""
        self._check()
        self._set_role(ROLE_CONSUMER)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            r = self._try_take(receive)
            if r is _REJECTED:
                if deadline is not None and time.monotonic() >= deadline:
                    return None  # the timeout holds even while garbage keeps arriving
                continue
            if r is _DRAINED:
                adopted = self._sweep(fresh=True, adopt=True, receive=receive)
                if adopted is not None:
                    if adopted is _REJECTED:
                        continue
                    return adopted
                r = self._try_take(receive)
                if r is _DRAINED:
                    if self._f.load32(CLOSED) == 2:
                        raise ProducersGoneError("queue %s: every producer died; the stream ended" % self.name)
                    raise QueueClosedError("queue %s: the stream has ended" % self.name)
            if r is not _EMPTY:
                if r is _REJECTED or r is _DRAINED:
                    continue
                return r
            now = time.monotonic()
            if now >= self._next_sweep:
                self._next_sweep = now + SWEEP_S
                adopted = self._sweep(fresh=False, adopt=True, receive=receive)
                if adopted is not None and adopted is not _REJECTED:
                    return adopted
            if now >= self._next_gone_check:
                self._next_gone_check = now + GONE_CHECK_S
                if self._producers_gone():
                    if native.cas32(self._f.addr + CLOSED, 0, 2):
                        self._signal_all()
                    continue
            left = SLICE_S if deadline is None else deadline - now
            if left <= 0:
                if self._f.load32(CONSUMERS_SLEEPING) > 0 and self._message_at_head():
                    self._signal(NOT_EMPTY_SEQ, CONSUMERS_SLEEPING)
                return None
            if self._spin(self._message_at_head, min(left, SPIN_S)):
                continue
            self._sleep(NOT_EMPTY_SEQ, CONSUMERS_SLEEPING, E_CSLEEP, self._message_at_head, left)

    def poll(self, timeout=0.0):
        """The next tensor, or None after ``timeout`` seconds; QueueClosedError at the end of the stream."""
        return self.poll_message(timeout, self._sharing.receive)

    def take(self):
        """The next tensor, waiting for one; QueueClosedError at the end of the stream."""
        while True:
            t = self.poll(None)
            if t is not None:
                return t

    def __iter__(self):
        """Tensors until the end of the stream (ProducersGoneError if every producer died)."""
        while True:
            try:
                yield self.take()
            except ProducersGoneError:
                raise
            except QueueClosedError:
                return

    def _producers_gone(self):
        if self._verdict(self._owner) != shm.DEAD:
            return False
        for _, ident, role in self._participants():
            if role & ROLE_PRODUCER and self._verdict(ident) != shm.DEAD:
                return False
        return not (self._role & ROLE_PRODUCER)

    # ---------------------------------------------------------------- recovery

    def _sweep(self, fresh, adopt, receive=None, me_index=None):
        """Finds DEAD participants, repairs their cells and returned cells, reclaims their entries
        (section 9.6, as Java's Recovery.sweep). The cells are scanned only when a participant
        died holding claims or the "given back" count moved since this handle's last scan that
        found no returned cell. Returns the result of delivering an adopted cell, or None."""
        f = self._f
        me = self._entry if me_index is None else me_index
        given_back = f.load64(GIVEN_BACK) & M64
        look_for_returned = given_back != self._given_back_scanned
        # verdicts are always fresh here: only DEAD (final) is cached, so ``fresh`` needs nothing more
        dead = {}
        dead_claimants = False
        for i in range(self._parts):
            if i == me:
                continue
            w = f.load64(self._e(i)) & M64
            if w == 0:
                continue
            if w & MARK:
                # its cells were repaired before the mark was set; only the folding was left undone
                reclaimer = shm.ProcessIdentity.unpacked(w)
                if reclaimer != self._me and self._verdict(reclaimer) == shm.DEAD:
                    dead[i] = w
            elif w & ((1 << 22) - 1) == 0 or self._verdict(shm.ProcessIdentity.unpacked(w)) == shm.DEAD:
                dead[i] = w
                dead_claimants = True
        if not dead and not look_for_returned:
            return None
        adopted = None
        needed = set()
        if dead_claimants or look_for_returned:
            consumer = bool(self._role & ROLE_CONSUMER) and me >= 0
            returned_left = False
            for c in range(self.capacity):
                cell = self._cells + c * self._cell_len
                while True:
                    w = f.load64(cell) & M64
                    s, cl = _state(w), _claimant(w)
                    if s not in (WRITING, READING):
                        break
                    returned = s == READING and cl == RETURNED
                    if not returned and (cl not in dead or dead[cl] & MARK
                                         or (f.load64(self._e(cl)) & M64) != dead[cl]):
                        break
                    p = w & POS_MASK
                    if s == WRITING:
                        if f.cas64(cell, w, _word(p + self.capacity)):
                            self._signal_all()
                            break
                        continue
                    if adopt and consumer and adopted is None:
                        if f.cas64(cell, w, _word(p, READING, me)):
                            adopted = self._deliver(cell, p, receive)
                            break
                        continue
                    if (f.load64(TAIL) & POS_MASK) == (p + self.capacity) & POS_MASK:
                        if f.cas64(cell, w, _word(p + self.capacity, FULL)):
                            self._signal(NOT_EMPTY_SEQ, CONSUMERS_SLEEPING)
                            break
                        continue
                    if returned:
                        returned_left = True
                    else:
                        needed.add(cl)
                    break
            if not returned_left and adopted is None:
                self._given_back_scanned = given_back  # none seen: no need to look until someone gives one back
        for i, w in dead.items():
            if i in needed:
                continue
            mark = self._packed | MARK
            if f.cas64(self._e(i), w, mark):
                self._fold(i)
                f.cas64(self._e(i), mark, 0)
        return adopted

    # ---------------------------------------------------------------- leaving

    def _consumer_attached(self):
        """Another attached handle has polled and its process is not DEAD. Handles that have done
        neither (no role bit) are not consumers: a process that only opened the queue keeps nothing."""
        for _, ident, role in self._participants():
            if role & ROLE_CONSUMER and self._verdict(ident) != shm.DEAD:
                return True
        return False

    def _last_producer_without_consumer(self):
        """True when this handle is the producer side's last and no consumer is attached (section
        9.7; Java: ShmQueue.lastProducerWithoutConsumer): no other attached handle of a process not
        DEAD has offered or polled, and the creator's handle is not attached to an open queue.
        Handles with no role bit do not count."""
        owner = self._owner.packed()
        for _, ident, role in self._participants():
            creators_handle = (not self._creator and ident.packed() == owner and self._f.load32(CLOSED) == 0)
            takes_part = role & (ROLE_PRODUCER | ROLE_CONSUMER)
            if (takes_part or creators_handle) and self._verdict(ident) != shm.DEAD:
                return False
        return True

    def _check(self):
        if self._closed:
            raise RefshareError("queue %s is closed" % self.name)

    def _end_stream(self):
        """Ends the stream by a producer's decision (closed 0 -> 1; the first reason stays) and
        wakes every waiter."""
        native.cas32(self._f.addr + CLOSED, 0, 1)
        self._signal_all()

    def close(self, timeout=CLOSE_TIMEOUT_S):
        """Leaves the queue. The creator's close ends the stream (consumers still drain it); a
        consumer's close never does.

        A handle on the producer side (the creator's, or one that offered) first waits, up to
        ``timeout`` seconds, while messages are still queued and a consumer is attached: once this
        process closes its Refshare, messages not yet received could no longer be (their files go
        with it). Then, as Java's ShareQueue.close: if it is the producer side's last handle and
        no consumer is attached (section 9.7), it ends the stream itself and returns the
        references of the messages left in it."""
        if self._closed:
            return
        self._closed = True
        f = self._f
        try:
            if self._creator:
                self._end_stream()
                f.unlink()
            if self._creator or self._offered:
                self._linger(timeout)
                if self._last_producer_without_consumer():
                    self._end_stream()  # nobody is left to put, nobody is there to take
                    self._drain()
        finally:
            self._fold(self._entry)
            f.cas64(self._e(self._entry), self._packed, 0)
            f.close()

    def _holds_messages(self):
        for c in range(self.capacity):
            if _state(self._f.load64(self._cells + c * self._cell_len) & M64) != FREE:
                return True
        return False

    def _linger(self, timeout):
        """Waits while messages are queued and a consumer is attached (at most ``timeout`` s). A
        local choice (Java's close does not wait): it changes no shared state, the messages stay
        for the consumer either way (section 9.7)."""
        deadline = time.monotonic() + timeout
        while self._holds_messages() and time.monotonic() < deadline:
            if not self._consumer_attached():
                return
            self._sweep(fresh=False, adopt=False)
            time.sleep(0.005)

    def _published_at_head(self):
        h = self._f.load64(HEAD) & M64
        w = self._f.load64(self._cell(h)) & M64
        d = _dist(w, h)
        return d > 0 or (d == 0 and _state(w) in (FULL, READING))

    def _drain(self):
        """Takes every message left and returns its reference (Java: ShmQueue.drain with a cancelling
        sink). On an ended stream it also waits for offers that claimed a cell before the end to
        publish (or for their DEAD claimants to be found), and adopts cells of DEAD consumers and
        returned cells, so nothing is left behind when it returns."""
        def cancel(payload):
            try:
                self._sharing.cancel(payload)
            except RefshareError:
                self.rejected += 1  # garbage, or a message whose sender's files are gone: nothing to return
            return _REJECTED
        self._set_role(ROLE_CONSUMER)  # it takes what is left, as a consumer would
        while True:
            r = self._try_take(cancel)
            if r is not _EMPTY and r is not _DRAINED:
                continue
            if self._sweep(fresh=True, adopt=True, receive=cancel) is not None:
                continue
            if r is _DRAINED or self._f.load32(CLOSED) == 0:
                return
            # a producer claimed the head cell before the end and has not published yet
            self._sleep(NOT_EMPTY_SEQ, CONSUMERS_SLEEPING, E_CSLEEP, self._published_at_head, SLICE_S)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "TensorQueue[%s]" % self.name
