"""refshare for Python: zero-copy tensors in shared memory with cross-process reference
counting, speaking the same protocol as the Java library (docs/protocol.md).

    import refshare
    with refshare.open() as rs:
        with rs.open_queue(name) as q:
            for t in q:
                with t:
                    a = t.numpy()
"""
from .errors import (InvalidDataError, OutOfSharedMemoryError, ProducersGoneError, QueueClosedError,
                     RefshareError, ResourceLimitError)
from .api import Refshare, gc, open
from .tensor import Tensor

__all__ = ["open", "gc", "Refshare", "Tensor", "RefshareError", "InvalidDataError", "QueueClosedError",
           "ProducersGoneError", "ResourceLimitError", "OutOfSharedMemoryError"]
