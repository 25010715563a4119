package io.refshare.exceptions;


/**
 * The queue takes no more messages (its stream was ended), has none left to give (ended
 * and drained), or this process's handle to it was closed. {@link ProducersGoneException}
 * tells that the stream ended because every producer died rather than by a producer's
 * decision.
 */
public class QueueClosedException extends RefshareException {
    /**
     * An exception naming the queue and why it is closed.
     *
     * @param message the detail message
     */
    public QueueClosedException(String message) {
        super(message);
    }
}
