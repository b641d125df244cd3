"""Every response field that can carry a broker's node id, host or port is in ``REWRITTEN``.

Kafka's JSON message schemas (kafka-python ships them) are walked for every API the proxy routes
and every version it understands. A field counts when its ``entityType`` is ``brokerId`` (a node
id, or an array of them: leaders, replicas, ISR, controller, coordinator, preferred read replica)
or its name is one of the names Kafka gives node ids and broker addresses (``NodeId``,
``LeaderId``, ``BrokerId``, ``ControllerId``, ``CoordinatorId``, ``Host``, ``Port``): ``Host`` and
``Port`` carry no ``entityType``, and the id names are listed in case a schema forgets it.
``ClientHost`` (a group member's own host) is another name and does not count, and ``NOT_ADDRESSES``
lists the fields named ``Host`` that carry a client's host, not a broker's: the host an ACL applies
to (``"*"`` or a client's address), in DescribeAcls and DeleteAcls answers.

Fields are named as kio names them: ``Entity.snake_case_field``, where the entity is the
struct's ``type`` (``[]MetadataResponseBroker`` -> ``MetadataResponseBroker``) and a top-level
field's entity is the message (``MetadataResponse``). The reverse check keeps the table honest:
every entry names a field kio's response class has in some understood version.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from barnabas.protocol import LocalProtocolError, response_class
from barnabas.proxy.rewrite import REWRITTEN
from barnabas.proxy.routes import ROUTES, UNDERSTOOD

ADDRESS_NAMES = frozenset({"NodeId", "LeaderId", "BrokerId", "ControllerId", "CoordinatorId", "Host", "Port"})
#: api_key -> fields (entity.field, as kio names them) the walk finds that carry a client's host.
NOT_ADDRESSES: dict[int, frozenset[str]] = {
    29: frozenset({"AclDescription.host"}),  # DescribeAcls: the host an ACL applies to
    31: frozenset({"DeleteAclsMatchingAcl.host"}),  # DeleteAcls: the same, of each ACL deleted
}


@cache
def response_schemas() -> dict[int, dict[str, Any]]:
    """api_key -> Kafka's response schema (comments stripped, common structs inlined)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python reads them with importlib.resources
        import kafka
        from kafka.protocol.schemas import load_json

        resources = Path(kafka.__file__).parent / "protocol" / "schemas" / "resources"
        schemas = [load_json(path.stem) for path in sorted(resources.glob("*Response.json"))]
    return {int(schema["apiKey"]): schema for schema in schemas}


def version_range(text: str) -> range:
    """A schema's ``versions``: ``"3"``, ``"1-4"``, ``"10+"`` or ``"none"``."""
    if text == "none":
        return range(0)
    low, _, high = text.partition("-")
    if text.endswith("+"):
        return range(int(text[:-1]), 1 << 15)
    return range(int(low), int(high or low) + 1)


def snake_case(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def address_fields(fields: list[dict[str, Any]], entity: str, version: int) -> Iterator[tuple[str, str]]:
    """(entity, field name) of each field present in ``version`` that carries a node id, host or port."""
    for field in fields:
        if version not in version_range(field["versions"]):
            continue
        if field.get("entityType") == "brokerId" or field["name"] in ADDRESS_NAMES:
            yield entity, field["name"]
        if "fields" in field:
            yield from address_fields(field["fields"], field["type"].removeprefix("[]"), version)


def kio_fields(api_key: int, version: int, entity: str) -> set[str]:
    try:
        cls = response_class(api_key, version, entity)
    except LocalProtocolError:
        return set()
    return {f.name for f in dataclasses.fields(cls)}


def understood(api_key: int) -> range:
    low, high = UNDERSTOOD[api_key]
    return range(low, high + 1)


def test_every_routed_api_has_a_response_schema() -> None:
    assert not set(ROUTES) - set(response_schemas())


def test_the_walk_finds_the_fields_it_must() -> None:
    """The walk itself: Metadata's known fields are found, with the version ranges Kafka gives them."""
    schema = response_schemas()[3]
    assert set(address_fields(schema["fields"], schema["name"], 0)) == {
        ("MetadataResponseBroker", "NodeId"),
        ("MetadataResponseBroker", "Host"),
        ("MetadataResponseBroker", "Port"),
        ("MetadataResponsePartition", "LeaderId"),
        ("MetadataResponsePartition", "ReplicaNodes"),
        ("MetadataResponsePartition", "IsrNodes"),
    }
    found_v5 = set(address_fields(schema["fields"], schema["name"], 5))
    assert {("MetadataResponse", "ControllerId"), ("MetadataResponsePartition", "OfflineReplicas")} <= found_v5
    describe_groups = response_schemas()[15]
    assert not set(address_fields(describe_groups["fields"], describe_groups["name"], 5))  # ClientHost


@pytest.mark.parametrize("api_key", sorted(ROUTES), ids=lambda key: ROUTES[key][0])
def test_every_node_field_is_rewritten(api_key: int) -> None:
    schema = response_schemas()[api_key]
    valid = version_range(schema["validVersions"])
    missing: dict[str, list[int]] = {}
    unnamed: list[str] = []
    for version in understood(api_key):
        if version not in valid:
            continue
        for entity, field in address_fields(schema["fields"], schema["name"], version):
            name = f"{entity}.{snake_case(field)}"
            if snake_case(field) not in kio_fields(api_key, version, entity):
                unnamed.append(f"{name} v{version}")
            if name not in REWRITTEN.get(api_key, frozenset()) | NOT_ADDRESSES.get(api_key, frozenset()):
                missing.setdefault(name, []).append(version)
    assert not unnamed, f"the walk names fields kio does not have: {unnamed}"
    assert not missing, f"{ROUTES[api_key][0]} answers carry node ids, hosts or ports not rewritten: " + ", ".join(
        f"{name} (v{versions[0]}-{versions[-1]})" for name, versions in sorted(missing.items())
    )


def test_every_rewritten_field_exists_in_an_understood_version() -> None:
    stale = []
    for api_key, names in REWRITTEN.items():
        if api_key not in ROUTES:
            stale.append(f"api {api_key}: not routed")
            continue
        for name in sorted(names):
            entity, _, field = name.partition(".")
            if not any(field in kio_fields(api_key, v, entity) for v in understood(api_key)):
                stale.append(f"{ROUTES[api_key][0]}: {name}")
    assert not stale, f"REWRITTEN names fields no understood version has: {stale}"


def test_every_field_left_alone_is_one_the_walk_finds() -> None:
    """``NOT_ADDRESSES`` names only fields the walk would otherwise report, so it hides nothing else."""
    for api_key, names in NOT_ADDRESSES.items():
        schema = response_schemas()[api_key]
        found = {
            f"{entity}.{snake_case(field)}"
            for version in understood(api_key)
            for entity, field in address_fields(schema["fields"], schema["name"], version)
        }
        assert names <= found, (ROUTES[api_key][0], names - found)


#: Rewrites the router applies through a faster twin, proven byte-identical in its own test: Metadata
#: through MetadataAnswers, which keeps what encode_metadata_answer made (test_metadata_answer.py).
FAST_TWINS = {"rewrite_metadata": "MetadataAnswers"}


def test_the_router_uses_every_rewrite() -> None:
    from barnabas.proxy import rewrite, router

    unused = [
        name for name in rewrite.__all__
        if name.startswith("rewrite_") and not hasattr(router, FAST_TWINS.get(name, name))
    ]  # fmt: skip
    assert not unused, f"rewrites the router never calls: {unused}"
