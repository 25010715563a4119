package io.refshare.exceptions;

/** Base of every exception refshare throws; unchecked, like {@code java.lang.foreign}. */
public class RefshareException extends RuntimeException {
    /**
     * An exception with a message that says what failed and, where it helps, what to do.
     *
     * @param message the detail message
     */
    public RefshareException(String message) {
        super(message);
    }

    /**
     * An exception with a message and the failure underneath it.
     *
     * @param message the detail message
     * @param cause   the underlying failure, or null when there is none
     */
    public RefshareException(String message, Throwable cause) {
        super(message, cause);
    }
}
