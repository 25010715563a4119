package io.refshare;

import io.refshare.tensor.Device;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class DeviceTest {
    @Test
    void parsesAndPrintsLikePyTorch() {
        assertEquals(Device.HOST, Device.parse("host"));
        assertEquals(Device.HOST, Device.parse(" CPU "));
        assertEquals(Device.cuda(0), Device.parse("cuda"));
        assertEquals(Device.cuda(3), Device.parse("cuda:3"));
        assertEquals("cuda:3", Device.cuda(3).toString());
        assertEquals("host", Device.HOST.toString());
        assertTrue(Device.HOST.isHost());
        for (String bad : new String[] {"gpu", "cuda:", "cuda:-1", "cuda:x", "cuda:1:2", ""}) {
            var e = assertThrows(IllegalArgumentException.class, () -> Device.parse(bad));
            assertTrue(e.getMessage().startsWith("not a device: '" + bad + "'"), e.getMessage());
        }
        assertThrows(IllegalArgumentException.class, () -> new Device(Device.Kind.HOST, 1));
    }
}
