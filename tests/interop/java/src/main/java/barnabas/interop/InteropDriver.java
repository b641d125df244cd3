package barnabas.interop;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Java client interop driver for barnabas (contract: tests/interop/common.py).
 *
 * <pre>
 * java -cp 'target/interop-driver.jar:target/lib/*' barnabas.interop.InteropDriver \
 *     --bootstrap 127.0.0.1:9092 --topic T --mode plain|gzip|snappy|lz4|zstd|idempotent \
 *     --count 10000 --partitions 3 --out report.json [--timeout-ms 100000]
 * </pre>
 *
 * AdminClient creates the topic, lists earliest/latest offsets and deletes the topic; KafkaProducer
 * (acks=all, enable.idempotence set explicitly for every mode since the Java default is true,
 * compression.type per mode) produces; KafkaConsumer with assign() + seekToBeginning() and no
 * group.id reads it back. Exit 0 with the JSON report in --out; exit 1 with one line
 * "interop-driver: reason" on stderr on failure.
 */
public final class InteropDriver {
    private static final int VALUE_SIZE = 100;
    private static final String PAD_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";
    private static final int MAX_ERRORS = 20;

    private final String bootstrap;
    private final String topic;
    private final String mode;
    private final int count;
    private final int partitions;
    private final long deadlineNanos;
    private final String clientId;

    private final List<String> errors = Collections.synchronizedList(new ArrayList<>());
    private final AtomicInteger errorCount = new AtomicInteger();
    private final Map<String, Long> timings = new LinkedHashMap<>();
    private final List<Object[]> records = new ArrayList<>();
    private final Map<Integer, Long> earliest = new TreeMap<>();
    private final Map<Integer, Long> latest = new TreeMap<>();
    private int produced;
    private String phase = "start";
    private long phaseStart = System.nanoTime();

    private InteropDriver(Map<String, String> args) {
        this.bootstrap = required(args, "bootstrap");
        this.topic = required(args, "topic");
        this.mode = required(args, "mode");
        this.count = Integer.parseInt(args.getOrDefault("count", "10000"));
        this.partitions = Integer.parseInt(args.getOrDefault("partitions", "3"));
        long timeoutMs = Long.parseLong(args.getOrDefault("timeout-ms", "100000"));
        this.deadlineNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        this.clientId = "interop-java-" + mode;
    }

    static String keyFor(int i) {
        return "key-" + i;
    }

    static String valueFor(int i) {
        String prefix = "value-" + i + "-";
        StringBuilder sb = new StringBuilder(VALUE_SIZE).append(prefix);
        for (int j = 0; j < VALUE_SIZE - prefix.length(); j++) {
            sb.append(PAD_ALPHABET.charAt((i + j) % PAD_ALPHABET.length()));
        }
        return sb.toString();
    }

    private static String required(Map<String, String> args, String name) {
        String v = args.get(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return v;
    }

    private String codec() {
        switch (mode) {
            case "plain":
            case "idempotent":
                return "none";
            case "gzip":
            case "snappy":
            case "lz4":
            case "zstd":
                return mode;
            default:
                throw new IllegalArgumentException("unknown mode " + mode);
        }
    }

    private void error(String text) {
        if (errorCount.incrementAndGet() <= MAX_ERRORS) {
            errors.add(text);
        }
    }

    private long remainingMs() {
        long left = TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime());
        if (left <= 0) {
            String progress = "consume".equals(phase) ? " (" + records.size() + " of " + count + " records)" : "";
            throw new IllegalStateException("timed out during " + phase + progress);
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

    private Properties common() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, clientId);
        return p;
    }

