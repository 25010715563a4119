"""The directory: names, modes, owner checks, space reservation, life files and verdicts, the janitor."""
import os
import shutil
import stat
import subprocess
import sys
import tempfile

import pytest

import refshare
from refshare import shm
from refshare.errors import InvalidDataError, OutOfSharedMemoryError, RefshareError

from conftest import kill, line


def test_created_files_are_0600_named_by_the_shape_and_name_their_owner(shmdir):
    d = shm.ShmDirectory(shmdir)
    f = d.create("seg", 8192)
    try:
        st = os.stat(f.path)
        assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_size == 8192
        assert d.kind_of(f.name) == "seg" and len(f.name) == len("refshare-seg-") + 32
        h = d.read_header(f.name)
        assert h[3] == shm.current() and h[0] == 0
        assert os.path.exists(os.path.join(shmdir, d.life_name(shm.current())))
    finally:
        f.unlink()
        f.close()
        d.release_life_lock()


def test_group_access_creates_0660(shmdir):
    d = shm.ShmDirectory(shmdir, group_access=True)
    f = d.create("cnt", 4096)
    try:
        assert stat.S_IMODE(os.stat(f.path).st_mode) == 0o660
    finally:
        f.unlink()
        f.close()
        d.release_life_lock()


@pytest.mark.parametrize("name", ["../../etc/passwd", "a/b", "refshare-seg-XYZ", "other-seg-" + "0" * 32,
                                  "refshare-cnt-" + "0" * 32, "refshare-seg-" + "0" * 31 + "G", ""])
def test_foreign_names_are_refused_before_any_open(shmdir, name):
    d = shm.ShmDirectory(shmdir)
    with pytest.raises(InvalidDataError):
        d.open(name, "seg", 32)


def test_links_fifos_and_truncated_files_are_refused(shmdir):
    d = shm.ShmDirectory(shmdir)
    link = os.path.join(shmdir, "refshare-seg-" + "1" * 32)
    os.symlink("/etc/passwd", link)
    fifo = os.path.join(shmdir, "refshare-seg-" + "2" * 32)
    os.mkfifo(fifo)
    short = os.path.join(shmdir, "refshare-seg-" + "3" * 32)
    with open(short, "wb") as f:
        f.write(b"x" * 10)
    try:
        with pytest.raises(InvalidDataError, match="link"):
            d.open(os.path.basename(link), "seg", 32)
        with pytest.raises(InvalidDataError, match="not a regular file"):
            d.open(os.path.basename(fifo), "seg", 32)
        with pytest.raises(InvalidDataError, match="truncated"):
            d.open(os.path.basename(short), "seg", 32)
    finally:
        for p in (link, fifo, short):
            os.unlink(p)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another user")
def test_a_file_of_another_user_is_refused(shmdir):
    d = shm.ShmDirectory(shmdir)
    path = os.path.join(shmdir, "refshare-seg-" + "4" * 32)
    with open(path, "wb") as f:
        f.write(b"\0" * 64)
    os.chown(path, 65534, 65534)
    try:
        with pytest.raises(RefshareError, match="belongs to uid 65534"):
            d.open(os.path.basename(path), "seg", 32)
    finally:
        os.unlink(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a small tmpfs")
def test_a_full_tmpfs_is_an_out_of_shared_memory_error_at_creation():
    mount = tempfile.mkdtemp(prefix="refshare-full-", dir="/tmp")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mount], capture_output=True, text=True)
    if r.returncode != 0:
        os.rmdir(mount)
        pytest.skip("cannot mount a tmpfs here: " + r.stderr.strip())
    try:
        with refshare.open(directory=mount) as rs:
            with pytest.raises(OutOfSharedMemoryError, match="no space left"):
                rs.allocate("uint8", (8 << 20,))
            with pytest.raises(OutOfSharedMemoryError, match="no space left"):
                rs.allocate("uint8", (1000,))  # small blocks come from a 4 MiB slab: too big for 1 MiB too
    finally:
        left = [n for n in os.listdir(mount)]
        subprocess.run(["umount", mount], check=True)
        os.rmdir(mount)
    assert left == [], "a failed creation left %s" % left


def test_verdicts_alive_dead_unknown(shmdir, peers):
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=4)
        p = peers.start("consume", shmdir, q.name, 0)
        assert line(p) == ["READY"]
        d = rs.directory
        child = shm.ProcessIdentity(p.pid, shm.proc_identity(p.pid).start)
        assert d.verdict(child) == shm.ALIVE
        assert d.verdict(shm.current()) == shm.ALIVE
        assert d.verdict(shm.ProcessIdentity(p.pid, child.start + 1)) == shm.UNKNOWN  # no evidence
        kill(p)
        assert d.verdict(child) == shm.DEAD
        q.close()
        assert d.life_name(child) in os.listdir(shmdir)
        assert d.life_name(child) in refshare.gc(directory=shmdir)
        assert d.verdict(child) == shm.UNKNOWN  # no life file, no such process: never DEAD without evidence


