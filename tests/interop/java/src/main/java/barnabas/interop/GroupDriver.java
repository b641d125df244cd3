package barnabas.interop;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Java client consumer-GROUP driver for barnabas (contract: tests/interop/README.md, "Consumer-group drivers").
 *
 * <pre>
 * java -cp 'target/interop-driver.jar:target/lib/*' barnabas.interop.GroupDriver \
 *     --bootstrap 127.0.0.1:9092 --topic T --group G --count N --out report.json [--timeout-ms 60000]
 * </pre>
 *
 * KafkaConsumer (classic group protocol, subscribe(), enable.auto.commit=false,
 * auto.offset.reset=earliest, session/heartbeat/poll timeouts at their defaults) processes exactly N
 * records (records a poll returns after the N-th are dropped, never committed), commitSync()s
 * "last processed offset + 1" per partition, reads them back with committed(), and close()s with
 * LEAVE_GROUP. Writes {"records": [[p, offset, key, value], ...], "committed": {"p": offset},
 * "errors": [...], "client_version": "kafka-clients X", "assignments": [...], "timings_ms": {...}}.
 * Exit 0 with the report in --out; exit 1 with one line "group-driver: reason" on stderr on failure.
 */
public final class GroupDriver {
    private final String bootstrap;
    private final String topic;
    private final String group;
    private final int count;
    private final long deadlineNanos;

    private final List<String> errors = Collections.synchronizedList(new ArrayList<>());
    private final List<String> assignments = new ArrayList<>();
    private final Map<String, Long> timings = new LinkedHashMap<>();
    private final List<Object[]> records = new ArrayList<>();
    private final Map<Integer, Long> committed = new TreeMap<>();
    private volatile String phase = "start";
    private long phaseStart = System.nanoTime();

    private GroupDriver(Map<String, String> args) {
        this.bootstrap = required(args, "bootstrap");
        this.topic = required(args, "topic");
        this.group = required(args, "group");
        this.count = Integer.parseInt(required(args, "count"));
        if (count < 1) {
            throw new IllegalArgumentException("bad --count " + count);
        }
        long timeoutMs = Long.parseLong(args.getOrDefault("timeout-ms", "60000"));
        this.deadlineNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    }

    private static String required(Map<String, String> args, String name) {
        String v = args.get(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return v;
    }

    private long remainingMs() {
        long left = TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime());
        if (left <= 0) {
            throw new IllegalStateException("timed out during " + phase + " (" + records.size() + " of " + count
                + " records)");
        }
        return left;
    }

    private void enter(String next) {
        long now = System.nanoTime();
        if (!"start".equals(phase)) {
            timings.put(phase, TimeUnit.NANOSECONDS.toMillis(now - phaseStart));
        }
        phase = next;
        phaseStart = now;
    }

