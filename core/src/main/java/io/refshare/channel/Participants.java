package io.refshare.channel;

import io.refshare.shm.ProcessIdentity;
import io.refshare.channel.ShmQueueLayout.Geometry;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

import static io.refshare.channel.ShmQueueLayout.*;

/**
 * The participant table of a queue file: which processes are attached, what each has
 * offered and taken, and how many of its threads sleep (see {@link ShmQueueLayout}).
 *
 * <h2>Implementation notes</h2>
 * An entry's identity word moves 0 &rarr; identity (a process attaches, compare-and-set
 * from 0) &rarr; 0 (it detaches); or, once its process is dead and no cell names it any
 * more, identity &rarr; reclaim mark of the reclaiming process &rarr; 0. Only the
 * holder of the identity word changes the entry's other fields, so a dead entry's counts
 * are folded into the totals by exactly one process: the one whose compare-and-set put
 * its mark there. Folding uses get-and-set, so a reclaimer that dies half-way and is
 * taken over never moves a count twice. Counters of a live entry are updated with atomic
 * adds because all threads of one handle share its entry.
 */
final class Participants {
    private final MemorySegment mem;
    private final Geometry geometry;

    Participants(MemorySegment mem, Geometry geometry) {
        this.mem = mem;
        this.geometry = geometry;
    }

    int capacity() {
        return geometry.participantCapacity();
    }

    long entryOffset(int index) {
        return geometry.participantOffset(index);
    }

    long identityWord(int index) {
        return (long) LONG.getVolatile(mem, entryOffset(index) + PARTICIPANT_IDENTITY);
    }

    /**
     * Claims a free entry for {@code packedIdentity} of a process in PID namespace
     * {@code pidNamespace}; -1 when every entry is taken.
     */
    int tryRegister(long packedIdentity, long pidNamespace) {
        for (int i = 0; i < capacity(); i++) {
            long at = entryOffset(i) + PARTICIPANT_IDENTITY;
            if ((long) LONG.getVolatile(mem, at) == 0 && LONG.compareAndSet(mem, at, 0L, packedIdentity)) {
                LONG.setVolatile(mem, entryOffset(i) + PARTICIPANT_PID_NAMESPACE, pidNamespace);
                return i;
            }
        }
        return -1;
    }

    /** The PID namespace an entry's process recorded; 0 while it registers (or when unknown). */
    long pidNamespace(int index) {
        return (long) LONG.getVolatile(mem, entryOffset(index) + PARTICIPANT_PID_NAMESPACE);
    }

    /** The roles an entry recorded ({@link ShmQueueLayout#ROLE_PRODUCER}, {@link ShmQueueLayout#ROLE_CONSUMER}). */
    int role(int index) {
        return (int) INT.getVolatile(mem, entryOffset(index) + PARTICIPANT_ROLE);
    }

    void addRole(int index, int role) {
        INT.getAndBitwiseOr(mem, entryOffset(index) + PARTICIPANT_ROLE, role);
    }

    void countOffered(int index) {
        countOffered(index, 1);
    }

    void countOffered(int index, int messages) {
        LONG.getAndAdd(mem, entryOffset(index) + PARTICIPANT_OFFERED, (long) messages);
    }

    void countTaken(int index) {
        countTaken(index, 1);
    }

    void countTaken(int index, int messages) {
        LONG.getAndAdd(mem, entryOffset(index) + PARTICIPANT_TAKEN, (long) messages);
    }

    void countRejected() {
        LONG.getAndAdd(mem, REJECTED_OFFSET, 1L);
    }

    /** Detaches a live participant: its counts go to the totals, its entry is freed. */
    void leave(int index, long packedIdentity, QueueSignal notEmpty, QueueSignal notFull) {
        fold(index, notEmpty, notFull);
        LONG.compareAndSet(mem, entryOffset(index) + PARTICIPANT_IDENTITY, packedIdentity, 0L);
    }

    /**
     * Frees the entry of a dead participant that no cell names any more. {@code seen} is
     * the identity word found there (the dead participant, or the mark of a dead
     * reclaimer); nothing happens if the entry changed since.
     */
    boolean reclaim(int index, long seen, long packedReclaimer, QueueSignal notEmpty, QueueSignal notFull) {
        long at = entryOffset(index) + PARTICIPANT_IDENTITY;
        long mark = reclaimMark(packedReclaimer);
        if (!LONG.compareAndSet(mem, at, seen, mark)) {
            return false;
        }
        fold(index, notEmpty, notFull);
        LONG.compareAndSet(mem, at, mark, 0L);
        return true;
    }

    private void fold(int index, QueueSignal notEmpty, QueueSignal notFull) {
        long entry = entryOffset(index);
        long offered = (long) LONG.getAndSet(mem, entry + PARTICIPANT_OFFERED, 0L);
        if (offered != 0) {
            LONG.getAndAdd(mem, OFFERED_BY_DEPARTED_OFFSET, offered);
        }
        long taken = (long) LONG.getAndSet(mem, entry + PARTICIPANT_TAKEN, 0L);
        if (taken != 0) {
            LONG.getAndAdd(mem, TAKEN_BY_DEPARTED_OFFSET, taken);
        }
        notEmpty.forget(entry);
        notFull.forget(entry);
        INT.setVolatile(mem, entry + PARTICIPANT_ROLE, 0);
        LONG.setVolatile(mem, entry + PARTICIPANT_PID_NAMESPACE, 0L);
    }

    /** The attached participants, in table order (entries being reclaimed are left out). */
    List<QueueParticipant> snapshot() {
        List<QueueParticipant> list = new ArrayList<>();
        for (int i = 0; i < capacity(); i++) {
            long word = identityWord(i);
            if (word == 0 || isReclaimMark(word) || namesNoProcess(word)) {
                continue;
            }
            long entry = entryOffset(i);
            int role = (int) INT.getVolatile(mem, entry + PARTICIPANT_ROLE);
            list.add(new QueueParticipant(ProcessIdentity.unpack(word), (role & ROLE_PRODUCER) != 0,
                    (role & ROLE_CONSUMER) != 0, (long) LONG.getVolatile(mem, entry + PARTICIPANT_OFFERED),
                    (long) LONG.getVolatile(mem, entry + PARTICIPANT_TAKEN)));
        }
        return list;
    }

    /** How many attached participants have taken from the queue (a moment's count). */
    int consumers() {
        int n = 0;
        for (int i = 0; i < capacity(); i++) {
            if ((role(i) & ROLE_CONSUMER) != 0) {
                n++;
            }
        }
        return n;
    }

    /** Offered, taken: the departed totals plus every entry's count (a moment's sum). */
    long[] totals() {
        long offered = (long) LONG.getVolatile(mem, OFFERED_BY_DEPARTED_OFFSET);
        long taken = (long) LONG.getVolatile(mem, TAKEN_BY_DEPARTED_OFFSET);
        for (int i = 0; i < capacity(); i++) {
            long entry = entryOffset(i);
            offered += (long) LONG.getVolatile(mem, entry + PARTICIPANT_OFFERED);
            taken += (long) LONG.getVolatile(mem, entry + PARTICIPANT_TAKEN);
        }
        return new long[] {offered, taken};
    }
}
