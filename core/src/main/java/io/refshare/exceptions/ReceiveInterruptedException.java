package io.refshare.exceptions;

/**
 * A receive that had to wait (for the device work its sender recorded before sending a device
 * tensor) ended because the receiving thread was interrupted. Nothing was taken: the message's
 * reference is in flight again, so the message can be received later or by another process,
 * and a queue gives it back (a queue's {@code take} and {@code poll} report this as an
 * {@link InterruptedException}). The thread's interrupt status is set again when this is thrown.
 */
public class ReceiveInterruptedException extends RefshareException {
    /**
     * An exception saying what the interrupted receive was waiting for.
     *
     * @param message the detail message
     */
    public ReceiveInterruptedException(String message) {
        super(message);
    }
}