    private void run() throws Exception {
        long started = System.nanoTime();
        String codec = codec();
        Properties adminProps = common();
        adminProps.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 30000);
        adminProps.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 60000);
        try (Admin admin = Admin.create(adminProps)) {
            enter("create");
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1)))
                .all().get(remainingMs(), TimeUnit.MILLISECONDS);

            enter("produce");
            Properties pp = common();
            pp.put(ProducerConfig.ACKS_CONFIG, "all");
            pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString("idempotent".equals(mode)));
            pp.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
            pp.put(ProducerConfig.LINGER_MS_CONFIG, 5);
            pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 20000);
            pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30000);
            pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 60000);
            pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            AtomicInteger acked = new AtomicInteger();
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
                for (int i = 0; i < count; i++) {
                    final String key = keyFor(i);
                    producer.send(new ProducerRecord<>(topic, key, valueFor(i)), (meta, exc) -> {
                        if (exc != null) {
                            error("delivery of " + key + ": " + exc);
                        } else {
                            acked.incrementAndGet();
                        }
                    });
                }
                producer.flush();
            }
            produced = acked.get();
            if (produced < count) {
                throw new IllegalStateException("only " + produced + " of " + count
                    + " messages acknowledged; first error: " + (errors.isEmpty() ? "none" : errors.get(0)));
            }

            enter("consume");
            Properties cp = common();
            cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
            cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
                while (records.size() < count) {
                    long wait = Math.min(500, remainingMs());
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(wait))) {
                        records.add(new Object[] {r.partition(), r.offset(), r.key(), r.value()});
                    }
                }
            }

            enter("list_offsets");
            Map<TopicPartition, OffsetSpec> early = new HashMap<>();
            Map<TopicPartition, OffsetSpec> late = new HashMap<>();
            for (TopicPartition tp : tps) {
                early.put(tp, OffsetSpec.earliest());
                late.put(tp, OffsetSpec.latest());
            }
            Map<TopicPartition, ListOffsetsResultInfo> e =
                admin.listOffsets(early).all().get(remainingMs(), TimeUnit.MILLISECONDS);
            Map<TopicPartition, ListOffsetsResultInfo> l =
                admin.listOffsets(late).all().get(remainingMs(), TimeUnit.MILLISECONDS);
            e.forEach((tp, info) -> earliest.put(tp.partition(), info.offset()));
            l.forEach((tp, info) -> latest.put(tp.partition(), info.offset()));

            enter("delete");
            try {
                admin.deleteTopics(List.of(topic)).all().get(remainingMs(), TimeUnit.MILLISECONDS);
            } catch (ExecutionException ex) {
                error("delete topic: " + ex.getCause());
            }
            enter("close");
        }
        timings.put("total", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started));
    }

    /** kafka-clients' version, from the properties file its jar carries (the parser class is internal). */
    private static String kafkaVersion() {
        try (var in = Admin.class.getResourceAsStream("/kafka/kafka-version.properties")) {
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

    private static String jsonOffsets(Map<Integer, Long> m) {
        StringBuilder sb = new StringBuilder("{");
        m.forEach((p, o) -> sb.append(sb.length() > 1 ? "," : "").append(json(p.toString())).append(':').append(o));
        return sb.append('}').toString();
    }

    private String report() {
        StringBuilder sb = new StringBuilder(records.size() * 140 + 1024);
        sb.append("{\"client\":\"java\",\"client_version\":")
            .append(json("kafka-clients " + kafkaVersion()))
            .append(",\"mode\":").append(json(mode))
            .append(",\"produced\":").append(produced)
            .append(",\"records\":[");
        for (int n = 0; n < records.size(); n++) {
            Object[] r = records.get(n);
            if (n > 0) {
                sb.append(',');
            }
            sb.append('[').append(r[0]).append(',').append(r[1]).append(',')
                .append(r[2] == null ? "null" : json((String) r[2])).append(',')
                .append(r[3] == null ? "null" : json((String) r[3])).append(']');
        }
        sb.append("],\"earliest\":").append(jsonOffsets(earliest))
            .append(",\"latest\":").append(jsonOffsets(latest))
            .append(",\"errors\":[");
        List<String> errs = new ArrayList<>(errors);
        if (errorCount.get() > errs.size()) {
            errs.add(errorCount.get() + " errors in all");
        }
        for (int n = 0; n < errs.size(); n++) {
            sb.append(n > 0 ? "," : "").append(json(errs.get(n)));
        }
        sb.append("],\"timings_ms\":{");
        int n = 0;
        for (Map.Entry<String, Long> t : timings.entrySet()) {
            sb.append(n++ > 0 ? "," : "").append(json(t.getKey().replace(' ', '_'))).append(':').append(t.getValue());
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
        System.err.println("interop-driver: " + reason.replace('\n', ' '));
        System.err.flush();
        Runtime.getRuntime().halt(1);
    }

    public static void main(String[] argv) {
        InteropDriver driver;
        Path out;
        try {
            Map<String, String> args = parseArgs(argv);
            driver = new InteropDriver(args);
            out = Path.of(required(args, "out"));
        } catch (IllegalArgumentException e) {
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
        }, "interop-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
        try {
            driver.run();
            Files.writeString(out, driver.report(), StandardCharsets.UTF_8);
        } catch (Throwable t) {
            Throwable cause = t instanceof ExecutionException && t.getCause() != null ? t.getCause() : t;
            if (cause instanceof IllegalStateException) { // the driver's own verdict: no trace needed
                fail("during " + driver.phase + ": " + cause.getMessage());
                return;
            }
            StringWriter trace = new StringWriter();
            cause.printStackTrace(new PrintWriter(trace));
            System.err.print(trace);
            fail("during " + driver.phase + ": " + cause);
            return;
        }
        System.exit(0);
    }
}
