/*
 * Runs Apache Kafka's command-line tools one after another in one JVM, for pylog's peer tier.
 *
 * Why: every kafka-* script is a fresh JVM, and on CI's two cores a tool spends most of its time
 * starting (loading, verifying and compiling the same few thousand classes) rather than talking to
 * the broker. The peer tier runs ~100 tools; one runner per concurrent caller answers them all.
 *
 * Protocol (big-endian, as java.io.DataInput): requests on stdin, answers on the inherited file
 * descriptor named by the one argument (stdout stays free for whatever the JVM itself prints).
 *   request:  int argc, then argc strings (int length + UTF-8 bytes): the tool's main class, then
 *             its arguments; int stdin length (-1: no stdin), then that many bytes.
 *   answer:   int exit status, bytes stdout, bytes stderr (int length + bytes each),
 *             byte reusable (0: this runner leaves after the answer; start another).
 * A closed stdin ends the runner.
 *
 * A tool runs as its script would, as far as anything it prints or returns can tell:
 * - Kafka's tools leave through org.apache.kafka.common.utils.Exit (none of the ones pylog uses
 *   calls System.exit); its exit procedure is replaced so the first Exit.exit/halt ends the tool
 *   with that status and nothing the tool prints after it counts, as in a process that has gone.
 * - System.out/err/in are the call's own: every stream a tool or log4j has cached is a switch
 *   that writes into the current call's buffers (one call at a time per runner).
 * - A main that returns is status 0 once the non-daemon threads it started have ended; one that
 *   throws is status 1 with the JVM's "Exception in thread "main"" report, as java would print it.
 * - Shutdown hooks registered through Exit.addShutdownHook run when the tool ends, as at exit.
 * - A tool that leaves threads running after all that (a client it never closed on an error path)
 *   could print into a later call or hold state: the runner answers, then quits (reusable 0), and
 *   the caller starts a fresh one. So a reused runner is one whose every earlier tool cleaned up.
 */

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.kafka.common.utils.Exit;

public final class KafkaToolRunner {
    /** How long threads a tool started may take to end after it did, before the runner is spent. */
    private static final long LEFTOVER_THREADS_GRACE_MS = 2_000;
    /** How long a tool's closing threads get to end before its leftovers are looked at. */
    private static final long SETTLE_MS = 200;
    /** How long a shutdown hook may run (the JVM gives them as long as they take; a tool's are quick). */
    private static final long SHUTDOWN_HOOK_TIMEOUT_MS = 10_000;

    /** Thrown by the replaced exit procedure: unwinds the tool's stack on the first Exit.exit. */
    private static final class ToolExit extends Error {
        ToolExit() { super(null, null, false, false); }
    }

    /** An output stream whose target is switched per call; null target: the bytes are dropped. */
    private static final class Switch extends OutputStream {
        private volatile OutputStream target;
        void to(OutputStream next) { target = next; }
        @Override public void write(int b) { OutputStream t = target; if (t != null) { try { t.write(b); } catch (java.io.IOException ignored) { } } }
        @Override public void write(byte[] b, int off, int len) { OutputStream t = target; if (t != null) { try { t.write(b, off, len); } catch (java.io.IOException ignored) { } } }
    }

    /** An input stream whose source is switched per call. */
    private static final class InputSwitch extends InputStream {
        private volatile InputStream source = new ByteArrayInputStream(new byte[0]);
        void from(InputStream next) { source = next; }
        @Override public int read() throws java.io.IOException { return source.read(); }
        @Override public int read(byte[] b, int off, int len) throws java.io.IOException { return source.read(b, off, len); }
        @Override public int available() throws java.io.IOException { return source.available(); }
    }

    private static final Switch OUT = new Switch();
    private static final Switch ERR = new Switch();
    private static final InputSwitch IN = new InputSwitch();
    private static final List<Runnable> HOOKS = new ArrayList<>();
    private static volatile Integer exitStatus;
    private static final PrintStream RUNNER_ERR = System.err;  // the runner's own stderr: its log

    public static void main(String[] args) throws Exception {
        DataInputStream requests = new DataInputStream(System.in);
        DataOutputStream answers = new DataOutputStream(new FileOutputStream("/proc/self/fd/" + Integer.parseInt(args[0])));
        System.setOut(new PrintStream(OUT, true));
        System.setErr(new PrintStream(ERR, true));
        System.setIn(IN);
        Exit.setExitProcedure((status, message) -> stop(status));
        Exit.setHaltProcedure((status, message) -> stop(status));
        Exit.setShutdownHookAdder((name, hook) -> { synchronized (HOOKS) { HOOKS.add(hook); } });
        while (true) {
            String[] command;
            byte[] input;
            try {
                command = new String[requests.readInt()];
                for (int i = 0; i < command.length; i++) command[i] = new String(bytes(requests), StandardCharsets.UTF_8);
                int length = requests.readInt();
                input = length < 0 ? new byte[0] : requests.readNBytes(length);
            } catch (EOFException closed) {
                return;
            }
            boolean reusable = runOne(command, input, answers);
            if (!reusable) return;
        }
    }

    private static byte[] bytes(DataInputStream in) throws java.io.IOException {
        int length = in.readInt();
        return in.readNBytes(length);
    }

