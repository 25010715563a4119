package io.refshare.harness;


import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;

/** Where the numbers were measured: they mean little without it. */
record MachineInfo(String cpu, int cores, String memory, String kernel, String jdk) {

    static MachineInfo detect() {
        List<String> cpuinfo = lines(Path.of("/proc/cpuinfo"));
        String cpu = field(cpuinfo, "model name");
        long kib = cpuinfoNumber(field(lines(Path.of("/proc/meminfo")), "MemTotal"));
        String kernel = lines(Path.of("/proc/sys/kernel/osrelease")).stream().findFirst()
                .orElse(System.getProperty("os.version"));
        String jdk = Runtime.version() + " (" + System.getProperty("java.vm.vendor", "?") + ", "
                + System.getProperty("java.vm.name", "?") + ")";
        return new MachineInfo(cpu == null ? System.getProperty("os.arch") : cpu,
                Runtime.getRuntime().availableProcessors(), kib > 0 ? ByteSize.label(kib * 1024) : "unknown",
                System.getProperty("os.name") + " " + kernel, jdk);
    }

    /** The 1, 5 and 15 minute load averages, or "unknown". */
    static String loadAverage() {
        String[] w = lines(Path.of("/proc/loadavg")).stream().findFirst().orElse("").split(" ");
        return w.length >= 3 ? w[0] + " " + w[1] + " " + w[2] : "unknown";
    }

    /**
     * The CPUs' time since boot in clock ticks, all of it and the part stolen: time a virtual
     * CPU had work but its host ran something else (/proc/stat's first line). Stolen time stops
     * both processes of a row at random moments, so the table says how much of the run it took.
     */
    record CpuTimes(long total, long steal) {
        static final CpuTimes UNKNOWN = new CpuTimes(-1, -1);

        static CpuTimes read() {
            return parse(lines(Path.of("/proc/stat")).stream().findFirst().orElse(""));
        }

        /** {@code cpu user nice system idle iowait irq softirq steal ...}; {@link #UNKNOWN} for anything else. */
        static CpuTimes parse(String line) {
            String[] w = line.trim().split("\\s+");
            if (w.length < 9 || !w[0].equals("cpu")) {
                return UNKNOWN;
            }
            long total = 0;
            long ticks = 0;
            try {
                for (int i = 1; i <= 8; i++) {
                    ticks = Long.parseLong(w[i]);
                    if (ticks < 0) {
                        return UNKNOWN;
                    }
                    total = Math.addExact(total, ticks);
                }
                return new CpuTimes(total, ticks); // the last column read, the eighth, is steal
            } catch (NumberFormatException | ArithmeticException e) {
                return UNKNOWN;
            }
        }

        /** The share of the CPUs' time from this reading to {@code later} that was stolen, "2.4 %", or "unknown". */
        String stolenUntil(CpuTimes later) {
            long total = later.total - this.total;
            long steal = later.steal - this.steal;
            if (this.total < 0 || later.total < 0 || total <= 0 || steal < 0 || steal > total) {
                return "unknown";
            }
            return String.format(Locale.ROOT, "%.1f %%", 100.0 * steal / total);
        }
    }

    private static List<String> lines(Path p) {
        try {
            return Files.readAllLines(p);
        } catch (IOException | RuntimeException e) {
            return List.of(); // not Linux, or not readable: the fallbacks say less, but the run goes on
        }
    }

    private static String field(List<String> lines, String name) {
        for (String line : lines) {
            int colon = line.indexOf(':');
            if (colon > 0 && line.substring(0, colon).trim().equals(name)) {
                return line.substring(colon + 1).trim();
            }
        }
        return null;
    }

    private static long cpuinfoNumber(String value) {
        if (value == null) {
            return -1;
        }
        try {
            return Long.parseLong(value.replace("kB", "").trim());
        } catch (NumberFormatException e) {
            return -1;
        }
    }
}
