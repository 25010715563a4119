package io.refshare.shm;

/** What a refshare file in the shared-memory directory holds; the tag is part of its name. */
public enum ShmKind {
    /** Memory that is shared: blocks are carved from it. */
    SEGMENT("seg"),
    /** A {@link io.refshare.counter.CounterFile}. */
    COUNTERS("cnt"),
    /** A queue between processes. */
    QUEUE("q"),
    /** A shared holder (differential reference counting). */
    HOLDER("hold"),
    /** A process's published statistics, for {@code refshare inspect}. */
    STATUS("proc"),
    /** A process's {@link LifeFile}: locked while it runs, so others can tell when it died. */
    LIFE("life");

    private final String tag;

    ShmKind(String tag) {
        this.tag = tag;
    }

    public String tag() {
        return tag;
    }

    /** The kind whose tag this is, or null. */
    public static ShmKind ofTag(String tag) {
        for (ShmKind k : values()) {
            if (k.tag.equals(tag)) {
                return k;
            }
        }
        return null;
    }
}
