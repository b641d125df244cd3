"""Every CQL statement of the backend, one statement per named constant.

Rules this module keeps (coordination.md §6):

- One table, ``kv``, and one partition per namespace (``ns``), so every commit is a single-partition
  conditional batch (a Paxos round; Cassandra refuses conditional batches across partitions).
- The clustering key ``(kind, key)`` splits the partition into slices that never overlap, so user
  keys need no reserved names and no read of one slice scans another slice's tombstones:

  ===============  =========================  ==================================================
  kind             key                        row
  ===============  =========================  ==================================================
  0 META           ``rev``                    ``version`` = the namespace's revision
  1 KV             the user's key             ``value``, ``version``, ``session`` (ephemeral)
  2 CHANGES        revision, 20 digits        ``value`` = JSON: the commit's id and changed keys
  3 SESSIONS       session id                 the lease row; ``version`` = its TTL in seconds
  3 SESSIONS       ``<session id>/<key>``     index of the session's ephemeral keys
  ===============  =========================  ==================================================

- Every row is written only by conditional (LWT) statements or inside conditional batches, never by
  a plain write (mixing the two timestamps rows inconsistently, CASSANDRA-13767). ``USING TIMESTAMP``
  is never used (refused with conditions).
- ``probe`` is never set: ``HOLD_KEY`` deletes it to attach a condition to a row without changing it.
- Placeholders ``{keyspace}`` and ``{replication_factor}`` (schema only) are filled once at connect;
  the other statements run in the session's keyspace.
"""

from __future__ import annotations

__all__ = [
    "BUMP_REV",
    "CREATE_EPHEMERAL",
    "CREATE_KEY",
    "CREATE_KEYSPACE",
    "CREATE_TABLE",
    "DELETE_KEY",
    "DROP_SESSION_ROW",
    "END_SESSION",
    "HOLD_KEY",
    "INDEX_EPHEMERAL",
    "INIT_REV",
    "KIND_CHANGES",
    "KIND_KV",
    "KIND_META",
    "KIND_SESSIONS",
    "LOG_CHANGE",
    "OPEN_SESSION",
    "PREPARED",
    "RENEW_SESSION",
    "REV_KEY",
    "SELECT_ALL",
    "SELECT_CHANGES",
    "SELECT_KEY",
    "SELECT_PAXOS_VARIANT",
    "SELECT_RANGE",
    "SELECT_RELEASE_VERSION",
    "SELECT_ROWS",
    "SELECT_SESSION_SLICE",
    "SELECT_WATCHED",
    "UPDATE_EPHEMERAL",
    "UPDATE_KEY",
    "change_key",
    "index_key",
]

KIND_META = 0
KIND_KV = 1
KIND_CHANGES = 2
KIND_SESSIONS = 3
REV_KEY = "rev"


def change_key(rev: int) -> str:
    """The change-log row key of revision ``rev``: zero-padded so text order is numeric order."""
    return f"{rev:020d}"


def index_key(session_id: str, key: str) -> str:
    """The index row of an ephemeral key, in its session's slice of kind 3."""
    return f"{session_id}/{key}"


# -- schema and server checks (run once at connect) ----------------------------------------------

CREATE_KEYSPACE = (
    "CREATE KEYSPACE IF NOT EXISTS {keyspace} "
    "WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {replication_factor}}}"
)
# gc_grace_seconds: expired change-log rows and deleted keys are purged a day after, not ten days
# (Paxos v2 keeps its own state until paxos repair; one day leaves time for that). The id is given
# (_schema.table_id): clients creating the table at once through different nodes make one table.
CREATE_TABLE = (
    "CREATE TABLE IF NOT EXISTS {keyspace}.kv ("
    "ns text, kind tinyint, key text, value blob, version bigint, session text, probe boolean, "
    "PRIMARY KEY (ns, kind, key)) WITH gc_grace_seconds = 86400 AND id = {table_id}"
)
SELECT_RELEASE_VERSION = "SELECT release_version FROM system.local"
# A virtual table since Cassandra 4.0; the setting exists from 4.1 on.
SELECT_PAXOS_VARIANT = "SELECT value FROM system_views.settings WHERE name = 'paxos_variant'"

# -- reads ---------------------------------------------------------------------------------------

