package io.refshare.share;

import io.refshare.Internals;
import io.refshare.Refshare;
import io.refshare.Tensor;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;

class AsciiNamesTest {
    @RegisterExtension
    final TempShm shm = new TempShm();

    @Test
    void theNameEncodedLastIsRememberedByIdentity() {
        AsciiNames names = new AsciiNames();
        String segment = "refshare-seg-0123abcd";
        byte[] first = names.of(segment);
        assertArrayEquals(segment.getBytes(StandardCharsets.US_ASCII), first);
        assertSame(first, names.of(segment), "the same name object: the same bytes, not encoded again");
        String equalButAnother = new String(segment.toCharArray());
        byte[] again = names.of(equalButAnother);
        assertNotSame(first, again, "another object is a miss (an identity check is all a hit costs)");
        assertArrayEquals(first, again);
    }

    /** A relay: the name of its own segment stays remembered while it receives fresh blocks of another's. */
    @Test
    void aReceiveDoesNotDisplaceTheNameOfTheBlocksSent() {
        try (Refshare producer = Refshare.open(shm.config()); Refshare relay = Refshare.open(shm.config())) {
            Sharing sharing = Internals.sharing(relay);
            String own = "refshare-seg-own";
            byte[] ownBytes = sharing.sentName(own);
            for (int i = 0; i < 3; i++) {
                try (Tensor fresh = producer.allocateBytes(1024)) {
                    relay.receive(producer.share(fresh)).close();
                }
                assertSame(ownBytes, sharing.sentName(own), "after receive " + i);
            }
        }
    }
}
