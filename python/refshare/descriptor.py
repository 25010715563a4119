"""The descriptor: the bytes a message carries to share one block (docs/protocol.md section 7;
Java: io.refshare.wire.Descriptor and DescriptorCodec).

Decoding is strict because the bytes come from another process: ``decode`` raises
InvalidDataError, and nothing else, for every input it refuses, and accepts exactly what the
Java decoder accepts, so ``encode(decode(b)) == b`` for every ``b`` that decodes.
"""
import re
import struct
import zlib

from . import dtypes
from .errors import InvalidDataError

MAGIC = b"RFSD"
VERSION = 2
HEADER_BYTES = 72
MAX_ENCODED_BYTES = 1024
FLAG_TENSOR = 1
FLAG_EVENT = 2
FLAG_MEMORY = 4
KNOWN_FLAGS = FLAG_TENSOR | FLAG_EVENT | FLAG_MEMORY
HANDLE_BYTES = 64
MAX_NAME_LENGTH = 128
MAX_RANK = 16
BACKEND_HOST = 1
BACKEND_CUDA = 2
_BACKENDS = {BACKEND_HOST: "HOST", BACKEND_CUDA: "CUDA"}

_HEADER = struct.Struct("<4sHHIBBBBB3siqqqqqq")
_I64_MAX = (1 << 63) - 1
_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}\Z")


class TensorLayout:
    """How a block is read as a tensor: dtype, shape, strides and storage offset, both in
    elements and relative to the block (as in PyTorch). Sane by construction (section 7.4):
    nothing negative, rank <= 16, and no 64-bit overflow anywhere; ValueError otherwise."""
    __slots__ = ("dtype", "shape", "strides", "storage_offset", "_count", "_span", "_contiguous")

    def __init__(self, dtype, shape, strides=None, storage_offset=0):
        self.dtype = dtype if isinstance(dtype, dtypes.DType) else dtypes.of(dtype)
        self.shape = tuple(map(int, shape))
        self.strides = contiguous_strides(self.shape) if strides is None else tuple(map(int, strides))
        self.storage_offset = int(storage_offset)
        if len(self.shape) > MAX_RANK:
            raise ValueError("rank %d exceeds the maximum of %d" % (len(self.shape), MAX_RANK))
        if len(self.strides) != len(self.shape):
            raise ValueError("shape has rank %d but strides has %d entries" % (len(self.shape), len(self.strides)))
        if self.storage_offset < 0:
            raise ValueError("storage offset is negative: %d" % self.storage_offset)
        count = 1
        for i, (d, s) in enumerate(zip(self.shape, self.strides)):
            if d < 0:
                raise ValueError("shape[%d] is negative: %d" % (i, d))
            if s < 0:
                raise ValueError("strides[%d] is negative: %d (negative strides are not supported)" % (i, s))
            count *= d if d > 1 else 1
        if count > _I64_MAX:
            raise ValueError("element count of shape %s overflows 64 bits" % (list(self.shape),))
        last = self._last_index()
        if last > _I64_MAX or (last + 1) * self.dtype.itemsize > _I64_MAX:
            raise ValueError("addressed range of shape %s, strides %s, storage offset %d overflows 64 bits"
                             % (list(self.shape), list(self.strides), self.storage_offset))
        # a layout never changes: what the hot paths ask of it is worked out once, here
        empty = 0 in self.shape
        self._count = 0 if empty else count
        self._span = (self.storage_offset if empty else last + 1) * self.dtype.itemsize
        self._contiguous = empty or self._dense()

    def _last_index(self):
        last = self.storage_offset
        for d, s in zip(self.shape, self.strides):
            last += max(d - 1, 0) * s
            if last > _I64_MAX:
                return last
        return last

    def _dense(self):
        expected = 1
        for d, s in zip(reversed(self.shape), reversed(self.strides)):
            if d != 1 and s != expected:
                return False
            expected *= d
        return True

    @property
    def rank(self):
        return len(self.shape)

    def is_empty(self):
        return self._count == 0

    def element_count(self):
        return self._count

    def byte_span(self):
        """Bytes of the block the layout needs (section 7.4)."""
        return self._span

    def is_contiguous(self):
        return self._contiguous

    def __eq__(self, other):
        return (isinstance(other, TensorLayout) and self.dtype is other.dtype and self.shape == other.shape
                and self.strides == other.strides and self.storage_offset == other.storage_offset)

    def __hash__(self):
        return hash((self.dtype.code, self.shape, self.strides, self.storage_offset))

    def __repr__(self):
        return "%s%s strides %s @%d" % (self.dtype.name, list(self.shape), list(self.strides), self.storage_offset)


