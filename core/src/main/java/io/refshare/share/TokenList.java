package io.refshare.share;

import java.util.Arrays;

/**
 * The reference tokens a sender handed out for one storage and has not yet seen back, as
 * {@link CounterFilePool} numbers them: a growable array that {@link #keepLive} compacts. Not
 * thread-safe: its owner ({@link SentBlock}) holds its own lock around every call.
 *
 * <p><b>An {@link Error} part-way through {@link #keepLive} counts nothing twice.</b> The
 * check counts a token that came back as the last thing it does (see
 * {@link CounterFilePool#isReturned}), so the token it threw on was not counted. The list then
 * keeps that token and every one after it, unexamined, behind the live ones seen so far, and
 * holds no copy of a token moved forward. Dropping the token thrown on would lose a live
 * token; keeping a copy would count one token twice. Either can bring a counter file's count
 * of returned tokens to its total too early, and the file is then removed (its tokens all
 * counting as back) while a consumer still holds one of them.
 */
class TokenList {
    private long[] tokens = new long[2];
    private int size;

    /** Whether a token came back, counting it when it did (once per token). */
    interface TokenCheck {
        boolean isReturned(long token, int tag);
    }

    final int size() {
        return size;
    }

    final void append(long token) {
        if (size == tokens.length) {
            tokens = Arrays.copyOf(tokens, 2 * size);
        }
        tokens[size++] = token;
    }

    /** {@link #append} of {@code from[at..at + count)}. */
    final void appendAll(long[] from, int at, int count) {
        if (size + count > tokens.length) {
            tokens = Arrays.copyOf(tokens, Math.max(2 * tokens.length, size + count));
        }
        System.arraycopy(from, at, tokens, size, count);
        size += count;
    }

    /** Drops the tokens {@code check} finds returned, keeping the order of the others; how many are left. */
    final int keepLive(TokenCheck check, int tag) {
        int live = 0;
        int next = 0;
        try {
            for (; next < size; next++) {
                if (!check.isReturned(tokens[next], tag)) {
                    tokens[live++] = tokens[next];
                }
            }
        } finally {
            int unexamined = size - next; // 0 unless the check threw
            System.arraycopy(tokens, next, tokens, live, unexamined);
            size = live + unexamined;
        }
        return size;
    }
}
