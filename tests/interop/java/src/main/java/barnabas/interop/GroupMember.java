package barnabas.interop;

import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

import sun.misc.Signal;

import static barnabas.interop.Tools.json;

/**
 * One Java-client consumer-group member in its own process, for rebalance and crash tests (contract:
 * tests/interop/README.md, "Group member processes"; same as tests/interop/group_member.py).
 *
 * <pre>
 * java -cp 'target/interop-driver.jar:target/lib/*' barnabas.interop.GroupMember \
 *     --bootstrap 127.0.0.1:9092 --topic T --group G [--session-ms 6000]
 * </pre>
 *
 * KafkaConsumer (group.protocol=classic, default assignors: range first, then cooperative-sticky;
 * heartbeat every 500 ms, enable.auto.commit=false, auto.offset.reset=earliest) subscribes and polls
 * until stdin closes or SIGTERM arrives (either wakes the poll up), then close()s with LEAVE_GROUP and
 * exits 0. After every rebalance-listener call that changes what it owns it prints one JSON line
 * {"assigned": [p, ...]} (sorted, the partitions owned now); problems print {"error": "..."}. A test
 * kills it with SIGKILL to simulate a crash.
 */
public final class GroupMember {
    private static final int HEARTBEAT_MS = 500;
    private static final Duration POLL = Duration.ofMillis(200);

    private final TreeSet<Integer> owned = new TreeSet<>();
    private final String topic;
    private volatile boolean stopping;
    private KafkaConsumer<byte[], byte[]> consumer;

    private GroupMember(String topic) {
        this.topic = topic;
    }

    private static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static void error(String message) {
        emit("{\"error\":" + json(message) + "}");
    }

    private void report() {
        StringBuilder sb = new StringBuilder("{\"assigned\":[");
        int n = 0;
        for (int p : owned) {
            sb.append(n++ > 0 ? "," : "").append(p);
        }
        emit(sb.append("]}").toString());
    }

    /** Called by the poll thread only (rebalance callbacks run inside poll() and close()). */
    private void change(Collection<TopicPartition> partitions, boolean add) {
        boolean changed = false;
        for (TopicPartition tp : partitions) {
            if (!topic.equals(tp.topic())) {
                error("partition of an unexpected topic: " + tp);
            } else {
                changed |= add ? owned.add(tp.partition()) : owned.remove(tp.partition());
            }
        }
        if (changed || (add && partitions.isEmpty() && owned.isEmpty())) {
            report(); // an empty assignment is news too: it says the rebalance completed
        }
    }

    /** Stop polling: from the stdin thread or the SIGTERM handler. */
    private synchronized void stop() {
        stopping = true;
        if (consumer != null) {
            consumer.wakeup();
        }
    }

    private void run(String bootstrap, String group, int sessionMs) {
        Properties cp = Tools.groupConsumerConfig(bootstrap, "group-member-java", group, ByteArrayDeserializer.class);
        cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, sessionMs);
        cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, HEARTBEAT_MS);

        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp)) {
            synchronized (this) {
                consumer = c;
                if (stopping) {
                    c.wakeup();
                }
            }
            c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    change(partitions, true);
                }

                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    change(partitions, false);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    change(partitions, false);
                }
            });
            while (!stopping) {
                try {
                    c.poll(POLL);
                } catch (WakeupException e) {
                    // stop() woke the poll up: the loop condition ends it
                }
            }
            c.close(CloseOptions.timeout(Duration.ofSeconds(30))
                .withGroupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP));
        }
    }

    /** The "--name value" arguments; --bootstrap, --topic and --group are required. */
    private static Map<String, String> parseArgs(String[] argv) {
        Map<String, String> args = Tools.parseArgs(argv);
        for (String required : List.of("bootstrap", "topic", "group")) {
            Tools.required(args, required);
        }
        return args;
    }

    public static void main(String[] argv) {
        Map<String, String> args;
        int sessionMs;
        try {
            args = parseArgs(argv);
            sessionMs = Integer.parseInt(args.getOrDefault("session-ms", "6000"));
        } catch (IllegalArgumentException e) { // includes NumberFormatException
            error(e.getMessage());
            System.exit(2);
            return;
        }
        GroupMember member = new GroupMember(args.get("topic"));
        // SIGTERM: leave cleanly and exit 0 (a shutdown hook would still exit 143).
        Signal.handle(new Signal("TERM"), signal -> member.stop());
        Thread stdin = new Thread(() -> {
            try (InputStream in = System.in) {
                byte[] buffer = new byte[4096];
                while (in.read(buffer) >= 0) {
                    // ignore input; EOF means "leave"
                }
            } catch (IOException ignored) {
                // a broken stdin means the same as a closed one
            }
            member.stop();
        }, "group-member-stdin");
        stdin.setDaemon(true);
        stdin.start();
        try {
            member.run(args.get("bootstrap"), args.get("group"), sessionMs);
        } catch (Throwable t) {
            error(t.toString());
            System.exit(1);
        }
        System.exit(0);
    }
}
