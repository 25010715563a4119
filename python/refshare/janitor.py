"""The janitor: removes files every process of which is DEAD (docs/protocol.md section 13;
Java: io.refshare.inspect.Janitor). UNKNOWN keeps a file; a queue that still holds messages
keeps the segments and counter files they name while it has a participant that is not DEAD."""
import mmap
import os
import stat
import struct
import time

from . import descriptor as dc
from . import shm
from .errors import InvalidDataError, RefshareError

UNOWNED_GRACE_S = 60.0
M64 = (1 << 64) - 1


class _ReadOnly:
    """A read-only mapping of a file opened without following links or blocking."""

    def __init__(self, directory, name):
        path = os.path.join(directory.path, name)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or not directory.owned_by_us(st.st_uid, st.st_gid):
                raise PermissionError("not a regular file of ours: " + path)
            self.stat = st
            self.header = os.pread(fd, shm.HEADER_LENGTH, 0)
            self.mm = mmap.mmap(fd, st.st_size, mmap.MAP_SHARED, mmap.PROT_READ) if st.st_size else None
        finally:
            os.close(fd)

    def u32(self, off):
        return struct.unpack_from("<I", self.mm, off)[0]

    def i64(self, off):
        return struct.unpack_from("<q", self.mm, off)[0]

    def close(self):
        if self.mm is not None:
            self.mm.close()


def _identities(directory, name, f, kind):
    """Every process a file belongs to besides its owner, and names its queued messages keep."""
    ids, keep = set(), set()
    if kind == "cnt":
        slots, peers = f.u32(32), f.u32(36)
        if f.stat.st_size != 128 + 16 * peers + 8 * slots:
            raise InvalidDataError("counter file size does not match its header")
        for i in range(peers):
            pid, start = f.i64(128 + 16 * i), f.i64(136 + 16 * i)
            if pid > 0 and start > 0:
                ids.add(shm.ProcessIdentity(pid, start))
            elif pid > 0 and not directory.pid_is_dead(pid):
                ids.add(None)  # left registering by a process not known dead
    elif kind == "q":
        cap, maxm, cl, parts = f.u32(32), f.u32(36), f.u32(40), f.u32(44)
        cells = 640 + 64 * parts
        if cl < 16 or f.stat.st_size < cells + cap * cl:
            raise InvalidDataError("queue size does not match its header")
        for i in range(parts):
            w = f.i64(640 + 64 * i) & M64
            if w & ((1 << 22) - 1):
                ids.add(shm.ProcessIdentity.unpacked(w))
        for c in range(cap):
            w = f.i64(cells + c * cl) & M64
            if (w >> 46) & 3 == 2:  # FULL: its message still names files
                n = f.u32(cells + c * cl + 8)
                if 1 <= n <= min(maxm, cl - 16):
                    try:
                        d = dc.decode(f.mm[cells + c * cl + 16:cells + c * cl + 16 + n])
                        keep.update((d.segment_name, d.counter_file_name))
                    except InvalidDataError:
                        pass
    elif kind == "hold":
        slots, readers, rlen = f.u32(32), f.u32(36), f.u32(44)
        if rlen < 8 or f.stat.st_size < 192 + readers * rlen:
            raise InvalidDataError("holder size does not match its header")
        for r in range(readers):
            w = f.i64(192 + r * rlen) & M64
            if w & ((1 << 22) - 1):
                ids.add(shm.ProcessIdentity.unpacked(w))
    return ids, keep


def _dead_with_life_files(directory):
    """The identities whose life files read DEAD now (by the names' last 32 hex digits)."""
    dead = set()
    for name in _list(directory):
        if directory.kind_of(name) == "life":
            try:
                ident = shm.ProcessIdentity(int(name[-32:-16], 16), int(name[-16:], 16))
            except ValueError:
                continue
            if directory.verdict(ident) == shm.DEAD:
                dead.add(ident)
    return dead


def _list(directory):
    try:
        return sorted(os.listdir(directory.path))
    except OSError as e:
        raise RefshareError("cannot list %s: %s" % (directory.path, e))


def sweep(directory, dry_run=False, _before_life_files=None):
    """One pass over ``directory`` (a ShmDirectory); the names removed (or that would be).

    Only a process DEAD before the listing loses its life file here: one alive then may register
    in a file after it was read and die before the life files are judged (section 13); its life
    file waits for the next sweep. ``_before_life_files`` runs between the passes, for tests."""
    dead_before_listing = _dead_with_life_files(directory)
    names = _list(directory)
    files = {}      # name -> (kind, owner, others)
    kept = set()    # names queued messages keep
    for name in names:
        kind = directory.kind_of(name)
        if kind is None:
            continue
        try:
            f = _ReadOnly(directory, name)
        except OSError:
            continue
        try:
            try:
                h = shm.parse_header(f.header, name)
            except InvalidDataError:
                continue  # an impossible owner: damaged, left to a person
            if h is None:
                if time.time() - f.stat.st_mtime >= UNOWNED_GRACE_S:
                    files[name] = (kind, None, set(), set())
                continue
            owner = h[3]
            if kind == "life":
                files[name] = (kind, owner, set(), set())
                continue
            try:
                others, keep = _identities(directory, name, f, kind) if f.mm is not None else (set(), set())
            except (InvalidDataError, struct.error, ValueError):
                others, keep = set(), set()  # damage: judged by its owner alone
            files[name] = (kind, owner, others, keep)
        finally:
            f.close()
    verdicts = {}

    def dead(ident):
        if ident is None:
            return False
        if ident not in verdicts:
            verdicts[ident] = directory.verdict(ident)
        return verdicts[ident] == shm.DEAD

    for name, (kind, owner, others, keep) in files.items():
        if kind == "q" and not all(dead(i) for i in others):
            kept.update(keep)
    removed = []
    for name, (kind, owner, others, keep) in files.items():
        if kind == "life":
            continue
        if owner is not None and (not dead(owner) or not all(dead(i) for i in others)):
            continue
        if name in kept:
            continue
        if dry_run or _unlink(os.path.join(directory.path, name)):
            removed.append(name)
    gone = set(removed)
    named = set()  # identities still named by a file that stays
    for name, (kind, owner, others, _) in files.items():
        if kind != "life" and name not in gone:
            named.add(owner)
            named.update(others)
    if _before_life_files is not None:
        _before_life_files()
    for name, (kind, owner, _, _) in files.items():
        if kind == "life" and owner in dead_before_listing and owner not in named and dead(owner):
            if dry_run or directory.remove_life_file_if_dead(owner):
                removed.append(name)
    return removed


def _unlink(path):
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False  # a concurrent sweep removed it first: not ours to count
