"""The shared-memory directory: names, creation, opening, ownership, process identity and the
liveness verdict from life files (docs/protocol.md sections 2-5; Java: io.refshare.shm)."""
import errno
import fcntl
import mmap
import os
import re
import secrets
import stat
import struct
import threading

import numpy as np

from . import native
from .errors import InvalidDataError, OutOfSharedMemoryError, RefshareError, ResourceLimitError

DEFAULT_DIRECTORY = "/dev/shm"
DEFAULT_PREFIX = "refshare"
OWNER_ONLY = 0o600
OWNER_AND_GROUP = 0o660
HEADER_LENGTH = 32
KINDS = ("seg", "cnt", "q", "hold", "proc", "life")
LIFE_MAGIC = 0x31304546494C5352  # "RSLIFE01"
# what each magic (section 4) names, for tools
KIND_BY_MAGIC = {0x31544D4745535352: "segment", 0x31544E554F435352: "counter", 0x3145554555515352: "queue",
                 0x3152444C4F485352: "holder", 0x3153544154535352: "status", LIFE_MAGIC: "life"}
_PREFIX = re.compile(r"[A-Za-z0-9_]{1,32}\Z")
_HEADER = struct.Struct("<QIIqq")
_MAX_PID = (1 << 22) - 1
_LIFE_ATTEMPTS = 100

ALIVE = "ALIVE"
DEAD = "DEAD"
UNKNOWN = "UNKNOWN"


class ProcessIdentity(tuple):
    """(pid, start ticks): one process for the lifetime of the host (section 3)."""
    __slots__ = ()

    def __new__(cls, pid, start):
        return tuple.__new__(cls, (int(pid), int(start)))

    @property
    def pid(self):
        return self[0]

    @property
    def start(self):
        return self[1]

    def packed(self):
        """The one-word form queue entries and holder rows store (section 3)."""
        return self[0] | self[1] << 22

    @staticmethod
    def unpacked(word):
        word &= ~(1 << 63)
        return ProcessIdentity(word & _MAX_PID, word >> 22)

    def __repr__(self):
        return "pid %d (start %d)" % self


def _start_ticks(pid):
    """Field 22 of /proc/<pid>/stat, or None; the command name may hold spaces and ')'."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            line = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = line[line.rindex(")") + 2:].split()
    return int(fields[19])


_current = None


def current():
    """This process's identity (re-read after a fork)."""
    global _current
    pid = os.getpid()
    if _current is None or _current.pid != pid:
        start = _start_ticks(pid)
        if start is None:
            raise RefshareError("cannot read /proc/self/stat: refshare needs Linux /proc")
        if pid > _MAX_PID or start < 1 or start >= 1 << 41:
            raise RefshareError("this process's identity %d/%d cannot be recorded (section 3 limits)" % (pid, start))
        _current = ProcessIdentity(pid, start)
    return _current


def proc_identity(pid):
    """The live process with this pid in our namespace, or None."""
    if pid <= 0:
        return None
    start = _start_ticks(pid)
    return None if start is None else ProcessIdentity(pid, start)


def owner_header(identity, magic=0, version=0, header_length=0):
    return _HEADER.pack(magic, version, header_length, identity.pid, identity.start)


def parse_header(raw, where):
    """(magic, version, header length, owner identity) of a common header, or None when no
    owner was written yet (shorter than 32 bytes or pid 0, section 4)."""
    if len(raw) < HEADER_LENGTH:
        return None
    magic, version, hlen, pid, start = _HEADER.unpack_from(raw)
    if pid == 0:
        return None
    if pid < 0 or pid > _MAX_PID or start < 0:
        raise InvalidDataError("%s names an impossible owner pid %d" % (where, pid))
    return magic, version, hlen, ProcessIdentity(pid, start)


# life locks this process holds: (directory, prefix) -> fd; a child of fork holds none
_life_locks = {}
_life_mutex = threading.Lock()
# files that keep a record of this process until it exits: (directory, prefix) -> names
_lasting_records = {}


