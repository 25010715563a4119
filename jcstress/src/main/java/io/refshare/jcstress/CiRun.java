package io.refshare.jcstress;

public final class CiRun {
    public static void main(String[] args) {
        System.out.println("placeholder");
    }
}
