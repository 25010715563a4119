package io.refshare.channel;

import io.refshare.shm.ShmDirectory;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.PidNamespaces;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

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
    @RegisterExtension
    final TempShm shm = new TempShm();
    private final ShmDirectory dir = shm.directory();

    @Test
    void itsClaimStandsWhileItLivesAndIsRepairedOnceItIsKilled() throws Exception {
        assumeTrue(PidNamespaces.available(), PidNamespaces.NEEDS);
        try (ShmQueue q = ShmQueue.create(dir, 4, 64)) {
            assertTrue(q.offer(TestMessages.encode(1, 7)));
            try (ChildJvm child = ChildJvm.startUnder(PidNamespaces.OWN_NAMESPACE, new String[0], ChannelChildMain.class, "QueueChild",
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
}
