package io.refshare.wire;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

class WireNamesTest {

    @Test
    void allowsExactlyAsciiLettersDigitsUnderscoreAndHyphen() {
        for (int c = Character.MIN_VALUE; c <= Character.MAX_VALUE; c++) {
            boolean expected = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
                    || c == '_' || c == '-';
            assertEquals(expected, WireNames.allowed((char) c), "character " + c);
        }
    }
}
