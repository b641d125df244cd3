"""Handlers depend on narrow interfaces (broker/handlers/_needs.py), never on the whole ``BrokerState``.

Each handler module annotates its state with one of the protocols in ``_needs``; mypy checks that
``BrokerState`` satisfies them where the registry takes the handlers. These tests keep a handler
from going back to ``BrokerState``, and check a real broker state, built in memory, has every
member each protocol names, of the type it names.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pkgutil
import typing
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from barnabas.broker import handlers
from barnabas.broker.handlers import _needs, build_registry
from barnabas.broker.offsets_topic import OffsetsTopic
from barnabas.broker.partition_service import PartitionService
from barnabas.broker.registry import ApiRegistry
from barnabas.broker.replication import ReplicaManager
from barnabas.broker.state import BrokerState, NodeState
from barnabas.cluster import Controller
from barnabas.groups import GroupCoordinator
from tests.unit.broker.in_memory import in_memory_broker

HANDLER_MODULES = [
    importlib.import_module(f"{handlers.__name__}.{info.name}")
    for info in pkgutil.iter_modules(handlers.__path__)
    if not info.name.startswith("_")
]
PROTOCOLS: list[type] = [getattr(_needs, name) for name in _needs.__all__]
#: The types the protocols name; ``_needs`` imports them for type checking only.
SERVICE_TYPES: dict[str, Any] = {
    cls.__name__: cls
    for cls in (NodeState, ApiRegistry, PartitionService, ReplicaManager, GroupCoordinator, OffsetsTopic, Controller)
}


def _protocol_of(module: ModuleType, function: Any, parameter: str) -> type | None:
    """The protocol ``parameter`` of ``function`` is annotated with, or None if it names something else."""
    annotation = inspect.signature(function).parameters[parameter].annotation
    if isinstance(annotation, str):  # postponed (``from __future__ import annotations``): a name in the module
        annotation = vars(module).get(annotation)
    return annotation if annotation in PROTOCOLS else None


def _functions(module: ModuleType) -> list[Any]:
    return [f for _, f in inspect.getmembers(module, inspect.isfunction) if f.__module__ == module.__name__]


def _members(protocol: type) -> dict[str, Any]:
    """What a protocol declares, its bases in ``_needs`` included."""
    return {
        name: member
        for cls in reversed(protocol.__mro__)
        if cls in PROTOCOLS
        for name, member in vars(cls).items()
        if not name.startswith("_")
    }


@pytest.mark.parametrize("spec", list(build_registry()), ids=lambda spec: spec.name)
def test_every_registered_handler_takes_a_protocol(spec: Any) -> None:
    module = inspect.getmodule(spec.handler)
    assert module is not None
    state = next(iter(inspect.signature(spec.handler).parameters))
    assert _protocol_of(module, spec.handler, state) is not None, (
        f"{module.__name__}.{spec.handler.__name__} must annotate {state!r} with a protocol from _needs"
    )


@pytest.mark.parametrize("module", HANDLER_MODULES, ids=lambda module: module.__name__.rsplit(".", 1)[-1])
def test_no_handler_function_takes_the_whole_broker_state(module: ModuleType) -> None:
    imports_it = "BrokerState" in vars(module)
    assert not imports_it, f"{module.__name__} imports BrokerState"
    for function in _functions(module):
        parameters = inspect.signature(function).parameters
        assert not any("BrokerState" in str(p.annotation) for p in parameters.values()), function.__qualname__
        if "state" in parameters:
            assert _protocol_of(module, function, "state") is not None, (
                f"{module.__name__}.{function.__qualname__} must annotate 'state' with a protocol from _needs"
            )


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda protocol: protocol.__name__)
def test_protocols_give_read_only_properties(protocol: type) -> None:
    members = _members(protocol)
    assert members, f"{protocol.__name__} declares nothing"
    for name, member in members.items():
        assert isinstance(member, property) and member.fset is None, f"{protocol.__name__}.{name}"


def test_a_broker_state_built_in_memory_satisfies_every_protocol(tmp_path: Path) -> None:
    async def built() -> BrokerState:
        async with in_memory_broker(tmp_path) as broker:
            return broker.state

    state = asyncio.run(asyncio.wait_for(built(), 60))
    for protocol in PROTOCOLS:
        for name, member in _members(protocol).items():
            expected = typing.get_type_hints(member.fget, vars(_needs), SERVICE_TYPES)["return"]
            assert isinstance(getattr(state, name), expected), f"{protocol.__name__}.{name}: {expected}"
