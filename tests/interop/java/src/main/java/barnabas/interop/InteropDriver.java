package barnabas.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
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

import static barnabas.interop.Tools.clientConfig;
import static barnabas.interop.Tools.clientVersion;
import static barnabas.interop.Tools.json;
import static barnabas.interop.Tools.jsonNumbers;
import static barnabas.interop.Tools.jsonRecords;
import static barnabas.interop.Tools.jsonStrings;
import static barnabas.interop.Tools.required;
import static barnabas.interop.Tools.runDriver;

/**
 * Java client interop driver for barnabas (contract: tests/interop/common.py).
 *
 * <pre>
 * java -cp 'target/interop-driver.jar:target/lib/*' barnabas.interop.InteropDriver \
 *     --bootstrap 127.0.0.1:9092 --topic T --mode plain|gzip|snappy|lz4|zstd|idempotent \
 *     --count 10000 --partitions 3 --out report.json [--timeout-ms 100000] [--client-config client.properties]
 * </pre>
 *
 * AdminClient creates the topic, lists earliest/latest offsets and deletes the topic; KafkaProducer
 * (acks=all, enable.idempotence set explicitly for every mode since the Java default is true,
 * compression.type per mode) produces; KafkaConsumer with assign() + seekToBeginning() and no
 * group.id reads it back. Exit 0 with the JSON report in --out; exit 1 with one line
 * "interop-driver: reason" on stderr on failure.
 */
public final class InteropDriver extends Tools.Driver {
    private static final int VALUE_SIZE = 100;
    private static final String PAD_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";
    private static final int MAX_ERRORS = 20;

    private final String bootstrap;
    private final String topic;
    private final String mode;
    private final int count;
    private final int partitions;
    private final String clientId;
    private final Properties clientConfig;

    private final List<String> errors = Collections.synchronizedList(new ArrayList<>());
    private final AtomicInteger errorCount = new AtomicInteger();
    private final List<Object[]> records = new ArrayList<>();
    private final Map<Integer, Long> earliest = new TreeMap<>();
    private final Map<Integer, Long> latest = new TreeMap<>();
    private int produced;

    private InteropDriver(Map<String, String> args) {
        this.bootstrap = required(args, "bootstrap");
        this.topic = required(args, "topic");
        this.mode = required(args, "mode");
        this.count = Integer.parseInt(args.getOrDefault("count", "10000"));
        this.partitions = Integer.parseInt(args.getOrDefault("partitions", "3"));
        startClock(Long.parseLong(args.getOrDefault("timeout-ms", "100000")));
        this.clientId = "interop-java-" + mode;
        this.clientConfig = clientConfig(args);
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

    @Override
    String progress() {
        return "consume".equals(phase) ? " (" + records.size() + " of " + count + " records)" : "";
    }

    private Properties common() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, clientId);
        p.putAll(clientConfig);
        return p;
    }

    @Override
    void run() throws Exception {
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

    @Override
    String report() {
        List<String> errs = new ArrayList<>(errors);
        if (errorCount.get() > errs.size()) {
            errs.add(errorCount.get() + " errors in all");
        }
        return "{\"client\":\"java\",\"client_version\":" + json(clientVersion())
            + ",\"mode\":" + json(mode)
            + ",\"produced\":" + produced
            + ",\"records\":" + jsonRecords(records)
            + ",\"earliest\":" + jsonNumbers(earliest)
            + ",\"latest\":" + jsonNumbers(latest)
            + ",\"errors\":" + jsonStrings(errs)
            + ",\"timings_ms\":" + jsonNumbers(timings) + "}";
    }

    public static void main(String[] argv) {
        runDriver("interop-driver", argv, InteropDriver::new);
    }
}
