package io.refshare.channel;

import io.refshare.RefshareException;

/**
 * The queue takes no more messages (it was marked closed), has none left to give (closed
 * and drained), or this process's handle to it was closed.
 */
public final class QueueClosedException extends RefshareException {
    public QueueClosedException(String message) {
        super(message);
    }
}
