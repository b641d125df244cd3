package barnabas.interop;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;

/**
 * What the interop tools ({@link InteropDriver}, {@link GroupDriver}, {@link GroupMember},
 * {@link AdminTool}) have in common, kept in one place so that each tool's class holds only what it
 * tests: "--name value" arguments, JSON writing without a JSON library, the kafka-clients version,
 * and the report drivers' phases, watchdog and failure line. Their command lines and outputs are the
 * ones tests/interop/README.md documents.
 */
final class Tools {
    private Tools() {}

    /** "--name value" pairs into {name: value}; anything else is a "bad argument". */
    static Map<String, String> parseArgs(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (int n = 0; n < argv.length; n += 2) {
            if (!argv[n].startsWith("--") || n + 1 >= argv.length) {
                throw new IllegalArgumentException("bad argument " + argv[n]);
            }
            args.put(argv[n].substring(2), argv[n + 1]);
        }
        return args;
    }

    static String required(Map<String, String> args, String name) {
        String v = args.get(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return v;
    }

    /**
     * The client settings of "--client-config FILE" (a properties file: security.protocol, ssl.*,
     * sasl.*), which every client a tool makes takes over its own; none without the flag.
     */
    static Properties clientConfig(Map<String, String> args) {
        Properties p = new Properties();
        String file = args.get("client-config");
        if (file != null) {
            try (InputStream in = Files.newInputStream(Path.of(file))) {
                p.load(in);
            } catch (IOException e) {
                throw new IllegalArgumentException("--client-config " + file + ": " + e);
            }
        }
        return p;
    }

    /** kafka-clients' version, from the properties file its jar carries (the parser class is internal). */
    static String kafkaVersion() {
        try (InputStream in = TopicPartition.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            Properties p = new Properties();
            if (in != null) {
                p.load(in);
            }
            return p.getProperty("version", "unknown");
        } catch (IOException e) {
            return "unknown";
        }
    }

    /**
     * A group consumer's settings: the classic group protocol (JoinGroup/SyncGroup/Heartbeat, not
     * KIP-848), no auto-commit, earliest reset, no topic auto-creation, keys and values read with
     * the given deserializer.
     */
    static Properties groupConsumerConfig(String bootstrap, String clientId, String group, Class<?> deserializer) {
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, false);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, deserializer.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, deserializer.getName());
        return cp;
    }

    /** s as a JSON string literal. */
    static String json(String s) {
        StringBuilder sb = new StringBuilder(s.length() + 2).append('"');
        for (int n = 0; n < s.length(); n++) {
            char c = s.charAt(n);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        return sb.append('"').toString();
    }

    /** A JSON array of strings. */
    static String jsonStrings(List<String> items) {
        StringBuilder sb = new StringBuilder("[");
        for (int n = 0; n < items.size(); n++) {
            sb.append(n > 0 ? "," : "").append(json(items.get(n)));
        }
        return sb.append(']').toString();
    }

    /** A JSON object of numbers, keyed by the keys' toString() ({"0": 17} for partition 0's offset 17). */
    static String jsonNumbers(Map<?, ? extends Number> m) {
        StringBuilder sb = new StringBuilder("{");
        m.forEach((k, v) -> sb.append(sb.length() > 1 ? "," : "").append(json(k.toString())).append(':').append(v));
        return sb.append('}').toString();
    }

    /** Records {partition, offset, key, value} as a JSON array [[p, offset, "key" | null, "value" | null], ...]. */
    static String jsonRecords(List<Object[]> records) {
        StringBuilder sb = new StringBuilder(records.size() * 140 + 2).append('[');
        for (int n = 0; n < records.size(); n++) {
            Object[] r = records.get(n);
            sb.append(n > 0 ? "," : "").append('[').append(r[0]).append(',').append(r[1]).append(',')
                .append(r[2] == null ? "null" : json((String) r[2])).append(',')
                .append(r[3] == null ? "null" : json((String) r[3])).append(']');
        }
        return sb.append(']').toString();
    }

    /** The report's "client_version". */
    static String clientVersion() {
        return "kafka-clients " + kafkaVersion();
    }

    /** Print "tool: reason" (on one line) on stderr and exit 1 at once. */
    static void fail(String tool, String reason) {
        System.err.println(tool + ": " + reason.replace('\n', ' '));
        System.err.flush();
        Runtime.getRuntime().halt(1);
    }

    /**
     * A driver that runs through named phases ("create", "consume", ...) before a deadline and writes
     * a JSON report: the current phase is named in failure messages, and each phase's duration goes
     * to {@link #timings}.
     */
    abstract static class Driver {
        final Map<String, Long> timings = new LinkedHashMap<>();
        volatile String phase = "start";
        private long phaseStart = System.nanoTime();
        private long deadlineNanos;

        /** Set the deadline, timeoutMs from now. */
        final void startClock(long timeoutMs) {
            deadlineNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        }

        /** Close the current phase's timing and name the next one. */
        final void enter(String next) {
            long now = System.nanoTime();
            if (!"start".equals(phase)) {
                timings.put(phase, TimeUnit.NANOSECONDS.toMillis(now - phaseStart));
            }
            phase = next;
            phaseStart = now;
        }

        /** Milliseconds left before the deadline; past it, "timed out during PHASE" + {@link #progress()}. */
        final long remainingMs() {
            long left = TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime());
            if (left <= 0) {
                throw new IllegalStateException("timed out during " + phase + progress());
            }
            return left;
        }

        /** What a timeout message adds after the phase, e.g. " (7 of 10 records)". */
        abstract String progress();

        /** The driver's work; an IllegalStateException is its own verdict (reported without a trace). */
        abstract void run() throws Exception;

        /** The JSON report written to --out. */
        abstract String report();
    }

    /**
     * A driver's main(): build it from the arguments (which must include --out), run it under a
     * watchdog (its deadline + 5 s), and write its report to --out, then exit 0; on failure exit 1 with
     * one stderr line "tool: reason" ("tool: during PHASE: reason" once it runs), after a stack
     * trace unless the failure is the driver's own IllegalStateException.
     */
    static void runDriver(String tool, String[] argv, Function<Map<String, String>, Driver> create) {
        Driver driver;
        Path out;
        try {
            Map<String, String> args = parseArgs(argv);
            driver = create.apply(args);
            out = Path.of(required(args, "out"));
        } catch (IllegalArgumentException e) { // includes NumberFormatException
            fail(tool, e.getMessage());
            return;
        }
        long watchdogMs = TimeUnit.NANOSECONDS.toMillis(driver.deadlineNanos - System.nanoTime()) + 5000;
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(watchdogMs);
                fail(tool, "timed out during " + driver.phase);
            } catch (InterruptedException ignored) {
                // finished in time
            }
        }, tool + "-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
        try {
            driver.run();
            Files.writeString(out, driver.report(), StandardCharsets.UTF_8);
        } catch (Throwable t) {
            Throwable cause = t instanceof ExecutionException && t.getCause() != null ? t.getCause() : t;
            if (cause instanceof IllegalStateException) { // the driver's own verdict: no trace needed
                fail(tool, "during " + driver.phase + ": " + cause.getMessage());
                return;
            }
            StringWriter trace = new StringWriter();
            cause.printStackTrace(new PrintWriter(trace));
            System.err.print(trace);
            fail(tool, "during " + driver.phase + ": " + cause);
            return;
        }
        System.exit(0);
    }
}
