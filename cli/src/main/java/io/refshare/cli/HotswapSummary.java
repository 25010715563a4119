package io.refshare.cli;

import io.refshare.inspect.Inventory;

import java.io.PrintStream;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * What a {@code refshare hotswap} run found, and the checks it passes or fails.
 *
 * @param published          versions published (numbered 1..published by the holder)
 * @param seconds            how long the publisher published
 * @param intervalMillis     the pause asked for between publishes
 * @param versionBytes       bytes in each version
 * @param readers            each reader's final figures
 * @param retiredBeforeClose versions retired when every reader had closed, before the publisher closed the holder
 * @param liveBeforeClose    versions alive then (the current one, if nothing leaked)
 * @param retiredAfterClose  versions retired once the holder was closed
 * @param retiredByPublisher retirements that happened in the publisher (the others happened in readers)
 * @param publisherAnomalies retirements in the publisher that found a token already returned
 * @param limboEmpty         every version's block came back to the publisher's allocator
 * @param blocksInUse        blocks the publisher's allocator still counts as used
 * @param segmentCreations   segments the publisher's allocator created (reused across versions)
 * @param filesLeft          refshare files of the run's processes left in the directory
 */
record HotswapSummary(long published, double seconds, long intervalMillis, long versionBytes, List<Reader> readers,
                      long retiredBeforeClose, long liveBeforeClose, long retiredAfterClose, long retiredByPublisher,
                      long publisherAnomalies, boolean limboEmpty, long blocksInUse, long segmentCreations,
                      Set<String> filesLeft) {

    /** One reader's final report: what it acquired and verified, and what it retired. */
    record Reader(long pid, long acquisitions, long distinct, long corrupt, long backwards, long latest,
                  long retiredHere, long anomalies) {
    }

    HotswapSummary {
        readers = List.copyOf(readers);
        filesLeft = Set.copyOf(filesLeft);
    }

    /** Every reader acquired, and every byte of every acquisition was one whole version. */
    boolean everyAcquisitionVerified() {
        return readers.stream().allMatch(r -> r.acquisitions() > 0 && r.corrupt() == 0);
    }

    boolean neverBackwards() {
        return readers.stream().allMatch(r -> r.backwards() == 0);
    }

    long retiredByReaders() {
        return readers.stream().mapToLong(Reader::retiredHere).sum();
    }

    long anomalies() {
        return publisherAnomalies + readers.stream().mapToLong(Reader::anomalies).sum();
    }

    /**
     * Each replaced version was retired, exactly once: the shared count says all but the
     * current one while it was current, all once the holder closed, and the retirements each
     * process counted itself add up to the same with no token returned twice.
     */
    boolean retiredExactlyOnce() {
        return published > 0 && retiredBeforeClose == published - 1 && liveBeforeClose == 1
                && retiredAfterClose == published && retiredByPublisher + retiredByReaders() == published
                && anomalies() == 0;
    }

    boolean nothingLeaked() {
        return limboEmpty && blocksInUse == 0 && filesLeft.isEmpty();
    }

    boolean ok() {
        return everyAcquisitionVerified() && neverBackwards() && retiredExactlyOnce() && nothingLeaked();
    }

    void print(PrintStream out) {
        long acquisitions = readers.stream().mapToLong(Reader::acquisitions).sum();
        long corrupt = readers.stream().mapToLong(Reader::corrupt).sum();
        long backwards = readers.stream().mapToLong(Reader::backwards).sum();
        out.println("summary");
        out.printf(Locale.ROOT, "  published %,d versions of %s in %.1f s (asked every %d ms, %.1f ms on average)%n",
                published, Inventory.bytes(versionBytes), seconds, intervalMillis, seconds * 1000 / published);
        for (Reader r : readers) {
            out.printf(Locale.ROOT, "  reader %d: %,d acquisitions, %,d distinct versions up to %,d, "
                            + "%d torn or corrupt, %d backwards, retired %,d%n", r.pid(), r.acquisitions(),
                    r.distinct(), r.latest(), r.corrupt(), r.backwards(), r.retiredHere());
        }
        out.printf(Locale.ROOT, "  every byte of every acquisition verified: %s%n", everyAcquisitionVerified()
                ? "all " + String.format(Locale.ROOT, "%,d", acquisitions) + " whole versions"
                : String.format(Locale.ROOT, "%,d torn or corrupt", corrupt) + (readers.stream().anyMatch(r -> r.acquisitions() == 0)
                ? ", a reader acquired nothing" : ""));
        out.printf(Locale.ROOT, "  versions never went backwards: %s%n", neverBackwards() ? "yes"
                : String.format(Locale.ROOT, "%,d times a reader saw an older version", backwards));
        out.printf(Locale.ROOT, "  retired: %,d of %,d while the last was current (%d live), %,d after close; "
                        + "%,d by the publisher, %,d by readers, %d twice: %s%n", retiredBeforeClose, published,
                liveBeforeClose, retiredAfterClose, retiredByPublisher, retiredByReaders(), anomalies(),
                retiredExactlyOnce() ? "each exactly once" : "WRONG");
        out.printf(Locale.ROOT, "  publisher memory: %d %s reused for %,d versions, limbo %s, blocks in use %d%n",
                segmentCreations, segmentCreations == 1 ? "segment" : "segments", published,
                limboEmpty ? "empty" : "NOT empty", blocksInUse);
        out.println("  files left behind: " + (filesLeft.isEmpty() ? "none" : filesLeft));
        out.println(ok() ? "OK: readers only ever saw whole versions, in order; each old version was freed once, "
                + "nothing leaked" : "FAILED: see above");
    }
}
