"""Python <-> Java with real processes, through the Java library of this checkout (its built CLI
jar). Skipped, with the reason, when the jar or a JDK 25 is absent."""
import glob
import os
import subprocess
import time

import numpy as np
import pytest

import refshare

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JAR = os.environ.get("REFSHARE_JAR") or os.path.join(REPO, "cli", "target", "refshare-cli.jar")
JAVA_HOME = os.environ.get("REFSHARE_JAVA_HOME") or "/usr/lib/jvm/temurin-25-jdk-amd64"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java", "JPeer.java")


@pytest.fixture(scope="module")
def java(tmp_path_factory):
    if not os.path.exists(JAR):
        pytest.skip("the Java CLI jar is not built (%s; mvn -pl cli -am package, or set REFSHARE_JAR)" % JAR)
    javac = os.path.join(JAVA_HOME, "bin", "javac")
    if not os.path.exists(javac):
        pytest.skip("no JDK 25 at %s (set REFSHARE_JAVA_HOME)" % JAVA_HOME)
    out = str(tmp_path_factory.mktemp("jpeer"))
    subprocess.run([javac, "-cp", JAR, "-d", out, SOURCE], check=True)
    return [os.path.join(JAVA_HOME, "bin", "java"), "--enable-native-access=ALL-UNNAMED", "-cp",
            JAR + os.pathsep + out, "JPeer"]


def start(cmd, procs):
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    procs.append(p)
    return p


@pytest.fixture
def procs():
    ps = []
    yield ps
    for p in ps:
        try:
            p.wait(timeout=10)  # a peer that printed its result is still closing: let it
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        for s in (p.stdin, p.stdout):
            s.close()


def test_java_producer_to_python_consumer(shmdir, java, procs):
    p = start(java + ["produce", shmdir, "300", "2500"], procs)
    name = p.stdout.readline().split()[1]
    n = 0
    with refshare.open(directory=shmdir) as rs, rs.open_queue(name) as q:
        p.stdin.write("go\n")
        p.stdin.flush()
        for t in q:
            with t:
                a = t.numpy()
                assert a.dtype == np.int32 and a.shape == (2500,)
                assert np.array_equal(a, n * 1000 + np.arange(2500, dtype=np.int32))
                assert int(t.torch()[17]) == n * 1000 + 17
                n += 1
    p.stdin.close()
    assert p.stdout.readline().split() == ["SENT", "300"]
    stats = p.stdout.readline()
    assert "limboBlocks=0" in stats, stats
    assert p.wait() == 0
    assert n == 300


def test_python_producer_to_java_consumer(shmdir, java, procs):
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=16)
        c = start(java + ["consume", shmdir, q.name], procs)
        assert c.stdout.readline().split() == ["READY"]
        for i in range(200):
            with rs.allocate("float32", (4, 8)) as t:
                t.numpy()[:] = i
                with t.T as v:  # a view: the Java side reads its first element
                    q.put(v)
        q.close()
        assert c.stdout.readline().split() == ["TOOK", "200", "BAD", "0"]
        assert c.wait() == 0
        deadline = time.monotonic() + 5
        while rs.stats().limbo_blocks and time.monotonic() < deadline:
            time.sleep(0.01)
        assert rs.stats().limbo_blocks == 0


def test_holder_published_in_java_read_in_python_and_back(shmdir, java, procs):
    p = start(java + ["hold", shmdir], procs)
    name = p.stdout.readline().split()[1]
    with refshare.open(directory=shmdir) as rs, rs.open_holder(name) as h:
        assert h.acquire() is None
        p.stdin.write("10\n")
        p.stdin.flush()
        assert p.stdout.readline().split() == ["PUBLISHED", "10"]
        held = h.acquire()
        p.stdin.write("20\n")
        p.stdin.flush()
        assert p.stdout.readline().split() == ["PUBLISHED", "20"]
        with h.acquire() as t:
            assert t.numpy().tolist() == [[20.0 + 4 * r + k for k in range(4)] for r in range(3)]
        assert held.numpy()[0, 0] == 10.0, "an acquired version stays valid"
        held.close()
        p.stdin.write("END\n")
        p.stdin.flush()
        assert p.wait() == 0
    with refshare.open(directory=shmdir) as rs:
        h = rs.create_holder()
        with rs.from_numpy(np.arange(6, dtype=np.float32) + 0.5) as t:
            h.publish(t)
        out = subprocess.run(java + ["read", shmdir, h.name], capture_output=True, text=True, check=True).stdout
        assert out.split()[-1] == "0.5"
        h.close()


def test_sigkilled_java_consumer_is_reclaimed_by_the_python_producer(shmdir, java, procs):
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=16)
        c = start(java + ["consume", shmdir, q.name, "4"], procs)
        assert c.stdout.readline().split() == ["READY"]
        for i in range(4):
            with rs.from_numpy(np.full((2, 3), i, dtype=np.float32)) as t:
                q.put(t)
        assert c.stdout.readline().split() == ["HELD", "4"]
        assert rs.stats().limbo_blocks == 4
        c.kill()
        c.wait()
        deadline = time.monotonic() + 5
        while rs.stats().limbo_blocks and time.monotonic() < deadline:
            time.sleep(0.02)
        assert rs.stats().reclaimed == 4 and rs.stats().limbo_blocks == 0
        q.close()
    refshare.gc(directory=shmdir)


def test_one_queue_with_java_and_python_consumers_each_message_once(shmdir, java, procs, peers):
    import struct
    from conftest import line
    from peer import pattern
    with refshare.open(directory=shmdir) as rs:
        q = rs.create_queue(capacity=16)
        j = start(java + ["consume", shmdir, q.name], procs)
        assert j.stdout.readline().split() == ["READY"]
        p = None
        for i in range(400):
            if i == 50:  # the first 50 go to Java alone (the queue holds 16): both sides take some
                p = peers.start("consume", shmdir, q.name, 0)
                assert line(p) == ["READY"]
            with rs.allocate("uint8", (1024,)) as t:
                a = t.numpy()
                a[:8] = np.frombuffer(struct.pack("<q", i), dtype=np.uint8)
                a[8:] = pattern(i, 1016)
                q.put(t)
        q.close()
        words = line(p)
        assert words[0] == "DONE" and words[2] == "0"
        jw = j.stdout.readline().split()
        assert jw[0] == "TOOK"
        assert int(words[1]) + int(jw[1]) == 400
        assert int(words[1]) > 0 and int(jw[1]) > 0
        assert len(set(words[3:])) == int(words[1])
        deadline = time.monotonic() + 5
        while rs.stats().limbo_blocks and time.monotonic() < deadline:
            time.sleep(0.01)
        assert rs.stats().limbo_blocks == 0
    peers.finish()
    assert j.wait(timeout=30) == 0
    refshare.gc(directory=shmdir)
