package io.refshare.harness;

import picocli.CommandLine;

import java.util.Locale;

/**
 * Sizes on the command line and in the table: "1024", "64KiB", "1MiB" (also KB/MB/GB and
 * K/M/G, all binary) to bytes, and back to the shortest exact label.
 */
public final class ByteSize implements CommandLine.ITypeConverter<Long> {
    private static final String[][] UNITS = {{"KIB", "KB", "K"}, {"MIB", "MB", "M"}, {"GIB", "GB", "G"}};
    private static final String[] LABELS = {"KiB", "MiB", "GiB"};

    @Override
    public Long convert(String value) {
        return parse(value);
    }

    public static long parse(String value) {
        String v = value.trim().toUpperCase(Locale.ROOT);
        long unit = 1;
        for (String[] names : UNITS) {
            unit <<= 10;
            for (String suffix : names) {
                if (v.endsWith(suffix)) {
                    return Math.multiplyExact(number(v.substring(0, v.length() - suffix.length()), value), unit);
                }
            }
        }
        return number(v.endsWith("B") ? v.substring(0, v.length() - 1) : v, value);
    }

    /** 1024 -> "1 KiB", 1536 -> "1.5 KiB", 1000 -> "1000 B". */
    public static String label(long bytes) {
        if (bytes < 1024) {
            return bytes + " B";
        }
        int unit = -1;
        double v = bytes;
        while (v >= 1024 && unit < LABELS.length - 1) {
            v /= 1024;
            unit++;
        }
        return (v == Math.rint(v) ? String.format(Locale.ROOT, "%.0f", v) : String.format(Locale.ROOT, "%.1f", v))
                + " " + LABELS[unit];
    }

    private static long number(String digits, String original) {
        try {
            long n = Long.parseLong(digits.trim());
            if (n <= 0) {
                throw new CommandLine.TypeConversionException("size must be positive: '" + original + "'");
            }
            return n;
        } catch (NumberFormatException e) {
            throw new CommandLine.TypeConversionException("not a size: '" + original + "' (try 4096, 64KiB, 1MiB)");
        }
    }
}
