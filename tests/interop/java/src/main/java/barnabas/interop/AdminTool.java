package barnabas.interop;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.TopicPartition;

import static barnabas.interop.Tools.json;

/**
 * The Java Admin client's leadership calls, one per run, for barnabas's cluster tests.
 *
 * <pre>
 * java -cp 'target/interop-driver.jar:target/lib/*' barnabas.interop.AdminTool --bootstrap B COMMAND
 *   reassign --topic T --partition P --replicas 1,2,3   alterPartitionReassignments (target replicas)
 *   cancel   --topic T --partition P                    alterPartitionReassignments (Optional.empty())
 *   list                                                listPartitionReassignments
 *   elect    --type preferred|unclean [--topic T --partition P]   electLeaders (no partition: all)
 * </pre>
 *
 * Prints one JSON line on stdout: {"ok": true} or {"error": "ExceptionClass: message"} for
 * reassign/cancel, {"T-P": {"replicas": [...], "adding": [...], "removing": [...]}} for list,
 * {"T-P": null | "ExceptionClass: message"} for elect. Exit 1 with "admin-tool: reason" on
 * stderr when the call itself cannot be made.
 */
public final class AdminTool {
    private AdminTool() {}

    public static void main(String[] argv) {
        try {
            System.out.println(run(argv));
            System.exit(0);
        } catch (Exception e) {
            System.err.println("admin-tool: " + describe(e));
            System.exit(1);
        }
    }

    private static String run(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        String command = null;
        for (int i = 0; i < argv.length; i++) {
            if (argv[i].startsWith("--") && i + 1 < argv.length) {
                args.put(argv[i].substring(2), argv[++i]);
            } else if (command == null) {
                command = argv[i];
            } else {
                throw new IllegalArgumentException("unexpected argument " + argv[i]);
            }
        }
        if (command == null || !args.containsKey("bootstrap")) {
            throw new IllegalArgumentException("usage: --bootstrap B reassign|cancel|list|elect ...");
        }
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        try (Admin admin = Admin.create(props)) {
            switch (command) {
                case "reassign":
                    return alter(admin, partitionOf(args), Optional.of(new NewPartitionReassignment(replicas(args))));
                case "cancel":
                    return alter(admin, partitionOf(args), Optional.empty());
                case "list":
                    return list(admin);
                case "elect":
                    return elect(admin, args);
                default:
                    throw new IllegalArgumentException("unknown command " + command);
            }
        }
    }

    private static String alter(Admin admin, TopicPartition tp, Optional<NewPartitionReassignment> target)
            throws InterruptedException {
        try {
            admin.alterPartitionReassignments(Map.of(tp, target)).all().get(60, TimeUnit.SECONDS);
            return "{\"ok\": true}";
        } catch (ExecutionException e) {
            return "{\"error\": " + json(describe(e.getCause())) + "}";
        } catch (java.util.concurrent.TimeoutException e) {
            return "{\"error\": " + json("TimeoutException: no answer in 60 s") + "}";
        }
    }

    private static String list(Admin admin) throws Exception {
        Map<TopicPartition, PartitionReassignment> ongoing =
                admin.listPartitionReassignments().reassignments().get(60, TimeUnit.SECONDS);
        Map<String, String> entries = new TreeMap<>();
        for (Map.Entry<TopicPartition, PartitionReassignment> e : ongoing.entrySet()) {
            PartitionReassignment r = e.getValue();
            entries.put(e.getKey().toString(), "{\"replicas\": " + r.replicas() + ", \"adding\": " + r.addingReplicas()
                    + ", \"removing\": " + r.removingReplicas() + "}");
        }
        return object(entries);
    }

    private static String elect(Admin admin, Map<String, String> args) throws Exception {
        ElectionType type = ElectionType.valueOf(args.getOrDefault("type", "preferred").toUpperCase());
        Set<TopicPartition> partitions = args.containsKey("topic") ? Set.of(partitionOf(args)) : null;
        Map<TopicPartition, Optional<Throwable>> results =
                admin.electLeaders(type, partitions).partitions().get(60, TimeUnit.SECONDS);
        Map<String, String> entries = new TreeMap<>();
        for (Map.Entry<TopicPartition, Optional<Throwable>> e : results.entrySet()) {
            entries.put(e.getKey().toString(), e.getValue().map(t -> json(describe(t))).orElse("null"));
        }
        return object(entries);
    }

    private static TopicPartition partitionOf(Map<String, String> args) {
        String topic = args.get("topic");
        String partition = args.get("partition");
        if (topic == null || partition == null) {
            throw new IllegalArgumentException("--topic and --partition are required");
        }
        return new TopicPartition(topic, Integer.parseInt(partition));
    }

    private static List<Integer> replicas(Map<String, String> args) {
        List<Integer> replicas = new ArrayList<>();
        for (String id : args.getOrDefault("replicas", "").split(",")) {
            if (!id.isBlank()) {
                replicas.add(Integer.parseInt(id.trim()));
            }
        }
        return replicas;
    }

    private static String object(Map<String, String> entries) {
        StringBuilder out = new StringBuilder("{");
        for (Map.Entry<String, String> e : entries.entrySet()) {
            if (out.length() > 1) {
                out.append(", ");
            }
            out.append(json(e.getKey())).append(": ").append(e.getValue());
        }
        return out.append('}').toString();
    }

    private static String describe(Throwable t) {
        return t.getClass().getSimpleName() + ": " + t.getMessage();
    }
}
