package io.refshare.exceptions;

/** Base of every exception refshare throws; unchecked, like {@code java.lang.foreign}. */
public class RefshareException extends RuntimeException {
    public RefshareException(String message) {
        super(message);
    }

    public RefshareException(String message, Throwable cause) {
        super(message, cause);
    }
}
