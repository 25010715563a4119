# The Python side of refshare bench's torch.multiprocessing comparison, run by
# /usr/bin/python3 from a temporary copy (TorchBench). See TorchScript.java for the protocol.
import queue
import sys
import time

import torch
import torch.multiprocessing as mp

PROBE = 64
TIMEOUT = 300


def tag(mode, i):
    return 0x5A if mode == "reuse" else 1 + (i % 251)


def read(t, expected):
    # the first and last element and 64 bytes from the middle, as the Java consumer reads
    n = t.numel()
    ok = int(t[0]) == expected and int(t[n - 1]) == expected
    start = max(0, min(n - PROBE, n // 2)) & ~7
    return bool((t[start:min(n, start + PROBE)] == expected).all()) and ok


def tensor(size, value):
    return torch.empty(size, dtype=torch.uint8).fill_(value)


def ping_pong_consumer(strategy, data, acks, rounds, mode):
    mp.set_sharing_strategy(strategy)
    read_at = [0] * rounds
    bad = 0
    for i in range(rounds):
        t = data.get(timeout=TIMEOUT)
        if not read(t, tag(mode, i)):
            bad += 1
        read_at[i] = time.monotonic_ns()
        del t
        acks.put(1)
    acks.put((bad, read_at))


def stream_consumer(strategy, data, done, messages, warmup, mode):
    mp.set_sharing_strategy(strategy)
    bad = 0
    start = 0
    for i in range(messages):
        t = data.get(timeout=TIMEOUT)
        if not read(t, tag(mode, i)):
            bad += 1
        del t
        if i == warmup - 1:
            start = time.monotonic_ns()
    done.put((bad, start, time.monotonic_ns()))


def finish(p):
    p.join(60)
    if p.is_alive():
        p.kill()
        p.join()


def ping_pong(ctx, strategy, size, mode, warmup, rounds):
    total = warmup + rounds
    data, acks = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=ping_pong_consumer, args=(strategy, data, acks, total, mode), daemon=True)
    p.start()
    try:
        reused = tensor(size, tag(mode, 0)) if mode == "reuse" else None
        send_at, ack_at = [0] * total, [0] * total
        for i in range(total):
            t = reused if reused is not None else tensor(size, tag(mode, i))
            send_at[i] = time.monotonic_ns()
            data.put(t)
            del t  # a fresh tensor is dropped at once, as the Java producer drops it
            acks.get(timeout=TIMEOUT)
            ack_at[i] = time.monotonic_ns()
        bad, read_at = acks.get(timeout=TIMEOUT)
    finally:
        finish(p)
    print("PINGPONG", strategy, mode, size, warmup, bad)
    print("SEND", *send_at)
    print("READ", *read_at)
    print("ACK", *ack_at)
    sys.stdout.flush()


def stream(ctx, strategy, size, mode, warmup, messages, window):
    total = warmup + messages
    data, done = ctx.Queue(window), ctx.Queue()
    p = ctx.Process(target=stream_consumer, args=(strategy, data, done, total, warmup, mode), daemon=True)
    p.start()
    try:
        reused = tensor(size, tag(mode, 0)) if mode == "reuse" else None
        for i in range(total):
            t = reused if reused is not None else tensor(size, tag(mode, i))
            data.put(t, timeout=TIMEOUT)
            del t
        bad, start, end = done.get(timeout=TIMEOUT)
    finally:
        finish(p)
    print("STREAM", strategy, mode, size, messages, bad, end - start)
    sys.stdout.flush()


def main():
    ctx = mp.get_context("fork")  # torch is imported once; a spawned child would import it again
    available = mp.get_all_sharing_strategies()
    strategies = [s for s in ("file_descriptor", "file_system") if s in available]
    for plan in sys.argv[1:]:
        size, pp_warmup, rounds, s_warmup, messages, window = map(int, plan.split(":"))
        for strategy in strategies:
            mp.set_sharing_strategy(strategy)
            for mode in ("reuse", "fresh"):
                ping_pong(ctx, strategy, size, mode, pp_warmup, rounds)
                stream(ctx, strategy, size, mode, s_warmup, messages, window)
    print("END")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
