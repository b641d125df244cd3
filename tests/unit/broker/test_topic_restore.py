"""Topics rebuilt from the copies beside their logs, against real logs and embedded (SQLite) coordination."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from barnabas.broker.topic_restore import RestoreResult, TopicDocuments, restore_topics
from barnabas.cluster import Topic, TopicStore
from barnabas.coordination import open_storage
from barnabas.log import TOPIC_DOCUMENT, LogConfig, LogManager, read_topic_document

NOW = 1_700_000_000_000


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    manager = LogManager([tmp_path / "data"], LogConfig(), 0, "cluster-a", background_writes=False)
    yield manager
    manager.close()


def keep_copies(logs: LogManager, topic: Topic) -> None:
    """This broker's replicas of ``topic`` with their copies written, as a running broker keeps them."""
    for partition, replicas in topic.assignment.items():
        if 0 in replicas:
            logs.create(topic.name, partition, topic.topic_id, LogConfig(), NOW)
    TopicDocuments(logs).sync({topic.name: topic})


def restore(tmp_path: Path, logs: LogManager, stored: Topic | None) -> tuple[RestoreResult, TopicStore]:
    async def scenario() -> tuple[RestoreResult, TopicStore]:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        try:
            topics = TopicStore(storage)
            if stored is not None:
                await topics.create(stored, {})
            result = await restore_topics(topics, logs)
            after = TopicStore(storage)
            await after.load()
            return result, after
        finally:
            await storage.close()

    return asyncio.run(scenario())


def test_every_local_partition_dir_holds_its_topics_document_and_a_change_rewrites_it(logs: LogManager) -> None:
    topic = Topic("ledger", uuid.uuid4(), {0: (0, 1), 1: (1, 0)}, {"retention.ms": "5"})
    keep_copies(logs, topic)
    dirs = [log.directory for tp in logs.partitions() if (log := logs.get(*tp)) is not None]
    assert [read_topic_document(d) for d in dirs] == [topic.to_json()] * 2
    changed = Topic(topic.name, topic.topic_id, topic.assignment, {"retention.ms": "6"})
    keep_copies(logs, changed)
    assert [read_topic_document(d) for d in dirs] == [changed.to_json()] * 2


def test_a_topic_the_store_lost_is_restored_from_its_copy_with_every_partition_waiting_for_reports(
    tmp_path: Path, logs: LogManager
) -> None:
    topic = Topic("ledger", uuid.uuid4(), {0: (0, 1), 1: (1, 2), 2: (2, 0)}, {"retention.ms": "5"})
    keep_copies(logs, topic)
    result, store = restore(tmp_path, logs, stored=None)
    assert result == RestoreResult(["ledger"], set())
    assert store.topics["ledger"] == topic, "every partition, also those this broker holds no replica of"
    assert {p: (s.leader, s.recovered) for (_, p), s in store.states.items()} == {p: (-1, {}) for p in range(3)}


def test_a_copy_that_saw_the_topic_grow_adds_the_partitions_the_store_lacks(tmp_path: Path, logs: LogManager) -> None:
    topic = Topic("ledger", uuid.uuid4(), {0: (0,), 1: (0,), 2: (0,)})
    keep_copies(logs, topic)
    older = Topic("ledger", topic.topic_id, {0: (0,), 1: (0,)})
    result, store = restore(tmp_path, logs, stored=older)
    assert result.restored == ["ledger"]
    assert store.topics["ledger"].assignment == topic.assignment
    assert store.states[("ledger", 2)].recovered == {}


def test_logs_without_a_copy_are_kept_and_named_and_a_topic_of_another_id_is_left_alone(
    tmp_path: Path, logs: LogManager
) -> None:
    logs.create("bare", 0, uuid.uuid4(), LogConfig(), NOW)
    topic = Topic("ledger", uuid.uuid4(), {0: (0,)})
    keep_copies(logs, topic)
    renamed = Topic("ledger", uuid.uuid4(), {0: (1,)})
    result, store = restore(tmp_path, logs, stored=renamed)
    assert result == RestoreResult([], {"bare"})
    assert store.topics["ledger"] == renamed and "bare" not in store.topics


def test_a_copy_of_another_topic_id_than_its_dir_is_not_used(tmp_path: Path, logs: LogManager) -> None:
    topic = Topic("ledger", uuid.uuid4(), {0: (0,)})
    keep_copies(logs, topic)
    (only,) = logs.partitions()
    directory = logs.get(*only).directory  # type: ignore[union-attr]
    (directory / TOPIC_DOCUMENT).write_bytes(Topic("ledger", uuid.uuid4(), {0: (0,)}).to_json())
    result, store = restore(tmp_path, logs, stored=None)
    assert result == RestoreResult([], {"ledger"}) and not store.topics