SELECT_KEY = "SELECT key, value, version, session FROM kv WHERE ns = ? AND kind = 1 AND key = ?"
SELECT_RANGE = "SELECT key, value, version, session FROM kv WHERE ns = ? AND kind = 1 AND key >= ? AND key < ?"
SELECT_ALL = "SELECT key, value, version, session FROM kv WHERE ns = ? AND kind = 1"
# What a commit or a keepalive decides on: named rows of any kind, with the seconds they have left.
SELECT_ROWS = "SELECT kind, key, value, version, session, TTL(version) AS ttl FROM kv WHERE ns = ? AND (kind, key) IN ?"
# A session's lease row and its ephemeral-key index: keys from ``<id>`` to ``<id>0`` ('0' follows '/').
SELECT_SESSION_SLICE = (
    "SELECT key, version, session, TTL(version) AS ttl FROM kv WHERE ns = ? AND kind = 3 AND key >= ? AND key < ?"
)
# A watcher's poll: the revision and every live ephemeral key (its index rows).
SELECT_WATCHED = "SELECT kind, key, version FROM kv WHERE ns = ? AND kind IN (0, 3)"
SELECT_CHANGES = "SELECT key, value FROM kv WHERE ns = ? AND kind = 2 AND key > ? AND key <= ?"

# -- conditional writes --------------------------------------------------------------------------

INIT_REV = "INSERT INTO kv (ns, kind, key, version) VALUES (?, 0, 'rev', 0) IF NOT EXISTS"
# Every commit: the revision moves by one, so commits serialize and the change log has no gaps.
BUMP_REV = "UPDATE kv SET version = ? WHERE ns = ? AND kind = 0 AND key = 'rev' IF version = ?"
LOG_CHANGE = "INSERT INTO kv (ns, kind, key, value) VALUES (?, 2, ?, ?) USING TTL ?"

CREATE_KEY = "INSERT INTO kv (ns, kind, key, value, version) VALUES (?, 1, ?, ?, 1) IF NOT EXISTS"
CREATE_EPHEMERAL = (
    "INSERT INTO kv (ns, kind, key, value, version, session) VALUES (?, 1, ?, ?, 1, ?) IF NOT EXISTS USING TTL ?"
)
UPDATE_KEY = "UPDATE kv SET value = ?, version = ? WHERE ns = ? AND kind = 1 AND key = ? IF version = ?"
# Rewrites every column (a TTL is per cell): updates of ephemeral keys and keepalive refreshes.
UPDATE_EPHEMERAL = (
    "UPDATE kv USING TTL ? SET value = ?, version = ?, session = ? "
    "WHERE ns = ? AND kind = 1 AND key = ? IF version = ? AND session = ?"
)
DELETE_KEY = "DELETE FROM kv WHERE ns = ? AND kind = 1 AND key = ? IF version = ?"
# A condition on a row the commit only checks: deletes the never-set ``probe`` cell.
HOLD_KEY = "DELETE probe FROM kv WHERE ns = ? AND kind = 1 AND key = ? IF version = ?"

INDEX_EPHEMERAL = "INSERT INTO kv (ns, kind, key, session) VALUES (?, 3, ?, ?) USING TTL ?"

OPEN_SESSION = "INSERT INTO kv (ns, kind, key, version) VALUES (?, 3, ?, ?) IF NOT EXISTS USING TTL ?"
RENEW_SESSION = "UPDATE kv USING TTL ? SET version = ? WHERE ns = ? AND kind = 3 AND key = ? IF EXISTS"
END_SESSION = "DELETE FROM kv WHERE ns = ? AND kind = 3 AND key = ? IF EXISTS"
# Inside a batch that has its conditions elsewhere: a lease row or an index row.
DROP_SESSION_ROW = "DELETE FROM kv WHERE ns = ? AND kind = 3 AND key = ?"

#: Prepared once per connection.
PREPARED = (
    SELECT_KEY,
    SELECT_RANGE,
    SELECT_ALL,
    SELECT_ROWS,
    SELECT_SESSION_SLICE,
    SELECT_WATCHED,
    SELECT_CHANGES,
    INIT_REV,
    BUMP_REV,
    LOG_CHANGE,
    CREATE_KEY,
    CREATE_EPHEMERAL,
    UPDATE_KEY,
    UPDATE_EPHEMERAL,
    DELETE_KEY,
    HOLD_KEY,
    INDEX_EPHEMERAL,
    OPEN_SESSION,
    RENEW_SESSION,
    END_SESSION,
    DROP_SESSION_ROW,
)
