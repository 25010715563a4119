package io.refshare.conformance;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The small subset of JSON the conformance fixtures use: objects, arrays, strings (ASCII
 * with the usual escapes), integers that fit a {@code long}, booleans and null. Objects
 * keep their key order, so a written fixture reads back field by field as it was made.
 * The core module has no JSON dependency and the fixtures need none.
 */
final class Json {
    private final String text;
    private int at;

    private Json(String text) {
        this.text = text;
    }

    /** Parses a whole document; trailing non-space characters are an error. */
    static Object parse(String text) {
        Json p = new Json(text);
        Object v = p.value();
        p.skipSpace();
        if (p.at != text.length()) {
            throw p.error("trailing characters");
        }
        return v;
    }

    /** {@code value} as JSON, objects one key per line, so fixture diffs stay readable. */
    static String write(Object value) {
        StringBuilder b = new StringBuilder();
        write(b, value, "");
        return b.append('\n').toString();
    }

    private static void write(StringBuilder b, Object value, String indent) {
        switch (value) {
            case null -> b.append("null");
            case String s -> quote(b, s);
            case Long n -> b.append(n);
            case Integer n -> b.append(n);
            case Boolean z -> b.append(z);
            case Map<?, ?> m -> {
                if (m.isEmpty()) {
                    b.append("{}");
                    return;
                }
                b.append("{\n");
                String inner = indent + "  ";
                int i = 0;
                for (Map.Entry<?, ?> e : m.entrySet()) {
                    b.append(inner);
                    quote(b, (String) e.getKey());
                    b.append(": ");
                    write(b, e.getValue(), inner);
                    b.append(++i < m.size() ? ",\n" : "\n");
                }
                b.append(indent).append('}');
            }
            case List<?> l -> {
                // lists of scalars (shapes, strides) on one line
                b.append('[');
                for (int i = 0; i < l.size(); i++) {
                    if (i > 0) {
                        b.append(", ");
                    }
                    write(b, l.get(i), indent);
                }
                b.append(']');
            }
            case long[] a -> {
                List<Long> l = new ArrayList<>();
                for (long x : a) {
                    l.add(x);
                }
                write(b, l, indent);
            }
            default -> throw new IllegalArgumentException("not a JSON value: " + value.getClass());
        }
    }

    private static void quote(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                default -> {
                    if (c < 0x20 || c > 0x7e) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        b.append('"');
    }

    private Object value() {
        skipSpace();
        if (at >= text.length()) {
            throw error("unexpected end");
        }
        char c = text.charAt(at);
        return switch (c) {
            case '{' -> object();
            case '[' -> array();
            case '"' -> string();
            case 't' -> literal("true", Boolean.TRUE);
            case 'f' -> literal("false", Boolean.FALSE);
            case 'n' -> literal("null", null);
            default -> number();
        };
    }

    private Map<String, Object> object() {
        Map<String, Object> m = new LinkedHashMap<>();
        at++;
        skipSpace();
        if (peek() == '}') {
            at++;
            return m;
        }
        while (true) {
            skipSpace();
            String key = string();
            skipSpace();
            expect(':');
            if (m.put(key, value()) != null) {
                throw error("duplicate key " + key);
            }
            skipSpace();
            if (peek() == ',') {
                at++;
                continue;
            }
            expect('}');
            return m;
        }
    }

    private List<Object> array() {
        List<Object> l = new ArrayList<>();
        at++;
        skipSpace();
        if (peek() == ']') {
            at++;
            return l;
        }
        while (true) {
            l.add(value());
            skipSpace();
            if (peek() == ',') {
                at++;
                continue;
            }
            expect(']');
            return l;
        }
    }

    private String string() {
        expect('"');
        StringBuilder b = new StringBuilder();
        while (true) {
            if (at >= text.length()) {
                throw error("unterminated string");
            }
            char c = text.charAt(at++);
            if (c == '"') {
                return b.toString();
            }
            if (c != '\\') {
                b.append(c);
                continue;
            }
            char e = text.charAt(at++);
            switch (e) {
                case '"', '\\', '/' -> b.append(e);
                case 'n' -> b.append('\n');
                case 't' -> b.append('\t');
                case 'u' -> {
                    b.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
                    at += 4;
                }
                default -> throw error("unknown escape \\" + e);
            }
        }
    }

    private Long number() {
        int start = at;
        if (peek() == '-') {
            at++;
        }
        while (at < text.length() && Character.isDigit(text.charAt(at))) {
            at++;
        }
        if (start == at) {
            throw error("unexpected character '" + text.charAt(at) + "'");
        }
        return Long.parseLong(text.substring(start, at));
    }

    private Object literal(String word, Object v) {
        if (!text.startsWith(word, at)) {
            throw error("expected " + word);
        }
        at += word.length();
        return v;
    }

    private void expect(char c) {
        if (peek() != c) {
            throw error("expected '" + c + "'");
        }
        at++;
    }

    private char peek() {
        return at < text.length() ? text.charAt(at) : '\0';
    }

    private void skipSpace() {
        while (at < text.length() && Character.isWhitespace(text.charAt(at))) {
            at++;
        }
    }

    private IllegalArgumentException error(String what) {
        return new IllegalArgumentException("JSON: " + what + " at offset " + at);
    }
}
