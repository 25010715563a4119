package io.refshare.namespace;

import io.refshare.share.ShareChildMain;
import io.refshare.Refshare;
import io.refshare.inspect.Janitor;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.PidNamespaces;
import io.refshare.testing.Patterns;
import io.refshare.testing.Reclaimed;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.HexFormat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * A consumer in its own PID namespace, as a container of the same pod runs: it shares
 * {@code /dev/shm} with the producer but its pid means nothing (or another process) here.
 * Its references must never be reclaimed while it lives, and must be reclaimed once it is
 * killed; neither may the janitor remove what it uses.
 */
class OwnPidNamespaceConsumerTest {
    @RegisterExtension
    final TempShm shm = new TempShm();

    @Test
    void itsReferencesStayWhileItLivesAndComeBackWhenItIsKilled() throws Exception {
        assumeTrue(PidNamespaces.available(), PidNamespaces.NEEDS);
        try (Refshare producer = Refshare.open(shm.config())) {
            ChildJvm consumer = ChildJvm.startUnder(PidNamespaces.OWN_NAMESPACE, new String[0], ShareChildMain.class, "ConsumerMain",
                    shm.path().toString());
            try {
                for (int i = 0; i < 3; i++) {
                    try (Tensor t = producer.allocateBytes(100_000)) {
                        Patterns.fill(t.data(), i);
                        consumer.send("RECV t" + i + " " + i + " " + HexFormat.of().formatHex(producer.share(t)));
                        assertEquals("OK t" + i, consumer.read());
                    }
                }
                // long enough for many collector rounds and a janitor sweep by a third party
                Thread.sleep(1_500);
                Janitor.sweep(shm.directory(), false);
                producer.collect();
                assertEquals(3, producer.stats().limboBlocks(), "a live consumer's references are never reclaimed");
                assertEquals(0, producer.stats().reclaimed());
                for (int i = 0; i < 3; i++) {
                    consumer.send("VERIFY t" + i + " " + i);
                    assertEquals("OK t" + i, consumer.read(), "the memory it holds is intact");
                }
            } finally {
                consumer.kill();
            }
            long millis = Reclaimed.await(producer, 3, 10_000_000_000L);
            System.out.println("references of the killed consumer in its own PID namespace reclaimed " + millis
                    + " ms after its death");
            assertEquals(0, producer.stats().limboBlocks(), "reclaimed once it is dead");
            assertEquals(3, producer.stats().reclaimed(), "each reference once");
        }
        Janitor.sweep(shm.directory(), false); // the killed consumer's status and life files
    }
}
