"""A second process for the tests: started with subprocess, talks in lines on stdout/stdin."""
import struct
import sys
import time

import numpy as np

import refshare


def say(*words):
    print(*words, flush=True)


def pattern(ident, n):
    return ((np.arange(n, dtype=np.int64) * 31 + ident * 7) % 251).astype(np.uint8)


def main(argv):
    mode, directory = argv[1], argv[2]
    with refshare.open(directory=directory) as rs:
        if mode == "consume":  # QUEUE HOLD: takes to the end; keeps the first HOLD open and waits to be killed
            hold, held, taken, bad, ids = int(argv[4]), [], 0, 0, []
            with rs.open_queue(argv[3]) as q:
                say("READY")
                for t in q:
                    a = t.numpy()
                    ident = int(a[:8].view(np.int64)[0])
                    bad += not np.array_equal(a[8:], pattern(ident, a.size - 8))
                    taken += 1
                    ids.append(ident)
                    if len(held) < hold:
                        held.append(t)
                        if len(held) == hold:
                            say("HELD", hold, bad)
                            time.sleep(3600)
                        continue
                    t.close()
            say("DONE", taken, bad, " ".join(map(str, ids)))
        elif mode == "produce":  # CAPACITY COUNT SIZE: puts COUNT messages, then waits for a line
            count, size = int(argv[4]), int(argv[5])
            q = rs.create_queue(capacity=int(argv[3]))
            say("QUEUE", q.name)
            for i in range(count):
                with rs.allocate("uint8", (size,)) as t:
                    a = t.numpy()
                    a[:8] = np.frombuffer(struct.pack("<q", i), dtype=np.uint8)
                    a[8:] = pattern(i, size - 8)
                    q.put(t)
            say("PUT", count)
            sys.stdin.readline()
            q.close()
        elif mode == "receive":  # HEX...: receives descriptors, holds them, waits to be killed
            held = [rs.receive(bytes.fromhex(h)) for h in argv[3:]]
            say("HELD", len(held), sum(int(t.numpy().sum()) for t in held))
            time.sleep(3600)
        elif mode == "read-holder":  # NAME: acquires the current version, keeps it, waits to be killed
            h = rs.open_holder(argv[3])
            t = h.acquire()
            say("HELD", float(t.numpy().reshape(-1)[0]))
            time.sleep(3600)
        else:
            say("ERROR unknown mode", mode)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
