"""A Python consumer process of ``refshare demo --python-consumers N``.

Takes tensors from the demo's queue until the stream ends, verifies every byte (the demo's
pattern, io.refshare.cli.DemoPattern) through a zero-copy numpy array or torch tensor, closes
each, and reports on stdout as the Java consumer (io.refshare.cli.DemoConsumer) does:
``READY`` once attached, ``PROGRESS received bytes bad`` a few times a second, ``DONE received bytes bad``.

Args: directory, prefix, queue name, ``numpy`` or ``torch``.
"""
import faulthandler
import sys
import time

import refshare

import patterns


def main(argv):
    if len(argv) != 5 or argv[4] not in ("numpy", "torch"):
        print("usage: demo_consumer.py DIRECTORY PREFIX QUEUE numpy|torch", file=sys.stderr)
        return 2
    directory, prefix, queue_name, kind = argv[1:]
    if kind == "torch":
        import torch

        def verify(t):
            return patterns.demo_verify_torch(t.torch().reshape(-1).view(torch.uint8))
    else:
        import numpy as np

        def verify(t):
            return patterns.demo_verify_numpy(t.numpy().reshape(-1).view(np.uint8))

    received = nbytes = bad = 0
    last_report = time.monotonic()
    with refshare.open(directory=directory, prefix=prefix) as rs, rs.open_queue(queue_name) as q:
        print("READY", flush=True)
        for t in q:  # ends at the end of the stream
            with t:  # closing gives the reference back
                if verify(t) < 0:
                    bad += 1
                received += 1
                nbytes += t.numpy().nbytes
            if time.monotonic() - last_report > 0.1:
                print("PROGRESS", received, nbytes, bad, flush=True)
                last_report = time.monotonic()
    print("DONE", received, nbytes, bad, flush=True)
    return 0


if __name__ == "__main__":
    faulthandler.enable()  # a crash in native code prints where it happened
    sys.exit(main(sys.argv))