    private static void stop(int status) {
        synchronized (KafkaToolRunner.class) {
            if (exitStatus == null) {
                exitStatus = status;
                OUT.to(null);  // a process that has exited prints nothing more
                ERR.to(null);
            }
        }
        throw new ToolExit();
    }

    private static boolean runOne(String[] command, byte[] input, DataOutputStream answers) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        exitStatus = null;
        synchronized (HOOKS) { HOOKS.clear(); }
        IN.from(new ByteArrayInputStream(input));
        OUT.to(out);
        ERR.to(err);
        Set<Thread> before = new HashSet<>(Thread.getAllStackTraces().keySet());
        int[] mainStatus = {0};
        Thread main = new Thread(() -> mainStatus[0] = invokeMain(command), "main");
        main.start();
        main.join();
        waitForNonDaemonThreads(before);
        runShutdownHooks();
        System.out.flush();
        System.err.flush();
        int status;
        synchronized (KafkaToolRunner.class) {
            status = exitStatus != null ? exitStatus : mainStatus[0];
            exitStatus = -1;  // from here on the call is over: late output and exits go nowhere
            OUT.to(null);
            ERR.to(null);
        }
        List<Thread> left = leftoverThreads(before, SETTLE_MS);
        if (!left.isEmpty()) {
            closeAdminClients(left);
            left = leftoverThreads(before, LEFTOVER_THREADS_GRACE_MS);
        }
        boolean reusable = left.isEmpty();
        if (!reusable) RUNNER_ERR.println("KafkaToolRunner: " + command[0] + " left threads " + left + "; leaving");
        answers.writeInt(status);
        answers.writeInt(out.size());
        out.writeTo(answers);
        answers.writeInt(err.size());
        err.writeTo(answers);
        answers.writeByte(reusable ? 1 : 0);
        answers.flush();
        return reusable;
    }

    /** The tool's main, as the java launcher runs it: an uncaught throwable is status 1 and the
     *  launcher's report on stderr; the replaced exit procedure's unwinding is no error. */
    private static int invokeMain(String[] command) {
        try {
            Class<?> tool = Class.forName(command[0]);
            Method main = tool.getMethod("main", String[].class);
            String[] args = java.util.Arrays.copyOfRange(command, 1, command.length);
            main.invoke(null, (Object) args);
            return 0;
        } catch (InvocationTargetException e) {
            return uncaught(e.getCause());
        } catch (ToolExit e) {
            return 0;
        } catch (Throwable t) {
            return uncaught(t);
        }
    }

    private static int uncaught(Throwable t) {
        if (t instanceof ToolExit) return 0;  // exitStatus holds the status
        System.err.print("Exception in thread \"main\" ");
        t.printStackTrace(System.err);
        return 1;
    }

    /** The JVM waits for every non-daemon thread before it exits (DestroyJavaVM). */
    private static void waitForNonDaemonThreads(Set<Thread> before) throws InterruptedException {
        for (Thread thread : Thread.getAllStackTraces().keySet()) {
            if (!before.contains(thread) && !thread.isDaemon() && thread != Thread.currentThread()) thread.join();
        }
    }

    private static void runShutdownHooks() throws InterruptedException {
        List<Thread> running = new ArrayList<>();
        synchronized (HOOKS) {
            for (Runnable hook : HOOKS) running.add(new Thread(() -> { try { hook.run(); } catch (ToolExit ignored) { } }));
            HOOKS.clear();
        }
        for (Thread thread : running) thread.start();
        for (Thread thread : running) thread.join(SHUTDOWN_HOOK_TIMEOUT_MS);
    }

    /**
     * Closes the Admin clients whose threads a tool left running.
     *
     * kafka-transactions never closes its Admin (the JVM's exit ends its daemon thread), so without
     * this every such call would retire its runner. The client is found from its thread: the
     * thread's Runnable (Thread.target; the runner JVM opens java.lang for it) is the client's
     * inner AdminClientRunnable, whose enclosing instance is the KafkaAdminClient.
     */
    private static void closeAdminClients(List<Thread> threads) {
        for (Thread thread : threads) {
            if (!thread.getName().startsWith("kafka-admin-client-thread")) continue;
            try {
                java.lang.reflect.Field target = Thread.class.getDeclaredField("target");
                target.setAccessible(true);
                Object runnable = target.get(thread);
                java.lang.reflect.Field outer = runnable.getClass().getDeclaredField("this$0");
                outer.setAccessible(true);
                Object admin = outer.get(runnable);
                admin.getClass().getMethod("close", java.time.Duration.class).invoke(admin, java.time.Duration.ZERO);
            } catch (ReflectiveOperationException | RuntimeException e) {
                RUNNER_ERR.println("KafkaToolRunner: cannot close the Admin of " + thread + ": " + e);
            }
        }
    }

    /** Threads the tool started that are still alive after a grace period: the pool's
     *  ForkJoin common workers are the JVM's, idle and silent, and do not count. */
    private static List<Thread> leftoverThreads(Set<Thread> before, long graceMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + graceMs;
        while (true) {
            List<Thread> left = new ArrayList<>();
            for (Thread thread : Thread.getAllStackTraces().keySet()) {
                if (before.contains(thread) || !thread.isAlive()) continue;
                if (thread.getName().startsWith("ForkJoinPool.commonPool-worker")) continue;
                left.add(thread);
            }
            if (left.isEmpty() || System.currentTimeMillis() > deadline) return left;
            Thread.sleep(20);
        }
    }
}
