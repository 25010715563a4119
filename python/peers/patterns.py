"""The byte patterns the Java side writes and checks, computed with numpy (or torch) so that a
Python process verifies every byte it receives from Java, and writes bytes Java verifies.

* ``test``: io.refshare.testing.Patterns (the Java tests' pattern of a seed): 8-byte little-endian
  words ``z = seed*C1 + offset*C2; z ^= z >>> 31; z * C3`` at every 8-aligned offset; a trailing
  partial word is that word's low bytes.
* ``demo``: io.refshare.cli.DemoPattern (refshare demo's payload): the sequence number in the first
  8 bytes, then words ``z = (seq+1)*C1 ^ offset*C2; z ^ (z >>> 29)`` from offset 8, trailing bytes
  the low byte of ``word(seq, offset)`` at their own offset.

All arithmetic is modulo 2**64, as Java's long arithmetic is.
"""
import numpy as np

C1 = 0x9E3779B97F4A7C15
C2 = 0xBF58476D1CE4E5B9
C3 = 0x94D049BB133111EB
MASK = (1 << 64) - 1

_offsets = {}


def _aligned_offsets(first, words):
    """uint64 array of first, first+8, ... (cached: the demo checks the same size again and again)."""
    key = (first, words)
    a = _offsets.get(key)
    if a is None:
        a = np.arange(words, dtype=np.uint64) * np.uint64(8) + np.uint64(first)
        if len(_offsets) > 16:
            _offsets.clear()
        _offsets[key] = a
    return a


def _test_words(seed, offsets):
    with np.errstate(over="ignore"):
        z = np.uint64(seed * C1 & MASK) + offsets * np.uint64(C2)
        z ^= z >> np.uint64(31)
        return z * np.uint64(C3)


def test_pattern(seed, n):
    """The n bytes of io.refshare.testing.Patterns for ``seed``, as a uint8 array."""
    words = (n + 7) // 8
    return _test_words(seed & MASK, _aligned_offsets(0, words)).view(np.uint8)[:n]


def test_first_mismatch(data, seed):
    """Offset of the first byte of ``data`` (uint8 array) that differs from the pattern, or -1."""
    expected = test_pattern(seed, data.nbytes)
    diff = np.flatnonzero(np.asarray(data).reshape(-1).view(np.uint8) != expected)
    return int(diff[0]) if diff.size else -1


def fill_test(data, seed):
    np.asarray(data).reshape(-1).view(np.uint8)[:] = test_pattern(seed, data.nbytes)


def _demo_words(seq, offsets):
    with np.errstate(over="ignore"):
        z = np.uint64((seq + 1) * C1 & MASK) ^ (offsets * np.uint64(C2))
        return z ^ (z >> np.uint64(29))


def demo_verify_numpy(data):
    """The demo message's sequence number after checking every byte of the uint8 array, or -1."""
    n = data.nbytes
    if n < 8:
        return -1
    seq = int(data[:8].view(np.int64)[0])
    words = (n - 8) // 8
    body = data[8:8 + 8 * words].view(np.uint64)
    if not np.array_equal(body, _demo_words(seq, _aligned_offsets(8, words))):
        return -1
    for i in range(8 + 8 * words, n):
        w = int(_demo_words(seq, np.array([i], dtype=np.uint64))[0])
        if int(data[i]) != w & 0xFF:
            return -1
    return seq


def demo_verify_torch(t):
    """demo_verify_numpy for a uint8 torch.Tensor, computed with torch's int64 arithmetic."""
    import torch
    n = t.numel()
    if n < 8:
        return -1
    seq = int(t[:8].view(torch.int64)[0])
    words = (n - 8) // 8

    def signed(x):
        x &= MASK
        return x - (1 << 64) if x >= 1 << 63 else x

    offsets = torch.arange(8, 8 + 8 * words, 8, dtype=torch.int64)
    z = torch.bitwise_xor(offsets * signed(C2), signed((seq + 1) * C1))  # int64 multiply wraps like Java's
    # Java's >>> 29 on a signed long: arithmetic shift, then clear the 29 copied sign bits
    z = torch.bitwise_xor(z, torch.bitwise_and(z >> 29, (1 << 35) - 1))
    if not torch.equal(t[8:8 + 8 * words].view(torch.int64), z):
        return -1
    tail = t[8 + 8 * words:]
    if tail.numel():
        expected = torch.tensor([w & 0xFF for w in
                                 (int(v) for v in _demo_words(seq, np.arange(8 + 8 * words, n, dtype=np.uint64)))],
                                dtype=torch.uint8)
        if not torch.equal(tail, expected):
            return -1
    return seq
