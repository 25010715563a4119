package io.refshare.holder;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.holder.SharedHolderLayout.Geometry;
import io.refshare.shm.ProcessIdentity;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicIntegerArray;

/**
 * The shared holder's protocol ({@link HolderFile}) on a small piece of native memory laid
 * out exactly like a holder file, with version 1 published; versions are one-byte
 * "descriptors" holding their id, which equals their publish sequence. Retirements are
 * counted per version.
 */
final class SharedFixture {
    private static final long ME = ProcessIdentity.current().packed();

    final HolderFile file;
    final int row;
    final AtomicIntegerArray retired = new AtomicIntegerArray(4);
    final HolderFile.Retirement retirement = (slot, sequence, descriptor) -> retired.incrementAndGet((int) sequence);

    SharedFixture(int drainAt) {
        Geometry g = new Geometry(4, 1);
        MemorySegment m = Arena.ofAuto().allocate(g.fileLength(), 64);
        SharedHolderLayout.format(m, g, ProcessIdentity.current());
        file = new HolderFile(m, g, drainAt);
        row = file.registerReader(ME);
        publish(1);
    }

    void publish(int id) {
        long word = file.claimSlot();
        file.fill(word, ME, new byte[]{(byte) id});
        file.unpin(file.swap(word), retirement);
    }

    /** Acquires the current version; returns its word. */
    long acquire() {
        return file.acquire(row);
    }

    /**
     * Uses the version {@code word} names: the id it holds, or -1 if it was retired, or its
     * slot was rewritten, while this reference was out.
     */
    int use(long word) {
        int slot = HolderWord.slot(word);
        long sequence = file.sequence(slot);
        try {
            byte[] d = file.descriptor(slot, HolderWord.generation(word));
            return d[0] != sequence || retired.get((int) sequence) != 0 ? -1 : d[0];
        } catch (InvalidDataException slotNoLongerOurs) {
            return -1;
        }
    }

    void release(long word) {
        file.release(row, HolderWord.slot(word), retirement);
    }
}
