package barnabas.interop;

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
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

import static barnabas.interop.Tools.clientConfig;
import static barnabas.interop.Tools.clientVersion;
import static barnabas.interop.Tools.groupConsumerConfig;
import static barnabas.interop.Tools.json;
import static barnabas.interop.Tools.jsonNumbers;
import static barnabas.interop.Tools.jsonRecords;
import static barnabas.interop.Tools.jsonStrings;
import static barnabas.interop.Tools.required;
import static barnabas.interop.Tools.runDriver;

/**
 * Java client consumer-GROUP driver for barnabas (contract: tests/interop/README.md, "Consumer-group drivers").
 *
 * <pre>
 * java -cp 'target/interop-driver.jar:target/lib/*' barnabas.interop.GroupDriver \
 *     --bootstrap 127.0.0.1:9092 --topic T --group G --count N --out report.json [--timeout-ms 60000] \
 *     [--client-config client.properties]
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
public final class GroupDriver extends Tools.Driver {
    private final String bootstrap;
    private final String topic;
    private final String group;
    private final int count;
    private final Properties clientConfig;

    private final List<String> errors = Collections.synchronizedList(new ArrayList<>());
    private final List<String> assignments = new ArrayList<>();
    private final List<Object[]> records = new ArrayList<>();
    private final Map<Integer, Long> committed = new TreeMap<>();

    private GroupDriver(Map<String, String> args) {
        this.bootstrap = required(args, "bootstrap");
        this.topic = required(args, "topic");
        this.group = required(args, "group");
        this.count = Integer.parseInt(required(args, "count"));
        this.clientConfig = clientConfig(args);
        if (count < 1) {
            throw new IllegalArgumentException("bad --count " + count);
        }
        startClock(Long.parseLong(args.getOrDefault("timeout-ms", "60000")));
    }

    @Override
    String progress() {
        return " (" + records.size() + " of " + count + " records)";
    }

    @Override
    void run() { // throws no checked exception (so no ExecutionException for runDriver to unwrap)
        long started = System.nanoTime();
        Properties cp = groupConsumerConfig(bootstrap, "group-driver-java", group, StringDeserializer.class);
        cp.putAll(clientConfig);

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

    @Override
    String report() {
        return "{\"client\":\"java\",\"client_version\":" + json(clientVersion())
            + ",\"group\":" + json(group)
            + ",\"records\":" + jsonRecords(records)
            + ",\"committed\":" + jsonNumbers(committed)
            + ",\"errors\":" + jsonStrings(new ArrayList<>(errors))
            + ",\"assignments\":" + jsonStrings(assignments)
            + ",\"timings_ms\":" + jsonNumbers(timings) + "}";
    }

    public static void main(String[] argv) {
        runDriver("group-driver", argv, GroupDriver::new);
    }
}
