package io.refshare.share;

import io.refshare.counter.RangeTag;

/**
 * The sender's record of a shared storage: the tokens it handed out for it (as
 * {@link CounterFilePool} numbers them), all bound to the storage's one range tag. While
 * any token is live (in flight or held), the storage must stay; once the sender drops the
 * storage it waits in the {@link Limbo} until {@link #prune()} finds no live token.
 *
 * <p>Released tokens are pruned as more are added, so a buffer sent a million times
 * keeps only its live tokens here, in an array that stops growing: recording a token
 * allocates nothing in steady state.
 */
final class SentBlock extends TokenList {
    private final Storage storage;
    /** The range tag every token of this storage was handed out for. */
    private final int tag;
    /** The segment's name as a message carries it (ASCII), written into every message. */
    private final byte[] segmentName;
    private int pruneAt = 64;

    SentBlock(Storage storage) {
        this.storage = storage;
        this.segmentName = storage.sharing.sentName(storage.segmentName());
        this.tag = RangeTag.of(storage.segmentOffset(), storage.byteSize(), segmentName);
    }

    Storage storage() {
        return storage;
    }

    int tag() {
        return tag;
    }

    byte[] segmentName() {
        return segmentName;
    }

    synchronized void add(long token) {
        append(token);
        pruneWhenDue();
    }

    /** {@link #add} of {@code count} tokens, {@code from[at..at + count)}, under one taking of the lock. */
    synchronized void addAll(long[] from, int at, int count) {
        appendAll(from, at, count);
        pruneWhenDue();
    }

    private void pruneWhenDue() {
        if (size() >= pruneAt) {
            prune();
            pruneAt = Math.max(64, 2 * size());
        }
    }

    /**
     * Drops the tokens that came back, returning them to their counter files, and
     * answers how many are still live (a token of a damaged counter file stays live for good:
     * see {@link CounterFilePool}).
     */
    synchronized int prune() {
        CounterFilePool files = storage.sharing.counterFiles();
        int live = keepLive(files, tag);
        files.removeFinished();
        return live;
    }

    long byteSize() {
        return storage.byteSize();
    }
}
