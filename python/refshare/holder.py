"""Holders: a named slot re-pointed at the newest version of a tensor, read without locks by
differential reference counting (docs/protocol.md section 10; Java: io.refshare.SharedHolder,
SharedHolderLayout, HolderWord, HolderFile)."""
import threading

from . import descriptor as dc
from . import native, shm
from .errors import InvalidDataError, RefshareError, ResourceLimitError

MAGIC = 0x3152444C4F485352  # "RSHOLDR1"
VERSION = 1
HEADER_LENGTH = 192
SLOT_CAPACITY, READER_CAPACITY, SLOT_LENGTH_OFF, READER_LENGTH_OFF = 32, 36, 40, 44
WORD, PUBLISHED, RETIRED, CLOSED, RECLAIMED = 64, 128, 136, 144, 152
S_COUNT, S_STATE, S_SEQUENCE, S_PUBLISHER, S_DESC_LEN, S_DESC = 0, 64, 72, 80, 88, 128
SLOT_LENGTH = 128 + dc.MAX_ENCODED_BYTES
FREE, WRITING, LIVE = 0, 1, 2
MAX_SLOTS = 4096
MAX_READERS = 1 << 16
COUNT_MASK = (1 << 24) - 1
GEN_MASK = (1 << 24) - 1
PINNED = 1 << 62
DRAIN_AT = 1 << 23
MARK = 1 << 63
M64 = (1 << 64) - 1


def reader_length(slots):
    return (8 + 8 * slots + 63) // 64 * 64


def _slot_of(w):
    return (w >> 48) - 1


def _gen_of(w):
    return (w >> 24) & GEN_MASK


def _count_of(w):
    return w & COUNT_MASK


def _version_of(w):
    return w & ~COUNT_MASK & M64


