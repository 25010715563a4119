package io.refshare.share;

import io.refshare.counter.CounterFile;

/** One counted reference: a slot of a counter file. */
record Token(CounterFile file, int slot) {
    boolean isReleased() {
        return file.isReleased(slot);
    }
}