def test_life_file_goes_with_the_last_close(shmdir):
    rs1 = refshare.open(directory=shmdir)
    rs2 = refshare.open(directory=shmdir)
    t = rs1.allocate("float32", (4,))
    life = rs1.directory.life_name(shm.current())
    assert life in os.listdir(shmdir)
    t.close()
    rs1.close()
    assert life in os.listdir(shmdir)
    rs2.close()
    assert os.listdir(shmdir) == []


def test_janitor_keeps_files_of_live_processes_and_unknown_ones(shmdir):
    with refshare.open(directory=shmdir) as rs:
        with rs.allocate("uint8", (10,)):
            assert refshare.gc(directory=shmdir) == []
            # a file naming a process nobody can judge (no life file, no such pid here) stays
            d = rs.directory
            f = d.create("seg", 4096)
            f.store64(16, 4_000_000)
            assert refshare.gc(directory=shmdir) == []
            f.unlink()
            f.close()


def test_a_process_registering_and_dying_during_a_sweep_keeps_its_life_file(shmdir):
    """It holds its life lock, registers in a counter file after the sweep read it, takes a token
    and is killed before the life files are judged: its life file must stay for the file's owner."""
    from refshare import janitor
    from refshare.counter import CounterFile
    d = shm.ShmDirectory(shmdir)
    counters = CounterFile.create(d, 4, 2)
    try:
        slot = counters.hand_out(7)
        code = ("import sys\n"
                "from refshare import shm\n"
                "from refshare.counter import CounterFile\n"
                "d = shm.ShmDirectory(%r); d.hold_life_lock(); print('READY', flush=True)\n"
                "sys.stdin.readline(); c = CounterFile.open(d, %r)\n"
                "print('CLAIMED', c.claim(%d, 7), flush=True); sys.stdin.readline()\n" % (shmdir, counters.name, slot))
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env=env)
        try:
            assert line(p) == ["READY"]
            consumer = shm.ProcessIdentity(p.pid, shm.proc_identity(p.pid).start)

            def register_and_die():
                p.stdin.write("go\n")
                p.stdin.flush()
                assert line(p) == ["CLAIMED", "True"]
                kill(p)

            removed = janitor.sweep(d, _before_life_files=register_and_die)
        finally:
            if p.poll() is None:
                kill(p)
            p.stdin.close()
            p.stdout.close()
        assert d.life_name(consumer) not in removed
        assert d.verdict(consumer) == shm.DEAD, "the owner can still learn of the death"
        assert counters.reclaim_dead(d) == 1
        assert counters.is_released(slot)
        counters.file.unlink()
        assert janitor.sweep(d) == [d.life_name(consumer)], "the next sweep removes it"
    finally:
        counters.close()
        d.release_life_lock()


def test_an_interpreter_exiting_without_close_leaves_nothing(shmdir):
    code = ("import refshare, numpy as np\n"
            "rs = refshare.open(directory=%r)\n"
            "t = rs.from_numpy(np.ones(10)); b = rs.share(t); q = rs.create_queue(4)\n" % shmdir)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    assert os.listdir(shmdir) == []


def _header_fixtures():
    import glob
    import json
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    root = os.environ.get("REFSHARE_CONFORMANCE_DIR", os.path.join(here, "conformance"))
    paths = sorted(glob.glob(os.path.join(root, "headers", "*.json")))
    if not paths:
        pytest.skip("no conformance fixtures at " + root + " (set REFSHARE_CONFORMANCE_DIR)")
    fixtures = []
    for path in paths:
        with open(path) as f:
            fixtures.append(json.load(f))
    return fixtures


def _magic_text(magic):
    """The fixtures' rendering of a magic: its 8 little-endian bytes, '?' for any not printable."""
    return "".join(chr(b) if 0x20 <= b < 0x7F else "?" for b in (magic & (1 << 64) - 1).to_bytes(8, "little"))


