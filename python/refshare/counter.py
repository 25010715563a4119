"""Counter files: reference tokens moved by compare-and-set (docs/protocol.md section 8;
Java: io.refshare.counter.CounterFile)."""
import threading

from . import native, shm
from .errors import InvalidDataError, RefshareError, ResourceLimitError

MAGIC = 0x31544E554F435352  # "RSCOUNT1"
VERSION = 2
HEADER_LENGTH = 128
SLOT_CAPACITY = 32
PEER_CAPACITY = 36
HANDED_OUT = 40
FLAGS = 48
RELEASES = 64
COLLECTOR_WAITING = 72
FLAG_RETIRED = 1
MAX_SLOTS = 1 << 20
MAX_PEERS = 1 << 16
FREE, IN_FLIGHT, HELD, RELEASED = 0, 1, 2, 3
_LOW = 0xFFFFFFFF


def file_length(slots, peers):
    return HEADER_LENGTH + 16 * peers + 8 * slots


def held_word(peer):
    return HELD | (peer + 1) << 8


class CounterFile:
    """One counter file as mapped by this process: its owner creates it and hands out tokens;
    every receiver claims and releases them."""

    def __init__(self, f, slots, peers, owner):
        self.file = f
        self.name = f.name
        self.slot_capacity = slots
        self.peer_capacity = peers
        self.owner = owner
        self._slots = HEADER_LENGTH + 16 * peers
        self._peer = -1
        self._lock = threading.Lock()
        self._handed_out = 0  # the owner's own count: it never trusts the shared word
        self.quarantined = False

    @classmethod
    def create(cls, directory, slots, peers):
        if not 1 <= slots <= MAX_SLOTS or not 1 <= peers <= MAX_PEERS:
            raise ValueError("counter file geometry out of range: %d slots, %d peers" % (slots, peers))
        f = directory.create("cnt", file_length(slots, peers))
        me = shm.current()
        f.write(8, (VERSION).to_bytes(4, "little") + HEADER_LENGTH.to_bytes(4, "little"))
        f.write(32, slots.to_bytes(4, "little") + peers.to_bytes(4, "little"))
        f.store64(16, me.pid)
        f.store64(24, me.start)
        f.store64(0, MAGIC)  # last: a valid magic means a complete header
        return cls(f, slots, peers, me)

    @classmethod
    def open(cls, directory, name):
        f = directory.open(name, "cnt", HEADER_LENGTH)
        try:
            hlen, slots, peers = f.check_layout(MAGIC, VERSION, "counter file", (12, 32, 36))
            if hlen != HEADER_LENGTH or not 1 <= slots <= MAX_SLOTS or not 1 <= peers <= MAX_PEERS:
                raise InvalidDataError("%s has a corrupt header: header length %d, %d slots, %d peers"
                                       % (f.path, hlen, slots, peers))
            if f.size != file_length(slots, peers):
                raise InvalidDataError("%s is %d bytes but its header describes %d (truncated or corrupt)"
                                       % (f.path, f.size, file_length(slots, peers)))
            return cls(f, slots, peers, shm.ProcessIdentity(f.head(16, 8, signed=True), f.head(24, 8, signed=True)))
        except BaseException:
            f.close()
            raise

    # ---------------------------------------------------------------- owner

    def handed_out(self):
        if self.file.created:
            return self._handed_out
        return max(0, min(self.file.load64(HANDED_OUT), self.slot_capacity))

    def is_retired(self):
        return bool(self.file.load64(FLAGS) & FLAG_RETIRED)

    def hand_out(self, tag):
        """Owner, one thread: the next slot as IN_FLIGHT|tag<<32; None when the file is full
        (it is retired then) or damaged (quarantined and retired)."""
        slot = self._handed_out
        if slot >= self.slot_capacity or self.quarantined:
            self.retire()
            return None
        if not self.file.cas64(self._slot(slot), FREE, IN_FLIGHT | tag << 32):
            self.quarantined = True  # somebody wrote a slot only the owner may: damage
            self.retire()
            return None
        self._handed_out = slot + 1
        self.file.store64(HANDED_OUT, slot + 1)
        if slot + 1 == self.slot_capacity:
            self.retire()
        return slot

    def retire(self):
        native.fetch_or64(self.file.addr + FLAGS, FLAG_RETIRED)

    def releases(self):
        return self.file.load64(RELEASES)

    def await_release(self, seen, timeout_s):
        """The owner's collector sleeps until a release after ``seen`` (section 8.6)."""
        self.file.store64(COLLECTOR_WAITING, 1)
        try:
            if self.releases() == seen:
                native.futex_wait(self.file.addr + RELEASES, _s32(seen & _LOW), int(timeout_s * 1e9))
        finally:
            self.file.store64(COLLECTOR_WAITING, 0)

    # ---------------------------------------------------------------- anyone

    def _slot(self, slot):
        if not 0 <= slot < self.slot_capacity:
            raise InvalidDataError("%s: slot %d is out of range 0..%d" % (self.name, slot, self.slot_capacity - 1))
        return self._slots + 8 * slot

    def word(self, slot):
        return self.file.load64(self._slot(slot)) & 0xFFFFFFFFFFFFFFFF

    def state(self, slot):
        return self.word(slot) & 0xFF

    def _released(self):
        self.file.fetch_add64(RELEASES, 1)
        # the fetch-add is a full fence: either the collector sees the new count before it
        # sleeps, or we see its waiting flag here; whoever clears the flag wakes it, the other
        # releasers skip their system call (section 8.6)
        waiting = self.file.load64(COLLECTOR_WAITING)
        if waiting != 0 and self.file.cas64(COLLECTOR_WAITING, waiting, 0):
            native.futex_wake(self.file.addr + RELEASES, 0x7FFFFFFF)

    def claim(self, slot, tag):
        """IN_FLIGHT|tag -> HELD(self)|tag; False when not in flight with that tag."""
        off = self._slot(slot)
        return native.cas64(self.file.addr + off, IN_FLIGHT | tag << 32, held_word(self.self_peer()) | tag << 32) != 0

    def unclaim(self, slot, tag):
        """HELD(self)|tag -> IN_FLIGHT|tag, not counted: a claim this process cannot finish (out of
        memory, interrupted) goes back for the message's next receiver (protocol 8.4)."""
        if self._peer < 0:
            return False
        return self.file.cas64(self._slot(slot), held_word(self._peer) | tag << 32, IN_FLIGHT | tag << 32)

    def release(self, slot, tag):
        """HELD(self)|tag -> RELEASED|tag, counted and the collector woken, in one native call."""
        off = self._slot(slot)
        if self._peer < 0:
            return False
        return native.counter_release(self.file.addr, off, held_word(self._peer) | tag << 32, RELEASED | tag << 32,
                                      RELEASES, COLLECTOR_WAITING) == 1

    def cancel(self, slot, tag):
        """IN_FLIGHT|tag -> RELEASED|tag: a message that will never be received."""
        if self.file.cas64(self._slot(slot), IN_FLIGHT | tag << 32, RELEASED | tag << 32):
            self._released()
            return True
        return False

    def is_released(self, slot):
        return self.state(slot) == RELEASED

    def peer(self, index):
        base = HEADER_LENGTH + 16 * index
        pid, start = self.file.load64(base), self.file.load64(base + 8)
        return shm.ProcessIdentity(pid, start) if pid > 0 and start > 0 else None

    def self_peer(self):
        p = self._peer
        if p < 0:
            with self._lock:
                if self._peer < 0:
                    self._peer = self._register()
                p = self._peer
        return p

    def _register(self):
        me = shm.current()
        for i in range(self.peer_capacity):
            base = HEADER_LENGTH + 16 * i
            if self.file.load64(base) == 0 and self.file.cas64(base, 0, me.pid):
                self.file.store64(base + 8, me.start)
                return i
        raise ResourceLimitError("all %d peer entries of counter file %s are held by live processes"
                                 % (self.peer_capacity, self.name))

    def release_all_held_by_index(self, peer):
        n = native.release_all_held(self.file.addr + self._slots, self.handed_out(), held_word(peer))
        for _ in range(n):
            self._released()
        return n

    def held_by_index(self, peer):
        return native.count_low(self.file.addr + self._slots, self.handed_out(), held_word(peer))

    def leave(self):
        """Gives back every token this process holds here and frees its peer entry."""
        with self._lock:
            p = self._peer
            if p < 0:
                return 0
            n = self.release_all_held_by_index(p)
            base = HEADER_LENGTH + 16 * p
            self.file.store64(base + 8, 0)
            self.file.store64(base, 0)
            self._peer = -1
            return n

    def reclaim_dead(self, directory):
        """Owner's collector: releases every token of DEAD peers and frees their entries, frees
        entries left registering by DEAD processes (section 8.5). The number of tokens released."""
        total = 0
        for i in range(self.peer_capacity):
            base = HEADER_LENGTH + 16 * i
            pid = self.file.load64(base)
            if pid <= 0 or i == self._peer:
                continue
            start = self.file.load64(base + 8)
            if start == 0:
                if directory.pid_is_dead(pid) and self.file.load64(base + 8) == 0:
                    self.file.cas64(base, pid, 0)
                continue
            if directory.verdict(shm.ProcessIdentity(pid, start)) != shm.DEAD:
                continue
            total += self.release_all_held_by_index(i)
            self.file.store64(base + 8, 0)
            self.file.store64(base, 0)
        return total

    def live(self):
        n = self.handed_out()
        return sum(1 for s in range(n) if self.state(s) in (IN_FLIGHT, HELD))

    def holders(self):
        """Identities with a HELD token now."""
        seen = set()
        for s in range(self.handed_out()):
            w = self.word(s)
            if w & 0xFF == HELD:
                seen.add(((w >> 8) & 0xFFFFFF) - 1)
        return {p for p in (self.peer(i) for i in seen if 0 <= i < self.peer_capacity) if p is not None}

    def close(self):
        self.file.close()

    def __repr__(self):
        return "counter file " + self.name