class Holder:
    """One process's handle on a holder file: the creator publishes (any process may), readers
    acquire the current version zero-copy."""

    def __init__(self, rs, f, creator):
        self._rs = rs
        self._sharing = rs._sharing
        self._dir = rs.directory
        self._f = f
        self.name = f.name
        self.creator = creator
        self.closed = False
        self.slots = int.from_bytes(f.read(SLOT_CAPACITY, 4), "little")
        self.readers = int.from_bytes(f.read(READER_CAPACITY, 4), "little")
        self._row_len = reader_length(self.slots)
        self._slots_off = HEADER_LENGTH + self.readers * self._row_len
        self._row = -1
        self._lock = threading.Lock()
        self._me = shm.current()

    @classmethod
    def create(cls, rs, slots=64, readers=64):
        if not 1 <= slots <= MAX_SLOTS or not 1 <= readers <= MAX_READERS:
            raise ValueError("holder geometry out of range: %d version slots, %d readers" % (slots, readers))
        size = HEADER_LENGTH + readers * reader_length(slots) + slots * SLOT_LENGTH
        f = rs.directory.create("hold", size)
        me = shm.current()
        f.write(8, VERSION.to_bytes(4, "little") + HEADER_LENGTH.to_bytes(4, "little"))
        f.store64(16, me.pid)
        f.store64(24, me.start)
        f.write(32, b"".join(v.to_bytes(4, "little") for v in (slots, readers, SLOT_LENGTH, reader_length(slots))))
        f.store64(0, MAGIC)
        return cls(rs, f, True)

    @classmethod
    def open(cls, rs, name):
        f = rs.directory.open(name, "hold", HEADER_LENGTH)
        try:
            hlen, slots, readers, slen, rlen = f.check_layout(MAGIC, VERSION, "holder", (12, 32, 36, 40, 44))
            if (hlen != HEADER_LENGTH or not 1 <= slots <= MAX_SLOTS or not 1 <= readers <= MAX_READERS
                    or slen != SLOT_LENGTH or rlen != reader_length(slots)):
                raise InvalidDataError("%s has a corrupt holder header: header length %d, %d slots, %d readers, "
                                       "slot length %d, row length %d" % (f.path, hlen, slots, readers, slen, rlen))
            want = HEADER_LENGTH + readers * rlen + slots * SLOT_LENGTH
            if f.size != want:
                raise InvalidDataError("%s is %d bytes but its header describes %d" % (f.path, f.size, want))
            return cls(rs, f, False)
        except BaseException:
            f.close()
            raise

    # ---------------------------------------------------------------- offsets

    def _slot(self, s, field=0):
        return self._slots_off + s * SLOT_LENGTH + field

    def _held(self, row, s):
        return HEADER_LENGTH + row * self._row_len + 8 + 8 * s

    def _row_identity(self, row):
        return HEADER_LENGTH + row * self._row_len

    # ---------------------------------------------------------------- reading

    def _take_row(self):
        if self._row >= 0:
            return self._row
        with self._lock:
            if self._row >= 0:
                return self._row
            # before our identity is in the file, and while the file exists: the row outlives
            # this handle and is reclaimed only once the kernel drops our lock
            self._dir.hold_life_lock_while_named_in(self.name)
            packed = self._me.packed()
            for attempt in (0, 1):
                for r in range(self.readers):
                    if (self._f.load64(self._row_identity(r)) & M64) == packed:
                        self._row = r
                        return r
                for r in range(self.readers):
                    if self._f.load64(self._row_identity(r)) == 0 and self._f.cas64(self._row_identity(r), 0, packed):
                        for s in range(self.slots):  # a free row records nothing: clear what a writer left
                            self._f.store64(self._held(r, s), 0)
                        self._row = r
                        return r
                if attempt == 0:
                    self.reclaim_dead()
            raise ResourceLimitError("all %d reader rows of holder %s are held by live processes"
                                     % (self.readers, self.name))

    def acquire(self):
        """A reference to the current version (a read-only Tensor; close it to release), or None
        when nothing is published."""
        self._check()
        row = self._take_row()
        f = self._f
        w = f.fetch_add64(WORD, 1) & M64
        s = _slot_of(w)
        if s < 0:
            if _count_of(w) + 1 >= DRAIN_AT:
                self._forget_empty_count()
            return None
        if s >= self.slots:
            raise InvalidDataError("holder %s: the holder word names slot %d of %d (corrupt)" % (self.name, s,
                                                                                                   self.slots))
        f.fetch_add64(self._held(row, s), 1)
        if _count_of(w) + 1 >= DRAIN_AT:
            self._drain(s, w)
        try:
            st = f.load64(self._slot(s, S_STATE)) & M64
            if st & 0xFF != LIVE or (st >> 8) & GEN_MASK != _gen_of(w):
                raise InvalidDataError("holder %s: slot %d is not the live version the holder word names" % (self.name, s))
            n = f.load32(self._slot(s, S_DESC_LEN))
            if not 1 <= n <= dc.MAX_ENCODED_BYTES:
                raise InvalidDataError("holder %s: slot %d has a descriptor length of %d" % (self.name, s, n))
            d = dc.decode(f.read(self._slot(s, S_DESC), n), self._dir.is_ours)
            return self._sharing.view_block(d, lambda: self._release(row, s))
        except BaseException:
            self._release(row, s)
            raise

    def _release(self, row, s):
        if self._f.closed:
            return
        h = self._f.fetch_add64(self._held(row, s), -1)
        if h <= 0:
            self._f.fetch_add64(self._held(row, s), 1)
            raise InvalidDataError("holder %s: released a version this process did not hold (corrupt row)" % self.name)
        self._release_count(s, 1)

    def _release_count(self, s, n):
        c = self._f.fetch_add64(self._slot(s, S_COUNT), -n) - n
        if c == 0:
            self._retire(s)
        elif c < 0:
            raise InvalidDataError("holder %s: version count of slot %d fell below zero (corrupt)" % (self.name, s))

    def _drain(self, s, w):
        f = self._f
        f.fetch_add64(self._slot(s, S_COUNT), DRAIN_AT)
        cur = f.load64(WORD) & M64
        while _version_of(cur) == _version_of(w) and _count_of(cur) >= DRAIN_AT:
            if f.cas64(WORD, cur, cur - DRAIN_AT):
                return
            cur = f.load64(WORD) & M64
        f.fetch_add64(self._slot(s, S_COUNT), -DRAIN_AT)

    def _forget_empty_count(self):
        cur = self._f.load64(WORD) & M64
        while _slot_of(cur) < 0 and _count_of(cur) >= DRAIN_AT:
            if self._f.cas64(WORD, cur, 0):
                return
            cur = self._f.load64(WORD) & M64

    def _retire(self, s):
        f = self._f
        st = f.load64(self._slot(s, S_STATE)) & M64
        if st & 0xFF != LIVE:
            raise InvalidDataError("holder %s: retiring slot %d that is not live (corrupt)" % (self.name, s))
        n = f.load32(self._slot(s, S_DESC_LEN))
        if 1 <= n <= dc.MAX_ENCODED_BYTES:
            try:
                self._sharing.cancel(f.read(self._slot(s, S_DESC), n))
            except RefshareError:
                pass  # already released, or the publisher's counter file is gone with it
        f.fetch_add64(RETIRED, 1)
        f.cas64(self._slot(s, S_STATE), st, FREE | ((st >> 8) & GEN_MASK) << 8)

    # ---------------------------------------------------------------- publishing

    def publish(self, tensor):
        """Makes ``tensor`` the current version; returns its sequence number. The caller keeps
        its tensor; the version lives until it is replaced and its last reader released it."""
        self._check()
        f = self._f
        if f.load64(CLOSED) != 0:
            raise RefshareError("holder %s is closed" % self.name)
        d = self._sharing.share_descriptor(tensor)
        raw = dc.encode(d)
        try:
            claimed = None
            for attempt in (0, 1):
                for s in range(self.slots):
                    st = f.load64(self._slot(s, S_STATE)) & M64
                    if st & 0xFF == FREE:
                        g = (((st >> 8) & GEN_MASK) + 1) & GEN_MASK
                        if f.cas64(self._slot(s, S_STATE), st, WRITING | g << 8):
                            claimed = (s, g)
                            break
                if claimed or attempt:
                    break
                self.reclaim_dead()
            if claimed is None:
                raise ResourceLimitError("holder %s: all %d version slots hold live versions" % (self.name, self.slots))
        except BaseException:
            self._sharing.cancel(d)
            raise
        s, g = claimed
        seq = f.fetch_add64(PUBLISHED, 1) + 1
        f.store64(self._slot(s, S_COUNT), PINNED)
        f.store64(self._slot(s, S_SEQUENCE), seq)
        f.store64(self._slot(s, S_PUBLISHER), self._me.packed())
        native.store32(f.addr + self._slot(s, S_DESC_LEN), len(raw))
        f.write(self._slot(s, S_DESC), raw)
        f.store64(self._slot(s, S_STATE), LIVE | g << 8)
        old = f.exchange64(WORD, (s + 1) << 48 | g << 24) & M64
        self._unpin(old)
        if f.load64(CLOSED) != 0:
            self._unpin(f.exchange64(WORD, 0) & M64)
        return seq

    def _unpin(self, old):
        s = _slot_of(old)
        if s < 0:
            return
        if s >= self.slots:
            raise InvalidDataError("holder %s: the holder word names slot %d of %d (corrupt)" % (self.name, s,
                                                                                                   self.slots))
        self._release_count(s, PINNED - _count_of(old))

    def clear(self):
        """Empties the holder (the current version goes once its readers released it)."""
        self._check()
        self._unpin(self._f.exchange64(WORD, 0) & M64)

    # ---------------------------------------------------------------- dead readers

    def reclaim_dead(self):
        """Gives back the references of DEAD readers (section 10.6); the number given back."""
        f = self._f
        total = 0
        mine = self._me.packed() | MARK
        for r in range(self.readers):
            ident = f.load64(self._row_identity(r)) & M64
            if ident == 0:
                continue
            who = shm.ProcessIdentity.unpacked(ident)
            if who.pid == 0 or who == self._me or self._dir.verdict(who) != shm.DEAD:
                continue
            if not f.cas64(self._row_identity(r), ident, mine):
                continue
            n_row = 0
            for s in range(self.slots):
                n = f.exchange64(self._held(r, s), 0)
                if n > 0:
                    n_row += n
                    self._release_count(s, n)
            if n_row:
                f.fetch_add64(RECLAIMED, n_row)
                total += n_row
            f.cas64(self._row_identity(r), mine, 0)
        return total

    # ---------------------------------------------------------------- life

    def _check(self):
        if self.closed:
            raise RefshareError("holder %s is closed" % self.name)

    def stats(self):
        f = self._f
        return {"published": f.load64(PUBLISHED), "retired": f.load64(RETIRED), "reclaimed": f.load64(RECLAIMED)}

    def close(self):
        """The creator's close empties and removes the holder (versions live until their readers
        release them); a reader's close only drops this handle."""
        if self.closed:
            return
        self.closed = True
        if self.creator:
            self._f.store64(CLOSED, 1)
            try:
                self._unpin(self._f.exchange64(WORD, 0) & M64)
            finally:
                self._f.unlink()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "Holder[%s]" % self.name
