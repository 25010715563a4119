package io.refshare.share;

import io.refshare.counter.CounterFile;

/**
 * One counted reference: a slot of a counter file, handed out for the block whose
 * {@link io.refshare.counter.RangeTag} is {@code tag}.
 */
record Token(CounterFile file, int slot, int tag) {
}
