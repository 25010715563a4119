package io.refshare.channel;

import io.refshare.shm.ShmDirectory;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.List;
import java.util.concurrent.TimeUnit;

import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.*;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * A consumer in its own PID namespace (a container sharing /dev/shm): its pid means
 * nothing here, yet its claim is judged through its life lock: never repaired while it
 * lives, repaired (the message delivered to another consumer, once) after its SIGKILL.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class NamespacedConsumerTest {
    private static final List<String> OWN_PID_NAMESPACE =
            List.of("unshare", "--pid", "--fork", "--kill-child", "--mount-proc");

    @RegisterExtension
    final TempShm shm = new TempShm();
    private final ShmDirectory dir = shm.directory();

    @Test
    void itsClaimStandsWhileItLivesAndIsRepairedOnceItIsKilled() throws Exception {
        assumeTrue(canUnsharePid(), "needs root and unshare(1) to start a process in its own PID namespace");
        try (ShmQueue q = ShmQueue.create(dir, 4, 64)) {
            assertTrue(q.offer(TestMessages.encode(1, 7)));
            try (ChildJvm child = ChildJvm.startUnder(OWN_PID_NAMESPACE, new String[0], QueueChild.class,
                    "claim-read", shm.path().toString(), q.name())) {
                assertEquals("0", child.expect("CLAIMED").trim());
                for (int i = 0; i < 5; i++) {
                    q.recover();
                    assertNull(q.poll(150, MILLISECONDS), "a live claimant's message is never taken from it");
                }
                assertEquals(2, q.stats().participants().size(), "its entry stands");
                child.kill();
                long killed = System.nanoTime();
                byte[] m = q.poll(10, SECONDS);
                long millis = (System.nanoTime() - killed) / 1_000_000;
                assertNotNull(m, "after its death the claimed message is adopted");
                assertEquals(7, TestMessages.sequence(TestMessages.check(m)));
                System.out.println("a namespaced consumer's claim was repaired " + millis + " ms after its SIGKILL");
                assertTrue(millis < 5_000, "repaired within 5 s: " + millis + " ms");
                assertNull(q.poll(100, MILLISECONDS), "delivered once");
                q.recover();
                assertEquals(1, q.stats().participants().size(), "its entry was reclaimed");
            }
        }
    }

    static boolean canUnsharePid() {
        try {
            Process p = new ProcessBuilder("unshare", "--pid", "--fork", "--mount-proc", "true")
                    .redirectErrorStream(true).start();
            p.getInputStream().readAllBytes();
            return p.waitFor() == 0;
        } catch (Exception e) {
            return false;
        }
    }
}
