package io.refshare.harness;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

class ThroughputStatsTest {
    @Test
    void slicesJoinIntoOneRateOverTheirTimesAdded() {
        // a fast slice and a slow one: the joined rate is messages over time, not the mean of the two rates
        ThroughputStats fast = new ThroughputStats(1_000, 1_024_000, 250_000, "1024 messages",
                new SharedCpu.Result(4, 1, 0));
        ThroughputStats slow = new ThroughputStats(1_000, 1_024_000, 750_000, "1024 messages",
                new SharedCpu.Result(6, 3, 2));

        ThroughputStats joined = ThroughputStats.concat(List.of(fast, slow));

        assertEquals(2_000, joined.messages());
        assertEquals(2_048_000, joined.bytes());
        assertEquals(1_000_000, joined.nanos());
        assertEquals(2_000_000.0, joined.tensorsPerSecond(), 1e-6);
        assertEquals("1024 messages", joined.window());
        assertEquals(new SharedCpu.Result(10, 4, 2), joined.sharedCpu());
    }

    @Test
    void unsampledSlicesStayUnsampled() {
        ThroughputStats a = new ThroughputStats(10, 10, 10, "socket buffers");
        ThroughputStats b = new ThroughputStats(10, 10, 10, "socket buffers");

        assertEquals("not sampled", ThroughputStats.concat(List.of(a, b)).sharedCpu().label());
    }

    @Test
    void nothingToJoinIsAnError() {
        assertThrows(IllegalArgumentException.class, () -> ThroughputStats.concat(List.of()));
    }
}
