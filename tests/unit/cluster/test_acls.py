"""ACLs in embedded (SQLite) coordination: one store writes, another broker's watcher takes the change up."""

from __future__ import annotations

import asyncio
from pathlib import Path

from barnabas.cluster import BrokerRegistry, TopicStore
from barnabas.cluster.acls import AclStore, acl_key
from barnabas.cluster.watcher import MetadataWatcher
from barnabas.coordination import Storage, open_storage
from barnabas.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from barnabas.security.authorizer import Authorizer

READ_ORDERS = AclBinding(
    ResourcePattern(ResourceType.TOPIC, "orders/eu", PatternType.PREFIXED),
    AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
)
DENY_BOB = AclBinding(
    ResourcePattern(ResourceType.TOPIC, "orders/eu", PatternType.PREFIXED),
    AccessControlEntry("User:bob", "*", AclOperation.ALL, AclPermissionType.DENY),
)


async def _store(path: Path) -> tuple[Storage, AclStore]:
    storage = await open_storage(f"sqlite://{path}")
    store = AclStore(storage, Authorizer())
    await store.load()
    return storage, store


def test_create_is_idempotent_and_delete_returns_what_each_filter_matched(tmp_path: Path) -> None:
    async def scenario() -> None:
        storage, store = await _store(tmp_path / "c.db")
        try:
            await store.create([READ_ORDERS, DENY_BOB])
            await store.create([READ_ORDERS])
            assert store.authorizer.acls() == [READ_ORDERS, DENY_BOB]  # by principal
            stored = await storage.get(acl_key(READ_ORDERS.pattern))
            assert stored is not None and stored.version == 1  # the second create wrote nothing
            alice, bob = AclBindingFilter(principal="User:alice"), AclBindingFilter(principal="User:bob")
            assert await store.delete([alice, bob, alice]) == [[READ_ORDERS], [DENY_BOB], [READ_ORDERS]]
            assert store.authorizer.acls() == []
            assert await storage.get(acl_key(READ_ORDERS.pattern)) is None  # no entries: no key
        finally:
            await storage.close()

    asyncio.run(scenario())


def test_another_brokers_watch_applies_a_change(tmp_path: Path) -> None:
    async def scenario() -> None:
        path = tmp_path / "c.db"
        storage_a, store_a = await _store(path)
        storage_b, store_b = await _store(path)
        changed = asyncio.Event()
        metastore = storage_b.metastore
        watcher = MetadataWatcher(
            metastore, TopicStore(storage_b), BrokerRegistry(metastore), changed.set, acls=store_b
        )
        watcher.start()
        try:

            async def until(expected: list[AclBinding]) -> None:
                while store_b.authorizer.acls() != expected:
                    changed.clear()
                    await changed.wait()

            await store_a.create([READ_ORDERS])
            await asyncio.wait_for(until([READ_ORDERS]), 10)
            assert store_b.authorizer.authorize("User:alice", "10.0.0.1", AclOperation.READ, ResourceType.TOPIC,
                                                "orders/eu-1")  # fmt: skip
            await store_a.delete([AclBindingFilter()])
            await asyncio.wait_for(until([]), 10)
            assert not store_b.authorizer.authorize("User:alice", "10.0.0.1", AclOperation.READ, ResourceType.TOPIC,
                                                    "orders/eu-1")  # fmt: skip
        finally:
            await watcher.stop()
            await storage_a.close()
            await storage_b.close()

    asyncio.run(scenario())
