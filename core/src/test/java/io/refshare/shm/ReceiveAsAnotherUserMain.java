package io.refshare.shm;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.exceptions.RefshareException;

import java.nio.file.Path;
import java.util.HexFormat;

/**
 * Run as another user: tries to receive a message (hex, argument 2) through a directory
 * (argument 1) and prints {@code RECEIVED} or {@code REFUSED <reason>}.
 */
public final class ReceiveAsAnotherUserMain {
    static void run(String[] args) {
        try (Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(Path.of(args[0])))) {
            rs.receive(HexFormat.of().parseHex(args[1])).close();
            System.out.println("RECEIVED");
        } catch (RefshareException e) {
            System.out.println("REFUSED " + e.getMessage());
        }
    }
}
