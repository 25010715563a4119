"""The Python process of ``refshare bench``'s Java<->Python rows, driven like the Java consumer
(io.refshare.harness.BenchPeer): one-line commands on stdin, replies on stdout, timestamps from
``time.monotonic_ns()`` (CLOCK_MONOTONIC, the clock Java's System.nanoTime() reads on Linux).

As a consumer of a Java producer (Java -> Python rows) it answers BenchPeer's commands and does
what BenchPeer does per message: receive, read the first and last byte and 64 bytes from the
middle through a zero-copy numpy array, take the timestamp, close, and in a ping-pong answer with
a small acknowledgement tensor:
  RS_PINGPONG ping pong rounds mode  -> READY, then RESULT bad readAt...
  RS_STREAM queue messages warmup mode -> READY, then RESULT bad start end
As a producer for a Java consumer (Python -> Java rows) it does what the Java producer does:
  PY_PINGPONG size mode rounds         -> QUEUES ping pong; after GO: SENT t..., ACKED t...
  PY_STREAM size mode messages window  -> QUEUE name; after GO: PUT; after CLOSE: CLOSED
Also: CLOCK -> CLOCK now; EXIT (or end of stdin) ends it. Failures answer ``ERROR text``.
Args: directory, prefix.
"""
import faulthandler
import sys
import time

import numpy as np

import refshare

PROBE = 64
PING_PONG_CAPACITY = 2


def tag(mode, i):
    """The byte every position of message i holds (io.refshare.harness.Payload#tag)."""
    return 0x5A if mode == "REUSE" else 1 + i % 251


def probe_range(n):
    start = max(0, min(n - PROBE, n // 2)) & ~7
    return start, min(n, start + PROBE)


_PROBES = [bytes([v]) * PROBE for v in range(256)]


def read(data, expected):
    """Payload#read: the first and last byte and 64 bytes from the middle all hold ``expected``
    (through a memoryview: a few hundred nanoseconds, where numpy comparisons cost microseconds)."""
    m = data.data  # the array's memoryview: indexing it yields ints, slicing it copies nothing
    n = len(m)
    start, end = probe_range(n)
    return m[0] == expected and m[n - 1] == expected and m[start:end] == _PROBES[expected][:end - start]


class Peer:
    def __init__(self, rs, commands):
        self.rs = rs
        self.commands = commands

    def reply(self, *words):
        print(*words, flush=True)

    def next_command(self, expected):
        line = self.commands.readline()
        if line.strip() != expected:
            raise RuntimeError(f"expected {expected}, got {line.strip()!r}")

    def filled(self, size, value):
        t = self.rs.allocate("uint8", (size,))
        t.numpy().fill(value)
        return t

    # --- consumer of a Java producer ---

    def consume_ping_pong(self, ping_name, pong_name, rounds, mode):
        read_at = [0] * rounds
        bad = 0
        with self.rs.open_queue(ping_name) as ping, self.rs.open_queue(pong_name) as pong, \
                self.rs.allocate("uint8", (8,)) as ack:
            self.reply("READY")
            for i in range(rounds):
                with ping.take() as t:
                    ok = read(t.numpy(), tag(mode, i))
                    read_at[i] = time.monotonic_ns()
                if not ok:
                    bad += 1
                pong.put(ack)
        self.reply("RESULT", bad, *read_at)

    def consume_stream(self, name, messages, warmup, mode):
        bad = 0
        start = 0
        with self.rs.open_queue(name) as q:
            self.reply("READY")
            for i in range(messages):
                with q.take() as t:
                    if not read(t.numpy(), tag(mode, i)):
                        bad += 1
                if i == warmup - 1:
                    start = time.monotonic_ns()
        self.reply("RESULT", bad, start, time.monotonic_ns())

    # --- producer for a Java consumer ---

    def produce_ping_pong(self, size, mode, rounds):
        send_at = [0] * rounds
        ack_at = [0] * rounds
        with self.rs.create_queue(capacity=PING_PONG_CAPACITY) as ping, \
                self.rs.create_queue(capacity=PING_PONG_CAPACITY) as pong:
            self.reply("QUEUES", ping.name, pong.name)
            self.next_command("GO")
            reused = self.filled(size, tag(mode, 0)) if mode == "REUSE" else None
            try:
                for i in range(rounds):
                    if reused is not None:
                        send_at[i] = time.monotonic_ns()
                        ping.put(reused)
                    else:
                        with self.filled(size, tag(mode, i)) as fresh:
                            send_at[i] = time.monotonic_ns()
                            ping.put(fresh)
                    pong.take().close()
                    ack_at[i] = time.monotonic_ns()
            finally:
                if reused is not None:
                    reused.close()
        self.reply("SENT", *send_at)
        self.reply("ACKED", *ack_at)

    def produce_stream(self, size, mode, messages, window):
        with self.rs.create_queue(capacity=window) as q:
            self.reply("QUEUE", q.name)
            self.next_command("GO")
            reused = self.filled(size, tag(mode, 0)) if mode == "REUSE" else None
            try:
                for i in range(messages):
                    if reused is not None:
                        q.put(reused)
                    else:
                        with self.filled(size, tag(mode, i)) as fresh:
                            q.put(fresh)
            finally:
                if reused is not None:
                    reused.close()
            self.reply("PUT")
            self.next_command("CLOSE")  # the consumer has taken everything: now the stream may end
        self.reply("CLOSED")

    def serve(self, w):
        if w[0] == "CLOCK":
            self.reply("CLOCK", time.monotonic_ns())
        elif w[0] == "RS_PINGPONG":
            self.consume_ping_pong(w[1], w[2], int(w[3]), w[4])
        elif w[0] == "RS_STREAM":
            self.consume_stream(w[1], int(w[2]), int(w[3]), w[4])
        elif w[0] == "PY_PINGPONG":
            self.produce_ping_pong(int(w[1]), w[2], int(w[3]))
        elif w[0] == "PY_STREAM":
            self.produce_stream(int(w[1]), w[2], int(w[3]), int(w[4]))
        else:
            raise ValueError(f"unknown command {w[0]}")


def main(argv):
    if len(argv) != 3:
        print("usage: bench_peer.py DIRECTORY PREFIX", file=sys.stderr)
        return 2
    with refshare.open(directory=argv[1], prefix=argv[2]) as rs:
        peer = Peer(rs, sys.stdin)
        peer.reply("READY")
        try:
            while True:
                line = sys.stdin.readline()
                if not line or line.strip() == "EXIT":
                    break
                if line.strip():
                    peer.serve(line.split())
        except Exception as e:
            peer.reply("ERROR", repr(e))
            raise
    return 0  # closing refshare gave back what this process held and removed its files


if __name__ == "__main__":
    faulthandler.enable()  # a crash in native code prints where it happened
    sys.exit(main(sys.argv))
