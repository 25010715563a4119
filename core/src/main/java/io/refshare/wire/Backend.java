package io.refshare.wire;

import io.refshare.exceptions.InvalidDataException;

/**
 * Where a shared block's memory lives. The codes are part of the wire format: never
 * change or reuse one, and give a new backend the next free code (0 stays unassigned so a
 * zeroed byte never reads as a backend).
 */
public enum Backend {
    /** Host shared memory: a file in the shared-memory directory, mapped by each process. */
    HOST(1),
    /** CUDA device memory shared through CUDA IPC handles. */
    CUDA(2);

    private static final Backend[] VALUES = values(); // values() clones on every call

    private final int code;

    Backend(int code) {
        this.code = code;
    }

    /** The stable one-byte code descriptors carry. */
    public int code() {
        return code;
    }

    /**
     * The backend with this wire code.
     *
     * @throws InvalidDataException when no backend has this code
     */
    public static Backend fromCode(int code) {
        for (Backend b : VALUES) {
            if (b.code == code) {
                return b;
            }
        }
        throw new InvalidDataException("unknown backend code " + code + " (known: 1=HOST, 2=CUDA)");
    }
}
