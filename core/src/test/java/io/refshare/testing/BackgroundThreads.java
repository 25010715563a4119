package io.refshare.testing;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertTrue;

/** The background threads every open refshare context runs, for tests that damage files under them. */
public final class BackgroundThreads {
    /** Their thread names (the kernel keeps the first 15 characters of each as its task name). */
    public static final List<String> NAMES = List.of("refshare-collector", "refshare-housekeeper");

    private BackgroundThreads() {
    }

    /** Fails unless a live thread of each name runs in this JVM. */
    public static void assertAlive() {
        for (String name : NAMES) {
            assertTrue(Thread.getAllStackTraces().keySet().stream().anyMatch(th -> th.getName().equals(name) && th.isAlive()),
                    name + " is alive");
        }
    }
}
