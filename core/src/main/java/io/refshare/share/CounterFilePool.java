package io.refshare.share;

import io.refshare.counter.CounterFile;
import io.refshare.observe.Events;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;

import java.util.HashMap;
import java.util.Map;

/**
 * The sender's counter files: tokens are handed out from the current file, a full file is
 * retired and a new one started, and a retired file is unlinked and unmapped as soon as
 * every token it handed out has come back to its sender ({@link #returned}).
 */
final class CounterFilePool {
    private final ShmDirectory directory;
    private final int slotsPerFile;
    private final int peersPerFile;
    /** Tokens handed out and not yet returned, per file. */
    private final Map<CounterFile, int[]> outstanding = new HashMap<>();
    private final Map<String, CounterFile> byName = new HashMap<>();
    private CounterFile current;
    /** The file the collector sleeps on: it must stay mapped until the collector wakes. */
    private CounterFile pinned;
    private boolean pinnedIsDone;

    CounterFilePool(ShmDirectory directory, int slotsPerFile, int peersPerFile) {
        this.directory = directory;
        this.slotsPerFile = slotsPerFile;
        this.peersPerFile = peersPerFile;
    }

    synchronized Token handOut() {
        if (current == null) {
            current = open();
        }
        int slot = current.handOut();
        if (slot < 0) {
            current = open();
            slot = current.handOut();
        }
        outstanding.get(current)[0]++;
        return new Token(current, slot);
    }

    private CounterFile open() {
        CounterFile f = CounterFile.create(directory, slotsPerFile, peersPerFile);
        outstanding.put(f, new int[1]);
        byName.put(f.name(), f);
        return f;
    }

    /** A token of ours came back (released, returned or reclaimed) and was seen by its sender. */
    synchronized void returned(Token token) {
        CounterFile f = token.file();
        int[] left = outstanding.get(f);
        if (left == null) {
            return; // the pool was closed; the file is gone already
        }
        if (--left[0] == 0 && f.isRetired()) {
            outstanding.remove(f);
            byName.remove(f.name());
            if (f == current) {
                current = null; // its last slot was handed out: the next token starts a new file
            }
            f.unlink();
            if (f == pinned) {
                pinnedIsDone = true;
            } else {
                f.close();
            }
        }
    }

    /** The current file, kept mapped until {@link #unpin()}; null before the first. */
    synchronized CounterFile pinCurrent() {
        pinned = current;
        return current;
    }

    synchronized void unpin() {
        if (pinnedIsDone) {
            pinned.close();
            pinnedIsDone = false;
        }
        pinned = null;
    }

    /** Our own counter file of this name, or null when it is not (or no longer) ours. */
    synchronized CounterFile ownFile(String name) {
        return byName.get(name);
    }

    /** Tokens of ours handed out and not yet released, across our files (a scan: not for hot paths). */
    synchronized long liveTokens() {
        long live = 0;
        for (CounterFile f : outstanding.keySet()) {
            live += f.live();
        }
        return live;
    }

    /**
     * Releases every token held by a process that died (pid and start time no longer
     * running), once per dead process; returns the tokens reclaimed.
     */
    synchronized int reclaimDeadHolders(java.util.Set<ProcessIdentity> knownDead) {
        int reclaimed = 0;
        for (CounterFile f : outstanding.keySet()) {
            for (ProcessIdentity holder : f.holders()) {
                if (!knownDead.contains(holder) && !holder.isAlive()) {
                    knownDead.add(holder);
                }
                if (knownDead.contains(holder)) {
                    int n = f.releaseAllHeldBy(holder);
                    reclaimed += n;
                    Events.Reclaim event = new Events.Reclaim();
                    if (n > 0 && event.shouldCommit()) {
                        event.pid = holder.pid();
                        event.references = n;
                        event.commit();
                    }
                }
            }
        }
        return reclaimed;
    }

    /** Tokens of ours that {@code holder} holds now (a scan: for tests and tools). */
    synchronized long heldBy(ProcessIdentity holder) {
        long n = 0;
        for (CounterFile f : outstanding.keySet()) {
            n += f.heldBy(holder);
        }
        return n;
    }

    synchronized int liveFiles() {
        return outstanding.size();
    }

    /** Unlinks and unmaps every file: processes still holding tokens keep their own mappings. */
    synchronized void close() {
        for (CounterFile f : outstanding.keySet()) {
            f.unlink();
            f.close();
        }
        outstanding.clear();
        byName.clear();
        current = null;
    }
}
