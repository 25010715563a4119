package io.refshare.share;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

class TokenListTest {
    private static final int TAG = 0x7a9;

    /** Tokens 0..11: those in {@link #BACK} came back, the others are live. */
    private static final Set<Long> BACK = Set.of(0L, 2L, 3L, 7L, 10L, 11L);
    private static final List<Long> LIVE = List.of(1L, 4L, 5L, 6L, 8L, 9L);

    /** A counter-file pool's answer, as the contract says: counts a token back once, and counts last. */
    private static final class Counting implements TokenList.TokenCheck {
        final Map<Long, Integer> counted = new HashMap<>();
        final List<Long> asked = new ArrayList<>();
        int throwAtCall = -1;

        @Override
        public boolean isReturned(long token, int tag) {
            assertEquals(TAG, tag);
            if (asked.size() == throwAtCall) {
                asked.add(token);
                throw new OutOfMemoryError("thrown by the test, before the count");
            }
            asked.add(token);
            if (!BACK.contains(token) || counted.containsKey(token)) {
                return false; // live, or already counted: a pool answers true once per token
            }
            counted.put(token, 1);
            return true;
        }
    }

    private static TokenList twelveTokens() {
        TokenList list = new TokenList();
        list.append(0);
        list.appendAll(new long[] {99, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 1, 11);
        return list;
    }

    @Test
    void keepsTheLiveTokensInOrder() {
        TokenList list = twelveTokens();
        Counting check = new Counting();
        assertEquals(LIVE.size(), list.keepLive(check, TAG));
        assertEquals(LIVE.size(), list.size());
        check.asked.clear();
        assertEquals(LIVE.size(), list.keepLive(check, TAG));
        assertEquals(LIVE, check.asked, "the live tokens, once each, in their order");
        assertEquals(BACK, check.counted.keySet());
    }

    /**
     * An Error thrown at any token, before the check counted it: the list keeps that token and
     * every one after it and holds no copy of a token moved forward, so the next pass counts
     * every returned token exactly once and ends with exactly the live ones. (Compacting in
     * place without restoring the tail left copies, and the next pass counted a token twice.)
     */
    @Test
    void anErrorPartWayKeepsTheTokenItThrewOnAndCopiesNone() {
        for (int at = 0; at < 12; at++) {
            TokenList list = twelveTokens();
            Counting check = new Counting();
            check.throwAtCall = at;
            assertThrows(OutOfMemoryError.class, () -> list.keepLive(check, TAG));
            long backBefore = check.asked.subList(0, at).stream().filter(BACK::contains).count();
            assertEquals(12 - backBefore, list.size(), "throw at token " + at + ": only the counted ones dropped");

            check.throwAtCall = -1;
            check.asked.clear();
            assertEquals(LIVE.size(), list.keepLive(check, TAG), "throw at token " + at);
            assertEquals(12 - backBefore, check.asked.size(), "throw at token " + at + ": each kept token asked once");
            assertEquals(BACK, check.counted.keySet(), "throw at token " + at + ": every returned token counted");
            check.asked.clear();
            list.keepLive(check, TAG);
            assertEquals(LIVE, check.asked, "throw at token " + at + ": the live ones, in order, no copy");
        }
    }

    @Test
    void anEmptyListStaysEmpty() {
        TokenList list = new TokenList();
        assertEquals(0, list.keepLive(new Counting(), TAG));
        list.appendAll(new long[0], 0, 0);
        assertEquals(0, list.size());
    }
}
