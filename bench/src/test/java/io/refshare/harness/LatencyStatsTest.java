package io.refshare.harness;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

class LatencyStatsTest {
    @Test
    void slicesJoinInOrderWithTheirWarmUpsDroppedAndTheirClockViolationsAdded() {
        // send, read, ack per round; the first round of each slice is its warm-up
        LatencyStats first = LatencyStats.of(new long[] {0, 10, 20}, new long[] {5, 13, 26}, new long[] {9, 19, 29}, 1);
        // the second slice's last round was read after its ack arrived: impossible with one clock
        LatencyStats second = LatencyStats.of(new long[] {100, 200}, new long[] {150, 290}, new long[] {160, 250}, 1);

        LatencyStats joined = LatencyStats.concat(List.of(first, second));

        assertArrayEquals(new long[] {3, 6, 90}, joined.oneWayNanos());
        assertArrayEquals(new long[] {9, 9, 50}, joined.roundTripNanos());
        assertEquals(1, joined.clockViolations());
        assertEquals(3, joined.rounds());
    }

    @Test
    void slicesJoinWithTheirSamplesOfOneCpuAddedUp() {
        LatencyStats sampled = LatencyStats.of(new long[] {0, 10}, new long[] {5, 13}, new long[] {9, 19}, 1)
                .withSharedCpu(new SharedCpu.Result(8, 6, 1));
        LatencyStats unsampled = LatencyStats.of(new long[] {100, 200}, new long[] {150, 210}, new long[] {160, 250}, 1);

        LatencyStats joined = LatencyStats.concat(List.of(sampled, unsampled));

        assertEquals(new SharedCpu.Result(8, 6, 1), joined.sharedCpu());
        assertEquals("75 % of 8 samples, both runnable in 13 %", joined.sharedCpu().label());
        assertEquals("not sampled", unsampled.sharedCpu().label());
    }

    @Test
    void nothingToJoinIsAnError() {
        assertThrows(IllegalArgumentException.class, () -> LatencyStats.concat(List.of()));
    }
}
