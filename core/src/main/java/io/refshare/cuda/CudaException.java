package io.refshare.cuda;

import io.refshare.exceptions.RefshareException;

/**
 * A CUDA driver call that returned an error: the message names the call, what it was
 * asked, the error's name and its text, e.g. {@code cuMemAlloc_v2(2097152 bytes) failed:
 * CUDA_ERROR_OUT_OF_MEMORY (out of memory)}.
 */
public final class CudaException extends RefshareException {
    private static final long serialVersionUID = 1L;
    /** The driver entry point and its arguments. */
    private final String call;
    /** The {@code CUresult} the call returned. */
    private final int code;
    /** The name of that {@code CUresult}. */
    private final String errorName;

    /**
     * A failure of {@code call}.
     *
     * @param call        the driver entry point and its arguments, e.g. {@code cuMemAlloc_v2(2097152 bytes)}
     * @param code        the {@code CUresult} it returned
     * @param errorName   that result's name ({@code cuGetErrorName})
     * @param errorString that result's text ({@code cuGetErrorString})
     */
    public CudaException(String call, int code, String errorName, String errorString) {
        super(call + " failed: " + errorName + " (" + errorString + ")");
        this.call = call;
        this.code = code;
        this.errorName = errorName;
    }

    /**
     * The driver entry point and its arguments, as in the message.
     *
     * @return e.g. {@code cuMemAlloc_v2(2097152 bytes)}
     */
    public String call() {
        return call;
    }

    /**
     * The {@code CUresult} the call returned.
     *
     * @return the error code, never 0 ({@code CUDA_SUCCESS})
     */
    public int code() {
        return code;
    }

    /**
     * The {@code CUresult}'s name.
     *
     * @return e.g. {@code CUDA_ERROR_INVALID_VALUE}
     */
    public String errorName() {
        return errorName;
    }
}
