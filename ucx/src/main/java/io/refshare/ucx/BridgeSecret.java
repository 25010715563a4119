package io.refshare.ucx;

import io.refshare.exceptions.RefshareException;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Set;

/**
 * The secret both ends of a bridge hold, read from a file only its owner can read or write
 * (mode 0600 or stricter: a secret others can read proves nothing). Peers prove they hold it
 * without sending it: each answers the other's fresh nonce with an HMAC-SHA256 over both
 * nonces and its role (docs/hosts.md, "Handshake"), so a recorded handshake cannot be replayed
 * and neither side can be impersonated by reflecting the other's proof.
 */
public final class BridgeSecret {
    /** Shorter secrets are refused: 16 bytes is already more than anyone guesses. */
    public static final int MIN_BYTES = 16;
    public static final int MAX_BYTES = 4096;
    private static final byte[] SERVER_ROLE = "refshare-bridge server".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] CLIENT_ROLE = "refshare-bridge client".getBytes(StandardCharsets.US_ASCII);
    private static final SecureRandom RANDOM = new SecureRandom();

    private final byte[] key;

    private BridgeSecret(byte[] key) {
        this.key = key;
    }

    /**
     * @throws RefshareException when the file is missing, is not a regular file, can be read or
     *                           written by group or others, or is shorter than {@value #MIN_BYTES} bytes
     */
    public static BridgeSecret read(Path file) {
        try {
            if (!Files.isRegularFile(file, LinkOption.NOFOLLOW_LINKS)) {
                throw new RefshareException("bridge secret " + file + " is not a regular file");
            }
            Set<PosixFilePermission> perms = Files.getPosixFilePermissions(file, LinkOption.NOFOLLOW_LINKS);
            for (PosixFilePermission p : perms) {
                if (p != PosixFilePermission.OWNER_READ && p != PosixFilePermission.OWNER_WRITE) {
                    throw new RefshareException("bridge secret " + file + " has permissions "
                            + java.nio.file.attribute.PosixFilePermissions.toString(perms)
                            + ": it must be readable by its owner only (chmod 600)");
                }
            }
            long size = Files.size(file);
            if (size < MIN_BYTES || size > MAX_BYTES) {
                throw new RefshareException("bridge secret " + file + " has " + size + " bytes; it needs "
                        + MIN_BYTES + " to " + MAX_BYTES);
            }
            return new BridgeSecret(Files.readAllBytes(file));
        } catch (IOException e) {
            throw new RefshareException("cannot read bridge secret " + file + ": " + e.getMessage(), e);
        }
    }

    /** A secret from bytes (tests and programs that keep it elsewhere). */
    public static BridgeSecret of(byte[] key) {
        if (key.length < MIN_BYTES || key.length > MAX_BYTES) {
            throw new IllegalArgumentException("a bridge secret needs " + MIN_BYTES + " to " + MAX_BYTES + " bytes");
        }
        return new BridgeSecret(key.clone());
    }

    static byte[] nonce() {
        byte[] n = new byte[ControlCodec.NONCE_BYTES];
        RANDOM.nextBytes(n);
        return n;
    }

    byte[] serverProof(byte[] clientNonce, byte[] serverNonce) {
        return hmac(SERVER_ROLE, clientNonce, serverNonce);
    }

    byte[] clientProof(byte[] clientNonce, byte[] serverNonce) {
        return hmac(CLIENT_ROLE, clientNonce, serverNonce);
    }

    /** Constant-time comparison: how much of a proof matched must not leak. */
    static boolean matches(byte[] expected, byte[] presented) {
        return MessageDigest.isEqual(expected, presented);
    }

    private byte[] hmac(byte[] role, byte[] clientNonce, byte[] serverNonce) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(key, "HmacSHA256"));
            mac.update(role);
            mac.update(clientNonce);
            mac.update(serverNonce);
            return mac.doFinal();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is part of every JDK", e);
        }
    }

    @Override
    public String toString() {
        return "BridgeSecret[" + key.length + " bytes]";
    }
}
