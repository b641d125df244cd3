"""Where each API goes through the proxy, and which versions the proxy understands.

The table follows Kafka's own routing (which broker a client would send the request to) the way
shotover's KafkaSinkCluster does: partition-addressed requests to each partition's leader
(split and merged), group requests to the group's coordinator, transaction requests to the
transactional id's coordinator (Kafka's ``TransactionManager``), controller requests to the
controller, cluster-wide listings to every broker, the rest to any broker (the proxy's own rack
first): ACLs, client quotas and SCRAM credentials too, which Kafka's ``KafkaAdminClient`` sends to
any broker (the broker forwards them to the controller), but AlterUserScramCredentials, which it
sends to the controller. Broker-internal APIs (replication, controller RPCs, KRaft, transaction
markers) are never relayed: a client that sends one gets its connection closed.

``UNDERSTOOD`` caps the versions the proxy can route and rewrite; ApiVersions advertises, per API,
the intersection of that with every broker's range.
"""

from __future__ import annotations

import enum

__all__ = ["INTERNAL", "ROUTES", "UNDERSTOOD", "Route", "api_name"]


class Route(enum.Enum):
    PROXY = "answered by the proxy"
    PARTITIONS = "each partition's leader, split and merged"
    GROUP = "the group's coordinator"
    GROUPS = "each group's coordinator, split and merged"
    FIND_COORDINATOR = "any broker, coordinators rewritten"
    CONTROLLER = "the controller"
    TRANSACTION = "the transactional id's coordinator (any broker without one)"
    TRANSACTIONS = "each transactional id's coordinator, split and merged"
    FAN_OUT = "every broker, merged"
    OWN_BROKERS = "the brokers this proxy node stands for, merged"
    ANY = "any broker, same rack first"


#: api_key -> (name, route). An API not here is not advertised; one in INTERNAL is refused.
ROUTES: dict[int, tuple[str, Route]] = {
    0: ("Produce", Route.PARTITIONS),
    1: ("Fetch", Route.PARTITIONS),
    2: ("ListOffsets", Route.PARTITIONS),
    3: ("Metadata", Route.ANY),
    8: ("OffsetCommit", Route.GROUP),
    9: ("OffsetFetch", Route.GROUPS),
    10: ("FindCoordinator", Route.FIND_COORDINATOR),
    11: ("JoinGroup", Route.GROUP),
    12: ("Heartbeat", Route.GROUP),
    13: ("LeaveGroup", Route.GROUP),
    14: ("SyncGroup", Route.GROUP),
    15: ("DescribeGroups", Route.GROUPS),
    16: ("ListGroups", Route.FAN_OUT),
    18: ("ApiVersions", Route.PROXY),
    19: ("CreateTopics", Route.CONTROLLER),
    20: ("DeleteTopics", Route.CONTROLLER),
    21: ("DeleteRecords", Route.PARTITIONS),
    22: ("InitProducerId", Route.TRANSACTION),
    23: ("OffsetForLeaderEpoch", Route.PARTITIONS),
    24: ("AddPartitionsToTxn", Route.TRANSACTION),
    25: ("AddOffsetsToTxn", Route.TRANSACTION),
    26: ("EndTxn", Route.TRANSACTION),
    28: ("TxnOffsetCommit", Route.GROUP),
    29: ("DescribeAcls", Route.ANY),
    30: ("CreateAcls", Route.ANY),
    31: ("DeleteAcls", Route.ANY),
    32: ("DescribeConfigs", Route.ANY),
    33: ("AlterConfigs", Route.ANY),
    35: ("DescribeLogDirs", Route.FAN_OUT),
    37: ("CreatePartitions", Route.CONTROLLER),
    42: ("DeleteGroups", Route.GROUPS),
    43: ("ElectLeaders", Route.CONTROLLER),
    44: ("IncrementalAlterConfigs", Route.ANY),
    45: ("AlterPartitionReassignments", Route.CONTROLLER),
    46: ("ListPartitionReassignments", Route.CONTROLLER),
    47: ("OffsetDelete", Route.GROUP),
    48: ("DescribeClientQuotas", Route.ANY),
    49: ("AlterClientQuotas", Route.ANY),
    50: ("DescribeUserScramCredentials", Route.ANY),
    51: ("AlterUserScramCredentials", Route.CONTROLLER),
    60: ("DescribeCluster", Route.ANY),
    61: ("DescribeProducers", Route.PARTITIONS),
    65: ("DescribeTransactions", Route.TRANSACTIONS),
    66: ("ListTransactions", Route.OWN_BROKERS),
    75: ("DescribeTopicPartitions", Route.ANY),
}

#: Versions the proxy routes and rewrites, per API (inclusive).
UNDERSTOOD: dict[int, tuple[int, int]] = {
    0: (3, 11),  # the proxy's Produce decoder; topic ids (v13) are not served
    1: (4, 12),  # topic names; v13+ name topics by id
    2: (1, 8),
    3: (0, 12),
    8: (2, 9),
    9: (1, 9),
    10: (0, 6),
    11: (0, 9),
    12: (0, 4),
    13: (0, 5),
    14: (0, 5),
    15: (0, 5),
    16: (0, 5),
    18: (0, 4),
    19: (2, 7),
    20: (1, 6),
    21: (0, 2),
    22: (0, 5),  # v6 (two-phase commit, KIP-939) is unstable in Kafka 4
    23: (2, 4),
    24: (0, 3),  # v4+ batch several transactions: Kafka's brokers send them to each other, never clients
    25: (0, 4),
    26: (0, 5),
    28: (0, 5),  # v6 names topics by id
    29: (1, 3),
    30: (1, 3),
    31: (1, 3),
    32: (1, 4),
    33: (0, 2),
    35: (1, 4),
    37: (0, 3),
    42: (0, 2),
    43: (0, 2),
    44: (0, 1),
    45: (0, 1),
    46: (0, 0),
    47: (0, 0),
    48: (0, 1),
    49: (0, 1),
    50: (0, 0),
    51: (0, 0),
    60: (0, 1),
    61: (0, 0),
    65: (0, 0),
    66: (0, 2),
    75: (0, 0),
}

#: Broker-internal APIs: replication and controller RPCs, KRaft, broker registration, transaction markers. Refused.
INTERNAL: dict[int, str] = {
    4: "LeaderAndIsr",
    5: "StopReplica",
    6: "UpdateMetadata",
    7: "ControlledShutdown",
    27: "WriteTxnMarkers",
    34: "AlterReplicaLogDirs",
    52: "Vote",
    53: "BeginQuorumEpoch",
    54: "EndQuorumEpoch",
    55: "DescribeQuorum",
    56: "AlterPartition",
    58: "Envelope",
    59: "FetchSnapshot",
    62: "BrokerRegistration",
    63: "BrokerHeartbeat",
    64: "UnregisterBroker",
    67: "AllocateProducerIds",
    80: "AddRaftVoter",
    81: "RemoveRaftVoter",
    82: "UpdateRaftVoter",
}


def api_name(api_key: int) -> str:
    if api_key in ROUTES:
        return ROUTES[api_key][0]
    return INTERNAL.get(api_key, f"api {api_key}")
