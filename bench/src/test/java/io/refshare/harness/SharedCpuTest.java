package io.refshare.harness;

import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

class SharedCpuTest {

    @Test
    void readsTheProcessorAndTheStateEvenWhenTheCommandNameHoldsSpacesAndParentheses() {
        assertEquals(new SharedCpu.Look(7, true), SharedCpu.lookOf(statLine("a (b) c", "R", 7)));
        assertEquals(new SharedCpu.Look(0, false), SharedCpu.lookOf(statLine("java) S (x", "S", 0)));
    }

    private static String statLine(String command, String state, int cpu) {
        StringBuilder line = new StringBuilder("4242 (" + command + ") " + state);
        for (int field = 4; field <= 52; field++) {
            line.append(' ').append(field == 39 ? cpu : field * 10);
        }
        return line.toString();
    }

    @Test
    void answersNullForWhatIsNotAStatLine() {
        assertNull(SharedCpu.lookOf(""));
        assertNull(SharedCpu.lookOf("no parenthesis at all 1 2 3"));
        assertNull(SharedCpu.lookOf("1 (short) R 1 2 3"));
        assertNull(SharedCpu.lookOf("1 (x) R" + " 0".repeat(35) + " cpu"));
        assertNull(SharedCpu.lookOf("1 (x) R" + " 0".repeat(35) + " 9999999999999"));
        assertNull(SharedCpu.look(Path.of("/proc/0/task/0/stat")), "a thread that does not exist");
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
            // a thread that has just started may still block briefly (class loading, a safepoint): look
            // until it is seen spinning, for up to a second
            SharedCpu.Look spinning = SharedCpu.look(other.get());
            for (int i = 0; i < 100 && (spinning == null || !spinning.runnable()); i++) {
                Thread.sleep(10);
                spinning = SharedCpu.look(other.get());
            }
            assertTrue(spinning != null && spinning.cpu() >= 0 && spinning.runnable(), "the spinner: " + spinning);
            // the first look comes an interval after the start, when the row's command has left the pair
            assertEquals(0, SharedCpu.start(self, Optional.of(other.get())).stop().samples(), "stopped at once");
            SharedCpu.Sampling sampling = SharedCpu.start(self, Optional.of(other.get()));
            Thread.sleep(20 * SharedCpu.INTERVAL_MILLIS);
            SharedCpu.Result r = sampling.stop();
            assertTrue(r.samples() >= 2 && r.onOneCpu() >= 0 && r.onOneCpu() <= r.samples()
                    && r.bothRunnable() >= 0 && r.bothRunnable() <= r.onOneCpu(), r.toString());
            assertTrue(r.label().contains("% of " + r.samples() + " samples, both runnable in "), r.label());
        } finally {
            stop.set(true);
            spinner.join();
        }
    }
}
