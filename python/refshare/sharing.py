"""Sending, receiving, the limbo and the collector (docs/protocol.md section 12; Java:
io.refshare.share.Sharing, Limbo, Collector, ReceiveCache)."""
import collections
import os
import sys
import threading
import time

from . import descriptor as dc
from . import shm
from .counter import CounterFile, CounterFilePool
from .errors import NOT_THE_MESSAGES_FAULT, InvalidDataError, RefshareError
from .memory import Allocator, HEADER_BYTES, Segment
from .tensor import HeldBlock, Tensor

COUNTER_SLOTS = 100000
COUNTER_PEERS = 256
PRUNE_EVERY = 1024  # a re-shared block's whole token list is settled each time it grows by this
COLLECT_SLICE_S = 0.010
HOUSEKEEPING_S = 0.100

Stats = collections.namedtuple("Stats", "limbo_blocks limbo_bytes segments segment_bytes blocks_in_use bytes_in_use "
                                        "own_counter_files mapped_segments mapped_counter_files shared received "
                                        "collected reclaimed")


class Sharing:
    """One process's sharing state in one directory: its allocator, its counter files, what it
    received, its limbo and its collector thread."""

    def __init__(self, directory, counter_slots=None, counter_peers=None):
        self.dir = directory
        self.allocator = Allocator(directory)
        # lock order: this lock, then the pool's; never the other way round
        self._lock = threading.RLock()
        self._decoder = dc.Decoder(directory.is_ours)
        self._pool = CounterFilePool(directory, COUNTER_SLOTS if counter_slots is None else counter_slots,
                                     COUNTER_PEERS if counter_peers is None else counter_peers)
        self._limbo = []            # HeldBlocks dropped while tokens of theirs are out
        self._segments = {}         # received segment name -> [Segment, blocks held]
        self._counters = {}         # foreign counter file name -> CounterFile
        self._held = collections.Counter()  # foreign counter file name -> tokens we hold (or claim) in it
        self._next_counter_check = 0.0
        self._seen_releases = None  # the pool's progress at the last limbo walk
        self._seen_limbo = 0       # limbo size after it
        self._holders = []          # holder files we created (reclaimed by our collector)
        self.shared = self.received = self.collected = self.reclaimed = 0
        self._closed = False
        self._wake = threading.Event()
        self._collector = None
        self._status = None        # our status file, for `refshare inspect` (processes that share)

    # ---------------------------------------------------------------- allocation

    def allocate(self, layout):
        nbytes = max(layout.byte_span(), 1)
        b = self.allocator.allocate(nbytes, on_miss=self.collect)
        h = HeldBlock(self, b.segment, b.offset, nbytes, b)
        h.refs = 1
        return Tensor(h, layout, writable=True)

    # ---------------------------------------------------------------- sending

    @property
    def _own(self):
        """Our counter files still mapped, the newest last (for tests and tools)."""
        return self._pool.files()

    def share(self, tensor):
        """The descriptor bytes of one new reference to ``tensor``."""
        return dc.encode(self.share_descriptor(tensor))

    def share_descriptor(self, tensor):
        tensor._check()
        h = tensor._block
        tag = dc.range_tag(h.offset, h.length, h.segment.name)
        with self._lock:
            if self._closed:
                raise RefshareError("the Refshare is closed")
            cnt, slot = self._pool.hand_out(tag)
            self._start_collector()
            sent = h.sent
            sent.append((cnt, slot, tag))
            # a block shared again and again (one reused tensor) would list every token it ever
            # had and keep every counter file they came from mapped: forget those already back
            n = self._pool.settle_prefix(sent, len(sent) - 1)
            if n:
                del sent[:n]
            if len(sent) % PRUNE_EVERY == 0:
                sent[:] = self._pool.settle(sent)
            self.shared += 1
        me = shm.current()
        return dc.Descriptor(dc.BACKEND_HOST, h.segment.name, h.segment.size, h.offset, h.length, cnt.name, slot,
                             tensor.layout, me.pid, me.start)

    def cancel(self, data):
        """Returns an undelivered message's reference; True when this call returned it."""
        d = data if isinstance(data, dc.Descriptor) else dc.decode(data, self.dir.is_ours)
        if self._closed:
            return False  # its counter file was given back with everything else
        cnt = self._counter(d.counter_file_name)
        with self._lock:
            if self._closed:
                return False  # its counter file was given back with everything else
            if cnt.file.created:
                return self._pool.call(cnt, lambda: cnt.cancel(d.slot, d.range_tag()), False)
            if self._counters.get(cnt.name) is not cnt:
                return False
            return cnt.cancel(d.slot, d.range_tag())

    # ---------------------------------------------------------------- receiving

    def _counter(self, name):
        """Our own counter file of this name, else the foreign one, mapped once."""
        with self._lock:
            if self._closed:
                raise RefshareError("the Refshare is closed")
            c = self._counters.get(name)  # foreign files first: a consumer asks here for every message
            if c is not None:
                return c
            own = self._pool.own_file(name)
            if own is not None:
                return own
            if c is None:
                self.dir.resolve(name, "cnt")
                c = CounterFile.open(self.dir, name)
                self._counters[name] = c
            return c

    def _drop_finished_counters(self):
        """Leaves and unmaps foreign counter files we hold nothing in once their owner removed
        them (it does when every token came back): a long-lived consumer keeps no stale mappings."""
        now = time.monotonic()
        if now < self._next_counter_check:
            return
        self._next_counter_check = now + 1.0
        with self._lock:
            for name, c in list(self._counters.items()):
                if self._held[name] <= 0 and not os.path.exists(c.file.path):
                    del self._counters[name]
                    self._held.pop(name, None)
                    c.leave()
                    c.close()
            for name, entry in list(self._segments.items()):
                if entry[1] == 0 and not os.path.exists(entry[0].file.path):
                    del self._segments[name]
                    entry[0].close()

    def receive(self, data):
        """Claims the reference ``data`` (descriptor bytes) carries; a Tensor over its block."""
        if time.monotonic() >= self._next_counter_check:
            self._drop_finished_counters()
        d = data if isinstance(data, dc.Descriptor) else self._decoder.decode(data)
        if d.backend != dc.BACKEND_HOST:
            raise RefshareError("a CUDA descriptor cannot be received by the Python package (host memory only); "
                                "the token was not claimed")
        if self.dir.kind_of(d.segment_name) != "seg" or self.dir.kind_of(d.counter_file_name) != "cnt":
            self.dir.resolve(d.segment_name, "seg")  # raises, naming the offending name
            self.dir.resolve(d.counter_file_name, "cnt")
        if d.offset < HEADER_BYTES:
            raise InvalidDataError("block offset %d lies in the segment header (< %d)" % (d.offset, HEADER_BYTES))
        self.dir.hold_life_lock()
        tag = d.range_tag()
        tensor_layout = d.tensor if d.tensor is not None else dc.TensorLayout("uint8", (d.length,))
        with self._lock:  # one hold for the whole claim: nothing we map can be dropped meanwhile
            if self._closed:
                raise RefshareError("the Refshare is closed")
            cnt = self._counter(d.counter_file_name)
            if cnt.owner != (d.sender_pid, d.sender_start_ticks):
                raise InvalidDataError("descriptor from %r names counter file %s of %r: a sender may only name its "
                                       "own" % (shm.ProcessIdentity(d.sender_pid, d.sender_start_ticks), cnt.name,
                                                cnt.owner))
            segment = self.map_segment(d)
            own = cnt.file.created
            try:
                if own:  # our own message: the file is ours while its token is in flight
                    claimed = self._pool.call(cnt, lambda: self._claim(cnt, d.slot, tag), False)
                else:
                    claimed = self._claim(cnt, d.slot, tag)
                if not claimed:
                    raise InvalidDataError("token %s#%d is not in flight for this block (already received, "
                                           "returned, or presented with another range)" % (cnt.name, d.slot))
            except BaseException:
                self._segment_done(d.segment_name)
                raise
            if not own:
                self._held[cnt.name] += 1  # keeps the file mapped until the token goes back
            self.received += 1
        h = None
        try:
            h = HeldBlock(self, segment, d.offset, d.length, None, (cnt, d.slot, tag))
            h.refs = 1
            return Tensor(h, tensor_layout, writable=False)
        except NOT_THE_MESSAGES_FAULT:
            if h is not None:
                h.refs = 0  # a Tensor made before the failure must not give the token back when collected
            self._unreceive(cnt, d, tag, own)
            raise

    def _unreceive(self, cnt, d, tag, own):
        """Undoes a claim whose receive cannot finish for a reason that is not the message's (out of
        memory, an interrupt): the token is in flight again (protocol 8.4, unclaim), for a queue to
        give the message back to its next receiver."""
        with self._lock:
            if not cnt.unclaim(d.slot, tag):
                print("refshare: token %s#%d was no longer held by this process" % (cnt.name, d.slot),
                      file=sys.stderr)
            if not own:
                self._held[cnt.name] -= 1
            self.received -= 1
        self._segment_done(d.segment_name)

    @staticmethod
    def _claim(cnt, slot, tag):
        cnt.self_peer()  # a full peer table is a ResourceLimitError before anything is claimed
        return cnt.claim(slot, tag)

    def map_segment(self, d):
        """The segment a checked descriptor names, mapped once per process; counted until
        _segment_done."""
        with self._lock:
            entry = self._segments.get(d.segment_name)
            if entry is None:
                entry = [Segment.open(self.dir, d.segment_name, d.segment_size), 0]
                self._segments[d.segment_name] = entry
            elif entry[0].size != d.segment_size:
                raise InvalidDataError("segment %s is %d bytes, the descriptor says %d"
                                       % (d.segment_name, entry[0].size, d.segment_size))
            entry[1] += 1
            return entry[0]

    def view_block(self, d, finisher):
        """A Tensor over a descriptor's block without claiming its token (a holder counts it);
        ``finisher`` runs when the last Tensor over it closes."""
        if d.backend != dc.BACKEND_HOST:
            raise RefshareError("a CUDA descriptor cannot be read by the Python package (host memory only)")
        self.dir.resolve(d.segment_name, "seg")
        if d.offset < HEADER_BYTES:
            raise InvalidDataError("block offset %d lies in the segment header (< %d)" % (d.offset, HEADER_BYTES))
        segment = self.map_segment(d)
        h = HeldBlock(self, segment, d.offset, d.length, None, None, finisher)
        h.refs = 1
        layout = d.tensor if d.tensor is not None else dc.TensorLayout("uint8", (d.length,))
        return Tensor(h, layout, writable=False)

    def _segment_done(self, name):
        with self._lock:
            entry = self._segments.get(name)
            if entry is None:
                return
            entry[1] -= 1  # an idle mapping is dropped once its file is gone (_drop_finished_counters)

    # ---------------------------------------------------------------- giving back

    def _dropped(self, h):
        """The last Tensor over ``h`` closed."""
        with self._lock:
            if self._closed:
                return  # everything was given back and unmapped when this Sharing closed
            if h.token is not None and not h.sent:
                self._return_token(h)  # received and not passed on: the common case, in one hold
                return
            if h.sent:
                h.sent[:] = self._pool.settle(h.sent)
            pending = bool(h.sent)  # decided here: once in the limbo the collector may finish it
            if pending:
                self._limbo.append(h)
        if pending:
            self._wake.set()
        else:
            self._finish(h)

    def _finish(self, h):
        if h.local is not None:
            self.allocator.free(h.local)
        elif h.finisher is not None:
            try:
                h.finisher()
            finally:
                self._segment_done(h.segment.name)
        else:
            with self._lock:
                if not self._closed:  # else close gave back every token we held and unmapped the files
                    self._return_token(h)

    def _return_token(self, h):
        """Releases a received block's token (under the lock, while open)."""
        cnt, slot, tag = h.token
        if cnt.file.created:  # a message of our own: the pool may remove the file meanwhile
            self._pool.call(cnt, lambda: cnt.release(slot, tag))
        else:
            cnt.release(slot, tag)
            self._held[cnt.name] -= 1
        self._segment_done(h.segment.name)

    def collect(self):
        """Frees limbo blocks whose every token came back; the number freed."""
        with self._lock:
            if self._closed:
                return 0
            # nothing can have come back unless some release was counted since the last scan
            # (or the limbo grew, or a file came or went): skip the walk over the whole limbo then
            progress = self._pool.progress()
            if progress == self._seen_releases and len(self._limbo) <= self._seen_limbo:
                return 0
            self._seen_releases = progress
            done, kept = [], []
            for h in self._limbo:
                h.sent[:] = self._pool.settle(h.sent)
                (kept if h.sent else done).append(h)
            self._limbo = kept
            self.collected += len(done)
            self._seen_limbo = len(self._limbo)
        for h in done:  # never under the lock: freeing may collect again
            self._finish(h)
        return len(done)

    def limbo_size(self):
        with self._lock:
            return len(self._limbo)

    # ---------------------------------------------------------------- collector

    def _start_collector(self):
        if self._collector is None:
            self._status = _StatusFile.create(self.dir)
            self._collector = threading.Thread(target=self._run_collector, name="refshare-collector", daemon=True)
            self._collector.start()

    def add_holder(self, holder):
        with self._lock:
            self._holders.append(holder)
        self._start_collector()

    def _run_collector(self):
        last_housekeeping = 0.0
        while not self._closed:
            try:
                if self._limbo:
                    cnt = self._pool.pin()  # mapped until unpin, even if removed or closed meanwhile
                    try:
                        seen = cnt.releases() if cnt is not None else 0
                        if self.collect() == 0:
                            if cnt is not None:
                                cnt.await_release(seen, COLLECT_SLICE_S)
                            else:
                                time.sleep(COLLECT_SLICE_S)
                            self.collect()
                    finally:
                        self._pool.unpin()
                    time.sleep(0.00025)
                else:
                    self._wake.wait(HOUSEKEEPING_S)
                    self._wake.clear()
                now = time.monotonic()
                if now - last_housekeeping >= HOUSEKEEPING_S:
                    last_housekeeping = now
                    self.housekeeping()
            except Exception as e:  # the collector survives anything; the next round retries
                print("refshare collector: %s: %s" % (type(e).__name__, e), file=sys.stderr)
                time.sleep(HOUSEKEEPING_S)

    def housekeeping(self):
        """Reclaims DEAD holders' tokens in our counter files (the limbo walk then settles them
        and removes retired files whose last token is back), reclaims dead readers of our
        holders, drops idle mappings of removed segments, publishes our statistics."""
        with self._lock:
            if self._closed:
                return
            holders = list(self._holders)
        n = self._pool.reclaim_dead(self.dir)
        if n:
            with self._lock:
                self.reclaimed += n
        self.collect()
        with self._lock:
            if self._closed:
                return
            for name, entry in list(self._segments.items()):
                if entry[1] == 0 and not os.path.exists(entry[0].file.path):
                    del self._segments[name]
                    entry[0].close()
            if self._status is not None:
                self._status.publish(self.stats()[:12])
        for holder in holders:
            try:
                if not holder.closed:
                    self.reclaimed += holder.reclaim_dead()
            except RefshareError as e:
                print("refshare collector: holder %s: %s" % (holder.name, e), file=sys.stderr)

    def stats(self):
        with self._lock:
            return Stats(len(self._limbo), sum(h.length for h in self._limbo), len(self.allocator._segments),
                         self.allocator.segment_bytes, self.allocator.blocks_in_use, self.allocator.bytes_in_use,
                         self._pool.file_count(), len(self._segments), len(self._counters), self.shared, self.received,
                         self.collected, self.reclaimed)

    # ---------------------------------------------------------------- close

    def close(self):
        """Gives back everything this process holds in foreign counter files, removes its own files."""
        self._closed = True
        self._wake.set()
        if self._collector is not None and self._collector is not threading.current_thread():
            self._collector.join(1.0)
        with self._lock:
            for c in self._counters.values():
                c.leave()
                c.close()
            self._counters.clear()
            self._pool.close()  # a file the collector sleeps on is unmapped when it wakes
            self._limbo.clear()
            for entry in self._segments.values():
                entry[0].close()
            self._segments.clear()
            if self._status is not None:
                self._status.file.unlink()
                self._status.file.close()
        self.allocator.close()


class _StatusFile:
    """A process's published statistics (docs/protocol.md section 11; Java: StatusFile)."""
    MAGIC = 0x3153544154535352  # "RSSTATS1"
    UPDATED = 32
    FIELDS = 40
    LENGTH = FIELDS + 8 * 12

    def __init__(self, f):
        self.file = f

    @classmethod
    def create(cls, directory):
        f = directory.create("proc", cls.LENGTH)
        me = shm.current()
        f.write(8, (1).to_bytes(4, "little") + cls.FIELDS.to_bytes(4, "little"))
        f.store64(16, me.pid)
        f.store64(24, me.start)
        f.store64(0, cls.MAGIC)
        return cls(f)

    def publish(self, values):
        for i, v in enumerate(values):
            self.file.store64(self.FIELDS + 8 * i, v)
        self.file.store64(self.UPDATED, int(time.time() * 1000))

