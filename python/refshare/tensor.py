"""Tensors over shared blocks: zero-copy numpy arrays and torch tensors, views, and the
in-process reference count that decides when a block's token goes back."""
import threading
import warnings

import numpy as np

from . import dtypes
from .descriptor import TensorLayout
from .errors import RefshareError


class HeldBlock:
    """A block this process uses: its own (from the allocator) or received (holding one token).
    Counts the Tensors over it; the last close hands it to the owning Sharing."""
    __slots__ = ("sharing", "segment", "offset", "length", "local", "token", "sent", "refs", "_lock", "finisher")

    def __init__(self, sharing, segment, offset, length, local, token=None, finisher=None):
        self.sharing = sharing
        self.segment = segment
        self.offset = offset
        self.length = length
        self.local = local        # an allocator Block, or None when received
        self.token = token        # (CounterFile, slot, tag) of a received block
        self.sent = []            # (CounterFile, slot, range tag) handed out for this block
        self.finisher = finisher  # what giving it back means when neither local nor a token (a holder read)
        self.refs = 0
        self._lock = threading.Lock()

    def retain(self):
        with self._lock:
            if self.refs <= 0:
                raise RefshareError("the block was already given back")
            self.refs += 1

    def drop(self):
        with self._lock:
            self.refs -= 1
            last = self.refs == 0
        if last:
            self.sharing._dropped(self)

    def byte_view(self):
        """The block's bytes as a uint8 array over the mapping (no copy)."""
        return self.segment.file.view[self.offset:self.offset + self.length]


class Tensor:
    """A tensor in shared memory. ``numpy()`` and ``torch()`` are zero-copy; ``close()`` (or
    leaving a ``with`` block) gives this reference back, and the memory lives on until every
    process that holds one gave it back. Arrays obtained before close must not be used after it."""

    def __init__(self, block, layout, writable):
        self._block = block
        self._layout = layout
        self._writable = writable
        self._closed = False
        self._array = None

    # ---------------------------------------------------------------- properties

    @property
    def dtype(self):
        return self._layout.dtype.name

    @property
    def shape(self):
        return self._layout.shape

    @property
    def strides(self):
        """Strides in elements (as torch counts them)."""
        return self._layout.strides

    @property
    def storage_offset(self):
        return self._layout.storage_offset

    @property
    def layout(self):
        return self._layout

    @property
    def nbytes(self):
        return self._layout.element_count() * self._layout.dtype.itemsize

    @property
    def closed(self):
        return self._closed

    def numel(self):
        return self._layout.element_count()

    def _check(self):
        if self._closed:
            raise RefshareError("tensor is closed")
        if self._block.sharing._closed:
            raise RefshareError("the Refshare this tensor belongs to is closed")

    # ---------------------------------------------------------------- zero-copy access

    def numpy(self):
        """A zero-copy ndarray with this tensor's dtype, shape and strides; read-only for a
        received tensor. bfloat16 reads as raw uint16 unless ml_dtypes is installed."""
        self._check()
        if self._array is None:
            lay = self._layout
            size = lay.dtype.itemsize
            if lay.is_contiguous() and not lay.is_empty():
                # the common case, about twice as fast as the general constructor below
                start = self._block.offset + lay.storage_offset * size
                arr = self._block.segment.file.view[start:start + lay.element_count() * size]
                if size != 1 or lay.dtype.numpy != arr.dtype:
                    arr = arr.view(lay.dtype.numpy)
                if len(lay.shape) != 1:
                    arr = arr.reshape(lay.shape)
                if not self._writable:
                    arr.flags.writeable = False
                self._array = arr
                return arr
            arr = np.ndarray(lay.shape, dtype=lay.dtype.numpy, buffer=self._block.byte_view(),
                             offset=lay.storage_offset * size, strides=tuple(s * size for s in lay.strides))
            if not self._writable:
                arr.flags.writeable = False
            self._array = arr
        return self._array

    def torch(self):
        """A zero-copy torch.Tensor over the same memory (torch must be importable)."""
        self._check()
        import torch
        lay = self._layout
        tdtype = getattr(torch, lay.dtype.name)
        span = lay.byte_span()
        if lay.is_empty() or span == 0:
            return torch.empty(lay.shape, dtype=tdtype)
        count = span // lay.dtype.itemsize
        with warnings.catch_warnings():
            # a received block is mapped read-only: torch warns that it cannot mark it so
            warnings.simplefilter("ignore", UserWarning)
            flat = torch.frombuffer(self._block.segment.file.view, dtype=tdtype, count=count,
                                    offset=self._block.offset)
        return flat.as_strided(lay.shape, lay.strides, lay.storage_offset)

    # ---------------------------------------------------------------- views

    def view_of(self, array):
        """A new Tensor (its own reference) for ``array``, a numpy view of this tensor's memory."""
        self._check()
        base = self._block.byte_view().__array_interface__["data"][0]
        size = self._layout.dtype.itemsize
        start = array.__array_interface__["data"][0] - base
        if start < 0 or start % size or any(s < 0 or s % size for s in array.strides):
            raise ValueError("not a view of this tensor's block with non-negative strides of whole elements")
        layout = TensorLayout(self._layout.dtype, array.shape, tuple(s // size for s in array.strides), start // size)
        if layout.byte_span() > self._block.length:
            raise ValueError("view reaches beyond the block")
        self._block.retain()
        return Tensor(self._block, layout, self._writable)

    def __getitem__(self, index):
        return self.view_of(self.numpy()[index])

    def transpose(self, *axes):
        return self.view_of(self.numpy().transpose(*axes))

    @property
    def T(self):
        return self.transpose()

    def reshape(self, *shape):
        a = self.numpy()
        r = a.reshape(*shape)
        if not np.shares_memory(r, a):
            raise ValueError("this reshape needs a copy; refshare views are zero-copy only")
        return self.view_of(r)

    # ---------------------------------------------------------------- life

    def close(self):
        if not self._closed:
            self._closed = True
            self._array = None
            self._block.drop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if not self._closed:
                self.close()
        except Exception:
            pass

    def __repr__(self):
        return "refshare.Tensor(%s, shape=%s, strides=%s%s)" % (self.dtype, list(self.shape), list(self.strides),
                                                              ", closed" if self._closed else "")


def layout_for(dtype, shape):
    return TensorLayout(dtypes.of(dtype), tuple(int(d) for d in shape))
