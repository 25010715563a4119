package io.refshare.cuda.driver;

import java.util.Arrays;

/**
 * The one child-process entry of this package's tests: {@code <role> <args...>}, where the
 * role is the simple name of the class whose {@code run(args)} the child runs. Tests start it
 * through {@code ChildJvm.start(CudaChildMain.class, "<role>", ...)}.
 */
public final class CudaChildMain {
    private CudaChildMain() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            throw new IllegalArgumentException("usage: CudaChildMain <role> <args...>");
        }
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        switch (args[0]) {
            case "CudaPeerMain" -> CudaPeerMain.run(rest);
            case "NoDeviceMain" -> NoDeviceMain.run(rest);
            default -> throw new IllegalArgumentException("no child role " + args[0]);
        }
    }
}
