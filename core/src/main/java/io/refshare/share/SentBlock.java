package io.refshare.share;

import java.util.ArrayList;
import java.util.List;

/**
 * The sender's record of a shared storage: the tokens it handed out for it. While any
 * token is live (in flight or held), the storage must stay; once the sender drops the
 * storage it waits in the {@link Limbo} until {@link #prune()} finds no live token.
 *
 * <p>Released tokens are pruned as more are added, so a buffer sent a million times
 * keeps only its live tokens here.
 */
final class SentBlock {
    private final Storage storage;
    private final List<Token> tokens = new ArrayList<>(2);
    private int pruneAt = 64;

    SentBlock(Storage storage) {
        this.storage = storage;
    }

    Storage storage() {
        return storage;
    }

    synchronized void add(Token token) {
        tokens.add(token);
        if (tokens.size() >= pruneAt) {
            prune();
            pruneAt = Math.max(64, 2 * tokens.size());
        }
    }

    /**
     * Drops the tokens that came back, returning them to their counter files, and
     * answers how many are still live (a token of a damaged counter file stays live for good:
     * see {@link CounterFilePool}).
     */
    synchronized int prune() {
        int live = 0;
        for (int i = 0; i < tokens.size(); i++) {
            Token t = tokens.get(i);
            if (!storage.sharing.counterFiles().isReturned(t)) {
                tokens.set(live++, t);
            }
        }
        tokens.subList(live, tokens.size()).clear();
        return live;
    }

    long byteSize() {
        return storage.byteSize();
    }
}
