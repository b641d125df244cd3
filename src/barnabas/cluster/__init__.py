"""Cluster metadata: topics, partition state, live brokers and the controller, kept in coordination storage."""

from .brokers import BrokerEndpoint, BrokerInfo, BrokerRegistry
from .client_quotas import ClientQuotaStore
from .controller import Controller, LeaderRebalance, NotControllerError, next_partition_state
from .credentials import CredentialStore
from .leadership import initial_state
from .model import PartitionState, Reassignment, Topic, describe_partitions, is_valid_topic_name, topic_name_problem
from .producer_ids import ProducerIdAllocator
from .topic_store import TopicExistsError, TopicStore
from .watcher import MetadataWatcher

__all__ = [
    "BrokerEndpoint",
    "BrokerInfo",
    "BrokerRegistry",
    "ClientQuotaStore",
    "Controller",
    "CredentialStore",
    "LeaderRebalance",
    "MetadataWatcher",
    "NotControllerError",
    "PartitionState",
    "ProducerIdAllocator",
    "Reassignment",
    "Topic",
    "TopicExistsError",
    "TopicStore",
    "describe_partitions",
    "initial_state",
    "is_valid_topic_name",
    "next_partition_state",
    "topic_name_problem",
]
