package io.refshare.share;

import io.refshare.memory.AllocatedBlock;
import io.refshare.memory.CachingAllocator;
import io.refshare.observe.Events;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Storages the sender no longer uses but some consumer still does. {@link #collect()}
 * frees those whose every token has come back.
 *
 * <h2>Implementation notes</h2>
 * The lock guards only the list and the counts, and is held for a few list operations,
 * never for a look at a token: the sender's every dropped block enters here ({@link #add}),
 * and a collection's pass over the waiting blocks reads counter-file words that consumers
 * on other CPUs just wrote, one cache miss each. Under the lock that pass kept the producing
 * thread waiting (two CPUs, one consumer of fresh 1 KiB blocks: blocked on this lock 11,563
 * times, 0.5 s of a 9.5 s run, by its own collector). So a collection takes the whole list out
 * under the lock, leaving an empty one for {@code add}, looks at its blocks without the lock
 * (each {@link SentBlock#prune} is its own lock), and puts those still in use back in front
 * of the blocks added meanwhile (oldest first, as before). Two collections running at once
 * take disjoint lists, so each block is looked at, and disposed of, by one of them.
 * <p>
 * Disposal happens after the lock too, because disposing frees into the allocator, whose
 * miss path collects the limbo again: freeing under this lock would let two threads
 * deadlock (one holding the allocator, one the limbo), which is how PyTorch's limbo once
 * hung. {@code blocks} counts every block not yet disposed of, the ones a collection has
 * out included, so {@link #collectAndSettle} can wait for the other collections.
 */
final class Limbo {
    /** The process's host allocator, every host block's: a collection's host blocks go back to it together. */
    private final CachingAllocator hostAllocator;
    private List<SentBlock> waiting = new ArrayList<>();
    /** Waiting blocks plus those taken out by a collection and not yet put back or disposed of. */
    private int blocks;
    private long bytes;
    /** Blocks freed from the limbo since it was made. */
    private long collected;

    Limbo(CachingAllocator hostAllocator) {
        this.hostAllocator = hostAllocator;
    }

    /**
     * Adds a block; returns true when the limbo was empty before (the background collector
     * parks while it is, and is to be woken).
     */
    synchronized boolean add(SentBlock block) {
        boolean wasEmpty = blocks == 0;
        waiting.add(block);
        blocks++;
        bytes += block.byteSize();
        Events.LimboEnter event = new Events.LimboEnter();
        if (event.shouldCommit()) {
            event.length = block.byteSize();
            event.limboBlocks = blocks;
            event.commit();
        }
        return wasEmpty;
    }

    /** Frees every waiting storage no process uses any more; returns how many. */
    int collect() {
        List<SentBlock> taken;
        synchronized (this) {
            if (waiting.isEmpty()) {
                return 0;
            }
            taken = waiting;
            waiting = new ArrayList<>();
        }
        List<SentBlock> free = new ArrayList<>();
        long freedBytes = 0;
        int keep = 0;
        boolean lookedAtAll = false;
        try {
            for (int i = 0; i < taken.size(); i++) {
                SentBlock b = taken.get(i);
                if (b.prune() == 0) {
                    free.add(b);
                    freedBytes += b.byteSize();
                } else {
                    taken.set(keep++, b);
                }
            }
            lookedAtAll = true;
        } finally {
            taken.subList(keep, keep + free.size()).clear(); // the slots the kept ones moved out of
            if (!lookedAtAll) {
                // a prune threw: every block goes back, the freeable ones too (a later collection frees them)
                taken.addAll(keep, free);
                free.clear();
            }
            synchronized (this) {
                taken.addAll(waiting); // those added meanwhile, after the older ones
                waiting = taken;
                if (free.isEmpty()) {
                    notifyAll(); // for collectAndSettle: nothing of ours is out any more
                }
            }
        }
        if (free.isEmpty()) {
            return 0;
        }
        // every block taken out is disposed of and uncounted, whatever one disposal throws:
        // one left counted would keep collectAndSettle waiting for good. They are uncounted
        // together, after the last: a lock and a notifyAll per block were an eighth of the
        // collector's time with eight consumers of fresh 1 KiB blocks. For the same reason the
        // host blocks go back to the allocator together: a lock per block kept the producing
        // thread waiting on it (16 cores, one consumer of fresh 1 KiB blocks: 7 % of its samples)
        RuntimeException failure = null;
        List<AllocatedBlock> hostBlocks = new ArrayList<>();
        try {
            for (SentBlock b : free) {
                try {
                    if (!(b.storage() instanceof LocalBlock local && local.disposeInto(hostBlocks))) {
                        b.storage().dispose();
                    }
                } catch (RuntimeException e) {
                    failure = added(failure, e);
                }
            }
            if (!hostBlocks.isEmpty()) {
                try {
                    hostAllocator.freeAll(hostBlocks);
                } catch (RuntimeException e) {
                    failure = added(failure, e);
                }
            }
        } finally {
            synchronized (this) {
                blocks -= free.size();
                bytes -= freedBytes;
                collected += free.size();
                notifyAll(); // for collectAndSettle
            }
        }
        if (failure != null) {
            throw failure;
        }
        Events.LimboCollect event = new Events.LimboCollect();
        if (event.shouldCommit()) {
            event.freed = free.size();
            event.waiting = size();
            event.commit();
        }
        return free.size();
    }

    private static RuntimeException added(RuntimeException failure, RuntimeException e) {
        if (failure == null) {
            return e;
        }
        failure.addSuppressed(e);
        return failure;
    }

    /**
     * Collects, then waits until the blocks that collections in other threads took out are
     * disposed of too, so that on return the limbo holds only blocks still in use. For
     * callers that then look at the limbo or the allocator.
     */
    int collectAndSettle() {
        return collectAndSettle(Long.MAX_VALUE);
    }

    /**
     * {@link #collectAndSettle()}, waiting at most {@code maxNanos} for the other collections'
     * disposals: the allocator's miss path, where a block the background collector is freeing
     * right now is memory about to come back (without the wait an allocation racing the
     * collector failed at the cap although its block was being freed). A disposal only updates
     * the allocator's books under its lock, which the miss path never holds, so the wait ends;
     * the bound keeps it short whatever a disposal does.
     */
    int collectAndSettle(long maxNanos) {
        int freed = collect();
        long deadline = System.nanoTime() + maxNanos;
        boolean interrupted = false;
        synchronized (this) {
            long left;
            while (blocks > waiting.size() && (left = deadline - System.nanoTime()) > 0) {
                try {
                    TimeUnit.NANOSECONDS.timedWait(this, left);
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        return freed;
    }

    /** Blocks in the limbo, counting those a collection is freeing right now. */
    synchronized int size() {
        return blocks;
    }

    synchronized long collected() {
        return collected;
    }

    /** Bytes of {@link #size()}. */
    synchronized long bytes() {
        return bytes;
    }
}
