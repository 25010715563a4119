"""Loads refshare's native helper (_native.c): atomics and futexes on shared mappings.

The helper is a plain C shared library (no Python headers needed) built with the machine's C
compiler (``cc``, or ``$CC``) on first use and cached, keyed by the hash of its source, in
``$REFSHARE_NATIVE_DIR`` or else ``~/.cache/refshare``. ``python3 -m refshare.build`` builds it
ahead of time (and prints where). It is loaded with ctypes; see README.md for why (measured).
"""
import ctypes
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile

from .errors import RefshareError

_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native.c")


def cache_dir():
    d = os.environ.get("REFSHARE_NATIVE_DIR")
    if d:
        return d
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                        "refshare")


def _private_dir(d):
    """``d`` created if needed; refused unless it is a directory of ours that nobody else can
    write (a library loaded from a directory others can write would run their code)."""
    os.makedirs(d, mode=0o700, exist_ok=True)
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise RefshareError("refusing %s as the native helper's cache: not a directory of uid %d that only "
                            "its owner can write" % (d, os.geteuid()))
    return d


def library_path():
    with open(_SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    name = "librefshare_native-" + digest + ".so"
    try:
        d = _private_dir(cache_dir())
    except OSError:
        # no writable home (a service account): a private folder in the temporary directory
        d = _private_dir(os.path.join(tempfile.gettempdir(), "refshare-native-%d" % os.geteuid()))
    return os.path.join(d, name)


def build(force=False):
    """Compiles the helper if it is not built yet; returns the path of the library."""
    path = library_path()
    if os.path.exists(path) and not force:
        return path
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RefshareError("refshare needs a C compiler (cc or gcc; Debian: apt-get install gcc) to build its "
                            "atomics helper " + _SOURCE + " once")
    # compile to a private name, then rename: concurrent first imports never load a half-written file
    fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=os.path.dirname(path))
    os.close(fd)
    try:
        r = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", tmp, _SOURCE], capture_output=True, text=True)
        if r.returncode != 0:
            raise RefshareError("building " + _SOURCE + " failed:\n" + r.stderr)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _load(blocking):
    # ctypes.CDLL releases the GIL around every call; for an atomic that takes nanoseconds that
    # hands the interpreter to any other runnable thread (a collector) for up to a switch
    # interval. PyDLL keeps the GIL: used for everything but the calls that may sleep (futex wait).
    path = build()
    lib = ctypes.CDLL(path) if blocking else ctypes.PyDLL(path)
    u64, i64, i32, c_int = ctypes.c_uint64, ctypes.c_int64, ctypes.c_int32, ctypes.c_int
    sigs = {
        "rs_load64": ([u64], i64), "rs_store64": ([u64, i64], None), "rs_exchange64": ([u64, i64], i64),
        "rs_fetch_add64": ([u64, i64], i64), "rs_fetch_or64": ([u64, i64], i64), "rs_cas64": ([u64, i64, i64], c_int),
        "rs_load32": ([u64], i32), "rs_store32": ([u64, i32], None), "rs_exchange32": ([u64, i32], i32),
        "rs_fetch_add32": ([u64, i32], i32), "rs_fetch_or32": ([u64, i32], i32), "rs_cas32": ([u64, i32, i32], c_int),
        "rs_futex_wait": ([u64, i32, i64], c_int), "rs_futex_wake": ([u64, i32], c_int),
        "rs_release_all_held": ([u64, i64, i64], i64), "rs_count_low": ([u64, i64, i64], i64),
        "rs_copy": ([u64, u64, i64], None), "rs_prefault": ([u64, i64, i64], None),
        "rs_queue_claim": ([u64, u64], c_int), "rs_queue_free": ([u64, i64, i64], None),
        "rs_queue_offer": ([u64, ctypes.c_char_p, i64], c_int),
        "rs_queue_message_at_head": ([u64], c_int), "rs_queue_room_at_tail": ([u64], c_int),
        "rs_counter_release": ([u64, i64, i64, i64, i64, i64], c_int),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = res
    return lib


lib = _load(blocking=False)
_sleeping = _load(blocking=True)

load64 = lib.rs_load64
store64 = lib.rs_store64
exchange64 = lib.rs_exchange64
fetch_add64 = lib.rs_fetch_add64
fetch_or64 = lib.rs_fetch_or64
cas64 = lib.rs_cas64
load32 = lib.rs_load32
store32 = lib.rs_store32
exchange32 = lib.rs_exchange32
fetch_add32 = lib.rs_fetch_add32
fetch_or32 = lib.rs_fetch_or32
cas32 = lib.rs_cas32
futex_wait = _sleeping.rs_futex_wait
futex_wake = lib.rs_futex_wake
release_all_held = lib.rs_release_all_held
count_low = lib.rs_count_low
copy = lib.rs_copy
prefault = lib.rs_prefault
queue_claim = lib.rs_queue_claim
queue_free = lib.rs_queue_free
queue_offer = lib.rs_queue_offer
queue_message_at_head = lib.rs_queue_message_at_head
queue_room_at_tail = lib.rs_queue_room_at_tail
counter_release = lib.rs_counter_release


class QueueHandle(ctypes.Structure):
    """What the queue's one-call paths need of a handle (``rs_queue`` in _native.c): the mapping,
    the ring's geometry, the handle's participant index and the offset of the count it keeps
    (offered for ``queue_offer``, taken for ``queue_free``). Pass ``address`` to those calls."""
    _fields_ = [("base", ctypes.c_uint64), ("cells", ctypes.c_int64), ("capacity", ctypes.c_int64),
                ("cell_length", ctypes.c_int64), ("entry", ctypes.c_int64), ("counter", ctypes.c_int64)]

    @property
    def address(self):
        return ctypes.addressof(self)