def contiguous_strides(shape):
    strides = [0] * len(shape)
    step = 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = step
        step *= max(shape[i], 1)
    return tuple(strides)


def _name_problem(name):
    if _NAME.match(name):
        return None
    if not name:
        return "is empty"
    if len(name) > MAX_NAME_LENGTH:
        return "is %d characters long, at most %d are allowed" % (len(name), MAX_NAME_LENGTH)
    if "/" in name or "\\" in name:
        return "contains a path separator"
    if ".." in name:
        return "contains '..'"
    for i, c in enumerate(name):
        if not (c.isascii() and (c.isalnum() or c in "_-")):
            return "contains character %r at index %d (allowed: A-Z a-z 0-9 _ -)" % (c, i)
    return "is not a valid name"


class Descriptor:
    """What a message carries to share one block; consistent by construction (ValueError
    otherwise), so that every Descriptor encodes and decodes back to itself."""
    FIELDS = ("backend", "segment_name", "segment_size", "offset", "length", "memory_handle", "counter_file_name",
              "slot", "event_handle", "tensor", "sender_pid", "sender_start_ticks")
    __slots__ = FIELDS + ("_tag",)

    def __init__(self, backend, segment_name, segment_size, offset, length, counter_file_name, slot,
                 tensor=None, sender_pid=1, sender_start_ticks=0, memory_handle=b"", event_handle=b""):
        self.backend = backend
        self.segment_name = segment_name
        self.segment_size = segment_size
        self.offset = offset
        self.length = length
        self.memory_handle = bytes(memory_handle)
        self.counter_file_name = counter_file_name
        self.slot = slot
        self.event_handle = bytes(event_handle)
        self.tensor = tensor
        self.sender_pid = sender_pid
        self.sender_start_ticks = sender_start_ticks
        self._tag = None
        if backend not in _BACKENDS:
            raise ValueError("unknown backend %r" % (backend,))
        for what, name in (("segment name", segment_name), ("counter file name", counter_file_name)):
            problem = _name_problem(name)
            if problem:
                raise ValueError("%s %r %s" % (what, name[:80], problem))
        if segment_size <= 0:
            raise ValueError("segment size must be positive: %d" % segment_size)
        if offset < 0:
            raise ValueError("offset is negative: %d" % offset)
        if length < 0:
            raise ValueError("length is negative: %d" % length)
        if offset > segment_size or length > segment_size - offset:
            raise ValueError("block [offset %d, length %d) does not lie within the segment size %d"
                             % (offset, length, segment_size))
        if slot < 0:
            raise ValueError("slot is negative: %d" % slot)
        if backend == BACKEND_CUDA and len(self.memory_handle) != HANDLE_BYTES:
            raise ValueError("a CUDA block needs a %d-byte memory handle, was %d bytes"
                             % (HANDLE_BYTES, len(self.memory_handle)))
        if backend != BACKEND_CUDA and self.memory_handle:
            raise ValueError("memory handle on a HOST block: only CUDA blocks carry one")
        if self.event_handle and len(self.event_handle) != HANDLE_BYTES:
            raise ValueError("event handle must be empty or %d bytes, was %d" % (HANDLE_BYTES, len(self.event_handle)))
        if self.event_handle and backend != BACKEND_CUDA:
            raise ValueError("event handle on a HOST block: only CUDA blocks carry one")
        if tensor is not None and tensor.byte_span() > length:
            raise ValueError("tensor %r needs %d bytes but the block length is %d" % (tensor, tensor.byte_span(), length))
        if sender_pid <= 0:
            raise ValueError("sender pid must be positive: %d" % sender_pid)
        if sender_start_ticks < 0:
            raise ValueError("sender start ticks is negative: %d" % sender_start_ticks)

    def with_tensor(self, tensor):
        return Descriptor(self.backend, self.segment_name, self.segment_size, self.offset, self.length,
                          self.counter_file_name, self.slot, tensor, self.sender_pid, self.sender_start_ticks,
                          self.memory_handle, self.event_handle)

    def with_slot(self, slot):
        """This descriptor for another token of the same block (``slot`` >= 0, checked by the caller)."""
        d = object.__new__(Descriptor)
        d.backend, d.segment_name, d.segment_size = self.backend, self.segment_name, self.segment_size
        d.offset, d.length, d.memory_handle = self.offset, self.length, self.memory_handle
        d.counter_file_name, d.slot, d.event_handle = self.counter_file_name, slot, self.event_handle
        d.tensor, d.sender_pid, d.sender_start_ticks = self.tensor, self.sender_pid, self.sender_start_ticks
        d._tag = self.range_tag()
        return d

    def range_tag(self):
        t = self._tag
        if t is None:
            t = self._tag = range_tag(self.offset, self.length, self.segment_name)
        return t

    def __eq__(self, other):
        return isinstance(other, Descriptor) and all(getattr(self, f) == getattr(other, f) for f in self.FIELDS)

    def __hash__(self):
        return hash((self.segment_name, self.offset, self.length, self.counter_file_name, self.slot))

    def __repr__(self):
        return "Descriptor[%s %s (%d bytes) @%d+%d, counter %s#%d, %s, from pid %d (start %d)]" % (
            _BACKENDS[self.backend], self.segment_name, self.segment_size, self.offset, self.length,
            self.counter_file_name, self.slot, "raw" if self.tensor is None else repr(self.tensor),
            self.sender_pid, self.sender_start_ticks)