def test_conformance_file_headers(shmdir):
    """conformance/headers/*.json (section 4), each replayed twice: the bytes parsed, and the same
    bytes as a file of the directory read through the checked opener every reader uses."""
    d = shm.ShmDirectory(shmdir)
    fixtures = _header_fixtures()
    assert {fx["expect"] for fx in fixtures} == {"owner", "no_owner", "error"}
    for fx in fixtures:
        raw = bytes.fromhex(fx["hex"])
        assert len(raw) <= shm.HEADER_LENGTH, fx["name"]
        name = "refshare-seg-%032x" % len(raw)
        path = os.path.join(shmdir, name)
        with open(path, "wb") as f:
            f.write(raw)
        try:
            for read in (lambda: shm.parse_header(raw, fx["name"]), lambda: d.read_header(name)):
                if fx["expect"] == "error":
                    with pytest.raises(RefshareError) as caught:
                        read()
                    assert type(caught.value).__name__ == fx["error_python"], (fx["name"], caught.value)
                    continue
                h = read()
                if fx["expect"] == "no_owner":
                    assert h is None, fx["name"]
                    continue
                assert fx["expect"] == "owner", fx["name"]
                magic, version, hlen, owner = h
                assert (magic, version, hlen, owner.pid, owner.start) == (
                    fx["magic"] & (1 << 64) - 1, fx["version"], fx["header_length"], fx["owner_pid"],
                    fx["owner_start_ticks"]), fx["name"]
                assert _magic_text(magic) == fx["magic_text"], fx["name"]
                assert shm.KIND_BY_MAGIC.get(magic) == fx["kind"], fx["name"]
        finally:
            os.unlink(path)


def test_open_sweeps_what_killed_processes_left_quietly(shmdir, peers, capfd):
    """refshare.open() runs the janitor's sweep, as Java's Refshare.open: a SIGKILLed producer's
    files go (it queued nothing anyone could still take), nothing is printed."""
    p = peers.start("produce", shmdir, 4, 2, 64)
    line(p)
    assert line(p) == ["PUT", "2"]
    kill(p)
    left = set(os.listdir(shmdir))
    assert sorted(n.split("-")[1] for n in left) == ["cnt", "life", "proc", "q", "seg"]
    capfd.readouterr()
    with refshare.open(directory=shmdir) as rs:
        assert not left & set(os.listdir(shmdir)), "the dead producer's files are gone"
        with rs.allocate("uint8", (8,)):
            pass
    assert capfd.readouterr() == ("", "")


def test_a_failing_or_troubled_sweep_never_fails_open(shmdir, monkeypatch):
    from refshare import janitor
    damaged = os.path.join(shmdir, "refshare-q-" + "ab" * 16)
    with open(damaged, "wb") as f:
        f.write(b"\xff" * 100)  # an impossible owner: damage left to a person
    os.utime(damaged, (0, 0))
    with refshare.open(directory=shmdir) as rs:
        rs.allocate("uint8", (4,)).close()
    assert os.path.exists(damaged), "the sweep leaves a damaged file alone"
    os.unlink(damaged)

    def broken(directory, dry_run=False):
        raise RefshareError("cannot list %s (test)" % directory.path)
    monkeypatch.setattr(janitor, "sweep", broken)
    with refshare.open(directory=shmdir) as rs:
        rs.allocate("uint8", (4,)).close()
    monkeypatch.setattr(janitor, "sweep", lambda directory, dry_run=False: 1 // 0)
    with refshare.open(directory=shmdir) as rs:
        rs.allocate("uint8", (4,)).close()


_CUT_WHILE_OPENING = r"""
import os, sys
from refshare import counter, memory, shm
from refshare.errors import InvalidDataError

d = shm.ShmDirectory(sys.argv[1])
for step in ("fstat", "pread"):  # the file is cut right after the open's call of this
    made = {"seg": memory.Segment.create(d, 4096), "cnt": counter.CounterFile.create(d, 64, 4)}
    real = getattr(os, step)
    for kind, f in made.items():
        def then_cut(*args, path=f.file.path):
            answer = real(*args)
            os.truncate(path, 0)  # another process cuts the file after it was sized
            return answer
        setattr(os, step, then_cut)
        try:
            if kind == "seg":
                memory.Segment.open(d, f.name, f.size)
            else:
                counter.CounterFile.open(d, f.name)
            print(step, kind, "opened")
        except InvalidDataError as e:
            print(step, kind, "refused:", e)
        finally:
            setattr(os, step, real)
        f.file.unlink()
        f.file.close()
d.release_life_lock()
"""


def test_a_file_cut_short_while_it_is_opened_is_refused(shmdir):
    """Cut after the open's fstat, or after its read of the header: the open fails with an
    InvalidDataError that says so. Before 2026-11-27 the header was checked through the mapping,
    and Python's mmap, which checks the size itself, raised a raw ValueError ('mmap length is
    greater than file size'); a cut just after the mapping ended the interpreter with SIGBUS.
    Runs in a child interpreter for that reason."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-c", _CUT_WHILE_OPENING, shmdir], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, "child ended with %d (SIGBUS is -7): %s" % (r.returncode, r.stderr)
    lines = r.stdout.splitlines()
    assert len(lines) == 4, r.stdout
    for want, out in zip(("fstat seg", "fstat cnt", "pread seg", "pread cnt"), lines):
        assert out.startswith(want + " refused:") and "truncated while it was being opened" in out, out
    assert os.listdir(shmdir) == []
