package io.refshare.wire;

/**
 * The one rule for file names a descriptor may carry. Names are resolved against the
 * shared-memory directory by the receiver, so anything that could leave that directory or
 * confuse a shell, a log or a non-Java reader is refused: 1 to {@value #MAX_LENGTH}
 * characters from {@code [A-Za-z0-9_-]}. That excludes '/', '\', '.', NUL and everything
 * beyond ASCII; the separate messages for those exist to make an attack obvious in a log.
 */
final class WireNames {
    static final int MAX_LENGTH = 128;

    private WireNames() {
    }

    /** What is wrong with {@code name} as a descriptor file name, or null when nothing is. */
    static String problem(String name) {
        if (name != null && isValid(name)) {
            return null; // the common case: one pass, no searching for the specific fault
        }
        if (name == null) {
            return "is missing";
        }
        if (name.isEmpty()) {
            return "is empty";
        }
        if (name.length() > MAX_LENGTH) {
            return "is " + name.length() + " characters long, at most " + MAX_LENGTH + " are allowed";
        }
        if (name.indexOf('/') >= 0 || name.indexOf('\\') >= 0) {
            return "contains a path separator";
        }
        if (name.contains("..")) {
            return "contains '..'";
        }
        for (int i = 0; i < name.length(); i++) {
            char c = name.charAt(i);
            if (c > 0x7f) {
                return "contains non-ASCII character U+" + String.format("%04X", (int) c) + " at index " + i;
            }
            if (!allowed(c)) {
                return "contains " + (c >= 0x20 && c < 0x7f ? "character '" + c + "'"
                        : String.format("control character 0x%02X", (int) c)) + " at index " + i
                        + " (allowed: A-Z a-z 0-9 _ -)";
            }
        }
        return null;
    }

    static boolean isValid(String name) {
        int n = name.length();
        if (n == 0 || n > MAX_LENGTH) {
            return false;
        }
        for (int i = 0; i < n; i++) {
            if (!allowed(name.charAt(i))) {
                return false;
            }
        }
        return true;
    }

    static boolean allowed(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    }

    /** {@code name} quoted for a message: non-printable characters as '?', cut at 80. */
    static String quoted(String name) {
        if (name == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("'");
        for (int i = 0; i < Math.min(name.length(), 80); i++) {
            char c = name.charAt(i);
            b.append(c >= 0x20 && c < 0x7f ? c : '?');
        }
        return b.append(name.length() > 80 ? "...'" : "'").toString();
    }
}
