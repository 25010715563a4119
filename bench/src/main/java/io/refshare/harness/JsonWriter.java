package io.refshare.harness;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Locale;

/** Just enough JSON output for results.json (the CLI has no JSON library, and needs none for this). */
final class JsonWriter {
    private final StringBuilder out = new StringBuilder();
    /** Per open object or array: true while it has no element yet. */
    private final Deque<Boolean> empty = new ArrayDeque<>();
    private boolean afterName;
    private boolean breakBeforeNext;

    JsonWriter beginObject() {
        element();
        out.append('{');
        empty.push(true);
        return this;
    }

    JsonWriter endObject() {
        empty.pop();
        out.append('}');
        return this;
    }

    JsonWriter beginArray() {
        element();
        out.append('[');
        empty.push(true);
        return this;
    }

    JsonWriter endArray() {
        empty.pop();
        out.append(']');
        return this;
    }

    JsonWriter name(String name) {
        element();
        string(name);
        out.append(':');
        afterName = true;
        return this;
    }

    JsonWriter value(String s) {
        element();
        if (s == null) {
            out.append("null");
        } else {
            string(s);
        }
        return this;
    }

    JsonWriter value(long n) {
        element();
        out.append(n);
        return this;
    }

    /** NaN and infinities, which JSON cannot hold, become null. */
    JsonWriter value(double d) {
        element();
        out.append(Double.isFinite(d) ? String.format(Locale.ROOT, "%.4f", d) : "null");
        return this;
    }

    JsonWriter value(boolean b) {
        element();
        out.append(b);
        return this;
    }

    JsonWriter field(String name, String v) {
        return name(name).value(v);
    }

    JsonWriter field(String name, long v) {
        return name(name).value(v);
    }

    JsonWriter field(String name, double v) {
        return name(name).value(v);
    }

    JsonWriter field(String name, boolean v) {
        return name(name).value(v);
    }

    JsonWriter array(String name, long[] values) {
        name(name).beginArray();
        for (long v : values) {
            value(v);
        }
        return endArray();
    }

    /** Starts the next element on a new line, for a file people also read. */
    JsonWriter newline() {
        breakBeforeNext = true;
        return this;
    }

    @Override
    public String toString() {
        if (!empty.isEmpty()) {
            throw new IllegalStateException("unclosed JSON object or array");
        }
        return out.toString();
    }

    private void element() {
        if (afterName) {
            afterName = false;
            return;
        }
        if (!empty.isEmpty()) {
            if (!empty.pop()) {
                out.append(',');
            }
            empty.push(false);
        }
        if (breakBeforeNext) {
            breakBeforeNext = false;
            out.append('\n');
        }
    }

    private void string(String s) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }
}
