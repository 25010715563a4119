package io.refshare.share;

import io.refshare.observe.Events;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Storages the sender no longer uses but some consumer still does. {@link #collect()}
 * frees those whose every token has come back.
 *
 * <h2>Implementation notes</h2>
 * The lock guards only the list. Collection takes the freeable entries out under the
 * lock and disposes of them after releasing it, because disposing frees into the
 * allocator, whose miss path collects the limbo again: freeing under this lock would let
 * two threads deadlock (one holding the allocator, one the limbo), which is how PyTorch's
 * limbo once hung. Two collections running at once take disjoint entries, so each entry
 * is disposed of exactly once.
 */
final class Limbo {
    private final List<SentBlock> waiting = new ArrayList<>();
    /** Waiting blocks plus those taken out by a collection and not yet disposed of. */
    private int blocks;
    private long bytes;
    /** Blocks freed from the limbo since it was made. */
    private long collected;

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
        List<SentBlock> free;
        long freedBytes = 0;
        synchronized (this) {
            if (waiting.isEmpty()) {
                return 0;
            }
            free = new ArrayList<>();
            int keep = 0;
            for (int i = 0; i < waiting.size(); i++) {
                SentBlock b = waiting.get(i);
                if (b.prune() == 0) {
                    free.add(b);
                    freedBytes += b.byteSize();
                } else {
                    waiting.set(keep++, b);
                }
            }
            waiting.subList(keep, waiting.size()).clear();
        }
        if (free.isEmpty()) {
            return 0;
        }
        // every block taken out is disposed of and uncounted, whatever one disposal throws:
        // one left counted would keep collectAndSettle waiting for good. They are uncounted
        // together, after the last: a lock and a notifyAll per block were an eighth of the
        // collector's time with eight consumers of fresh 1 KiB blocks
        RuntimeException failure = null;
        try {
            for (SentBlock b : free) {
                try {
                    b.storage().dispose();
                } catch (RuntimeException e) {
                    if (failure == null) {
                        failure = e;
                    } else {
                        failure.addSuppressed(e);
                    }
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
