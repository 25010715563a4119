package io.refshare.harness;

/** How the producer gets the tensor it sends. */
enum Mode {
    /** One tensor allocated and filled before measuring, sent again and again: the transport alone. */
    REUSE,
    /**
     * A newly allocated and filled tensor for every message, closed by the producer right after
     * the send: what a pipeline producing new data does, and where pooled, already-mapped
     * memory has to pay off (the fill itself is outside the latency, inside the throughput).
     */
    FRESH;

    String label() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }
}