def range_tag(offset, length, segment_name):
    """CRC-32 binding a token to its block (section 8.3)."""
    return zlib.crc32(struct.pack("<qq", offset, length) + segment_name.encode("ascii"))


def encoded_size(d):
    size = HEADER_BYTES + len(d.segment_name) + len(d.counter_file_name)
    if d.backend == BACKEND_CUDA:
        size += HANDLE_BYTES
    if d.event_handle:
        size += HANDLE_BYTES
    if d.tensor is not None:
        size += 16 * d.tensor.rank
    return size


def encode(d):
    """The encoding of ``d`` (bytes)."""
    t = d.tensor
    flags = (FLAG_TENSOR if t is not None else 0) | (FLAG_EVENT if d.event_handle else 0) | \
        (FLAG_MEMORY if d.backend == BACKEND_CUDA else 0)
    parts = [_HEADER.pack(MAGIC, VERSION, flags, encoded_size(d), d.backend, t.dtype.code if t else 0,
                          t.rank if t else 0, len(d.segment_name), len(d.counter_file_name), b"\0\0\0", d.slot,
                          d.segment_size, d.offset, d.length, t.storage_offset if t else 0, d.sender_pid,
                          d.sender_start_ticks)]
    if d.backend == BACKEND_CUDA:
        parts.append(d.memory_handle)
    if d.event_handle:
        parts.append(d.event_handle)
    if t is not None:
        parts.append(struct.pack("<%dq%dq" % (t.rank, t.rank), *t.shape, *t.strides))
    parts.append(d.segment_name.encode("ascii"))
    parts.append(d.counter_file_name.encode("ascii"))
    return b"".join(parts)


def _bad(message):
    return InvalidDataError("malformed descriptor: " + message)


