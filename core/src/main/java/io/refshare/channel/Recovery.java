package io.refshare.channel;

import io.refshare.channel.ShmQueueLayout.Geometry;

import java.lang.foreign.MemorySegment;

import static io.refshare.channel.ShmQueueLayout.*;

/**
 * Finds what dead participants left behind in a queue file and puts it right, so a crash
 * never wedges the queue and never loses or duplicates a published message.
 *
 * <h2>Implementation notes</h2>
 * A participant can die holding a cell it claimed (see {@link ShmQueueLayout}):
 * <ul>
 * <li><b>WRITING(p)</b>: its message was never published (its offer never returned), so
 *     the position is skipped: the cell becomes FREE(p + capacity), exactly what a
 *     consumer leaves behind, and the consumer waiting at {@code p} moves past it.</li>
 * <li><b>READING(p)</b>: the message was claimed but its poll never returned it to the
 *     application, so it is delivered again, exactly once: a consumer <i>adopts</i> the
 *     cell (READING(p, dead) &rarr; READING(p, itself)) and returns the message from its
 *     own poll; or, when the producer side is blocked on this very cell (the tail is at
 *     {@code p + capacity}), it is republished in place as FULL(p + capacity), the
 *     position the tail is about to hand out, without copying a byte.</li>
 * </ul>
 * Each repair is one compare-and-set from the exact word that names the dead claimant,
 * after re-reading that the claimant's table entry still holds the identity judged dead
 * (read after the cell word, so it is the identity of the cell's claimant or a later
 * one, in which case the cell word read is stale and the compare-and-set fails). Two
 * processes repairing at once: one compare-and-set wins. The dead process cannot race:
 * it is dead. A live claimant is never touched, because death needs the kernel's evidence
 * ({@link Liveness}: nobody holds the claimant's life lock). That evidence holds across
 * PID namespaces sharing the directory, so a participant in another container is
 * judged, and its dead claims repaired, like any other; one whose state is unknown
 * counts as alive.
 * <p>
 * A READING cell whose claimant is {@link ShmQueueLayout#RETURNED} was given back by a
 * live consumer that could not take the message (a resource limit): it is treated
 * exactly like a dead consumer's READING cell, adopted or republished by one
 * compare-and-set. Such cells are looked for only when the header's give-back count
 * moved since this handle's last scan that found none, so a queue where nothing was
 * given back costs no scan.
 * <p>
 * Republishing at FULL(p + capacity) keeps every invariant of the cell protocol: no
 * producer can have claimed {@code p + capacity} (its cell was not FREE for it), the
 * head cannot have passed it (its cell was never FULL for it), and a tail still behind
 * it is moved past it by the first producer that looks. Only the timing differs from a
 * normal publication, which is why it is done only when the tail is already there.
 * <p>
 * Once no cell names a dead participant, its table entry is reclaimed
 * ({@link Participants#reclaim}); a READING cell that no consumer has adopted yet keeps
 * the entry until one does.
 */
final class Recovery {
    /** What the sweeping thread is: only a consumer can take a message over. */
    enum Role { PRODUCER, CONSUMER, JANITOR }

    /** A cell this process took over from a dead consumer; the caller must deliver it. */
    record Adopted(long cellOffset, long position) {
    }

    private final MemorySegment mem;
    private final Geometry geometry;
    private final Participants participants;
    private final Liveness liveness;
    private final QueueSignal notEmpty;
    private final QueueSignal notFull;
    private final long me;
    /** The give-back count at the start of this handle's last scan that found no returned cell. */
    private volatile long givenBackScanned;

    Recovery(MemorySegment mem, Geometry geometry, Participants participants, Liveness liveness,
            QueueSignal notEmpty, QueueSignal notFull, long packedSelf) {
        this.mem = mem;
        this.geometry = geometry;
        this.participants = participants;
        this.liveness = liveness;
        this.notEmpty = notEmpty;
        this.notFull = notFull;
        this.me = packedSelf;
    }

