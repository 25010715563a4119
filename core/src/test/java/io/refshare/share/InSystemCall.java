package io.refshare.share;

import io.refshare.counter.CounterFile;

import java.util.concurrent.CountDownLatch;

/**
 * Runs a step while another thread is inside a system call on a counter file's mapping, as a
 * release is during its futex wake-up of the sender's collector (a call that holds the mapping
 * while it runs). A 300 ms futex wait on the same mapping stands in for the wake-up, to widen
 * the window.
 */
final class InSystemCall {
    interface Step {
        void run() throws Exception;
    }

    private InSystemCall() {
    }

    static void on(CounterFile file, Step step) throws Exception {
        CountDownLatch entering = new CountDownLatch(1);
        Thread caller = Thread.ofPlatform().start(() -> {
            entering.countDown();
            file.awaitRelease(file.releases(), 300_000_000L);
        });
        entering.await();
        Thread.sleep(100); // by now inside the call (were it not yet, the test would pass without testing anything)
        try {
            step.run();
        } finally {
            caller.join();
        }
    }
}
