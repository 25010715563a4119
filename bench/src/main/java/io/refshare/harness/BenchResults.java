package io.refshare.harness;

import java.time.ZonedDateTime;
import java.util.List;

/**
 * Everything one run measured, and the evidence that it cleaned up after itself.
 *
 * @param loadBefore   /proc/loadavg's 1, 5 and 15 minute load averages when the run started: other
 *                     work on the machine skews every number, so the table says how busy it was
 * @param stolen       the share of the CPUs' time during the run that the host of a virtual machine
 *                     gave to others ({@link MachineInfo.CpuTimes}), as "2.4 %", or "unknown"
 * @param reclamations refshare's reclamation latency, per size and consumer hold time
 * @param torch        why torch.multiprocessing was not measured, or null when it was
 * @param python       why the Java<->Python rows were not measured (or what failed), or null when they were
 * @param elapsedNanos wall time of the whole run
 */
record BenchResults(ZonedDateTime date, MachineInfo machine, String loadBefore, String loadAfter, String stolen,
                    Settings settings, long producerPid, long consumerPid,
                    ClockCheck clock, List<SizePlan> plans, List<Measurement> measurements,
                    List<Reclamation> reclamations, String torch, String python,
                    Cleanup cleanup, long elapsedNanos) {

    /**
     * @param consumerExit the consumer process's exit code (0: it finished every command)
     * @param pythonExit   the Python process's exit code (0: it finished every command, or none was started)
     * @param limboEmpty   every block this process shared was let go by the consumer
     * @param filesLeft    files with our prefix that the run created and did not remove
     */
    record Cleanup(int consumerExit, int pythonExit, boolean limboEmpty, List<String> filesLeft) {
        boolean clean() {
            return consumerExit == 0 && pythonExit == 0 && limboEmpty && filesLeft.isEmpty();
        }
    }

    /** True when no ping-pong round contradicted the shared clock and every probe agreed. */
    boolean clockHolds() {
        return clock.holds() && clockViolations() == 0;
    }

    long clockViolations() {
        return measurements.stream().mapToLong(m -> m.latency().clockViolations()).sum();
    }

    long clockSamples() {
        return measurements.stream().mapToLong(m -> m.latency().rounds()).sum();
    }

    /** The copy baseline measured at {@code size} in this run, or null. */
    Measurement baseline(long size) {
        return measurements.stream().filter(m -> m.baseline() && m.size() == size).findFirst().orElse(null);
    }
}
