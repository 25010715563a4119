"""The descriptor codec: round trips, every refusal an InvalidDataError, the Java fuzz corpus
and the shared conformance fixtures replayed."""
import glob
import json
import os
import random
import struct

import pytest

from refshare import descriptor as dc
from refshare.errors import InvalidDataError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(REPO, "core/src/test/resources/io/refshare/fuzz/DescriptorCodecFuzzTestInputs/decode")
CONFORMANCE = os.environ.get("REFSHARE_CONFORMANCE_DIR", os.path.join(REPO, "conformance"))

SEG = "refshare-seg-00112233445566778899aabbccddeeff"
CNT = "refshare-cnt-ffeeddccbbaa99887766554433221100"


def host(tensor=None, length=1 << 20):
    return dc.Descriptor(dc.BACKEND_HOST, SEG, 8 << 20, 4096, length, CNT, 7, tensor, 4242, 123456)


def test_round_trip_of_a_tensor_descriptor():
    d = host(dc.TensorLayout("float32", (3, 4), (1, 3), 5))
    b = dc.encode(d)
    assert len(b) == 72 + 2 * 16 + len(SEG) + len(CNT)
    e = dc.decode(b)
    assert e == d
    assert e.tensor.shape == (3, 4) and e.tensor.strides == (1, 3) and e.tensor.storage_offset == 5
    assert dc.encode(e) == b


def test_header_reads_with_the_documented_struct_format():
    b = dc.encode(host(dc.TensorLayout("int64", (2,))))
    fields = struct.unpack_from("<4sHHIBBBBB3xiqqqqqq", b)
    assert fields[0] == b"RFSD" and fields[1] == 2 and fields[5] == 6 and fields[9] == 7


def test_raw_block_and_zero_dimensional_tensor():
    assert dc.decode(dc.encode(host())).tensor is None
    scalar = dc.decode(dc.encode(host(dc.TensorLayout("float64", ()))))
    assert scalar.tensor.rank == 0 and scalar.tensor.byte_span() == 8


def test_range_tag_matches_the_protocol_example():
    assert dc.range_tag(4096, 1024, SEG) == 0xA8C4D61E


@pytest.mark.parametrize("mutate, message", [
    (lambda b: b[:3], "truncated"),
    (lambda b: b"XFSD" + b[4:], "wrong magic"),
    (lambda b: b[:71], "truncated"),
    (lambda b: b[:4] + b"\x03\x00" + b[6:], "unsupported format version"),
    (lambda b: b[:6] + b"\x08\x00" + b[8:], "unknown flags"),
    (lambda b: b + b"\x00", "trailing bytes"),
    (lambda b: b[:12] + b"\x09" + b[13:], "unknown backend"),
    (lambda b: b[:13] + b"\x0b" + b[14:], "unknown dtype"),
    (lambda b: b[:17] + b"\x01" + b[18:], "reserved byte"),
    (lambda b: b[:20] + struct.pack("<i", -1) + b[24:], "slot is negative"),
    (lambda b: b[:40] + struct.pack("<q", 1 << 62) + b[48:], "does not lie within"),
    (lambda b: b[:-1] + b"/", "path separator"),
    (lambda b: b[:-1] + b"\xff", "non-ASCII"),
    (lambda b: b"\0" * 2000, "larger than the maximum"),
])
def test_malformed_inputs_are_refused_with_a_clear_message(mutate, message):
    b = dc.encode(host(dc.TensorLayout("uint8", (16,))))
    with pytest.raises(InvalidDataError, match=message):
        dc.decode(mutate(b))


def test_name_check_refuses_foreign_names():
    b = dc.encode(host())
    with pytest.raises(InvalidDataError, match="refused by the name check"):
        dc.decode(b, names=lambda n: n.startswith("other-"))


def test_tensor_beyond_the_block_is_refused():
    with pytest.raises(ValueError):
        host(dc.TensorLayout("float32", (1024,)), length=100)
    b = bytearray(dc.encode(host(dc.TensorLayout("float32", (16,)), length=64)))
    struct.pack_into("<q", b, 72, 17)  # shape[0] = 17 needs 68 bytes
    with pytest.raises(InvalidDataError, match="needs 68 bytes"):
        dc.decode(bytes(b))


def test_overflowing_layouts_are_refused():
    b = bytearray(dc.encode(host(dc.TensorLayout("float32", (2, 2)))))
    struct.pack_into("<qqqq", b, 72, 1 << 40, 1 << 40, 1 << 40, 1)
    with pytest.raises(InvalidDataError, match="overflows 64 bits"):
        dc.decode(bytes(b))


def _replay(data):
    try:
        d = dc.decode(data)
    except InvalidDataError:
        return False
    assert dc.encode(d) == bytes(data), "the accepted encoding is the only one"
    return True


