"""A producer that shares one tensor many times (tens of thousands of tokens over several
counter files) keeps every counter file mapped while any token of it is still listed by an
open tensor or a limbo entry: closing the tensor, collecting, closing the Refshare and the
interpreter's exit never read an unmapped file (the bench's segfault in tensor.close)."""
import os
import subprocess
import sys

from conftest import PYTHON_DIR

# the producer runs in its own process: a segfault there is a failed test, not a dead pytest
PRODUCER = r'''
import faulthandler, os, subprocess, sys
faulthandler.enable()
import refshare, refshare.sharing
refshare.sharing.COUNTER_SLOTS = 10000   # the pile spans several files (the default holds 100,000)

CONSUMER = """
import sys, refshare
with refshare.open(directory=sys.argv[1]) as rs:
    first = None
    for line in sys.stdin:
        if not line.strip():
            break
        t = rs.receive(bytes.fromhex(line))
        assert t.numpy()[0] == 7
        if first is None:
            first = t   # held to the end: its token keeps the first counter file counted
        else:
            t.close()
    with rs.open_queue(sys.argv[2]) as q:
        for t in q:
            t.close()
    first.close()
"""


def mapped(rs, block):
    """Every token the block lists is of a file still ours and mapped."""
    own = rs._sharing._own
    return all(c in own and not c.file.closed for c, _, _ in block.sent)


d, pile, streamed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rs = refshare.open(directory=d)
q = rs.create_queue(capacity=16)
consumer = subprocess.Popen([sys.executable, "-c", CONSUMER, d, q.name], stdin=subprocess.PIPE, text=True)
t = rs.allocate("uint8", (64,))
t.numpy()[:] = 7
# nobody consumes yet: the tokens pile up over several counter files
msgs = [rs.share(t).hex() for _ in range(pile)]
assert rs.stats().own_counter_files == -(-pile // refshare.sharing.COUNTER_SLOTS), rs.stats()
assert mapped(rs, t._block)
consumer.stdin.write("\n".join(msgs) + "\n\n")
consumer.stdin.flush()
for i in range(streamed):  # the bench's pattern: one reused tensor put again and again
    q.put(t)
    if i % 5000 == 0:
        assert mapped(rs, t._block)
q.end_of_stream()
assert consumer.wait(60) == 0
assert mapped(rs, t._block)
t.close()   # the crash site: it settles every token it still lists
rs.collect()
s = rs.stats()
assert s.limbo_blocks == 0 and s.own_counter_files == 1, s
assert s.shared == pile + streamed, s
cnt = [n for n in os.listdir(d) if "-cnt-" in n]
assert len(cnt) == 1, cnt

# a tensor with tokens out while the Refshare closes, closed after it: nothing to read
late = rs.allocate("float32", (4,))
dropped = rs.allocate("float32", (4,))
for _ in range(3):
    rs.share(late)
    rs.share(dropped)
dropped.close()   # into the limbo: the collector sleeps on the counter file now
assert rs.stats().limbo_blocks == 1
q.close()
rs.close()
late.close()
assert rs._sharing._own == []

# left to atexit: a process that exits with tensors shared, open and in the limbo
rs2 = refshare.open(directory=d)
kept = rs2.allocate("uint8", (8,))
for _ in range(25):
    rs2.share(kept)
gone = rs2.allocate("uint8", (8,))
rs2.share(gone)
gone.close()
print("OK", flush=True)
'''

# one process shares its own messages, receives them on other threads and closes them out of
# order while counter files of 64 slots retire by the hundred
SELF = r'''
import faulthandler, queue, random, sys, threading
faulthandler.enable()
import refshare, refshare.sharing
refshare.sharing.COUNTER_SLOTS = 64

d, n = sys.argv[1], int(sys.argv[2])
rs = refshare.open(directory=d)
t = rs.allocate("int32", (16,))
t.numpy()[:] = 3
msgs = queue.Queue()


def receiver(seed):
    rnd = random.Random(seed)
    held = []
    while True:
        m = msgs.get()
        if m is None:
            break
        held.append(rs.receive(m))
        if len(held) > 40 or rnd.random() < 0.3:
            rnd.shuffle(held)
            for x in held[:rnd.randint(1, len(held))]:
                assert x.numpy()[0] == 3
                x.close()
            held = [x for x in held if not x.closed]
    for x in held:
        x.close()


threads = [threading.Thread(target=receiver, args=(i,)) for i in range(2)]
for th in threads:
    th.start()
views = []
for i in range(n):
    msgs.put(rs.share(t))
    if i % 997 == 0:
        views.append(t[1:])   # a view is its own reference to the same block
        rs.share(views[-1])   # never received: stays in flight in a retired file
        rs.collect()
for th in threads:
    msgs.put(None)
for th in threads:
    th.join()
own = rs._sharing._own
assert all(c in own and not c.file.closed for c, _, _ in t._block.sent)
assert rs.stats().own_counter_files > 1   # the views' in-flight tokens keep their files
t.close()
for v in views:
    v.close()
rs.collect()
s = rs.stats()
assert s.limbo_blocks == 1, s   # the views' block waits for its unreceived messages
rs.close()
print("OK", s.own_counter_files, flush=True)
'''


def run(script, *args, timeout=60):
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    p = subprocess.run([sys.executable, "-c", script] + [str(a) for a in args], env=env, capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0 and p.stdout.startswith("OK"), (p.returncode, p.stdout, p.stderr[-3000:])
    return p.stdout


def test_a_tensor_shared_55000_times_closes_after_its_counter_files_retired(shmdir):
    run(PRODUCER, shmdir, 25000, 30000)


def test_own_messages_closed_out_of_order_over_hundreds_of_retired_files(shmdir):
    out = run(SELF, shmdir, 12000)
    assert int(out.split()[1]) > 1