def decode(data, names=None):
    """Decodes exactly ``data`` (bytes-like) into a Descriptor.

    ``names``, if given, is a predicate both file names must also pass (for example the name
    shape of one refshare directory). Raises InvalidDataError, and nothing else, for any input
    that is not exactly one valid encoding.
    """
    try:
        size = len(data)
    except TypeError:
        raise InvalidDataError("malformed descriptor: not a bytes-like object: " + type(data).__name__)
    if size > MAX_ENCODED_BYTES:
        raise _bad("%d bytes is larger than the maximum of %d" % (size, MAX_ENCODED_BYTES))
    try:
        b = bytes(data)  # one private copy: a peer rewriting shared memory cannot race the checks
    except (TypeError, ValueError, BufferError) as e:
        raise InvalidDataError("malformed descriptor: unreadable input: %s" % e)
    if size < 4:
        raise _bad("truncated: %d bytes, not even the 4-byte magic" % size)
    if b[:4] != MAGIC:
        raise _bad("wrong magic 0x%08X (expected 0x%08X, \"RFSD\"): not a refshare descriptor"
                   % (struct.unpack_from("<I", b)[0], struct.unpack("<I", MAGIC)[0]))
    if size < HEADER_BYTES:
        raise _bad("truncated: %d bytes, the fixed header alone is %d" % (size, HEADER_BYTES))
    (_, version, flags, total, backend, code, rank, seg_len, cnt_len, reserved, slot, segment_size, offset, length,
     storage_offset, sender_pid, sender_start) = _HEADER.unpack_from(b)
    if version != VERSION:
        raise _bad("unsupported format version %d (this reader understands %d)" % (version, VERSION))
    if flags & ~KNOWN_FLAGS:
        raise _bad("unknown flags 0x%04X set (known: 0x%04X)" % (flags & ~KNOWN_FLAGS, KNOWN_FLAGS))
    if total > size:
        raise _bad("truncated: total length says %d bytes, only %d given" % (total, size))
    if total < size:
        raise _bad("trailing bytes: %d bytes given, total length says %d" % (size, total))
    has_tensor = bool(flags & FLAG_TENSOR)
    has_event = bool(flags & FLAG_EVENT)
    has_memory = bool(flags & FLAG_MEMORY)
    if backend not in _BACKENDS:
        raise _bad("unknown backend code %d (known: 1=HOST, 2=CUDA)" % backend)
    if has_event and backend != BACKEND_CUDA:
        raise _bad("event handle flag set on a HOST descriptor: only CUDA blocks carry one")
    if has_memory != (backend == BACKEND_CUDA):
        raise _bad("memory handle flag set on a HOST descriptor: only CUDA blocks carry one" if has_memory
                   else "CUDA descriptor without the memory handle flag: a CUDA block must name its allocation")
    dtype = None
    if has_tensor:
        dtype = dtypes.BY_CODE.get(code)
        if dtype is None:
            raise _bad("unknown dtype code %d" % code)
        if rank > MAX_RANK:
            raise _bad("tensor rank %d exceeds the maximum of %d" % (rank, MAX_RANK))
    elif code or rank or storage_offset:
        raise _bad("tensor dtype/rank/storage offset set (%d/%d/%d) without the tensor flag"
                   % (code, rank, storage_offset))
    for what, n in (("segment name", seg_len), ("counter file name", cnt_len)):
        if n == 0:
            raise _bad(what + " length is 0")
        if n > MAX_NAME_LENGTH:
            raise _bad("%s length %d exceeds the maximum of %d" % (what, n, MAX_NAME_LENGTH))
    for i, r in enumerate(reserved):
        if r:
            raise _bad("reserved byte at offset %d is 0x%02X, must be 0" % (17 + i, r))
    needed = HEADER_BYTES + (HANDLE_BYTES if has_memory else 0) + (HANDLE_BYTES if has_event else 0) + \
        (16 * rank if has_tensor else 0) + seg_len + cnt_len
    if needed != total:
        raise _bad("total length says %d bytes but the fields it announces take %d" % (total, needed))
    if slot < 0:
        raise _bad("slot is negative: %d" % slot)
    at = HEADER_BYTES
    memory = b""
    event = b""
    if has_memory:
        memory = b[at:at + HANDLE_BYTES]
        at += HANDLE_BYTES
    if has_event:
        event = b[at:at + HANDLE_BYTES]
        at += HANDLE_BYTES
    tensor = None
    if has_tensor:
        dims = struct.unpack_from("<%dq" % (2 * rank), b, at)
        at += 16 * rank
        try:
            tensor = TensorLayout(dtype, dims[:rank], dims[rank:], storage_offset)
        except ValueError as e:
            raise InvalidDataError("malformed descriptor: tensor: %s" % e)
    seg_name = _ascii(b, at, seg_len, "segment name")
    at += seg_len
    cnt_name = _ascii(b, at, cnt_len, "counter file name")
    try:
        d = Descriptor(backend, seg_name, segment_size, offset, length, cnt_name, slot, tensor, sender_pid,
                       sender_start, memory, event)
    except ValueError as e:
        raise InvalidDataError("malformed descriptor: %s" % e)
    if names is not None:
        for what, name in (("segment name", seg_name), ("counter file name", cnt_name)):
            if not names(name):
                raise _bad("%s %r is refused by the name check (not a file name of this refshare directory)"
                           % (what, name))
    return d


class Decoder:
    """``decode`` for one receiver, remembering what it decoded. A process receives tokens of the
    same few blocks again and again (a pool reuses its blocks), and their descriptors differ only
    in the slot: an entry is keyed by the exact bytes with the slot left out, so a hit returns
    exactly what ``decode`` would, without parsing and checking it all again."""
    SLOT = struct.Struct("<i")
    SLOT_AT = 20

    def __init__(self, names=None, entries=1024):
        self._names = names
        self._entries = entries
        self._seen = {}

    def decode(self, data):
        if not isinstance(data, (bytes, bytearray, memoryview)):
            return decode(data, self._names)  # its checks and errors, whatever ``data`` is
        b = bytes(data)  # one private copy: a peer rewriting shared memory cannot race the checks
        if len(b) < HEADER_BYTES:
            return decode(b, self._names)
        key = b[:self.SLOT_AT] + b[self.SLOT_AT + 4:]
        known = self._seen.get(key)
        if known is not None:
            slot = self.SLOT.unpack_from(b, self.SLOT_AT)[0]
            if slot >= 0:
                return known.with_slot(slot)
        d = decode(b, self._names)
        if len(self._seen) >= self._entries:
            self._seen.clear()  # a bounded memo: senders' blocks change slowly
        self._seen[key] = d
        return d


def _ascii(b, at, n, what):
    raw = b[at:at + n]
    if raw.isascii():
        return raw.decode("ascii")
    for i, c in enumerate(raw):
        if c >= 0x80:
            raise _bad("%s contains non-ASCII byte 0x%02X at index %d" % (what, c, i))
    return raw.decode("ascii")
