package io.refshare.counter;

import io.refshare.shm.Libc;
import io.refshare.shm.LittleEndian;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;

import static io.refshare.counter.CounterFileLayout.*;

/**
 * The token transitions of a counter file, alone: every move of a slot word
 * ({@code docs/protocol.md} section 8.3) and the release count that wakes the owner's
 * collector (section 8.6). No peer table, no ownership, no files: {@link CounterFile} adds
 * those. Small enough to argue about, and tested as such by the jcstress tests of the
 * counter tokens.
 *
 * <h2>Implementation notes</h2>
 * A slot word moves FREE &rarr; IN_FLIGHT (the owner hands it out) &rarr; HELD(peer) (one
 * receiver claims it) &rarr; RELEASED, or IN_FLIGHT &rarr; RELEASED (the sender cancels an
 * undelivered token); RELEASED is final. Every move but the hand-out (an exchange: only the
 * owner writes a FREE slot, see {@link #handOut}) is one compare-and-set of the whole word
 * against the exact word expected, so of two racing moves from one state exactly one
 * succeeds: a token is claimed by one receiver, and released (by its holder, a reclaimer of
 * a dead holder, or a cancel) exactly once. Each move to RELEASED adds one to the release
 * count after the CAS; the count's fetch-add is a full fence, so either the collector sees
 * the new count before it sleeps or the releaser sees its waiting flag and wakes it.
 * <p>
 * <b>One wake-up per sleep.</b> A releaser that sees the flag set claims the wake-up by
 * compare-and-set of the flag to 0 and wakes the collector only when that took: the others
 * skip their system call (eight consumers releasing into one file while its collector slept
 * made a third of all futex calls). Nothing is lost: the flag is set anew before every sleep,
 * ahead of the collector's look at the count, so every sleep that a release must end has
 * its flag seen by that release, and whoever wins the flag wakes it. A releaser that dies
 * between the claim and the wake delays the collector by one sleep slice at most; a releaser
 * that wakes without claiming (protocol.md 8.6 allows it) costs a system call, nothing else.
 * <p>
 * Each CAS is preceded by a volatile read of the word and skipped when it cannot succeed.
 * The read matters beyond speed: when another process truncated the file, reading the lost
 * page raises an {@link InternalError} the caller can handle, while a SIGBUS in the JVM's
 * compare-and-set (interpreted, at least) kills the process. The window left between the
 * read and the CAS is a few instructions wide.
 */
final class Tokens {
    private static final VarHandle LONG = LittleEndian.ATOMIC_LONG;

    private final MemorySegment mem;
    private final long slotsOffset;

    /** The tokens of the counter file mapped at {@code mem}, its slots starting at {@code slotsOffset}. */
    Tokens(MemorySegment mem, long slotsOffset) {
        this.mem = mem;
        this.slotsOffset = slotsOffset;
    }

    /** The word of {@code slot}. */
    long word(int slot) {
        return (long) LONG.getVolatile(mem, offset(slot));
    }

    /**
     * FREE &rarr; IN_FLIGHT under {@code tag}: the word found, FREE when the hand-out took.
     * An exchange, not a compare-and-set: only the owner's one thread ever writes a FREE slot,
     * so a word other than FREE is damage either way (and the file is quarantined), and an
     * exchange cannot answer FREE falsely. On a page another process cut from the file,
     * compiled code skips the faulting instruction and goes on (the fault comes later, see the
     * notes): a skipped compare-and-exchange still holds the FREE it expected, which read as a
     * hand-out that took, and the fault then surfaced after it, outside the caller's handling
     * of damaged files; a skipped exchange holds the word it was to write, which is not FREE.
     */
    long handOut(int slot, int tag) {
        long off = offset(slot);
        long found = (long) LONG.getVolatile(mem, off);
        return found != FREE ? found : (long) LONG.getAndSet(mem, off, CounterFileLayout.word(IN_FLIGHT, tag));
    }

    /** IN_FLIGHT &rarr; HELD({@code peer}), for a token handed out under {@code tag}. */
    boolean claim(int slot, int tag, int peer) {
        return compareAndSet(offset(slot), CounterFileLayout.word(IN_FLIGHT, tag), CounterFileLayout.word(held(peer), tag));
    }

