"""What each family of request handlers reads from the broker: narrow views of ``BrokerState``.

A handler annotates its state with the narrowest of these protocols that covers what it reads, as
Tansu's handlers depend on a narrow trait (``Storage``, ``Coordinator``) rather than on the whole
broker. A handler's signature then says which services it touches (its tests still build the
real ones in memory: see docs/architecture.md).

Rules this module keeps:

- Every member is a read-only property: a handler uses its services, it never replaces one.
- :class:`~barnabas.broker.state.BrokerState` satisfies every protocol structurally; nothing
  subclasses or registers anything. mypy checks it where the registry's ``Handler`` type takes
  the handlers, and tests/unit/broker/test_handler_needs.py checks a real one at run time.
- A protocol is named by what it gives. One that gives a service also gives the node, which every
  service is built on; a new protocol is added only for a combination no other one gives.
- The types are imported under TYPE_CHECKING only: this module depends on no service at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from barnabas.cluster import Controller
    from barnabas.groups import GroupCoordinator

    from ..offsets_topic import OffsetsTopic
    from ..partition_service import PartitionService
    from ..registry import ApiRegistry
    from ..state import NodeState

__all__ = [
    "ClusterNeeds",
    "ControllerNeeds",
    "GroupNeeds",
    "NodeNeeds",
    "PartitionNeeds",
    "RegistryNeeds",
]


class RegistryNeeds(Protocol):
    """The table of APIs served, and nothing else: ApiVersions advertises exactly that table."""

    @property
    def registry(self) -> ApiRegistry: ...


class NodeNeeds(Protocol):
    """This broker before any service (configuration, topics, logs, producer ids, clock).

    For the handlers that read the node or change metadata through ``topic_admin``: configs,
    topics, log dirs and producer ids.
    """

    @property
    def node(self) -> NodeState: ...


class ClusterNeeds(NodeNeeds, Protocol):
    """The node and the live controller's id: Metadata and DescribeCluster tell clients which it is."""

    @property
    def controller_id(self) -> int: ...


class PartitionNeeds(NodeNeeds, Protocol):
    """The node and the partition service: for reading or changing partitions this broker leads."""

    @property
    def partitions(self) -> PartitionService: ...


class GroupNeeds(NodeNeeds, Protocol):
    """The node, the group coordinator and the offsets topic that hosts it: the consumer group APIs.

    FindCoordinator makes sure the offsets topic exists before it names the leader of the group's
    partition; the other group and offset APIs go to the coordinator.
    """

    @property
    def groups(self) -> GroupCoordinator: ...

    @property
    def offsets_topic(self) -> OffsetsTopic: ...


class ControllerNeeds(NodeNeeds, Protocol):
    """The node and the controller: leader elections and partition reassignments go through it."""

    @property
    def controller(self) -> Controller: ...
