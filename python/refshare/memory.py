"""Host segments and the pooled allocator a Python producer carves blocks from
(docs/protocol.md section 6.1; Java: io.refshare.memory.HostBackend, CachingAllocator).

A segment file is a 4096-byte header page (the common header, magic RSSEGMT1) followed by the
memory. Block offsets count from byte 0 of the file, so they are at least 4096, and every block
starts at a multiple of 512. The bookkeeping of which bytes are in use is private to the owner:
blocks up to 1 MiB come from 4 MiB slab segments of one power-of-two size class each; larger
blocks get a segment of their own (rounded up to 2 MiB), cached by size for reuse.
"""
import mmap
import threading

from . import native, shm
from .errors import InvalidDataError, OutOfSharedMemoryError

MAGIC = 0x31544D4745535352  # "RSSEGMT1"
VERSION = 1
HEADER_BYTES = 4096
MIN_BLOCK = 512
MAX_SMALL = 1 << 20
SLAB_BYTES = 4 << 20
LARGE_ROUND = 2 << 20
_CACHED_LARGE = 8


class Segment:
    """A segment file mapped by this process (created here, or opened as a receiver)."""

    def __init__(self, f):
        self.file = f
        self.name = f.name
        self.size = f.size  # of the whole file, as descriptors carry it
        self.addr = f.addr

    @classmethod
    def create(cls, directory, memory_bytes):
        f = directory.create("seg", HEADER_BYTES + memory_bytes)
        me = shm.current()
        f.write(8, VERSION.to_bytes(4, "little") + HEADER_BYTES.to_bytes(4, "little"))
        f.store64(16, me.pid)
        f.store64(24, me.start)
        f.store64(0, MAGIC)
        native.prefault(f.addr + HEADER_BYTES, memory_bytes, mmap.PAGESIZE)
        return cls(f)

    @classmethod
    def open(cls, directory, name, size):
        """Maps a producer's segment for reading; its size must be exactly ``size``."""
        f = directory.open(name, "seg", HEADER_BYTES, writable=False)
        try:
            if f.size != size:
                raise InvalidDataError("segment %s is %d bytes, the descriptor says %d" % (name, f.size, size))
            if f.head(0, 8) != MAGIC or f.head(8, 4) != VERSION:
                raise InvalidDataError("segment %s is not a refshare host segment of version %d" % (name, VERSION))
        except BaseException:
            f.close()
            raise
        return cls(f)

    def close(self):
        self.file.close()

    def free(self):
        self.file.unlink()
        self.file.close()


class Block:
    """A byte range of a segment: [offset, offset + length) of the file."""
    __slots__ = ("segment", "offset", "length", "size_class")

    def __init__(self, segment, offset, length, size_class):
        self.segment = segment
        self.offset = offset
        self.length = length
        self.size_class = size_class


class Allocator:
    """Pooled blocks of this process's own segments. Thread-safe."""

    def __init__(self, directory, limit_bytes=None):
        self._dir = directory
        # reentrant: a Tensor collected by the garbage collector while this thread allocates
        # (inside the lock) frees its block from within that very allocation
        self._lock = threading.RLock()
        self._free = {}          # size class -> [Block]
        self._large = {}         # segment memory size -> [Segment] idle
        self._segments = []      # every segment alive
        self.limit_bytes = limit_bytes
        self.segment_bytes = 0
        self.blocks_in_use = 0
        self.bytes_in_use = 0

    def allocate(self, nbytes, on_miss=None):
        """A block of at least ``nbytes`` (at least 1); ``on_miss`` runs once before growing
        (the limbo's collection, which may free blocks)."""
        nbytes = max(int(nbytes), 1)
        for attempt in (0, 1):
            with self._lock:
                b = self._take(nbytes)
                if b is not None:
                    return b
            if attempt == 0 and on_miss is not None:
                on_miss()
        with self._lock:
            b = self._take(nbytes)
            if b is not None:
                return b
            return self._grow(nbytes)

    def _take(self, nbytes):
        if nbytes <= MAX_SMALL:
            cls = max(MIN_BLOCK, 1 << (nbytes - 1).bit_length())
            free = self._free.get(cls)
            if free:
                b = free.pop()
                self._used(b, +1)
                return b
            return None
        size = -(-nbytes // LARGE_ROUND) * LARGE_ROUND
        idle = self._large.get(size)
        if idle:
            seg = idle.pop()
            b = Block(seg, HEADER_BYTES, size, -size)
            self._used(b, +1)
            return b
        return None

    def _grow(self, nbytes):
        if nbytes <= MAX_SMALL:
            cls = max(MIN_BLOCK, 1 << (nbytes - 1).bit_length())
            seg = self._new_segment(SLAB_BYTES)
            free = self._free.setdefault(cls, [])
            for off in range(HEADER_BYTES + SLAB_BYTES - cls, HEADER_BYTES - 1, -cls):
                free.append(Block(seg, off, cls, cls))
            b = free.pop()
        else:
            size = -(-nbytes // LARGE_ROUND) * LARGE_ROUND
            seg = self._new_segment(size)
            b = Block(seg, HEADER_BYTES, size, -size)
        self._used(b, +1)
        return b

    def _new_segment(self, size):
        if self.limit_bytes is not None and self.segment_bytes + size > self.limit_bytes:
            raise OutOfSharedMemoryError("allocating %d more bytes would pass this process's limit of %d"
                                         % (size, self.limit_bytes))
        seg = Segment.create(self._dir, size)
        self._segments.append(seg)
        self.segment_bytes += size
        return seg

    def _used(self, b, sign):
        self.blocks_in_use += sign
        self.bytes_in_use += sign * b.length

    def free(self, b):
        with self._lock:
            self._used(b, -1)
            if b.size_class > 0:
                self._free.setdefault(b.size_class, []).append(b)
                return
            idle = self._large.setdefault(-b.size_class, [])
            if len(idle) < _CACHED_LARGE:
                idle.append(b.segment)
            else:
                self._segments.remove(b.segment)
                self.segment_bytes -= b.segment.size - HEADER_BYTES
                b.segment.free()

    def trim(self):
        """Frees cached large segments nobody uses."""
        with self._lock:
            for idle in self._large.values():
                for seg in idle:
                    self._segments.remove(seg)
                    self.segment_bytes -= seg.size - HEADER_BYTES
                    seg.free()
                idle.clear()

    def close(self):
        """Unlinks and unmaps every segment (mappings still used by arrays live on with them)."""
        with self._lock:
            for seg in self._segments:
                seg.free()
            self._segments.clear()
            self._free.clear()
            self._large.clear()
            self.segment_bytes = 0
