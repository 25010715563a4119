package io.refshare.channel;

import io.refshare.shm.ProcessIdentity;

/**
 * One attached handle as recorded in a queue file: its process, whether it has offered
 * and polled, and how many messages it has published and taken so far.
 */
public record QueueParticipant(ProcessIdentity process, boolean producer, boolean consumer, long offered,
        long taken) {
}