def _s32(v):
    return v - (1 << 32) if v >= 1 << 31 else v


class _OwnFile:
    """A counter file of ours and what we know of it without trusting its shared contents."""
    __slots__ = ("file", "outstanding", "retired")

    def __init__(self, file):
        self.file = file
        self.outstanding = 0  # tokens handed out and not yet seen back (settled)
        self.retired = False  # its last slot was handed out (or it failed): no more will be


class CounterFilePool:
    """The sender's counter files (Java: io.refshare.share.CounterFilePool). Tokens come from
    the current file; a full file is retired and a new one started.

    Mapping rule: a file stays mapped while any token it handed out is still counted
    (``outstanding``), that is listed by a SentBlock (an open tensor's block or a limbo entry)
    of this process. A token stops counting only when ``settle`` sees it back (its word is
    RELEASED with its range tag), and the caller then forgets it: so nothing can read a file
    after it was unmapped. A retired file is unlinked and unmapped when its last token is
    settled; the file the collector sleeps on is pinned and unmapped by ``unpin`` instead.
    A quarantined file (a slot word only we may write was changed) is kept until ``close``.

    Every access to a file of ours goes through this pool under its lock (``call`` for the
    receiving side: a process may receive its own messages), so removal never races a use."""

    def __init__(self, directory, slots, peers):
        self._dir = directory
        self._slots = slots
        self._peers = peers
        self._lock = threading.RLock()
        self._files = {}       # CounterFile -> _OwnFile, in creation order
        self._by_name = {}     # name -> _OwnFile
        self._current = None
        self._newest = None
        self._pinned = None
        self._pinned_done = False  # the pinned file was removed: unpin unmaps it
        self.generation = 0        # files added or removed: changes the sum of their release counts
        self.closed = False

    def hand_out(self, tag):
        """A new token for a block of range tag ``tag``: (CounterFile, slot)."""
        with self._lock:
            if self.closed:
                raise RefshareError("the Refshare is closed")
            for _ in range(3):
                if self._current is None:
                    f = _OwnFile(CounterFile.create(self._dir, self._slots, self._peers))
                    self._files[f.file] = f
                    self._by_name[f.file.name] = f
                    self._current = self._newest = f
                    self.generation += 1
                f = self._current
                slot = f.file.hand_out(tag)
                if slot is not None:
                    f.outstanding += 1
                    if slot + 1 == f.file.slot_capacity:
                        f.retired = True
                        self._current = None  # the next token starts a new file
                    return f.file, slot
                f.retired = True  # full or quarantined
                self._current = None
                self._remove_if_done(f)
            raise RefshareError("cannot hand out a token: fresh counter files keep failing")

    def settle(self, tokens):
        """Of ``tokens`` (CounterFile, slot, tag) of ours, those not yet back; the ones back stop
        counting here and must be forgotten by the caller. After close: none (all given back)."""
        with self._lock:
            if self.closed:
                return []
            left = []
            for token in tokens:
                if not self._settle_one(token):
                    left.append(token)
            return left

    def settle_prefix(self, tokens, end):
        """How many of ``tokens[:end]``, from the first, are back (settled here; the caller drops
        them): FIFO consumers give tokens back in order, so this keeps a re-shared block's list
        short at the cost of one word read per share."""
        with self._lock:
            if self.closed:
                return end
            n = 0
            while n < end and self._settle_one(tokens[n]):
                n += 1
            return n

    def _settle_one(self, token):
        cnt, slot, tag = token
        f = self._files.get(cnt)
        if f is None:
            return True  # not ours any more: never read it
        if cnt.word(slot) != RELEASED | tag << 32:
            # the whole word, range tag included: a word some other writer scribbled RELEASED
            # into never frees a block a reader may still use
            return False
        f.outstanding -= 1
        self._remove_if_done(f)
        return True

    def _remove_if_done(self, f):
        if f.outstanding > 0 or not f.retired or f.file.quarantined or self._files.get(f.file) is not f:
            return
        del self._files[f.file]
        del self._by_name[f.file.name]
        self.generation += 1
        f.file.file.unlink()
        if f.file is self._pinned:
            self._pinned_done = True
        else:
            f.file.close()

    def call(self, cnt, action, absent=None):
        """Runs ``action()`` on our file ``cnt`` under the pool's lock, so the file cannot be
        removed meanwhile; ``absent`` when it is no longer ours (removed, or the pool closed)."""
        with self._lock:
            if self._files.get(cnt) is None:
                return absent
            return action()

    def own_file(self, name):
        """Our counter file of this name, or None when it is not (or no longer) ours."""
        with self._lock:
            f = self._by_name.get(name)
            return None if f is None else f.file

    def files(self):
        """Our files still mapped, in creation order (the newest last)."""
        with self._lock:
            return list(self._files)

    def file_count(self):
        return len(self._files)

    def progress(self):
        """(releases counted in our files, generation): unchanged means nothing came back."""
        with self._lock:
            return sum(f.releases() for f in self._files), self.generation

    def reclaim_dead(self, directory):
        """The owner's reclamation of DEAD peers in every healthy file of ours; tokens released."""
        with self._lock:
            return sum(f.reclaim_dead(directory) for f in list(self._files) if not f.quarantined)

    def pin(self):
        """The newest file, kept mapped until ``unpin`` (the collector sleeps on its futex word
        outside the lock); None when there is none."""
        with self._lock:
            f = self._newest
            if self.closed or f is None or self._files.get(f.file) is not f:
                return None
            self._pinned = f.file
            return f.file

    def unpin(self):
        with self._lock:
            if self._pinned_done:
                self._pinned.close()
                self._pinned_done = False
            self._pinned = None

    def close(self):
        """Gives back what this process holds in its own files, unlinks and unmaps them all (a
        pinned one when it is unpinned): processes still holding tokens keep their own mappings."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            for cnt in list(self._files):
                try:
                    cnt.leave()
                finally:
                    cnt.file.unlink()
                    if cnt is self._pinned:
                        self._pinned_done = True
                    else:
                        cnt.close()
            self._files.clear()
            self._by_name.clear()
            self._current = self._newest = None
