package io.refshare.testing;

import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * Threads a test starts to block on the other side of what it tests (a poll waiting for an
 * offer, a producer racing consumers). Register as a field,
 * {@code @RegisterExtension final TestThreads threads = new TestThreads();}: after each
 * test they are interrupted, and the test fails if any is still running 10 s later, so a
 * thread stuck in a wait never outlives its test unnoticed.
 */
public final class TestThreads implements AfterEachCallback {
    private final ExecutorService pool = Executors.newCachedThreadPool();

    public <T> Future<T> submit(Callable<T> task) {
        return pool.submit(task);
    }

    public Future<?> submit(Runnable task) {
        return pool.submit(task);
    }

    @Override
    public void afterEach(ExtensionContext context) throws InterruptedException {
        pool.shutdownNow();
        if (!pool.awaitTermination(10, TimeUnit.SECONDS)) {
            throw new AssertionError("test threads still running 10 s after the test");
        }
    }
}
