package io.refshare.channel;

import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;

import java.lang.foreign.MemorySegment;

import static io.refshare.channel.ShmQueueLayout.*;

/**
 * A second, raw mapping of a queue file: what another (possibly hostile) process sees.
 * Tests read the sleeping counts through it to know a waiter really sleeps, and write
 * garbage through it.
 */
final class QueueFileView implements AutoCloseable {
    private final ShmFile file;

    QueueFileView(ShmDirectory dir, String name) {
        this.file = dir.open(name, ShmKind.QUEUE, 0);
    }

    MemorySegment segment() {
        return file.segment();
    }

    int consumersSleeping() {
        return (int) INT.getVolatile(file.segment(), CONSUMERS_SLEEPING_OFFSET);
    }

    void setConsumersSleeping(int count) {
        INT.setVolatile(file.segment(), CONSUMERS_SLEEPING_OFFSET, count);
    }

    int producersSleeping() {
        return (int) INT.getVolatile(file.segment(), PRODUCERS_SLEEPING_OFFSET);
    }

    int consumersSpinning() {
        return (int) INT.getVolatile(file.segment(), CONSUMERS_SPINNING_OFFSET);
    }

    void setConsumersSpinning(int count) {
        INT.setVolatile(file.segment(), CONSUMERS_SPINNING_OFFSET, count);
    }

    /** The not-empty futex word: it moves with every wake-up of a consumer. */
    int consumerWakeUps() {
        return (int) INT.getVolatile(file.segment(), NOT_EMPTY_SEQ_OFFSET);
    }

    /** The not-full futex word: it moves with every wake-up of a producer. */
    int producerWakeUps() {
        return (int) INT.getVolatile(file.segment(), NOT_FULL_SEQ_OFFSET);
    }

    int consumerWakePending() {
        return (int) INT.getVolatile(file.segment(), CONSUMER_WAKE_PENDING_OFFSET);
    }

    void setConsumerWakePending(int flag) {
        INT.setVolatile(file.segment(), CONSUMER_WAKE_PENDING_OFFSET, flag);
    }

    int producerWakePending() {
        return (int) INT.getVolatile(file.segment(), PRODUCER_WAKE_PENDING_OFFSET);
    }

    void setProducerWakePending(int flag) {
        INT.setVolatile(file.segment(), PRODUCER_WAKE_PENDING_OFFSET, flag);
    }

    /** Waits (without a deadline: the test's own timeout bounds it) until a consumer sleeps on the futex. */
    void awaitSleepingConsumer() throws InterruptedException {
        while (consumersSleeping() == 0) {
            Thread.sleep(1);
        }
    }

    void awaitSleepingProducer() throws InterruptedException {
        while (producersSleeping() == 0) {
            Thread.sleep(1);
        }
    }

    @Override
    public void close() {
        file.close();
    }
}