def test_java_fuzz_corpus_replays_with_only_invalid_data_errors():
    files = sorted(glob.glob(os.path.join(CORPUS, "*")))
    if not files:
        pytest.skip("the Java fuzz corpus is not in this checkout: " + CORPUS)
    accepted = sum(_replay(open(f, "rb").read()) for f in files)
    assert len(files) > 50
    assert accepted < len(files)


def test_random_mutations_raise_only_invalid_data_errors():
    rng = random.Random(11)
    seeds = [dc.encode(host(dc.TensorLayout(t, s))) for t, s in
             (("float32", (4, 4)), ("bfloat16", (2, 3, 4)), ("bool", ()), ("int64", (0, 5)))]
    seeds.append(dc.encode(host()))
    accepted = 0
    for _ in range(20000):
        b = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            op = rng.randrange(4)
            if op == 0 and b:
                b[rng.randrange(len(b))] = rng.randrange(256)
            elif op == 1 and b:
                del b[rng.randrange(len(b)):]
            elif op == 2:
                b.insert(rng.randrange(len(b) + 1), rng.randrange(256))
            elif len(b) >= 8:
                at = rng.randrange(0, len(b) - 7)
                b[at:at + 8] = struct.pack("<q", rng.choice([-1, 0, 1, 1 << 62, -(1 << 63), (1 << 63) - 1]))
        accepted += _replay(bytes(b))
    assert 0 < accepted < 20000


def _outcome(decode, b):
    try:
        d = decode(b)
        return "ok", [getattr(d, f) for f in dc.Descriptor.FIELDS], dc.encode(d)
    except InvalidDataError as e:
        return "refused", str(e)


def test_the_decoder_memo_answers_exactly_as_decode():
    """A Decoder remembers descriptors by their bytes without the slot: each answer, from the
    memo or not, must be what decode gives (a mutated slot, negative ones included, and every
    other byte changed), and the memo stays bounded."""
    rng = random.Random(5)
    known = [dc.encode(host(dc.TensorLayout("float32", (4, 4)))), dc.encode(host())]
    decoder = dc.Decoder(entries=8)
    for b in known:
        decoder.decode(b)
    hits = 0
    for i in range(5000):
        b = bytearray(rng.choice(known))
        if i % 2:
            b[20:24] = struct.pack("<i", rng.choice([0, 1, 9999, (1 << 31) - 1, -1, -(1 << 31)]))
        else:
            b[rng.randrange(len(b))] = rng.randrange(256)
        b = bytes(b)
        hits += b[:20] + b[24:] in decoder._seen
        assert _outcome(decoder.decode, b) == _outcome(dc.decode, b)
        assert len(decoder._seen) <= 8
    assert hits > 2000
    for junk in (b"", b"RFSD", None, 42):
        assert _outcome(decoder.decode, junk) == _outcome(dc.decode, junk)


def _fixtures(kind):
    files = sorted(glob.glob(os.path.join(CONFORMANCE, "descriptors", kind, "*.json")))
    if not files:
        pytest.skip("no conformance fixtures at " + CONFORMANCE + " (set REFSHARE_CONFORMANCE_DIR)")
    return [json.load(open(f)) for f in files]


def test_conformance_valid_descriptors():
    for fx in _fixtures("valid"):
        raw = bytes.fromhex(fx["hex"])
        d = dc.decode(raw)
        want = fx["decoded"]
        assert dc.encode(d) == raw, fx["name"]
        t = d.tensor
        got = {
            "backend": d.backend, "slot": d.slot, "segment_size": d.segment_size, "offset": d.offset,
            "length": d.length, "sender_pid": d.sender_pid, "sender_start_ticks": d.sender_start_ticks,
            "segment_name": d.segment_name, "counter_file_name": d.counter_file_name,
            "memory_handle": d.memory_handle.hex(), "event_handle": d.event_handle.hex(),
            "tensor": t is not None, "dtype": t.dtype.code if t else 0, "dtype_name": t.dtype.name if t else None,
            "rank": t.rank if t else 0, "storage_offset": t.storage_offset if t else 0,
            "shape": list(t.shape) if t else [], "strides": list(t.strides) if t else [],
            "itemsize": t.dtype.itemsize if t else 1, "element_count": t.element_count() if t else d.length,
            "byte_span": t.byte_span() if t else d.length, "range_tag": d.range_tag(), "total_length": len(raw),
        }
        for k, v in got.items():
            if k in want:
                assert want[k] == v, "%s: %s" % (fx["name"], k)


def test_conformance_malformed_descriptors():
    for fx in _fixtures("malformed"):
        assert fx["error_python"] == "InvalidDataError"
        with pytest.raises(InvalidDataError):
            dc.decode(bytes.fromhex(fx["hex"]))
