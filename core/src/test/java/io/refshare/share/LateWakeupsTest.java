package io.refshare.share;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The judgement alone, fed rest times; no clock is read. */
class LateWakeupsTest {
    private static final long ASKED = 250_000;
    private static final long LATE = ASKED + LateWakeups.LATE_MICROS * 1_000 + 1;
    private static final long ON_TIME = ASKED + 40_000; // within the kernel's timer slack

    @Test
    void restsThatEndOnTimeOrEarlyAreNotOversubscribed() {
        LateWakeups wakeups = new LateWakeups();
        assertFalse(wakeups.oversubscribed(), "nothing recorded yet");
        for (int i = 0; i < 10_000; i++) {
            wakeups.rested(ASKED, i % 2 == 0 ? ON_TIME : 10_000); // an unpark ends a rest early
        }
        assertFalse(wakeups.oversubscribed());
    }

    @Test
    void aLateShareLikeOneConsumersStaysBelowTheLineAndEightConsumersGoesOver() {
        LateWakeups one = new LateWakeups();
        LateWakeups eight = new LateWakeups();
        for (int i = 0; i < 10_000; i++) {
            one.rested(ASKED, i % 50 == 0 ? LATE : ON_TIME); // 2 % late
            eight.rested(ASKED, i % 8 == 0 ? LATE : ON_TIME); // 12.5 % late
        }
        assertFalse(one.oversubscribed());
        assertTrue(eight.oversubscribed());
    }

    @Test
    void theAnswerFollowsTheRecentRestsBothWays() {
        LateWakeups wakeups = new LateWakeups();
        for (int i = 0; i < 2_000; i++) {
            wakeups.rested(ASKED, LATE);
        }
        assertTrue(wakeups.oversubscribed());
        int rests = 0;
        while (wakeups.oversubscribed()) {
            wakeups.rested(ASKED, ON_TIME);
            rests++;
        }
        assertTrue(rests > 100 && rests < 2_000,
                "a few hundred on-time rests undo it, not one and not thousands: " + rests);
        for (int i = 0; i < 2_000 && !wakeups.oversubscribed(); i++) {
            wakeups.rested(ASKED, LATE);
        }
        assertTrue(wakeups.oversubscribed());
    }

    @Test
    void aRestExactlyAtTheLateLineIsOnTime() {
        LateWakeups wakeups = new LateWakeups();
        for (int i = 0; i < 10_000; i++) {
            wakeups.rested(ASKED, ASKED + LateWakeups.LATE_MICROS * 1_000);
        }
        assertFalse(wakeups.oversubscribed());
    }
}
