"""Holders: versions published and acquired across processes, retired exactly once, dead readers."""
import time

import numpy as np
import pytest

import refshare

from conftest import kill, line


def test_publish_acquire_and_retire(shmdir):
    with refshare.open(directory=shmdir) as rs:
        h = rs.create_holder(slots=4, readers=4)
        assert h.acquire() is None
        for v in range(10):  # more versions than slots: old ones retire
            with rs.from_numpy(np.full(4, v, dtype=np.int32)) as t:
                assert h.publish(t) == v + 1
        with refshare.open(directory=shmdir) as other, other.open_holder(h.name) as r:
            with r.acquire() as a:
                assert a.numpy().tolist() == [9] * 4
                with rs.from_numpy(np.full(4, 10, dtype=np.int32)) as t:
                    rs.publish(h, t)
                assert a.numpy().tolist() == [9] * 4, "an acquired version stays valid"
            with r.acquire() as b:
                assert b.numpy().tolist() == [10] * 4
        assert h.stats()["retired"] == 10
        h.clear()
        assert h.acquire() is None
        assert h.stats()["retired"] == 11
        h.close()
        rs.collect()
        assert rs.stats().limbo_blocks == 0


def test_a_sigkilled_readers_reference_is_reclaimed(shmdir, peers):
    with refshare.open(directory=shmdir) as rs:
        h = rs.create_holder()
        with rs.from_numpy(np.full(8, 3.0)) as t:
            h.publish(t)
        p = peers.start("read-holder", shmdir, h.name)
        assert line(p) == ["HELD", "3.0"]
        with rs.from_numpy(np.full(8, 4.0)) as t:
            h.publish(t)
        assert h.stats()["retired"] == 0, "the reader still holds version 1"
        kill(p)
        deadline = time.monotonic() + 5
        while h.stats()["retired"] < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert h.stats()["retired"] == 1 and h.stats()["reclaimed"] == 1
        h.close()
        deadline = time.monotonic() + 5
        while rs.stats().limbo_blocks and time.monotonic() < deadline:
            time.sleep(0.02)
        assert rs.stats().limbo_blocks == 0
    refshare.gc(directory=shmdir)


def test_corrupt_holder_headers_are_refused(shmdir):
    with refshare.open(directory=shmdir) as rs:
        h = rs.create_holder(slots=2, readers=2)
        f = h._f
        for off, value in ((8, 3), (32, 0), (40, 100), (44, 8)):
            old = f.read(off, 4)
            f.write(off, value.to_bytes(4, "little"))
            with pytest.raises(refshare.InvalidDataError):
                rs.open_holder(h.name)
            f.write(off, old)
        h.close()
