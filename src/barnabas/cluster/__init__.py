"""Cluster metadata: topics, partition state and producer-id blocks kept in coordination storage."""

from .model import PartitionState, Topic, is_valid_topic_name, topic_name_problem
from .producer_ids import ProducerIdAllocator
from .topic_store import TopicExistsError, TopicStore

__all__ = [
    "PartitionState",
    "ProducerIdAllocator",
    "Topic",
    "TopicExistsError",
    "TopicStore",
    "is_valid_topic_name",
    "topic_name_problem",
]
