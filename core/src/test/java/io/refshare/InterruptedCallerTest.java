package io.refshare;

import io.refshare.tensor.DType;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.*;

/**
 * A thread with its interrupt flag set (a cancelled task, an executor shutting down) that calls
 * something which does not wait: the call does its work and the flag stays set for the next
 * wait to answer. Mapping a file goes through an interruptible channel, which a pending
 * interrupt used to close: {@code allocate} then failed with "cannot map ...: null", and a
 * receiver rejected a good message (dropped, its reference given back).
 */
class InterruptedCallerTest {

    @AfterEach
    void clearInterrupt() {
        Thread.interrupted(); // a failed assertion must not leave the flag to the next test
    }

    @Test
    void allocatingAndCreatingAQueueMapNewFilesAndKeepTheInterrupt() {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config())) {
            Thread.currentThread().interrupt();
            try (Tensor t = rs.allocate(DType.FLOAT32, 256, 1024)) { // a new segment
                t.data().set(ValueLayout.JAVA_FLOAT, 0, 1.5f);
                assertEquals(1.5f, t.data().get(ValueLayout.JAVA_FLOAT, 0));
            }
            ShareQueue q = rs.createQueue(4); // a new queue file
            assertTrue(Thread.interrupted(), "the interrupt is still pending");
            q.close();
        }
    }

    @Test
    void receivingMapsTheSendersFilesAndKeepsTheInterrupt() throws Exception {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             Refshare consumer = Refshare.open(shm.config())) {
            byte[] message;
            try (Tensor sent = producer.allocate(DType.INT32, 1000)) {
                sent.data().set(ValueLayout.JAVA_INT, 4 * 999, 42);
                message = producer.share(sent); // a reference counted in a new counter file
            }
            Thread.currentThread().interrupt();
            try (Tensor received = consumer.receive(message)) { // maps the segment and the counter file
                assertEquals(42, received.data().get(ValueLayout.JAVA_INT, 4 * 999));
            }
            assertTrue(Thread.interrupted(), "the interrupt is still pending");
            assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(5)), "the reference came back");
        }
    }

    @Test
    void closingOnAnInterruptedThreadEndsItsThreadsGivesEverythingBackAndKeepsTheInterrupt() throws Exception {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config())) {
            Set<Thread> before = refshareThreads();
            Refshare consumer = Refshare.open(shm.config());
            Set<Thread> consumers = refshareThreads();
            consumers.removeAll(before);
            assertEquals(2, consumers.size(), "the consumer's collector and housekeeper: " + consumers);
            Tensor received;
            try (Tensor sent = producer.allocate(DType.INT32, 16)) {
                received = consumer.receive(producer.share(sent));
            }
            Thread.currentThread().interrupt();
            consumer.close();
            assertTrue(Thread.interrupted(), "the interrupt is still pending");
            for (Thread t : consumers) {
                assertFalse(t.isAlive(), t + " still ran after close returned");
            }
            assertTrue(received.isClosed());
            assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(5)), "the close gave the reference back");
        }
    }

    private static Set<Thread> refshareThreads() {
        Set<Thread> threads = new HashSet<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("refshare-collector") || t.getName().startsWith("refshare-housekeeper")) {
                threads.add(t);
            }
        }
        return threads;
    }

    @Test
    void drainingOnAnInterruptedThreadTakesTheMessageInsteadOfRejectingIt() throws Exception {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             Refshare consumer = Refshare.open(shm.config())) {
            ShareQueue q = producer.createQueue(4);
            ShareQueue in = consumer.openQueue(q.name());
            try (Tensor sent = producer.allocate(DType.INT64, 8)) {
                sent.data().set(ValueLayout.JAVA_LONG, 0, 7L);
                q.put(sent);
            }
            List<Tensor> got = new ArrayList<>();
            Thread.currentThread().interrupt();
            assertEquals(1, in.drainTo(got, 8)); // drainTo never waits: the interrupt is not its business
            assertTrue(Thread.interrupted(), "the interrupt is still pending");
            assertEquals(0, in.rejected());
            try (Tensor t = got.getFirst()) {
                assertEquals(7L, t.data().get(ValueLayout.JAVA_LONG, 0));
            }
            in.close();
            q.close();
            assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(5)), "the reference came back");
        }
    }
}
