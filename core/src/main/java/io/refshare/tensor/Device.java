package io.refshare.tensor;

import java.util.Objects;

/**
 * Where a tensor's memory lives: host shared memory, or a CUDA device by ordinal. Written
 * and parsed as {@code host} and {@code cuda:N} ({@code cuda} alone is {@code cuda:0}), as
 * PyTorch names devices.
 *
 * @param kind  host or CUDA
 * @param index the CUDA device ordinal; 0 for the host
 */
public record Device(Kind kind, int index) {

    public enum Kind { HOST, CUDA }

    public static final Device HOST = new Device(Kind.HOST, 0);

    public Device {
        Objects.requireNonNull(kind, "kind");
        if (index < 0 || (kind == Kind.HOST && index != 0)) {
            throw new IllegalArgumentException("no such device: " + kind + " " + index);
        }
    }

    public static Device cuda(int ordinal) {
        return new Device(Kind.CUDA, ordinal);
    }

    /**
     * {@code host} (or {@code cpu}), {@code cuda}, or {@code cuda:N}.
     *
     * @throws IllegalArgumentException for anything else
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

    public boolean isHost() {
        return kind == Kind.HOST;
    }

    @Override
    public String toString() {
        return kind == Kind.HOST ? "host" : "cuda:" + index;
    }
}
