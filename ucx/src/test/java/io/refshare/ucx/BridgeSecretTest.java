package io.refshare.ucx;

import io.refshare.exceptions.RefshareException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The secret file's rules (owner-only, 16..4096 bytes, a regular file) and the proofs' properties. */
class BridgeSecretTest {
    @TempDir
    Path tmp;

    private Path file(String text, String mode) throws Exception {
        Path f = Files.createTempFile(tmp, "secret", "");
        Files.writeString(f, text);
        Files.setPosixFilePermissions(f, PosixFilePermissions.fromString(mode));
        return f;
    }

    @Test
    void onlyAnOwnerOnlyFileOfSaneLengthIsAccepted() throws Exception {
        BridgeSecret.read(file("sixteen bytes ok", "rw-------"));
        BridgeSecret.read(file("sixteen bytes ok", "r--------"));
        RefshareException readable = assertThrows(RefshareException.class,
                () -> BridgeSecret.read(file("sixteen bytes ok", "rw-r--r--")));
        assertTrue(readable.getMessage().contains("chmod 600"), readable.getMessage());
        assertThrows(RefshareException.class, () -> BridgeSecret.read(file("sixteen bytes ok", "rw-rw----")));
        RefshareException tooShort = assertThrows(RefshareException.class,
                () -> BridgeSecret.read(file("short", "rw-------")));
        assertTrue(tooShort.getMessage().contains("16"), tooShort.getMessage());
        assertThrows(RefshareException.class, () -> BridgeSecret.read(file("x".repeat(5000), "rw-------")));
        assertThrows(RefshareException.class, () -> BridgeSecret.read(tmp.resolve("missing")));
        assertThrows(RefshareException.class, () -> BridgeSecret.read(tmp));
        Path link = tmp.resolve("link");
        Files.createSymbolicLink(link, file("sixteen bytes ok", "rw-------"));
        assertThrows(RefshareException.class, () -> BridgeSecret.read(link), "a symbolic link is not followed");
    }

    @Test
    void proofsDependOnTheSecretTheRoleAndBothNonces() {
        BridgeSecret a = BridgeSecret.of("the first secret!".getBytes());
        BridgeSecret b = BridgeSecret.of("the other secret!".getBytes());
        byte[] cn = BridgeSecret.nonce();
        byte[] sn = BridgeSecret.nonce();
        assertArrayEquals(a.clientProof(cn, sn), BridgeSecret.of("the first secret!".getBytes()).clientProof(cn, sn));
        assertFalse(BridgeSecret.matches(a.clientProof(cn, sn), b.clientProof(cn, sn)));
        assertFalse(BridgeSecret.matches(a.clientProof(cn, sn), a.serverProof(cn, sn)), "a reflected proof fails");
        assertFalse(BridgeSecret.matches(a.clientProof(cn, sn), a.clientProof(cn, BridgeSecret.nonce())));
        assertFalse(BridgeSecret.matches(a.clientProof(cn, sn), a.clientProof(sn, cn)));
    }
}
