package io.refshare.exceptions;

/**
 * A fixed resource of a shared file is exhausted (every peer entry of a counter file held
 * by live processes, say). Nothing was consumed on its behalf: a message that met the
 * limit while being received is given back to its queue for a consumer that can take it.
 * The message names the limit and how to raise it.
 */
public class ResourceLimitException extends RefshareException {
    /**
     * An exception naming the exhausted resource and how to raise its limit.
     *
     * @param message the detail message
     */
    public ResourceLimitException(String message) {
        super(message);
    }
}
