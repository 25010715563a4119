package io.refshare.harness;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class MachineInfoTest {
    @Test
    void stolenTimeIsTheStealColumnsShareOfAllTicksBetweenTwoReadings() {
        MachineInfo.CpuTimes before = MachineInfo.CpuTimes.parse("cpu  100 0 50 800 0 0 0 50 0 0");
        MachineInfo.CpuTimes after = MachineInfo.CpuTimes.parse("cpu  400 0 150 1200 0 0 0 150 7 0");

        assertEquals(new MachineInfo.CpuTimes(1000, 50), before);
        assertEquals("11.1 %", before.stolenUntil(after)); // 100 of 900 ticks; guest time is inside user already
        assertEquals("0.0 %", before.stolenUntil(MachineInfo.CpuTimes.parse("cpu 200 0 50 800 0 0 0 50")));
    }

    @Test
    void aLineThatIsNotTheCpuTotalsReadsAsUnknown() {
        for (String bad : new String[] {"", "cpu", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3 4 5 6 7", "cpu 1 2 3 x 5 6 7 8",
                "cpu 1 2 3 -4 5 6 7 8", "cpu 1 2 3 4 5 6 7 99999999999999999999",
                "cpu 9223372036854775807 1 0 0 0 0 0 0", "intr 1 2 3 4 5 6 7 8"}) {
            assertEquals(MachineInfo.CpuTimes.UNKNOWN, MachineInfo.CpuTimes.parse(bad), bad);
        }
    }

    @Test
    void aShareThatCannotBeToldIsUnknown() {
        MachineInfo.CpuTimes t = MachineInfo.CpuTimes.parse("cpu 100 0 0 100 0 0 0 10");
        assertEquals("unknown", MachineInfo.CpuTimes.UNKNOWN.stolenUntil(t));
        assertEquals("unknown", t.stolenUntil(MachineInfo.CpuTimes.UNKNOWN));
        assertEquals("unknown", t.stolenUntil(t), "no tick between the readings");
        assertEquals("unknown", t.stolenUntil(MachineInfo.CpuTimes.parse("cpu 50 0 0 100 0 0 0 10")), "time ran back");
    }

    @Test
    void thisMachinesReadingIsKnownOnLinux() {
        MachineInfo.CpuTimes now = MachineInfo.CpuTimes.read();
        if (System.getProperty("os.name").startsWith("Linux")) {
            assertTrue(now.total() > 0 && now.steal() >= 0 && now.steal() <= now.total(), now.toString());
        }
    }
}
