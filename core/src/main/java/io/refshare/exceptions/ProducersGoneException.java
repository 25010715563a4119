package io.refshare.exceptions;

/**
 * The stream ended because every producer died: the queue's creator is dead (on the
 * kernel's evidence: its life lock in the shared directory is free) and no attached participant
 * that has offered is alive or of unknown state, and the queue has been drained. Thrown
 * by a consumer's poll or take instead of waiting forever for a message nobody can send;
 * a producer that joins afterwards is refused. Whatever the dead producers had published
 * was delivered before this is thrown.
 */
public final class ProducersGoneException extends QueueClosedException {
    /**
     * An exception naming the queue and its dead creator.
     *
     * @param message the detail message
     */
    public ProducersGoneException(String message) {
        super(message);
    }
}
