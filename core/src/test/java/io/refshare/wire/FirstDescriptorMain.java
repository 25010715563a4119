package io.refshare.wire;

import io.refshare.shm.ProcessIdentity;

/**
 * A child JVM whose first descriptor names no segment: {@link Descriptor}'s caches of the last
 * checked names start empty, and a null name must be refused all the same. Prints the outcome.
 */
public final class FirstDescriptorMain {
    private FirstDescriptorMain() {
    }

    public static void main(String[] args) {
        try {
            Descriptor.host(null, 100, 0, 1, "cnt", 0, null, ProcessIdentity.current());
            System.out.println("ACCEPTED");
        } catch (IllegalArgumentException e) {
            System.out.println("REFUSED " + e.getMessage());
        }
    }
}
