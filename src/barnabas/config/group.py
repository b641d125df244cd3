"""Group-level settings (Kafka's GroupConfig, KIP-848/932/1071): names, defaults, the broker setting behind each.

Kafka 4.4 reports these for any group name in DescribeConfigs, at the broker setting's value. They
tune consumer-protocol (KIP-848), share and streams groups; barnabas serves classic groups only,
whose timeouts each member sends in JoinGroup, so none of them would change anything here. They
are described as Kafka describes them (defaults, sourced from their broker synonym) but read-only:
a setting barnabas would not honour must not look accepted.
"""

from __future__ import annotations

from .definitions import ConfigDef, ConfigType

__all__ = ["GROUP_CONFIGS", "GROUP_CONFIG_SYNONYMS"]

_B, _S, _I, _L = ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LIST

#: name -> (type, default, broker synonym, documentation), as Kafka 4.4 answers DescribeConfigs.
_TABLE: dict[str, tuple[ConfigType, object, str, str]] = {
    "consumer.assignment.interval.ms": (_I, 1000, "group.consumer.assignment.interval.ms",
        "The interval between assignment updates for a consumer group."),
    "consumer.heartbeat.interval.ms": (_I, 5000, "group.consumer.heartbeat.interval.ms",
        "The heartbeat interval given to the members of a consumer group."),
    "consumer.session.timeout.ms": (_I, 45000, "group.consumer.session.timeout.ms",
        "The timeout to detect client failures when using the consumer group protocol."),
    "errors.deadletterqueue.copy.record.enable": (_B, False, "errors.deadletterqueue.copy.record.enable",
        "Whether a share group's dead-letter queue record copies the original record."),
    "errors.deadletterqueue.topic.name": (_S, "", "errors.deadletterqueue.topic.name",
        "The dead-letter queue topic of a share group; blank for none."),
    "share.assignment.interval.ms": (_I, 1000, "group.share.assignment.interval.ms",
        "The interval between assignment updates for a share group."),
    "share.auto.offset.reset": (_S, "latest", "share.auto.offset.reset",
        "The strategy to initialize the share-partition start offset."),
    "share.delivery.count.limit": (_I, 5, "group.share.delivery.count.limit",
        "The maximum number of delivery attempts for a record delivered to a share group."),
    "share.heartbeat.interval.ms": (_I, 5000, "group.share.heartbeat.interval.ms",
        "The heartbeat interval given to the members of a share group."),
    "share.isolation.level": (_S, "read_uncommitted", "share.isolation.level",
        "Controls how a share group reads records written transactionally."),
    "share.partition.max.record.locks": (_I, 2000, "group.share.partition.max.record.locks",
        "Share-group record lock limit per share-partition."),
    "share.record.lock.duration.ms": (_I, 30000, "group.share.record.lock.duration.ms",
        "The record acquisition lock duration in milliseconds for share groups."),
    "share.renew.acknowledge.enable": (_B, True, "share.renew.acknowledge.enable",
        "Whether the renew acknowledge type is enabled for the share group."),
    "share.session.timeout.ms": (_I, 45000, "group.share.session.timeout.ms",
        "The timeout to detect client failures when using the share group protocol."),
    "streams.assignment.interval.ms": (_I, 1000, "group.streams.assignment.interval.ms",
        "The interval between assignment updates for a streams group."),
    "streams.assignor.name": (_S, "sticky", "group.streams.assignors",
        "The task assignor of a streams group, by short name."),
    "streams.heartbeat.interval.ms": (_I, 5000, "group.streams.heartbeat.interval.ms",
        "The heartbeat interval given to the members."),
    "streams.initial.rebalance.delay.ms": (_I, 3000, "group.streams.initial.rebalance.delay.ms",
        "How long the coordinator waits for more streams clients to join a new group before its first rebalance."),
    "streams.num.standby.replicas": (_I, 0, "group.streams.num.standby.replicas",
        "The number of standby replicas for each task."),
    "streams.rack.aware.assignment.tags": (_L, [], "group.streams.rack.aware.assignment.tags",
        "Client tag keys used to distribute standby replicas across Kafka Streams instances."),
    "streams.session.timeout.ms": (_I, 45000, "group.streams.session.timeout.ms",
        "The timeout to detect client failures when using the streams group protocol."),
}  # fmt: skip

GROUP_CONFIGS: dict[str, ConfigDef] = {
    name: ConfigDef(name, kind, default, doc) for name, (kind, default, _, doc) in _TABLE.items()
}
#: Each group setting's broker-level synonym (the setting its default comes from).
GROUP_CONFIG_SYNONYMS: dict[str, str] = {name: synonym for name, (_, _, synonym, _) in _TABLE.items()}
