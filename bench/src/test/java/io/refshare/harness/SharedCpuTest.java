package io.refshare.harness;

import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

class SharedCpuTest {

    @Test
    void readsTheProcessorFieldEvenWhenTheCommandNameHoldsSpacesAndParentheses() {
        StringBuilder line = new StringBuilder("4242 (a (b) c) R");
        for (int field = 4; field <= 52; field++) {
            line.append(' ').append(field == 39 ? 7 : field * 10);
        }
        assertEquals(7, SharedCpu.lastCpuOf(line.toString()));
    }

    @Test
    void answersMinusOneForWhatIsNotAStatLine() {
        assertEquals(-1, SharedCpu.lastCpuOf(""));
        assertEquals(-1, SharedCpu.lastCpuOf("no parenthesis at all 1 2 3"));
        assertEquals(-1, SharedCpu.lastCpuOf("1 (short) R 1 2 3"));
        assertEquals(-1, SharedCpu.lastCpuOf("1 (x) R" + " 0".repeat(35) + " cpu"));
        assertEquals(-1, SharedCpu.lastCpuOf("1 (x) R" + " 0".repeat(35) + " 9999999999999"));
        assertEquals(-1, SharedCpu.lastCpu(Path.of("/proc/0/task/0/stat")), "a thread that does not exist");
    }

    @Test
    void unknownThreadsAreNotSampled() {
        assertEquals(SharedCpu.Result.NONE, SharedCpu.start(Optional.empty(), SharedCpu.currentThread()).stop());
        assertEquals("not sampled", SharedCpu.Result.NONE.label());
    }

    @Test
    void samplesTwoLiveThreadsUntilStopped() throws Exception {
        Optional<Path> self = SharedCpu.currentThread();
        assumeTrue(self.isPresent() && Files.isReadable(self.get()), "needs Linux's /proc/thread-self");
        assertEquals(ProcessHandle.current().pid(), Long.parseLong(self.get().getParent().getParent().getParent()
                .getFileName().toString()), "the stat file is this process's");
        AtomicReference<Path> other = new AtomicReference<>();
        AtomicBoolean stop = new AtomicBoolean();
        CountDownLatch known = new CountDownLatch(1);
        Thread spinner = Thread.ofPlatform().start(() -> {
            other.set(SharedCpu.currentThread().orElseThrow());
            known.countDown();
            while (!stop.get()) {
                Thread.onSpinWait();
            }
        });
        try {
            known.await();
            assertTrue(SharedCpu.lastCpu(other.get()) >= 0, "the spinner's CPU");
            SharedCpu.Sampling sampling = SharedCpu.start(self, Optional.of(other.get()));
            Thread.sleep(20 * SharedCpu.INTERVAL_MILLIS);
            SharedCpu.Result r = sampling.stop();
            assertTrue(r.samples() >= 2 && r.onOneCpu() >= 0 && r.onOneCpu() <= r.samples(), r.toString());
            assertTrue(r.label().endsWith("% of " + r.samples() + " samples"), r.label());
        } finally {
            stop.set(true);
            spinner.join();
        }
    }
}
