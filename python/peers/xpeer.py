"""The Python process of the cross-language tests (io.refshare.python.*Test in core's tests).

Started by the Java tests as ``/usr/bin/python3 python/peers/xpeer.py MODE DIR ...`` with
PYTHONPATH=python; speaks in lines on stdout (stderr is the test's log), takes commands on stdin.
Messages are those of the Java test mains: the first 8 bytes hold the message's id (little-endian),
the rest is io.refshare.testing.Patterns of that id, so either side verifies every byte.

Modes:
  consume DIR QUEUE IDS FORWARD HOLD
      opens QUEUE as a consumer, prints READY, takes until the end of the stream, verifies each
      message, appends its id to the file IDS (8 bytes big-endian, as Java's DataOutputStream), and
      with FORWARD (a queue name, or "-") puts it on that queue before closing it. Prints
      ``DONE taken bad``. With HOLD > 0 it keeps the first HOLD messages open instead, prints
      ``HELD n`` and waits to be killed.
  produce DIR CAPACITY
      creates a queue, prints ``QUEUE name``, then serves commands:
      ``PUT size count`` puts count messages (ids 7<<32 | sequence), prints ``PUT total``;
      ``END`` closes the queue (the end of the stream), prints ``ENDED``;
      ``LIMBO seconds`` waits up to that long until no block of this process waits in its limbo,
      prints ``LIMBO blocks_left reclaimed`` (references reclaimed from dead processes);
      end of stdin: closes everything and exits.
  holder-publish DIR
      creates a holder, prints ``HOLDER name``; ``PUBLISH version size`` publishes a version whose
      id is the version number, prints ``PUBLISHED version``; ``CLOSE`` closes the holder, prints
      ``CLOSED``; ``LIMBO seconds`` as above; end of stdin: closes and exits.
  holder-read DIR NAME
      opens the holder; ``ACQUIRE`` acquires the current version, verifies every byte, releases it,
      prints ``VERSION id size bad``; end of stdin: exits.
Exit codes: 0 done, 2 usage, 3 a check failed.
"""
import struct
import faulthandler
import sys
import time

import numpy as np

import patterns
import refshare

PRODUCER_ID = 7


def say(*words):
    print(*words, flush=True)


def check(t):
    """The message's id after verifying every byte of the tensor, and whether any byte was wrong."""
    data = t.numpy().reshape(-1).view(np.uint8)
    ident = int(data[:8].view(np.int64)[0])
    return ident, patterns.test_first_mismatch(data[8:], ident) >= 0


def message(rs, ident, size):
    t = rs.allocate("uint8", (size,))
    data = t.numpy()
    data[:8] = np.frombuffer(struct.pack("<q", ident), dtype=np.uint8)
    patterns.fill_test(data[8:], ident)
    return t


def consume(directory, queue_name, ids_path, forward_name, hold):
    taken = bad = 0
    held = []
    with refshare.open(directory=directory) as rs, open(ids_path, "wb") as ids:
        forward = None if forward_name == "-" else rs.open_queue(forward_name)
        with rs.open_queue(queue_name) as q:
            say("READY")
            for t in q:
                ident, wrong = check(t)
                bad += wrong
                taken += 1
                ids.write(struct.pack(">q", ident))
                if hold and len(held) < hold:
                    held.append(t)  # kept open: the references this process dies holding
                    if len(held) == hold:
                        ids.flush()
                        say("HELD", len(held), bad)
                        while True:
                            time.sleep(3600)
                    continue
                with t:
                    if forward is not None:
                        forward.put(t)
        if forward is not None:
            forward.close()
    say("DONE", taken, bad)
    return 3 if bad else 0


def serve(rs, handlers):
    """Answers the test's commands on stdin until it closes: each line's first word picks a
    handler, given the other words; LIMBO is common to every producer. 2 on an unknown command."""
    handlers = dict(handlers, LIMBO=lambda w: say("LIMBO", *limbo(rs, float(w[0]))))
    for line in sys.stdin:
        w = line.split()
        if not w:
            continue
        if w[0] not in handlers:
            say("ERROR unknown command", w[0])
            return 2
        handlers[w[0]](w[1:])
    return 0


def produce(directory, capacity):
    sent = 0

    def put(w):
        nonlocal sent
        size, count = int(w[0]), int(w[1])
        for _ in range(count):
            with message(rs, PRODUCER_ID << 32 | sent, size) as t:
                q.put(t)
            sent += 1
        say("PUT", sent)

    def end(w):
        q.close()
        say("ENDED")

    with refshare.open(directory=directory) as rs:
        q = rs.create_queue(capacity=capacity)
        try:
            say("QUEUE", q.name)
            return serve(rs, {"PUT": put, "END": end})
        finally:
            q.close()


def limbo(rs, seconds):
    """Waits up to ``seconds`` for this process's limbo to empty (0 returns at once); the blocks
    still waiting there and the references reclaimed from dead processes so far."""
    deadline = time.monotonic() + seconds
    while True:
        stats = rs.stats()
        if stats.limbo_blocks == 0 or time.monotonic() >= deadline:
            return stats.limbo_blocks, stats.reclaimed
        time.sleep(0.005)


def holder_publish(directory):
    def publish(w):
        version, size = int(w[0]), int(w[1])
        with message(rs, version, size) as t:
            h.publish(t)
        say("PUBLISHED", version)

    def close(w):
        h.close()
        say("CLOSED")

    with refshare.open(directory=directory) as rs:
        h = rs.create_holder()
        try:
            say("HOLDER", h.name)
            return serve(rs, {"PUBLISH": publish, "CLOSE": close})
        finally:
            h.close()


def holder_read(directory, name):
    failed = False
    with refshare.open(directory=directory) as rs, rs.open_holder(name) as h:
        say("READY")
        for line in sys.stdin:
            if line.strip() == "ACQUIRE":
                with h.acquire() as t:
                    ident, wrong = check(t)
                    failed |= wrong
                    say("VERSION", ident, t.numpy().nbytes, int(wrong))
    return 3 if failed else 0


def main(argv):
    modes = {
        "consume": (lambda a: consume(a[0], a[1], a[2], a[3], int(a[4])), 5),
        "produce": (lambda a: produce(a[0], int(a[1])), 2),
        "holder-publish": (lambda a: holder_publish(a[0]), 1),
        "holder-read": (lambda a: holder_read(a[0], a[1]), 2),
    }
    if len(argv) < 2 or argv[1] not in modes or len(argv) - 2 != modes[argv[1]][1]:
        print("usage: xpeer.py consume|produce|holder-publish|holder-read ARGS (see the module's doc)",
              file=sys.stderr)
        return 2
    return modes[argv[1]][0](argv[2:])


if __name__ == "__main__":
    faulthandler.enable()  # a crash in native code prints where it happened
    sys.exit(main(sys.argv))