    /**
     * One pass over the table and, if it names a dead participant, over the cells.
     * Returns the cell adopted for a consumer ({@code self} is its entry), or null.
     * {@code fresh}: ask /proc now rather than trust a recent "alive".
     */
    Adopted sweep(Role role, int self, boolean fresh) {
        long givenBack = (long) LONG.getVolatile(mem, GIVEN_BACK_OFFSET);
        boolean lookForReturned = givenBack != givenBackScanned;
        int n = participants.capacity();
        long[] dead = null; // the identity word judged dead, per entry; 0 = not dead
        boolean deadClaimants = false;
        for (int i = 0; i < n; i++) {
            long word = participants.identityWord(i);
            if (word == 0 || word == me) {
                continue;
            }
            if (isReclaimMark(word)) {
                // cells were repaired before the mark was set; only the folding was left undone
                long reclaimer = withoutReclaimMark(word);
                if (reclaimer != me && liveness.isDead(reclaimer, fresh)) {
                    dead = note(dead, n, i, word);
                }
            } else if (liveness.isDead(word, fresh)) {
                dead = note(dead, n, i, word);
                deadClaimants = true;
            }
        }
        if (dead == null && !lookForReturned) {
            return null;
        }
        boolean[] stillHolds = new boolean[n];
        Adopted adopted = null;
        if (deadClaimants || lookForReturned) {
            boolean[] returnedLeft = new boolean[1];
            adopted = repairCells(dead == null ? new long[n] : dead, stillHolds, returnedLeft, role, self);
            if (!returnedLeft[0] && adopted == null) {
                givenBackScanned = givenBack; // none seen: no need to look again until someone gives one back
            }
        }
        if (dead == null) {
            return adopted;
        }
        for (int i = 0; i < n; i++) {
            if (dead[i] != 0 && !stillHolds[i]) {
                participants.reclaim(i, dead[i], me, notEmpty, notFull);
            }
        }
        return adopted;
    }

    private Adopted repairCells(long[] dead, boolean[] stillHolds, boolean[] returnedLeft, Role role, int self) {
        int capacity = geometry.capacity();
        Adopted adopted = null;
        for (int c = 0; c < capacity; c++) {
            long cell = geometry.cellOffset(c);
            while (true) {
                long word = (long) LONG.getVolatile(mem, cell + CELL_WORD);
                int state = state(word);
                if (state != WRITING && state != READING) {
                    break;
                }
                int claimant = claimant(word);
                boolean returned = state == READING && claimant == RETURNED;
                if (!returned && (claimant >= dead.length || dead[claimant] == 0 || isReclaimMark(dead[claimant])
                        || participants.identityWord(claimant) != dead[claimant])) {
                    break;
                }
                long p = position(word);
                if (state == WRITING) {
                    if (LONG.compareAndSet(mem, cell + CELL_WORD, word, free(p + capacity))) {
                        notEmpty.signal();
                        notFull.signal();
                        break;
                    }
                } else if (role == Role.CONSUMER && adopted == null) {
                    // made before the claim: a heap that runs out after it would leave the cell ours for good
                    Adopted candidate = new Adopted(cell, p);
                    if (LONG.compareAndSet(mem, cell + CELL_WORD, word, reading(p, self))) {
                        adopted = candidate;
                        break;
                    }
                } else if (((p + capacity - (long) LONG.getVolatile(mem, TAIL_OFFSET)) & POSITION_MASK) == 0) {
                    if (LONG.compareAndSet(mem, cell + CELL_WORD, word, full(p + capacity))) {
                        notEmpty.signal();
                        break;
                    }
                } else {
                    if (returned) {
                        returnedLeft[0] = true;
                    } else {
                        stillHolds[claimant] = true;
                    }
                    break;
                }
                // the compare-and-set lost to another repair: look at the cell again
            }
        }
        return adopted;
    }

    private static long[] note(long[] dead, int n, int index, long word) {
        long[] d = dead == null ? new long[n] : dead;
        d[index] = word;
        return d;
    }
}
