"""Replication: lead, follow and fetch partition replicas as the stored partition states say."""

from .leader import LeaderReplica
from .manager import ReplicaManager

__all__ = ["LeaderReplica", "ReplicaManager"]