    /**
     * HELD({@code peer}) &rarr; IN_FLIGHT, whatever the tag: a claim its holder could not finish
     * goes back, not counted (nothing was released).
     */
    boolean unclaim(int slot, int peer) {
        return moveKeepingTag(offset(slot), held(peer), IN_FLIGHT);
    }

    /** HELD({@code peer}) &rarr; RELEASED, whatever the tag, counted. */
    boolean release(int slot, int peer) {
        if (moveKeepingTag(offset(slot), held(peer), RELEASED)) {
            released();
            return true;
        }
        return false;
    }

    /** IN_FLIGHT &rarr; RELEASED for a token handed out under {@code tag} and never claimed, counted. */
    boolean cancel(int slot, int tag) {
        if (compareAndSet(offset(slot), CounterFileLayout.word(IN_FLIGHT, tag), CounterFileLayout.word(RELEASED, tag))) {
            released();
            return true;
        }
        return false;
    }

    /** Releases every token of the first {@code slots} slots that {@code peer} holds; how many. */
    int releaseAllHeldBy(int peer, int slots) {
        int count = 0;
        for (int s = 0; s < slots; s++) {
            if (release(s, peer)) {
                count++;
            }
        }
        return count;
    }

    /** Tokens moved to RELEASED so far (the count's low 32 bits are the collector's futex word). */
    long releases() {
        return (long) LONG.getVolatile(mem, RELEASES_OFFSET);
    }

    /**
     * Owner's collector: sleeps until a release is counted after {@code seen} (a value of
     * {@link #releases()}), at most {@code timeoutNanos}. Returns at once if one already was.
     */
    void awaitRelease(long seen, long timeoutNanos) {
        try {
            if (announceSleep(seen)) {
                Libc.futexWait(mem.asSlice(RELEASES_OFFSET, 4), (int) seen, timeoutNanos);
            }
        } finally {
            LONG.setVolatile(mem, COLLECTOR_WAITING_OFFSET, 0L);
        }
    }

    /**
     * The collector's half of the hand-shake: sets the waiting flag, then answers whether the
     * count is still {@code seen} (then it may sleep; the caller clears the flag after).
     */
    boolean announceSleep(long seen) {
        LONG.setVolatile(mem, COLLECTOR_WAITING_OFFSET, 1L);
        return releases() == seen;
    }

    /** Counts a release and wakes the owner's collector if it sleeps on this file and no one else does. */
    private void released() {
        if (countRelease()) {
            Libc.futexWake(mem.asSlice(RELEASES_OFFSET, 4), Integer.MAX_VALUE);
        }
    }

    /**
     * The releaser's half: counts a release, then claims the collector's wake-up if it is
     * flagged waiting; true when the caller claimed it and must wake it (see the notes).
     */
    boolean countRelease() {
        LONG.getVolatile(mem, RELEASES_OFFSET); // guarded read first: see the notes
        LONG.getAndAdd(mem, RELEASES_OFFSET, 1L);
        long waiting = (long) LONG.getVolatile(mem, COLLECTOR_WAITING_OFFSET);
        return waiting != 0 && guardedCompareAndSet(mem, COLLECTOR_WAITING_OFFSET, waiting, 0L);
    }

    /** CAS of the slot at {@code off} from low half {@code from} to {@code to}, keeping its tag. */
    private boolean moveKeepingTag(long off, long from, long to) {
        while (true) {
            long w = (long) LONG.getVolatile(mem, off);
            if (low(w) != from) {
                return false;
            }
            if (LONG.compareAndSet(mem, off, w, CounterFileLayout.word(to, tag(w)))) {
                return true;
            }
        }
    }

    private boolean compareAndSet(long off, long expected, long next) {
        return guardedCompareAndSet(mem, off, expected, next);
    }

    /**
     * Compare-and-set of the word at {@code off} of a counter file, after the volatile read that
     * guards it (see the notes: a truncated file then fails with an {@link InternalError}, not
     * a SIGBUS). Every CAS on a counter file goes through here, the peer table's too.
     */
    static boolean guardedCompareAndSet(MemorySegment mem, long off, long expected, long next) {
        return (long) LONG.getVolatile(mem, off) == expected && LONG.compareAndSet(mem, off, expected, next);
    }

    private long offset(int slot) {
        return slotsOffset + (long) slot * SLOT_LENGTH;
    }
}