    private void run() throws Exception {
        long started = System.nanoTime();
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.CLIENT_ID_CONFIG, "group-driver-java");
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic"); // JoinGroup/SyncGroup/Heartbeat (not KIP-848)
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, false);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());

        enter("join");
        Map<Integer, Long> nextOffset = new TreeMap<>(); // partition -> last processed offset + 1
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    assignments.add("assigned " + new TreeMap<>(group(partitions)));
                }

                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    if (!partitions.isEmpty()) {
                        assignments.add("revoked " + new TreeMap<>(group(partitions)));
                    }
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    errors.add("partitions lost (generation fenced or session expired): " + partitions);
                }
            });
            while (records.size() < count) {
                long wait = Math.min(500, remainingMs());
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(wait))) {
                    if (records.size() >= count) {
                        break; // past the N-th record: not processed, never committed
                    }
                    if ("join".equals(phase)) {
                        enter("consume");
                    }
                    if (!topic.equals(r.topic())) {
                        errors.add("record from unexpected topic " + r.topic() + " p" + r.partition() + "@" + r.offset());
                        continue;
                    }
                    records.add(new Object[] {r.partition(), r.offset(), r.key(), r.value()});
                    nextOffset.put(r.partition(), r.offset() + 1);
                }
            }

            enter("commit");
            Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
            nextOffset.forEach((p, o) -> offsets.put(new TopicPartition(topic, p), new OffsetAndMetadata(o)));
            consumer.commitSync(offsets, Duration.ofMillis(remainingMs()));
            committed.putAll(nextOffset);

            enter("verify");
            Map<TopicPartition, OffsetAndMetadata> visible =
                consumer.committed(offsets.keySet(), Duration.ofMillis(remainingMs()));
            offsets.forEach((tp, want) -> {
                OffsetAndMetadata got = visible.get(tp);
                if (got == null || got.offset() != want.offset()) {
                    errors.add("committed " + tp + "=" + want.offset() + " but OffsetFetch returns "
                        + (got == null ? "nothing" : Long.toString(got.offset())));
                }
            });

            enter("leave");
            consumer.close(CloseOptions.timeout(Duration.ofMillis(remainingMs()))
                .withGroupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP));
        }
        enter("end");
        timings.put("total", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started));
    }

    private static Map<String, List<Integer>> group(Collection<TopicPartition> partitions) {
        Map<String, List<Integer>> byTopic = new HashMap<>();
        for (TopicPartition tp : partitions) {
            byTopic.computeIfAbsent(tp.topic(), t -> new ArrayList<>()).add(tp.partition());
        }
        byTopic.values().forEach(Collections::sort);
        return byTopic;
    }

    /** kafka-clients' version, from the properties file its jar carries (the parser class is internal). */
    private static String kafkaVersion() {
        try (var in = KafkaConsumer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            Properties p = new Properties();
            if (in != null) {
                p.load(in);
            }
            return p.getProperty("version", "unknown");
        } catch (java.io.IOException e) {
            return "unknown";
        }
    }

    private static String json(String s) {
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

    private static String jsonStrings(List<String> items) {
        StringBuilder sb = new StringBuilder("[");
        for (int n = 0; n < items.size(); n++) {
            sb.append(n > 0 ? "," : "").append(json(items.get(n)));
        }
        return sb.append(']').toString();
    }

    private String report() {
        StringBuilder sb = new StringBuilder(records.size() * 60 + 1024);
        sb.append("{\"client\":\"java\",\"client_version\":").append(json("kafka-clients " + kafkaVersion()))
            .append(",\"group\":").append(json(group))
            .append(",\"records\":[");
        for (int n = 0; n < records.size(); n++) {
            Object[] r = records.get(n);
            sb.append(n > 0 ? "," : "").append('[').append(r[0]).append(',').append(r[1]).append(',')
                .append(r[2] == null ? "null" : json((String) r[2])).append(',')
                .append(r[3] == null ? "null" : json((String) r[3])).append(']');
        }
        sb.append("],\"committed\":{");
        int n = 0;
        for (Map.Entry<Integer, Long> e : committed.entrySet()) {
            sb.append(n++ > 0 ? "," : "").append(json(e.getKey().toString())).append(':').append(e.getValue());
        }
        sb.append("},\"errors\":").append(jsonStrings(new ArrayList<>(errors)))
            .append(",\"assignments\":").append(jsonStrings(assignments))
            .append(",\"timings_ms\":{");
        n = 0;
        for (Map.Entry<String, Long> t : timings.entrySet()) {
            sb.append(n++ > 0 ? "," : "").append(json(t.getKey())).append(':').append(t.getValue());
        }
        return sb.append("}}").toString();
    }

    private static Map<String, String> parseArgs(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (int n = 0; n < argv.length; n += 2) {
            if (!argv[n].startsWith("--") || n + 1 >= argv.length) {
                throw new IllegalArgumentException("bad argument " + argv[n]);
            }
            args.put(argv[n].substring(2), argv[n + 1]);
        }
        return args;
    }

    private static void fail(String reason) {
        System.err.println("group-driver: " + reason.replace('\n', ' '));
        System.err.flush();
        Runtime.getRuntime().halt(1);
    }

    public static void main(String[] argv) {
        GroupDriver driver;
        Path out;
        try {
            Map<String, String> args = parseArgs(argv);
            driver = new GroupDriver(args);
            out = Path.of(required(args, "out"));
        } catch (IllegalArgumentException e) { // includes NumberFormatException
            fail(e.getMessage());
            return;
        }
        long watchdogMs = TimeUnit.NANOSECONDS.toMillis(driver.deadlineNanos - System.nanoTime()) + 5000;
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(watchdogMs);
                fail("timed out during " + driver.phase);
            } catch (InterruptedException ignored) {
                // finished in time
            }
        }, "group-driver-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
        try {
            driver.run();
            Files.writeString(out, driver.report(), StandardCharsets.UTF_8);
        } catch (Throwable t) {
            if (t instanceof IllegalStateException) { // the driver's own verdict: no trace needed
                fail("during " + driver.phase + ": " + t.getMessage());
                return;
            }
            StringWriter trace = new StringWriter();
            t.printStackTrace(new PrintWriter(trace));
            System.err.print(trace);
            fail("during " + driver.phase + ": " + t);
            return;
        }
        System.exit(0);
    }
}
