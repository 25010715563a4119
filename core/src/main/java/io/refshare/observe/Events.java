package io.refshare.observe;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

/**
 * The JFR events refshare records (category "refshare"). Each is cheap when JFR is not
 * recording: callers check {@code shouldCommit()} before filling fields. Record them with
 * {@code -XX:StartFlightRecording:filename=rec.jfr} and read them with
 * {@code jfr print --events 'io.refshare.*' rec.jfr}.
 */
public final class Events {
    private Events() {
    }

    @Name("io.refshare.Send")
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
    @Label("Release")
    @Category("refshare")
    @Description("A received block was closed: its reference went back to the sender")
    @StackTrace(false)
    public static final class Release extends Event {
        @Label("Counter file") public String counterFile;
        @Label("Slot") public int slot;
    }

    @Name("io.refshare.LimboEnter")
    @Label("Limbo enter")
    @Category("refshare")
    @Description("The producer dropped a block other processes still use: it waits in the limbo")
    @StackTrace(false)
    public static final class LimboEnter extends Event {
        @Label("Length") @DataAmount public long length;
        @Label("Limbo blocks") public int limboBlocks;
    }

    @Name("io.refshare.LimboCollect")
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
