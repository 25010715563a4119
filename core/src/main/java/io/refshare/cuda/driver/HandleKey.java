package io.refshare.cuda.driver;

import java.util.Arrays;
import java.util.HexFormat;

/** A 64-byte IPC handle (of memory or of an event) as a map key: arrays compare by identity, handles by content. */
record HandleKey(byte[] bytes) {
    HandleKey {
        if (bytes.length != CudaDriver.IPC_HANDLE_BYTES) {
            throw new IllegalArgumentException("an IPC handle is " + CudaDriver.IPC_HANDLE_BYTES + " bytes, not "
                    + bytes.length);
        }
        bytes = bytes.clone();
    }

    @Override
    public byte[] bytes() {
        return bytes.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof HandleKey k && Arrays.equals(bytes, k.bytes);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(bytes);
    }

    @Override
    public String toString() {
        return "handle " + HexFormat.of().formatHex(bytes, 0, 8) + "...";
    }
}