def _after_fork():
    for fd in _life_locks.values():
        try:
            os.close(fd)  # the parent's open file description (and lock) lives on in the parent
        except OSError:
            pass
    _life_locks.clear()
    _lasting_records.clear()


os.register_at_fork(after_in_child=_after_fork)


class MappedFile:
    """One refshare file mapped whole; word accessors go through the native atomics."""

    def __init__(self, name, path, size, mm, created, writable=True, header=None):
        self.name = name
        self.path = path
        self.size = size
        self.created = created
        self._mm = mm
        # of a file opened from outside: its first bytes, read before it was mapped (see head)
        self._header = header
        # an export of the mapping: gives its address, and arrays sliced from it keep it mapped;
        # read-only exactly when the mapping is
        self._view = np.frombuffer(mm, dtype=np.uint8)
        self.addr = self._view.__array_interface__["data"][0]
        self.closed = False

    @property
    def view(self):
        return self._view

    def buffer(self):
        return self._mm

    def check(self, offset, width):
        if offset < 0 or offset + width > self.size:
            raise InvalidDataError("%s: offset %d is outside the %d-byte file" % (self.path, offset, self.size))

    def load64(self, off):
        return native.load64(self.addr + off)

    def store64(self, off, v):
        native.store64(self.addr + off, v)

    def cas64(self, off, expected, desired):
        return native.cas64(self.addr + off, _s64(expected), _s64(desired)) != 0

    def fetch_add64(self, off, d):
        return native.fetch_add64(self.addr + off, d)

    def exchange64(self, off, v):
        return native.exchange64(self.addr + off, _s64(v))

    def load32(self, off):
        return native.load32(self.addr + off)

    def fetch_add32(self, off, d):
        return native.fetch_add32(self.addr + off, d)

    def head(self, off, n, signed=False):
        """The little-endian integer of ``n`` bytes at ``off`` in the file's header. For a file
        opened from outside it comes from the bytes read (``pread``) before the file was mapped:
        a file another process cut short meanwhile then fails its checks with an error, where a
        read through the mapping would end this process with SIGBUS."""
        source = self._header if self._header is not None else self._mm
        raw = bytes(source[off:off + n])
        if len(raw) != n:
            raise InvalidDataError("%s: a header field at byte %d is past the %d bytes that hold the header"
                                   % (self.path, off, len(source)))
        return int.from_bytes(raw, "little", signed=signed)

    def check_layout(self, magic, version, what, offsets):
        """Checks the common header of a file of one layout (section 4): its magic, its layout
        version and a possible owner; returns the little-endian 32-bit fields at ``offsets``
        (header length and geometry) for the layout's own checks."""
        found = self.head(0, 8)
        if found != magic:
            raise InvalidDataError("%s is not a refshare %s (magic 0x%x)" % (self.path, what, found))
        found = self.head(8, 4)
        if found != version:
            raise InvalidDataError("%s has %s layout version %d; this refshare reads version %d"
                                   % (self.path, what, found, version))
        pid, start = self.head(16, 8, signed=True), self.head(24, 8, signed=True)
        if pid <= 0 or pid > (1 << 22) - 1 or start < 0:
            raise InvalidDataError("%s names an impossible owner pid %d" % (self.path, pid))
        return [self.head(o, 4) for o in offsets]

    def read(self, off, n):
        return bytes(self._mm[off:off + n])

    def write(self, off, data):
        self._mm[off:off + len(data)] = data

    def unlink(self):
        try:
            os.unlink(self.path)
            return True
        except FileNotFoundError:
            return False

    def close(self):
        """Unmaps, unless arrays over the mapping are still alive (then it goes with the last)."""
        if self.closed:
            return
        self.closed = True
        self._view = None
        try:
            self._mm.close()
        except BufferError:
            pass  # a user's array still uses it: the mapping is released with that array
        self._mm = None

    def __repr__(self):
        return self.name


def _s64(v):
    """A 64-bit word given as an unsigned Python int, as the signed value ctypes takes."""
    return v - (1 << 64) if v >= 1 << 63 else v


