"""Sending, receiving, the limbo and the collector (docs/protocol.md section 12; Java:
io.refshare.share.Sharing, Limbo, Collector, ReceiveCache)."""
import collections
import os
import sys
import threading
import time

from . import descriptor as dc
from . import shm
from .counter import CounterFile, RELEASED
from .errors import InvalidDataError, RefshareError
from .memory import Allocator, HEADER_BYTES, Segment
from .tensor import HeldBlock, Tensor

COUNTER_SLOTS = 10000
COUNTER_PEERS = 256
COLLECT_SLICE_S = 0.010
HOUSEKEEPING_S = 0.100

Stats = collections.namedtuple("Stats", "limbo_blocks limbo_bytes segments segment_bytes blocks_in_use bytes_in_use "
                                        "own_counter_files mapped_segments mapped_counter_files shared received "
                                        "collected reclaimed")


class Sharing:
    """One process's sharing state in one directory: its allocator, its counter files, what it
    received, its limbo and its collector thread."""

    def __init__(self, directory, counter_slots=COUNTER_SLOTS, counter_peers=COUNTER_PEERS):
        self.dir = directory
        self.allocator = Allocator(directory)
        self._lock = threading.RLock()
        self._slots = counter_slots
        self._peers = counter_peers
        self._own = []              # our counter files, current last
        self._limbo = []            # HeldBlocks dropped while tokens of theirs are out
        self._segments = {}         # received segment name -> [Segment, blocks held]
        self._counters = {}         # foreign counter file name -> CounterFile
        self._held = collections.Counter()  # foreign counter file name -> tokens we hold in it
        self._next_counter_check = 0.0
        self._seen_releases = -1   # releases counted in our files at the last limbo walk
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

    def _counter_file(self):
        if not self._own or self._own[-1].is_retired() or self._own[-1].quarantined:
            self._own.append(CounterFile.create(self.dir, self._slots, self._peers))
            self._start_collector()
        return self._own[-1]

    def share(self, tensor):
        """The descriptor bytes of one new reference to ``tensor``."""
        return dc.encode(self.share_descriptor(tensor))

    def share_descriptor(self, tensor):
        tensor._check()
        h = tensor._block
        tag = dc.range_tag(h.offset, h.length, h.segment.name)
        with self._lock:
            for _ in range(3):
                cnt = self._counter_file()
                slot = cnt.hand_out(tag)
                if slot is not None:
                    break
            else:
                raise RefshareError("cannot hand out a token: fresh counter files keep failing")
            h.sent.append((cnt, slot, tag))
            self.shared += 1
        me = shm.current()
        return dc.Descriptor(dc.BACKEND_HOST, h.segment.name, h.segment.size, h.offset, h.length, cnt.name, slot,
                             tensor.layout, me.pid, me.start)

    def cancel(self, data):
        """Returns an undelivered message's reference; True when this call returned it."""
        d = data if isinstance(data, dc.Descriptor) else dc.decode(data, self.dir.is_ours)
        cnt = self._counter(d.counter_file_name)
        return cnt.cancel(d.slot, d.range_tag())

    # ---------------------------------------------------------------- receiving

    def _counter(self, name):
        with self._lock:
            c = self._counters.get(name)
            if c is None:
                for own in self._own:
                    if own.name == name:
                        return own
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
        self._drop_finished_counters()
        d = data if isinstance(data, dc.Descriptor) else dc.decode(data, self.dir.is_ours)
        if d.backend != dc.BACKEND_HOST:
            raise RefshareError("a CUDA descriptor cannot be received by the Python package (host memory only); "
                                "the token was not claimed")
        if self.dir.kind_of(d.segment_name) != "seg" or self.dir.kind_of(d.counter_file_name) != "cnt":
            self.dir.resolve(d.segment_name, "seg")  # raises, naming the offending name
            self.dir.resolve(d.counter_file_name, "cnt")
        if d.offset < HEADER_BYTES:
            raise InvalidDataError("block offset %d lies in the segment header (< %d)" % (d.offset, HEADER_BYTES))
        self.dir.hold_life_lock()
        cnt = self._counter(d.counter_file_name)
        if cnt.owner != (d.sender_pid, d.sender_start_ticks):
            raise InvalidDataError("descriptor from %r names counter file %s of %r: a sender may only name its own"
                                   % (shm.ProcessIdentity(d.sender_pid, d.sender_start_ticks), cnt.name, cnt.owner))
        tensor_layout = d.tensor if d.tensor is not None else dc.TensorLayout("uint8", (d.length,))
        segment = self.map_segment(d)
        try:
            tag = d.range_tag()
            cnt.self_peer()  # a full peer table is a ResourceLimitError before anything is claimed
            if not cnt.claim(d.slot, tag):
                raise InvalidDataError("token %s#%d is not in flight for this block (already received, returned, "
                                       "or presented with another range)" % (cnt.name, d.slot))
        except BaseException:
            self._segment_done(d.segment_name)
            raise
        h = HeldBlock(self, segment, d.offset, d.length, None, (cnt, d.slot, tag))
        h.refs = 1
        with self._lock:
            self.received += 1
            self._held[cnt.name] += 1
        return Tensor(h, tensor_layout, writable=False)

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
        if self._closed:
            return  # everything was given back and unmapped when this Sharing closed
        if all(_released(cnt, slot, tag) for cnt, slot, tag in h.sent):
            self._finish(h)
        else:
            with self._lock:
                self._limbo.append(h)
            self._wake.set()

    def _finish(self, h):
        if h.local is not None:
            self.allocator.free(h.local)
        elif h.finisher is not None:
            try:
                h.finisher()
            finally:
                self._segment_done(h.segment.name)
        else:
            cnt, slot, tag = h.token
            cnt.release(slot, tag)
            self._segment_done(h.segment.name)
            with self._lock:
                self._held[cnt.name] -= 1

    def collect(self):
        """Frees limbo blocks whose every token came back; the number freed."""
        with self._lock:
            # nothing can have come back unless some release was counted since the last scan
            # (or the limbo grew): skip the walk over the whole limbo then
            releases = sum(c.releases() for c in self._own)
            if releases == self._seen_releases and len(self._limbo) <= self._seen_limbo:
                return 0
            self._seen_releases = releases
            done = [h for h in self._limbo if all(_released(cnt, slot, tag) for cnt, slot, tag in h.sent)]
            if done:
                ids = {id(h) for h in done}
                self._limbo = [h for h in self._limbo if id(h) not in ids]
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
                if self._limbo and self._own:
                    cnt = self._own[-1]
                    seen = cnt.releases()
                    if self.collect() == 0:
                        cnt.await_release(seen, COLLECT_SLICE_S)
                        self.collect()
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
        """Reclaims DEAD holders' tokens in our counter files, frees empty retired ones, reclaims
        dead readers of our holders, drops idle mappings of removed segments."""
        with self._lock:
            own = list(self._own)
            holders = list(self._holders)
        for cnt in own:
            n = cnt.reclaim_dead(self.dir)
            if n:
                with self._lock:
                    self.reclaimed += n
        self.collect()
        with self._lock:
            for cnt in list(self._own[:-1]):
                if cnt.is_retired() and cnt.live() == 0 and not any(c is cnt for h in self._limbo for c, _, _ in h.sent):
                    self._own.remove(cnt)
                    self._seen_releases = -1
                    cnt.file.unlink()
                    cnt.close()
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
                         len(self._own), len(self._segments), len(self._counters), self.shared, self.received,
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
            for cnt in self._own:
                cnt.leave()
                cnt.file.unlink()
                cnt.close()
            self._own.clear()
            self._limbo.clear()
            for entry in self._segments.values():
                entry[0].close()
            self._segments.clear()
        self.allocator.close()
        if self._status is not None:
            self._status.file.unlink()
            self._status.file.close()


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


def _released(cnt, slot, tag):
    """True once the token we handed out is back: the whole word, range tag included, so a word
    some other writer scribbled RELEASED into never frees a block a reader may still use."""
    return cnt.word(slot) == RELEASED | tag << 32
