"""Tensors: every dtype, zero-copy numpy and torch, views, copies in, share/receive/cancel."""
import numpy as np
import pytest

import refshare
from refshare import dtypes
from refshare.errors import InvalidDataError, RefshareError

torch = pytest.importorskip("torch", reason="torch is not importable here (Debian: python3-torch)")

ALL = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def test_dtype_codes_match_the_protocol():
    assert [dtypes.of(n).code for n in ALL] == list(range(1, 11))
    assert [dtypes.of(n).itemsize for n in ALL] == [1, 1, 1, 2, 4, 8, 2, 2, 4, 8]
    with pytest.raises(InvalidDataError):
        dtypes.from_code(0)
    assert dtypes.of(torch.bfloat16).name == "bfloat16" and dtypes.of(np.float16).name == "float16"


@pytest.mark.parametrize("name", ALL)
def test_every_dtype_round_trips_zero_copy(shmdir, name):
    with refshare.open(directory=shmdir) as rs:
        src = (torch.arange(24) % 3).to(getattr(torch, name)).reshape(2, 3, 4)
        with rs.from_torch(src) as t:
            b = rs.share(t)
        with rs.receive(b) as r:
            assert r.dtype == name and r.shape == (2, 3, 4) and r.strides == (12, 4, 1)
            x = r.torch()
            assert x.dtype == src.dtype and torch.equal(x, src)
            a = r.numpy()
            assert not a.flags.writeable and a.shape == (2, 3, 4)
            if name == "bfloat16":
                assert a.dtype in (np.dtype("<u2"),) or a.dtype.name == "bfloat16"
                assert np.array_equal(a.view(np.uint16), src.view(torch.int16).numpy().view(np.uint16))
            else:
                assert np.array_equal(a, src.numpy())
            assert a.__array_interface__["data"][0] == x.data_ptr(), "numpy and torch see the same memory"


def test_views_stay_zero_copy_and_share_as_the_same_block(shmdir):
    with refshare.open(directory=shmdir) as rs:
        t = rs.from_numpy(np.arange(60, dtype=np.float32).reshape(5, 12))
        v = t[1:4, 2:10:3]
        assert v.shape == (3, 3) and v.strides == (12, 3) and v.storage_offset == 14
        assert np.shares_memory(v.numpy(), t.numpy())
        b = rs.share(v.T)
        t.close()
        v.close()
        with rs.receive(b) as r:
            expect = np.arange(60, dtype=np.float32).reshape(5, 12)[1:4, 2:10:3].T
            assert np.array_equal(r.numpy(), expect) and r.strides == (3, 12)
            assert torch.equal(r.torch(), torch.from_numpy(expect.copy()))
            sub = r[0]
            fwd = rs.share(sub)  # forwarding a received view
            sub.close()
        with rs.receive(fwd) as again:
            assert again.numpy().tolist() == expect[0].tolist()
        rs.collect()


def test_writes_through_numpy_and_torch_are_visible_to_the_receiver(shmdir):
    with refshare.open(directory=shmdir) as rs:
        with rs.allocate("float64", (4, 4)) as t:
            t.numpy()[:] = 1.5
            t.torch()[0, 0] = -2.0
            b = rs.share(t)
        with rs.receive(b) as r:
            assert r.numpy()[0, 0] == -2.0 and r.numpy()[3, 3] == 1.5


def test_a_message_is_received_once_and_cancel_returns_undelivered_ones(shmdir):
    with refshare.open(directory=shmdir) as rs:
        with rs.from_numpy(np.ones(8)) as t:
            b1, b2 = rs.share(t), rs.share(t)
        with rs.receive(b1):
            with pytest.raises(InvalidDataError, match="not in flight"):
                rs.receive(b1)
        assert rs.cancel(b2) and not rs.cancel(b2)
        with pytest.raises(InvalidDataError):
            rs.receive(b2)
        rs.collect()


def test_hostile_descriptors_are_refused_before_any_claim(shmdir):
    with refshare.open(directory=shmdir) as rs:
        with rs.from_numpy(np.ones(8)) as t:
            d = rs._sharing.share_descriptor(t)
        forged = refshare.descriptor.Descriptor(1, d.segment_name, d.segment_size, d.offset + 512, d.length,
                                                d.counter_file_name, d.slot, d.tensor, d.sender_pid,
                                                d.sender_start_ticks)
        with pytest.raises(InvalidDataError, match="not in flight"):
            rs.receive(refshare.descriptor.encode(forged))  # another range: the tag does not match
        liar = refshare.descriptor.Descriptor(1, d.segment_name, d.segment_size, d.offset, d.length,
                                              d.counter_file_name, d.slot, d.tensor, d.sender_pid + 1,
                                              d.sender_start_ticks)
        with pytest.raises(InvalidDataError, match="may only name its own"):
            rs.receive(refshare.descriptor.encode(liar))
        escape = refshare.descriptor.Descriptor(1, "other-seg-" + "0" * 32, d.segment_size, d.offset, d.length,
                                                d.counter_file_name, d.slot, d.tensor, d.sender_pid,
                                                d.sender_start_ticks)
        with pytest.raises(InvalidDataError):
            rs.receive(refshare.descriptor.encode(escape))
        with rs.receive(refshare.descriptor.encode(d)) as r:  # the genuine one still works
            assert r.numpy().tolist() == [1.0] * 8
        rs.collect()


def test_closed_tensors_and_handles_refuse_use(shmdir):
    rs = refshare.open(directory=shmdir)
    t = rs.allocate("int32", (3,))
    t.close()
    t.close()
    with pytest.raises(RefshareError, match="closed"):
        t.numpy()
    rs.close()
    with pytest.raises(RefshareError, match="closed"):
        rs.allocate("int32", (3,))


def test_large_blocks_get_their_own_segment_and_are_reused(shmdir):
    with refshare.open(directory=shmdir) as rs:
        with rs.allocate("uint8", (64 << 20,)) as t:
            t.numpy()[-1] = 7
            b = rs.share(t)
        with rs.receive(b) as r:
            assert r.numpy()[-1] == 7 and r.nbytes == 64 << 20
        rs.collect()
        segs = rs.stats().segments
        with rs.allocate("uint8", (63 << 20,)):
            assert rs.stats().segments == segs, "the cached segment is reused"