class ShmDirectory:
    """The directory refshare keeps its files in, and the one gate through which each of them
    is named, created and opened."""

    def __init__(self, directory=None, prefix=None, group_access=False):
        directory = DEFAULT_DIRECTORY if directory is None else os.fspath(directory)
        prefix = DEFAULT_PREFIX if prefix is None else prefix
        if not isinstance(prefix, str) or not _PREFIX.match(prefix):
            raise ValueError("prefix must be 1-32 letters, digits or '_': %r" % (prefix,))
        self.path = os.path.abspath(directory)
        self.prefix = prefix
        self.mode = OWNER_AND_GROUP if group_access else OWNER_ONLY
        if not os.path.isdir(self.path):
            raise RefshareError("shared memory directory does not exist: " + self.path)
        self._names = re.compile(re.escape(prefix) + r"-([a-z]{1,8})-[0-9a-f]{32}\Z")
        self._kinds = {}
        self.uid = os.geteuid()
        self.gid = os.getegid()
        self.groups = set(os.getgroups()) | {self.gid}

    # ---------------------------------------------------------------- names

    def new_name(self, kind):
        return "%s-%s-%s" % (self.prefix, kind, secrets.token_hex(16))

    def kind_of(self, name):
        kind = self._kinds.get(name)
        if kind is None:
            m = self._names.match(name) if isinstance(name, str) else None
            kind = m.group(1) if m and m.group(1) in KINDS else ""
            if len(self._kinds) > 4096:
                self._kinds.clear()  # a bounded memo: names from outside are many, ours are few
            if isinstance(name, str):
                self._kinds[name] = kind
        return kind or None

    def is_ours(self, name):
        return self.kind_of(name) is not None

    def resolve(self, name, kind):
        """The path of a name from outside, refusing anything but one of our names of ``kind``."""
        if self.kind_of(name) != kind:
            raise InvalidDataError("not a refshare %s file name under prefix '%s': %r"
                                   % (kind, self.prefix, str(name)[:80]))
        return os.path.join(self.path, name)

    def owned_by_us(self, uid, gid):
        if uid == self.uid:
            return True
        return self.mode == OWNER_AND_GROUP and gid in self.groups

    # ---------------------------------------------------------------- files

    def create(self, kind, size):
        """Creates a file of exactly ``size`` bytes, space reserved, mapped read-write; its
        first 32 bytes name this process as owner (magic still 0, section 2.4)."""
        if size < HEADER_LENGTH:
            raise ValueError("size must hold the 32-byte common header: %d" % size)
        self.hold_life_lock()
        name = self.new_name(kind)
        path = os.path.join(self.path, name)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, self.mode)
        except OSError as e:
            raise _failure("create", path, e) from e
        try:
            try:
                os.pwrite(fd, owner_header(current()), 0)  # first: from now on the file names its owner
                if self.mode != OWNER_ONLY:
                    os.fchmod(fd, self.mode)  # the umask may have taken the group's bits
                os.posix_fallocate(fd, 0, size)
                mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            except OSError as e:
                _unlink_quietly(path)
                if e.errno == errno.ENOSPC:
                    raise OutOfSharedMemoryError(
                        "no space left in %s for a %d-byte %s file (%s); free space or raise the tmpfs size"
                        % (self.path, size, kind, e.strerror)) from e
                raise _failure("create %d-byte" % size, path, e) from e
        finally:
            os.close(fd)
        return MappedFile(name, path, size, mm, created=True)

    def open(self, name, kind, min_size, writable=True):
        """Maps an existing file of ours by a name from outside (section 2.5)."""
        path = self.resolve(name, kind)
        flags = (os.O_RDWR if writable else os.O_RDONLY) | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(path, flags)
        except FileNotFoundError as e:
            raise RefshareError("refshare file no longer exists (its owner released or lost it): " + path) from e
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise InvalidDataError("not a regular file (a link): " + path) from e
            raise _failure("open", path, e) from e
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise InvalidDataError("not a regular file: " + path)
            self.check_owner(path, st)
            if st.st_size < min_size:
                raise InvalidDataError("%s is truncated: %d bytes, at least %d expected" % (path, st.st_size, min_size))
            header = os.pread(fd, min_size, 0)  # checked from these bytes, not through the mapping (see head)
            if len(header) < min_size:
                raise InvalidDataError("%s was truncated while it was being opened: %d of its %d header bytes left"
                                       % (path, len(header), min_size))
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
            try:
                mm = mmap.mmap(fd, st.st_size, mmap.MAP_SHARED, prot)
            except ValueError as e:  # Python's mmap checks the size again: cut since the fstat
                raise InvalidDataError("%s was truncated while it was being opened: %s" % (path, e)) from e
            except OSError as e:
                raise _failure("map", path, e) from e
        finally:
            os.close(fd)
        return MappedFile(name, path, st.st_size, mm, created=False, writable=writable, header=header)

    def check_owner(self, path, st):
        if not self.owned_by_us(st.st_uid, st.st_gid):
            raise RefshareError(
                "refusing %s: it belongs to uid %d (gid %d) and this process runs as uid %d (gid %d)%s"
                % (path, st.st_uid, st.st_gid, self.uid, self.gid,
                   "" if self.mode == OWNER_AND_GROUP else "; processes of one group can share with group access"))

    def read_header(self, name):
        """The common header of a file of ours, read (not mapped) through a non-blocking,
        no-follow descriptor; None when it names no owner yet."""
        path = os.path.join(self.path, name)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise InvalidDataError("not a regular file: " + path)
            self.check_owner(path, st)
            return parse_header(os.pread(fd, HEADER_LENGTH, 0), path)
        finally:
            os.close(fd)

    # ---------------------------------------------------------------- life files

    def life_name(self, identity):
        return "%s-life-%016x%016x" % (self.prefix, identity.pid, identity.start)

    def _key(self):
        return self.path, self.prefix

    def hold_life_lock(self):
        """Takes this process's life lock here (section 5.2); idempotent and cheap once held."""
        key = self._key()
        if key in _life_locks:
            return
        with _life_mutex:
            if key not in _life_locks:
                _life_locks[key] = self._take_life_lock()

    def holds_life_lock(self):
        return self._key() in _life_locks

    def _take_life_lock(self):
        me = current()
        path = os.path.join(self.path, self.life_name(me))
        for _ in range(_LIFE_ATTEMPTS):
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, self.mode)
            except OSError as e:
                raise RefshareError("cannot create the life file %s: %s" % (path, e.strerror)) from e
            keep = False
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_uid != self.uid:
                    raise RefshareError("refusing %s as this process's life file: not a regular file of uid %d"
                                        % (path, self.uid))
                fcntl.flock(fd, fcntl.LOCK_SH)
                if not _still_named(path, st):
                    continue  # a janitor removed the dead twin's file we opened: start over
                if st.st_size < HEADER_LENGTH:
                    os.pwrite(fd, owner_header(me, LIFE_MAGIC, 1, HEADER_LENGTH), 0)
                if self.mode != OWNER_ONLY:
                    os.fchmod(fd, self.mode)
                keep = True
                return fd
            except OSError as e:
                raise RefshareError("cannot hold the life file %s: %s" % (path, e.strerror)) from e
            finally:
                if not keep:
                    os.close(fd)
        raise RefshareError("cannot hold the life file %s: removed %d times while being locked"
                            % (path, _LIFE_ATTEMPTS))

    def verdict(self, identity):
        """ALIVE, DEAD or UNKNOWN for the process ``identity`` names (section 5.3)."""
        if identity == current():
            return ALIVE
        path = os.path.join(self.path, self.life_name(identity))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            p = proc_identity(identity.pid)
            return ALIVE if p == identity else UNKNOWN
        except OSError:
            return UNKNOWN
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or not self.owned_by_us(st.st_uid, st.st_gid):
                return UNKNOWN
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return DEAD
            except BlockingIOError:
                return ALIVE
            except OSError:
                return UNKNOWN
        finally:
            os.close(fd)  # drops the exclusive lock if we got it

    def pid_is_dead(self, pid):
        """For an entry left registering by pid ``pid`` (section 8.5): DEAD when every life file
        of that pid here is lockable, or there is none and /proc shows no such process."""
        head = "%s-life-%016x" % (self.prefix, pid)
        found = False
        try:
            names = os.listdir(self.path)
        except OSError:
            return False
        for n in names:
            if n.startswith(head) and len(n) == len(head) + 16:
                found = True
                try:
                    ident = ProcessIdentity(pid, int(n[len(head):], 16))
                except ValueError:
                    return False
                if self.verdict(ident) != DEAD:
                    return False
        return found

    def remove_life_file_if_dead(self, identity):
        """The janitor's removal: under the exclusive lock, if nobody holds it (section 5.4)."""
        if identity == current():
            return False
        path = os.path.join(self.path, self.life_name(identity))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or not self.owned_by_us(st.st_uid, st.st_gid):
                return False
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False
            if not _still_named(path, st):
                return False
            return _unlink_quietly(path)
        finally:
            os.close(fd)

    def release_life_lock(self):
        """Gives up the life lock here and removes its file (the caller checked nothing names us)."""
        with _life_mutex:
            fd = _life_locks.pop(self._key(), None)
            if fd is None:
                return
            path = os.path.join(self.path, self.life_name(current()))
            try:
                if _still_named(path, os.fstat(fd)):
                    _unlink_quietly(path)
            finally:
                os.close(fd)

    def hold_life_lock_while_named_in(self, name):
        """Takes the life lock and keeps it while the file ``name`` exists here: for a record
        of this process that stays in that file until it exits (a holder's reader row), which
        others may reclaim only once the kernel drops the lock (docs/protocol.md 5.4)."""
        self.hold_life_lock()
        with _life_mutex:
            _lasting_records.setdefault(self._key(), set()).add(name)

    def owns_no_file(self):
        """True when no file here (life files aside) names this process as its owner, and
        no file holding a lasting record of it (hold_life_lock_while_named_in) exists."""
        with _life_mutex:
            records = _lasting_records.get(self._key(), set())
            records.intersection_update(n for n in records if os.path.lexists(os.path.join(self.path, n)))
            if records:
                return False
        me = current()
        try:
            names = os.listdir(self.path)
        except OSError:
            return False
        for n in names:
            kind = self.kind_of(n)
            if kind is None or kind == "life":
                continue
            try:
                h = self.read_header(n)
            except FileNotFoundError:
                continue
            except (OSError, RefshareError):
                return False
            if h is not None and h[3] == me:
                return False
        return True

    def __repr__(self):
        return "%s/%s-*" % (self.path, self.prefix)


