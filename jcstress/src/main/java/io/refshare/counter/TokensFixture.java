package io.refshare.counter;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * A counter file's token transitions ({@link Tokens}) over a small piece of native memory
 * laid out exactly like a counter file of 2 slots and 2 peers, with slot 0 handed out under
 * {@link #TAG}.
 */
final class TokensFixture {
    static final int TAG = 0x5eed;
    static final int SLOT = 0;

    final Tokens tokens;

    TokensFixture() {
        MemorySegment m = Arena.ofAuto().allocate(CounterFileLayout.fileLength(2, 2), 64);
        tokens = new Tokens(m, CounterFileLayout.slotsOffset(2));
        if (tokens.handOut(SLOT, TAG) != CounterFileLayout.FREE) {
            throw new AssertionError("hand-out of a fresh slot failed");
        }
    }
}
