package io.refshare.cuda;

import io.refshare.exceptions.RefshareException;

/**
 * A CUDA driver call that returned an error: the message names the call, what it was
 * asked, the error's name and its text, e.g. {@code cuMemAlloc_v2(2097152 bytes) failed:
 * CUDA_ERROR_OUT_OF_MEMORY (out of memory)}.
 */
public final class CudaException extends RefshareException {
    private final String call;
    private final int code;
    private final String errorName;

    CudaException(String call, int code, String errorName, String errorString) {
        super(call + " failed: " + errorName + " (" + errorString + ")");
        this.call = call;
        this.code = code;
        this.errorName = errorName;
    }

    /** The driver entry point and its arguments, as in the message. */
    public String call() {
        return call;
    }

    /** The {@code CUresult}. */
    public int code() {
        return code;
    }

    /** The {@code CUresult}'s name, e.g. {@code CUDA_ERROR_INVALID_VALUE}. */
    public String errorName() {
        return errorName;
    }
}
