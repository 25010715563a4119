package io.refshare.ucx;

import io.refshare.exceptions.RefshareException;

/** A UCX call failed, or a bridge link broke; the message names the call or the peer and the reason. */
public class UcxException extends RefshareException {
    public UcxException(String message) {
        super(message);
    }

    public UcxException(String message, Throwable cause) {
        super(message, cause);
    }
}
