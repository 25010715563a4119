import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, PYTHON_DIR)
PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peer.py")


def _remove_life_files_of_the_dead(d):
    """What the janitor does to the life file of a process that exited (a Java reader of a
    holder keeps its own while the holder file exists, so it outlives that process): such a
    file is not a leak. A live process's life file, or any other file, still is."""
    from refshare.shm import ProcessIdentity, ShmDirectory
    directory = ShmDirectory(d)
    for n in os.listdir(d):
        if directory.kind_of(n) == "life":
            digits = n[-32:]
            directory.remove_life_file_if_dead(ProcessIdentity(int(digits[:16], 16), int(digits[16:], 16)))


@pytest.fixture
def shmdir():
    """A fresh directory under /dev/shm; the test fails if anything is left in it."""
    d = tempfile.mkdtemp(prefix="refshare-pytest-", dir="/dev/shm")
    yield d
    import gc
    gc.collect()
    _remove_life_files_of_the_dead(d)
    left = sorted(os.listdir(d))
    shutil.rmtree(d, ignore_errors=True)
    assert left == [], "left behind in the shared-memory directory: %s" % left


class Peers:
    """Child processes of one test: every one is killed and reaped at the end."""

    def __init__(self):
        self.procs = []

    def start(self, *args):
        env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
        p = subprocess.Popen([sys.executable, PEER] + [str(a) for a in args], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
        self.procs.append(p)
        return p

    def close(self):
        for p in self.procs:
            try:
                p.wait(timeout=10)  # a peer that finished its work is still closing: let it
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGKILL)
                p.wait()
            for s in (p.stdin, p.stdout):
                if s:
                    s.close()

    def finish(self):
        """Waits for every peer to exit on its own (their stdin closed)."""
        for p in self.procs:
            if p.stdin and not p.stdin.closed:
                p.stdin.close()
            p.wait(timeout=30)


@pytest.fixture
def peers():
    ps = Peers()
    yield ps
    ps.close()


def line(p):
    """The next line of a peer's stdout, split; fails when the peer exited."""
    out = p.stdout.readline()
    assert out, "peer exited (rc %s)" % p.poll()
    return out.split()


def kill(p):
    p.send_signal(signal.SIGKILL)
    p.wait()
