package io.refshare.channel;

import io.refshare.channel.ShmQueueLayout.Geometry;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

import static io.refshare.channel.ShmQueueLayout.*;

/**
 * The messages a queue file still holds, read without attaching to the queue and without
 * changing a byte of it: for the janitor, which must keep the files those messages name
 * (a dead producer's segments and counter files) while someone may still receive them.
 *
 * <p>A message counts while its cell is FULL (published, not yet claimed) or READING
 * (claimed by a consumer that is receiving it now; should that consumer die, recovery
 * hands the message to another). Each payload is copied and kept only if the cell word
 * read after the copy is the one read before it, so a message consumed during the copy is
 * left out rather than read torn.
 */
public final class QueuedMessages {
    private QueuedMessages() {
    }

    /**
     * The payloads of the messages queue {@code name} holds now, in cell order.
     *
     * @throws io.refshare.exceptions.RefshareException when the file cannot be opened or is not a queue
     *         this code can read ({@link io.refshare.exceptions.InvalidDataException} for damage)
     */
    public static List<byte[]> payloads(ShmDirectory dir, String name) {
        return dir.open(name, ShmKind.QUEUE, HEADER_LENGTH).readAndClose(f -> {
            MemorySegment mem = f.segment();
            Geometry g = Geometry.read(mem, f.size(), f.path().toString());
            List<byte[]> messages = new ArrayList<>();
            for (int c = 0; c < g.capacity(); c++) {
                long cell = g.cellOffset(c);
                long word = (long) LONG.getVolatile(mem, cell + CELL_WORD);
                int state = state(word);
                if (state != FULL && state != READING) {
                    continue;
                }
                int length = mem.get(LE_INT, cell + CELL_LENGTH_FIELD);
                if (length < 0 || length > g.maxMessageBytes()) {
                    continue; // an impossible length: the queue rejects this cell too
                }
                byte[] payload = mem.asSlice(cell + CELL_PAYLOAD, length).toArray(ValueLayout.JAVA_BYTE);
                if ((long) LONG.getVolatile(mem, cell + CELL_WORD) == word) {
                    messages.add(payload);
                }
            }
            return messages;
        });
    }
}
