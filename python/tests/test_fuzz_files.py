"""Shared files rewritten by a hostile or broken process: opening them answers with refshare's
documented errors only (InvalidDataError for malformed data), never another exception."""
import random

import pytest

import refshare
from refshare import counter, holder, queue
from refshare.errors import RefshareError


def _mutations(rng, f, span):
    """Random rewrites of the first ``span`` bytes of ``f``, each undone after its check."""
    for _ in range(300):
        at = rng.randrange(span)
        width = rng.choice((1, 4, 8))
        at = min(at, span - width)
        old = f.read(at, width)
        new = rng.choice([bytes(width), b"\xff" * width, bytes(rng.randrange(256) for _ in range(width))])
        f.write(at, new)
        yield
        f.write(at, old)


@pytest.mark.parametrize("kind", ["cnt", "q", "hold"])
def test_damaged_headers_open_with_documented_errors_only(shmdir, kind):
    rng = random.Random(kind)
    with refshare.open(directory=shmdir) as rs:
        if kind == "cnt":
            owner = counter.CounterFile.create(rs.directory, 16, 4)
            f, opener, span = owner.file, lambda: counter.CounterFile.open(rs.directory, owner.name), 64
        elif kind == "q":
            owner = rs.create_queue(capacity=4)
            f, opener, span = owner._f, lambda: queue.TensorQueue.open(rs, owner.name), 64
        else:
            owner = rs.create_holder(slots=2, readers=2)
            f, opener, span = owner._f, lambda: holder.Holder.open(rs, owner.name), 64
        refused = 0
        for _ in _mutations(rng, f, span):
            try:
                opened = opener()
            except RefshareError:
                refused += 1
                continue
            opened.close()
        assert refused > 50
        if kind == "cnt":
            f.unlink()  # a bare counter file: removed by hand (the others' close removes them)
        owner.close()
