"""What DescribeConfigs and both AlterConfigs APIs share: the resource types, who may touch each, the cordon's name.

Authorization (Kafka's ConfigHelper and KafkaApis): DESCRIBE_CONFIGS (describe) or ALTER_CONFIGS
(alter) on the topic, else TOPIC_AUTHORIZATION_FAILED; on the group, else GROUP_AUTHORIZATION_FAILED;
on the cluster for a broker resource, else CLUSTER_AUTHORIZATION_FAILED; checked before the
resource is looked up.
"""

from __future__ import annotations

from barnabas.protocol import ErrorCode
from barnabas.security.acl import AclOperation, ResourceType

from ._authorize import allowed, cluster_allowed
from ._needs import NodeNeeds

__all__ = ["ALL_LOG_DIRS", "BROKER", "CORDONED_LOG_DIRS", "GROUP", "TOPIC", "denial"]

#: ConfigResource.Type ids.
TOPIC = 2
BROKER = 4
GROUP = 32

#: KIP-1066's broker config: the log dirs no new replica is placed in; ``*`` is every one, the whole broker.
CORDONED_LOG_DIRS = "cordoned.log.dirs"
ALL_LOG_DIRS = "*"


def denial(state: NodeNeeds, operation: AclOperation, resource_type: int, name: str) -> tuple[ErrorCode, str] | None:
    """The error a principal that may not do ``operation`` on this config resource gets, or None."""
    if resource_type == TOPIC and not allowed(state, operation, ResourceType.TOPIC, name):
        return ErrorCode.topic_authorization_failed, "Topic authorization failed."
    if resource_type == GROUP and not allowed(state, operation, ResourceType.GROUP, name):
        return ErrorCode.group_authorization_failed, "Group authorization failed."
    if resource_type == BROKER and not cluster_allowed(state, operation):
        return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
    return None
