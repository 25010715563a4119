package io.refshare;

/**
 * A value whose destroy action poisons it, so that a reader still using it after the
 * destroy sees the poison, and which counts its destroys, so that the arbiter sees a
 * double or a missing one.
 */
final class Item {
    final int id;
    /** Plain on purpose: a read racing with the destroy is exactly what the tests look for. */
    int payload;
    volatile int destroyed;

    Item(int id) {
        this.id = id;
        this.payload = id;
    }

    void destroy() {
        payload = -1;
        destroyed++; // destroy runs in one thread at a time unless the holder is broken; then counts may be lost,
                     // but payload -1 or destroyed != 1 shows up either way
    }

    /** What a reader reports: the id it saw, or -1 if the value was destroyed under it. */
    int use() {
        int p = payload;
        return destroyed != 0 || p != id ? -1 : p;
    }
}
