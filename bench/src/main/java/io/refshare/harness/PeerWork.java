package io.refshare.harness;

import java.io.IOException;

/** Work that talks to or waits for a peer process: a warm-up pass, the producer's side of a stream. */
interface PeerWork {
    void run() throws IOException, InterruptedException;
}
