"""Kafka's own command-line tools (kafka-tools 4.4, from the jars bench/kafka-server/build.sh resolves) against
a barnabas cluster: kafka-log-dirs, kafka-consumer-groups --delete-offsets, kafka-reassign-partitions
--execute/--verify, kafka-configs cordoning a broker (KIP-1066), kafka-cluster unregister and kafka-topics
--describe, as an operator used to Kafka would run them. The barnabas commands for the same requests must agree
with them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support.cluster import BrokerCluster
from tests.support.interop_tools import kafka_tool

pytestmark = pytest.mark.timeout(300)

TOOL_TIMEOUT_S = 120
RECORDS = 200


def barnabas(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "barnabas", *args], capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False
    )


@pytest.fixture
def cluster(cluster_factory: Callable[..., BrokerCluster], tmp_path: Path) -> BrokerCluster:
    """Three brokers and topic `tools` (2 partitions, RF 3) holding RECORDS acknowledged records."""
    started = cluster_factory(tmp_path, 3).start()
    started.create_topic("tools", 2, 3)
    producer = Producer({"bootstrap.servers": started.bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce("tools", key=str(i).encode(), value=b"v" * 100)
    assert producer.flush(30) == 0
    return started


def test_kafka_log_dirs_tool_and_barnabas_report_the_same_replicas_and_sizes(cluster: BrokerCluster) -> None:
    tool = kafka_tool(
        "org.apache.kafka.tools.LogDirsCommand", "--bootstrap-server", cluster.bootstrap, "--describe",
        "--topic-list", "tools",
    )  # fmt: skip
    assert tool.returncode == 0, tool.stderr
    report = json.loads(tool.stdout.strip().splitlines()[-1])
    from_kafka = {
        (entry["broker"], partition["partition"]): partition["size"]
        for entry in report["brokers"]
        for log_dir in entry["logDirs"]
        for partition in log_dir["partitions"]
    }
    assert set(from_kafka) == {(b, f"tools-{p}") for b in range(3) for p in range(2)}
    for p in range(2):  # acks=all: every replica holds the same batches, byte for byte
        sizes = {from_kafka[(b, f"tools-{p}")] for b in range(3)}
        assert len(sizes) == 1 and sizes.pop() > 0
    ours = barnabas("cluster", "log-dirs", "-b", cluster.bootstrap, "--topic", "tools", "--json")
    assert ours.returncode == 0, ours.stderr
    from_barnabas = {
        (r["broker"], f"{r['topic']}-{r['partition']}"): r["size_bytes"] for r in json.loads(ours.stdout)["replicas"]
    }
    assert from_barnabas == from_kafka


def test_kafka_topics_tool_describes_the_partitions_metadata_names(cluster: BrokerCluster) -> None:
    """kafka-topics --describe asks DescribeTopicPartitions first (Admin.describeTopics, Kafka 3.8+); its ELR
    columns say which answered: empty lists from DescribeTopicPartitions, N/A from the Metadata fallback."""
    described = kafka_tool(
        "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", cluster.bootstrap, "--describe", "--topic", "tools"
    )
    assert described.returncode == 0, described.stderr
    rows = []
    for line in described.stdout.splitlines():
        if "Partition: " in line:
            rows.append({key.strip(): value.strip() for key, _, value in (p.partition(":") for p in line.split("\t"))})
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics("tools", timeout=30).topics["tools"]
    assert sorted(int(row["Partition"]) for row in rows) == [0, 1], described.stdout
    for row in rows:
        partition = metadata.partitions[int(row["Partition"])]
        assert int(row["Leader"]) == partition.leader
        assert [int(r) for r in row["Replicas"].split(",")] == partition.replicas
        assert sorted(int(r) for r in row["Isr"].split(",")) == sorted(partition.isrs)
        assert (row["Elr"], row["LastKnownElr"]) == ("", ""), f"Metadata answered, not DescribeTopicPartitions: {row}"


def test_kafka_consumer_groups_tool_deletes_a_groups_offsets(cluster: BrokerCluster) -> None:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "tools-group"})
    consumer.commit(offsets=[TopicPartition("tools", 0, 5), TopicPartition("tools", 1, 7)], asynchronous=False)
    consumer.close()
    tool = kafka_tool(
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server", cluster.bootstrap,
        "--delete-offsets", "--group", "tools-group", "--topic", "tools:0",
    )  # fmt: skip
    assert tool.returncode == 0, tool.stderr
    assert "Successful" in tool.stdout, tool.stdout
    described = barnabas("groups", "describe", "tools-group", "-b", cluster.bootstrap, "--json")
    assert described.returncode == 0, described.stderr
    left = {(row["topic"], row["partition"]) for row in json.loads(described.stdout)["partitions"]}
    assert left == {("tools", 1)}


def test_kafka_reassign_partitions_tool_executes_and_verifies_a_move(cluster: BrokerCluster, tmp_path: Path) -> None:
    metadata = cluster.metadata()
    current = list(metadata.topics["tools"].partitions[0].replicas)
    target = [current[1], current[2]]  # drop one replica: the tool's plan moves tools-0 onto two brokers
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "tools", "partition": 0, "replicas": target}]}))
    reassign = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    executed = kafka_tool(reassign, "--bootstrap-server", cluster.bootstrap, "--execute", "--reassignment-json-file",
                          str(plan))  # fmt: skip
    assert executed.returncode == 0, executed.stderr
    assert "Successfully started partition reassignment for tools-0" in executed.stdout, executed.stdout
    cluster.wait_for(
        lambda md: list(md.topics["tools"].partitions[0].replicas) == target, "tools-0 on its two new replicas"
    )
    verified = kafka_tool(reassign, "--bootstrap-server", cluster.bootstrap, "--verify", "--reassignment-json-file",
                          str(plan))  # fmt: skip
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "Reassignment of partition tools-0 is completed" in verified.stdout, verified.stdout


def test_log_dirs_names_a_broker_that_does_not_answer(
    cluster_factory: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    """A broker that is stopped but still registered (a 30 s session) is named; the other's replicas still count."""
    cluster = cluster_factory(tmp_path, 2, None, {"broker.session.timeout.ms": "30000"}).start()
    cluster.create_topic("paused", 1, 2)
    cluster.brokers[1].pause()
    try:
        done = barnabas("cluster", "log-dirs", "-b", cluster.brokers[0].bootstrap, "--timeout", "3", "--json")
    finally:
        cluster.brokers[1].resume()
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip().startswith("barnabas cluster: 1 brokers did not answer, e.g. broker 1: "), done.stderr
    report = json.loads(done.stdout)
    assert {(r["broker"], r["topic"]) for r in report["replicas"]} >= {(0, "paused")}
    assert {r["broker"] for r in report["replicas"]} == {0}
    assert set(report["unanswered"]) == {"1"}


