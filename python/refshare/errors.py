"""The exceptions of refshare, mirroring the Java library's io.refshare exception classes."""


class RefshareError(Exception):
    """Base of every refshare error (Java: RefshareException)."""


class InvalidDataError(RefshareError):
    """Bytes or a file from another process are malformed (Java: InvalidDataException).

    Raised by every decoder and every opener of a shared file for any input it refuses; no
    other exception escapes them for malformed data."""


class QueueClosedError(RefshareError):
    """The stream of a queue has ended and every message was taken (Java: QueueClosedException)."""


class ProducersGoneError(QueueClosedError):
    """The stream ended because every producer of the queue died (Java: ProducersGoneException)."""


class ResourceLimitError(RefshareError):
    """A fixed resource is exhausted: a shared file's (peer entries, rows, slots, held by live
    processes) or this process's or machine's (open files, mappings, memory); nothing was
    consumed on the caller's behalf (Java: ResourceLimitException)."""


class OutOfSharedMemoryError(RefshareError):
    """The shared-memory directory has no room for a new file (Java: OutOfSharedMemoryException)."""


# What a receive can fail with that says nothing about the message (protocol 9.8): a claimed token
# is put back in flight and a queue gives the message back, both for these and only these.
NOT_THE_MESSAGES_FAULT = (ResourceLimitError, MemoryError, KeyboardInterrupt)
