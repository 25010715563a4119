package io.refshare.tensor;

import java.util.Objects;

/**
 * Where a tensor's memory lives: host shared memory, or a CUDA device by ordinal. Written
 * and parsed as {@code host} and {@code cuda:N} ({@code cuda} alone is {@code cuda:0}), as
 * PyTorch names devices.
 *
 * <p>Two devices are equal when kind and index are: {@code Device.parse("cuda")} equals
 * {@code Device.cuda(0)}.
 *
 * @param kind  host or CUDA
 * @param index the CUDA device ordinal, as the CUDA driver numbers the devices this process
 *              sees; always 0 for the host
 */
public record Device(Kind kind, int index) {

    /** The two places a tensor's memory can be. */
    public enum Kind {
        /** Host shared memory: files in the shared directory, mapped by every process. */
        HOST,
        /** Memory of a CUDA device, shared between processes through CUDA IPC handles. */
        CUDA
    }

    /** Host shared memory, the only host device. */
    public static final Device HOST = new Device(Kind.HOST, 0);

    /**
     * A device of {@code kind} with ordinal {@code index}.
     *
     * @param kind  host or CUDA
     * @param index the CUDA device ordinal; 0 for the host
     * @throws NullPointerException     when {@code kind} is null
     * @throws IllegalArgumentException when {@code index} is negative, or not 0 for the host
     */
    public Device {
        Objects.requireNonNull(kind, "kind");
        if (index < 0 || (kind == Kind.HOST && index != 0)) {
            throw new IllegalArgumentException("no such device: " + kind + " " + index);
        }
    }

    /**
     * The CUDA device with this ordinal. It need not exist on this machine: devices are
     * checked only when memory is allocated or opened on them.
     *
     * @param ordinal the device ordinal, 0 or more
     * @return the device, printed as {@code cuda:N}
     * @throws IllegalArgumentException when {@code ordinal} is negative
     */
    public static Device cuda(int ordinal) {
        return new Device(Kind.CUDA, ordinal);
    }

    /**
     * Reads a device name as {@link #toString()} writes it, or as PyTorch does: {@code host}
     * (or {@code cpu}), {@code cuda} (device 0), or {@code cuda:N}. Surrounding blanks and
     * case are ignored.
     *
     * @param text the name
     * @return the device
     * @throws IllegalArgumentException for anything else, a negative ordinal included
     * @throws NullPointerException     when {@code text} is null
     */
    public static Device parse(String text) {
        String t = text.trim().toLowerCase(java.util.Locale.ROOT);
        if (t.equals("host") || t.equals("cpu")) {
            return HOST;
        }
        if (t.equals("cuda")) {
            return cuda(0);
        }
        if (t.startsWith("cuda:")) {
            try {
                return cuda(Integer.parseInt(t.substring(5)));
            } catch (IllegalArgumentException e) {
                // reported below
            }
        }
        throw new IllegalArgumentException("not a device: '" + text + "' (expected host, cuda or cuda:N)");
    }

    /**
     * Whether this is host shared memory.
     *
     * @return true for {@link #HOST}, false for a CUDA device
     */
    public boolean isHost() {
        return kind == Kind.HOST;
    }

    /**
     * The name {@link #parse} reads back.
     *
     * @return {@code host} or {@code cuda:N}
     */
    @Override
    public String toString() {
        return kind == Kind.HOST ? "host" : "cuda:" + index;
    }
}