def test_kafka_configs_tool_cordons_and_kafka_cluster_tool_unregisters_a_broker(
    cluster_factory: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    """KIP-1066's cordoned.log.dirs=* set by kafka-configs.sh; UnregisterBroker sent by kafka-cluster.sh unregister."""
    cluster = cluster_factory(tmp_path, 2).start()
    bootstrap = cluster.bootstrap
    configs = "org.apache.kafka.tools.ConfigCommand"
    cordoned = kafka_tool(configs, "--bootstrap-server", bootstrap, "--alter", "--entity-type", "brokers",
                          "--entity-name", "1", "--add-config", "cordoned.log.dirs=*")  # fmt: skip
    assert cordoned.returncode == 0, cordoned.stdout + cordoned.stderr
    status = barnabas("cluster", "status", "-b", bootstrap, "--json")
    assert [b["cordoned"] for b in json.loads(status.stdout)["brokers"]] == [False, True], status.stderr

    cluster_tool = "org.apache.kafka.tools.ClusterTool"
    running = kafka_tool(cluster_tool, "unregister", "--bootstrap-server", bootstrap, "--id", "1")
    assert running.returncode != 0
    assert "broker 1 is running: stop it before unregistering it" in running.stderr, running.stderr
    assert cluster.brokers[1].stop() == 0
    gone = kafka_tool(cluster_tool, "unregister", "--bootstrap-server", cluster.brokers[0].bootstrap, "--id", "1")
    assert gone.returncode == 0, gone.stderr
    assert gone.stdout.strip() == "Broker 1 is no longer registered."
