package io.refshare.share;

import io.refshare.counter.CounterFileLayout;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;

import java.lang.foreign.ValueLayout;

/** Tests' stand-in for another process that writes into a counter file it does not own. */
final class CounterSlots {
    private CounterSlots() {
    }

    /** Writes {@code word} over slot {@code slot} of the counter file {@code counterFile} of {@code dir}. */
    static void write(ShmDirectory dir, String counterFile, int slot, long word) {
        try (ShmFile f = dir.open(counterFile, ShmKind.COUNTERS, CounterFileLayout.HEADER_LENGTH)) {
            int peers = f.segment().get(ValueLayout.JAVA_INT, CounterFileLayout.PEER_CAPACITY_OFFSET);
            f.segment().set(ValueLayout.JAVA_LONG, CounterFileLayout.slotsOffset(peers) + 8L * slot, word);
        }
    }
}
