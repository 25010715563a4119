package io.refshare.observe;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Enabled;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

/**
 * The JFR events refshare records (category "refshare"). Each is cheap when it is not
 * recorded: callers check {@code shouldCommit()} before filling fields.
 *
 * <p>The rare ones (Reclaim, Leak) are on whenever JFR records. The per-message ones (Send,
 * Receive, Release, LimboEnter, LimboCollect) are off unless asked for: a service recording
 * continuously with JFR's default settings would otherwise write an event per message and
 * stream small tensors at a fifth of the speed (measured: 89,194 against 492,821 tensors/s at
 * 1 KiB). Ask for them by name, for example
 * {@code -XX:StartFlightRecording:filename=rec.jfr,+io.refshare.Send#enabled=true,+io.refshare.Receive#enabled=true},
 * and read them with {@code jfr print --events 'io.refshare.*' rec.jfr}.
 */
public final class Events {
    private Events() {
    }

    @Name("io.refshare.Send")
    @Enabled(false)
    @Label("Send")
    @Category("refshare")
    @Description("A block was shared: one reference counted for a message")
    @StackTrace(false)
    public static final class Send extends Event {
        @Label("Segment") public String segment;
        @Label("Offset") public long offset;
        @Label("Length") @DataAmount public long length;
        @Label("Counter file") public String counterFile;
        @Label("Slot") public int slot;
    }

    @Name("io.refshare.Receive")
    @Enabled(false)
    @Label("Receive")
    @Category("refshare")
    @Description("A message was received: its reference is now held by this process")
    @StackTrace(false)
    public static final class Receive extends Event {
        @Label("Segment") public String segment;
        @Label("Length") @DataAmount public long length;
        @Label("Sender pid") public long senderPid;
        @Label("Slot") public int slot;
    }

    @Name("io.refshare.Release")
    @Enabled(false)
    @Label("Release")
    @Category("refshare")
    @Description("A received block was closed: its reference went back to the sender")
    @StackTrace(false)
    public static final class Release extends Event {
        @Label("Counter file") public String counterFile;
        @Label("Slot") public int slot;
    }

    @Name("io.refshare.LimboEnter")
    @Enabled(false)
    @Label("Limbo enter")
    @Category("refshare")
    @Description("The producer dropped a block other processes still use: it waits in the limbo")
    @StackTrace(false)
    public static final class LimboEnter extends Event {
        @Label("Length") @DataAmount public long length;
        @Label("Limbo blocks") public int limboBlocks;
    }

    @Name("io.refshare.LimboCollect")
    @Enabled(false)
    @Label("Limbo collect")
    @Category("refshare")
    @Description("A collection freed the blocks of the limbo no process uses any more")
    @StackTrace(false)
    public static final class LimboCollect extends Event {
        @Label("Freed blocks") public int freed;
        @Label("Still waiting") public int waiting;
    }

    @Name("io.refshare.Reclaim")
    @Label("Reclaim after death")
    @Category("refshare")
    @Description("References held by a dead process were released")
    @StackTrace(false)
    public static final class Reclaim extends Event {
        @Label("Dead pid") public long pid;
        @Label("References") public int references;
    }

    @Name("io.refshare.Leak")
    @Label("Leak")
    @Category("refshare")
    @Description("A received tensor was garbage-collected without close(); its reference was released")
    @StackTrace(false)
    public static final class Leak extends Event {
        @Label("Length") @DataAmount public long length;
        @Label("Received at") public String receivedAt;
    }
}
