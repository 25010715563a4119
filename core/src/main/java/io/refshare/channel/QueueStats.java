package io.refshare.channel;

import io.refshare.exceptions.ProducersGoneException;
import io.refshare.shm.ProcessIdentity;

import java.util.List;

/**
 * A moment's view of a queue, read from its file without locking (figures moved by
 * concurrent operations may be off by those operations).
 *
 * @param size      positions producers claimed and consumers did not yet (0..capacity): a moment's fill level
 * @param offered   messages published, ever, by every participant (departed ones included)
 * @param taken     messages handed to a consumer, ever
 * @param rejected  cells skipped because their length field was impossible (hostile or corrupt writer)
 * @param closed    true once the stream ended: {@link ShmQueue#markClosed()} by anyone, the creator's close,
 *                  or the death of every producer (see {@link ProducersGoneException})
 * @param owner     the process that created the queue
 */
public record QueueStats(String name, int capacity, int maxMessageBytes, int size, long offered, long taken,
        long rejected, boolean closed, ProcessIdentity owner, List<QueueParticipant> participants) {

    public QueueStats {
        participants = List.copyOf(participants);
    }
}