_LIMITS = {
    errno.EMFILE: "this process has as many files open as it may (EMFILE): raise its limit (ulimit -n, systemd's "
                  "LimitNOFILE) or let it close some",
    errno.ENFILE: "the system has as many files open as it may (ENFILE): raise fs.file-max",
    errno.ENOMEM: "the kernel refused the memory for it (ENOMEM): the machine is out of memory, or this process has "
                  "as many mappings as it may (sysctl vm.max_map_count)",
}


def _failure(doing, path, e):
    """The error for ``e``, met while doing ``doing`` to ``path``: running out of open files or of
    memory for mappings is a limit of this process or machine, not the file's fault, so it is a
    ResourceLimitError (a queue gives the message it was receiving back, section 9.8); anything
    else is a RefshareError."""
    limit = _LIMITS.get(e.errno)
    if limit is not None:
        return ResourceLimitError("cannot %s %s: %s" % (doing, path, limit))
    return RefshareError("cannot %s %s: %s" % (doing, path, e.strerror))


def _still_named(path, st):
    try:
        now = os.lstat(path)
    except FileNotFoundError:
        return False
    return now.st_ino == st.st_ino and now.st_dev == st.st_dev


def _unlink_quietly(path):
    try:
        os.unlink(path)
        return True
    except OSError:
        return False
