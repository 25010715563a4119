"""refshare.open() and the Refshare context: the package's entry point."""
import atexit
import logging
import threading
import weakref

from . import shm
from .sharing import Sharing
from .tensor import layout_for

_open_count = {}
_open_lock = threading.Lock()
_open_instances = weakref.WeakSet()
_log = logging.getLogger("refshare")


@atexit.register
def _close_at_exit():
    """An interpreter that exits normally gives back what it holds and removes its files, as if
    every Refshare had been closed (a killed process is the collectors' and the janitor's job)."""
    for rs in list(_open_instances):
        try:
            rs.close()
        except Exception:
            pass


class Refshare:
    """One use of a refshare directory (and prefix) by this process. Close it (or use ``with``)
    to give back everything it holds and remove the files it created."""

    def __init__(self, directory=None, prefix=None, group_access=False):
        self.directory = shm.ShmDirectory(directory, prefix, group_access)
        self._sharing = Sharing(self.directory)
        _sweep_dead_processes_files(self.directory)
        self._closeables = []
        self._closed = False
        with _open_lock:
            key = (self.directory.path, self.directory.prefix)
            _open_count[key] = _open_count.get(key, 0) + 1
            _open_instances.add(self)

    # ---------------------------------------------------------------- tensors

    def allocate(self, dtype, shape):
        """A new tensor in pooled shared memory (contents unspecified), writable."""
        self._check()
        return self._sharing.allocate(layout_for(dtype, shape))

    def from_numpy(self, array):
        """A shared copy of a numpy array (one copy)."""
        import numpy as np
        array = np.asarray(array)
        t = self.allocate(array.dtype, array.shape)
        try:
            if array.size:
                t.numpy()[...] = array
        except BaseException:
            t.close()
            raise
        return t

    def from_torch(self, tensor):
        """A shared copy of a CPU torch tensor (one copy)."""
        src = tensor.detach()
        if src.device.type != "cpu":
            raise ValueError("from_torch takes a CPU tensor (host memory); got one on " + str(src.device))
        t = self.allocate(str(src.dtype), tuple(src.shape))
        try:
            if src.numel():
                t.torch().copy_(src)
        except BaseException:
            t.close()
            raise
        return t

    def share(self, tensor):
        """Descriptor bytes carrying one new reference to ``tensor``, for any transport."""
        self._check()
        return self._sharing.share(tensor)

    def receive(self, data):
        """The Tensor that descriptor bytes ``data`` carry; claims their reference."""
        self._check()
        return self._sharing.receive(data)

    def cancel(self, data):
        """Returns the reference of descriptor bytes that will never be received."""
        self._check()
        return self._sharing.cancel(data)

    def collect(self):
        """Frees blocks whose every reference came back; the number freed."""
        return self._sharing.collect()

    def stats(self):
        return self._sharing.stats()

    # ---------------------------------------------------------------- queues and holders

    def create_queue(self, capacity=64, participants=128):
        from .queue import TensorQueue
        self._check()
        q = TensorQueue.create(self, capacity, participants)
        self._closeables.append(q)
        return q

    def open_queue(self, name):
        from .queue import TensorQueue
        self._check()
        q = TensorQueue.open(self, name)
        self._closeables.append(q)
        return q

    def create_holder(self, slots=64, readers=64):
        from .holder import Holder
        self._check()
        h = Holder.create(self, slots, readers)
        self._closeables.append(h)
        self._sharing.add_holder(h)
        return h

    def open_holder(self, name):
        from .holder import Holder
        self._check()
        h = Holder.open(self, name)
        self._closeables.append(h)
        return h

    def publish(self, holder, tensor):
        """Publishes ``tensor`` as the current version of ``holder`` (same as holder.publish)."""
        return holder.publish(tensor)

    # ---------------------------------------------------------------- life

    def _check(self):
        if self._closed:
            from .errors import RefshareError
            raise RefshareError("this Refshare is closed")

    @property
    def closed(self):
        return self._closed

    def close(self):
        if self._closed:
            return
        self._closed = True
        try:
            for c in reversed(self._closeables):
                try:
                    c.close()
                except Exception:
                    pass
            self._sharing.close()
        finally:
            with _open_lock:
                key = (self.directory.path, self.directory.prefix)
                _open_count[key] -= 1
                last = _open_count[key] == 0
                if last:
                    del _open_count[key]
            if last and self.directory.holds_life_lock() and self.directory.owns_no_file():
                self.directory.release_life_lock()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "Refshare(%r)" % (self.directory,)


def _sweep_dead_processes_files(directory):
    """The janitor's sweep at start-up, as Java's Refshare.open: files left by DEAD processes go
    (what ``refshare.gc`` does). Quiet (a DEBUG/INFO log record, nothing printed by default) and it
    never fails the open: a directory that cannot be listed or a file that cannot be judged only
    means less is swept. Run in the caller's thread (Java uses a background thread): the sweep
    reads only headers and participant tables, and when ``open`` returns the directory is tidy."""
    from . import janitor
    try:
        removed = janitor.sweep(directory)
    except Exception as e:  # noqa: BLE001 (whatever goes wrong, the open stands)
        _log.debug("start-up sweep of %s failed: %s", directory.path, e)
        return
    if removed:
        _log.info("removed %d files left by dead processes in %s", len(removed), directory.path)


def open(directory=None, prefix=None, group_access=False):  # noqa: A001 (the issue's name)
    """Opens refshare in ``directory`` (default /dev/shm) with ``prefix`` (default "refshare"),
    the same defaults as the Java library; ``group_access`` makes files 0660 and accepts files
    of our groups."""
    return Refshare(directory, prefix, group_access)


def gc(directory=None, prefix=None, group_access=False, dry_run=False):
    """Removes the files of ``directory`` whose processes are all DEAD (the janitor, section 13);
    returns the names removed (or, with ``dry_run``, that would be)."""
    from . import janitor
    return janitor.sweep(shm.ShmDirectory(directory, prefix, group_access), dry_run)
