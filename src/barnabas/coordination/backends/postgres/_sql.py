"""Every SQL statement of the PostgreSQL backend, one per constant; the schema as numbered DDL.

Rules the schema keeps:

- All objects live in one schema (``?schema=``, default ``barnabas``); connections set
  ``search_path`` to it at connect time, and functions pin it with ``SET search_path FROM CURRENT``.
- Keys use ``COLLATE "C"``: byte order of UTF-8 is code point order, so prefix ranges and
  ``ORDER BY key`` agree with Python's ``str`` ordering, and the primary key index serves ranges.
- **One writer at a time.** Every transaction that changes ``kv`` first locks the ``meta`` row
  ``rev`` (``commit_ops``, ``end_session`` and ``reap_sessions`` do it explicitly; the trigger's
  ``UPDATE`` does it for anything else). Hence (1) checks read after the lock see every earlier
  commit, so "absent" cannot race a concurrent insert; (2) revisions are handed out in commit
  order and without gaps (a rollback returns its numbers), so a watcher that has read the log up
  to ``r`` can never later find a smaller revision appear, and a gap means pruning; (3) whoever
  writes ``kv`` or deletes a session holds ``meta`` first, so two of them cannot deadlock, and a
  keepalive locks nothing but its own session row.
- The trigger on ``kv`` (cascaded deletes included) bumps ``rev``, logs ``(rev, key, op)`` in
  ``changes`` and ``NOTIFY``s the schema's channel with an empty payload (identical notifications
  are folded into one per transaction). Every 1000th revision prunes the log to the last 10 000.
- Leases are on the server's clock (``clock_timestamp()``): client clocks never matter.
"""

from __future__ import annotations

__all__ = [
    "COMMIT_OPS",
    "CREATE_SCHEMA",
    "DDL",
    "END_SESSION",
    "LISTEN",
    "LOCK_DDL",
    "OPEN_SESSION",
    "REAP_SESSIONS",
    "RENEW_SESSION",
    "SCHEMA_VERSION",
    "SELECT_CHANGES",
    "SELECT_FROM",
    "SELECT_KEY",
    "SELECT_RANGE",
    "SELECT_REV",
    "SELECT_SCHEMA_VERSION",
]

#: Bumped when the DDL below changes; a client finding an older number re-applies it.
SCHEMA_VERSION = 1
#: Change-log rows kept behind the newest revision, and how often (in revisions) to prune.
CHANGES_KEEP = 10_000
CHANGES_PRUNE_EVERY = 1_000

# -- schema (applied in order, in one transaction, under LOCK_DDL) ---------------------------------

#: Formatted with the quoted schema name (psycopg.sql); the only statement naming the schema.
CREATE_SCHEMA = "CREATE SCHEMA IF NOT EXISTS {schema}"
#: Concurrent first clients would race on CREATE SCHEMA / CREATE TABLE; serialise them per schema.
LOCK_DDL = "SELECT pg_advisory_xact_lock(hashtext('barnabas coordination schema ' || %s))"

DDL_010_META = 'CREATE TABLE IF NOT EXISTS meta (name text COLLATE "C" PRIMARY KEY, value bigint NOT NULL)'
DDL_011_META_ROWS = "INSERT INTO meta (name, value) VALUES ('rev', 0), ('schema_version', 0) ON CONFLICT DO NOTHING"
DDL_020_SESSIONS = (
    'CREATE TABLE IF NOT EXISTS sessions (id text COLLATE "C" PRIMARY KEY, ttl interval NOT NULL, '
    "expires_at timestamptz NOT NULL, created_at timestamptz NOT NULL DEFAULT clock_timestamp())"
)
DDL_021_SESSIONS_EXPIRY = "CREATE INDEX IF NOT EXISTS sessions_expires_at ON sessions (expires_at)"
DDL_030_KV = (
    'CREATE TABLE IF NOT EXISTS kv (key text COLLATE "C" PRIMARY KEY, value bytea NOT NULL, '
    "version bigint NOT NULL CHECK (version > 0), "
    'session_id text COLLATE "C" REFERENCES sessions (id) ON DELETE CASCADE)'
)
DDL_031_KV_SESSION = "CREATE INDEX IF NOT EXISTS kv_session_id ON kv (session_id) WHERE session_id IS NOT NULL"
DDL_040_CHANGES = (
    'CREATE TABLE IF NOT EXISTS changes (rev bigint PRIMARY KEY, key text COLLATE "C" NOT NULL, op text NOT NULL)'
)
DDL_050_LOG_CHANGE = f"""
CREATE OR REPLACE FUNCTION log_change() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    new_rev bigint;
    changed_key text;
BEGIN
    IF TG_OP = 'DELETE' THEN
        changed_key := OLD.key;
    ELSE
        changed_key := NEW.key;
    END IF;
    UPDATE meta SET value = value + 1 WHERE name = 'rev' RETURNING value INTO new_rev;
    INSERT INTO changes (rev, key, op) VALUES (new_rev, changed_key, lower(TG_OP));
    IF new_rev % {CHANGES_PRUNE_EVERY} = 0 THEN
        DELETE FROM changes WHERE rev <= new_rev - {CHANGES_KEEP};
    END IF;
    PERFORM pg_notify(TG_TABLE_SCHEMA, '');
    RETURN NULL;
END
$$"""
DDL_051_KV_TRIGGER = (
    "CREATE OR REPLACE TRIGGER kv_log_change AFTER INSERT OR UPDATE OR DELETE ON kv "
    "FOR EACH ROW EXECUTE FUNCTION log_change()"
)
# A failed check returns one row naming the key and why ('absent', 'exists', 'version', 'session')
# and writes nothing; success returns one row per put key with its new version.
DDL_060_COMMIT_OPS = """
CREATE OR REPLACE FUNCTION commit_ops(
    check_keys text[], check_versions bigint[],
    put_keys text[], put_values bytea[], put_sessions text[],
    delete_keys text[]
) RETURNS TABLE (out_key text, out_version bigint, failure text)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    i integer;
    found_version bigint;
    ended text;
BEGIN
    PERFORM 1 FROM meta WHERE name = 'rev' FOR UPDATE;
    FOR i IN 1 .. coalesce(array_length(check_keys, 1), 0) LOOP
        found_version := coalesce((SELECT kv.version FROM kv WHERE kv.key = check_keys[i]), 0);
        IF (check_versions[i] IS NULL AND found_version = 0)
           OR (check_versions[i] IS NOT NULL AND found_version <> check_versions[i]) THEN
            RETURN QUERY VALUES (check_keys[i], found_version, CASE
                WHEN found_version = 0 THEN 'absent'
                WHEN check_versions[i] = 0 THEN 'exists'
                ELSE 'version' END);
            RETURN;
        END IF;
    END LOOP;
    SELECT s INTO ended FROM unnest(put_sessions) AS s
    WHERE s IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM sessions WHERE id = s AND expires_at > clock_timestamp())
    LIMIT 1;
    IF ended IS NOT NULL THEN
        RETURN QUERY VALUES (ended, 0::bigint, 'session');
        RETURN;
    END IF;
    DELETE FROM kv WHERE kv.key = ANY (delete_keys);
    FOR i IN 1 .. coalesce(array_length(put_keys, 1), 0) LOOP
        RETURN QUERY
            INSERT INTO kv AS t (key, value, version, session_id)
            VALUES (put_keys[i], put_values[i], 1, put_sessions[i])
            ON CONFLICT (key) DO UPDATE SET value = excluded.value, version = t.version + 1
            RETURNING t.key, t.version, NULL::text;
    END LOOP;
END
$$"""
DDL_070_END_SESSION = """
CREATE OR REPLACE FUNCTION end_session(session text) RETURNS boolean
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM 1 FROM meta WHERE name = 'rev' FOR UPDATE;
    DELETE FROM sessions WHERE id = session;
    RETURN FOUND;
END
$$"""
# Cheap when nothing expired (one indexed probe, no lock). Returns seconds until the next lease
# ends, or NULL when there are no sessions, so reapers can sleep exactly that long.
DDL_080_REAP_SESSIONS = """
CREATE OR REPLACE FUNCTION reap_sessions() RETURNS double precision
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    next_expiry timestamptz;
BEGIN
    IF EXISTS (SELECT 1 FROM sessions WHERE expires_at <= clock_timestamp()) THEN
        PERFORM 1 FROM meta WHERE name = 'rev' FOR UPDATE;
        DELETE FROM sessions WHERE expires_at <= clock_timestamp();
    END IF;
    SELECT min(expires_at) INTO next_expiry FROM sessions;
    RETURN extract(epoch FROM next_expiry - clock_timestamp());
END
$$"""
DDL_090_SCHEMA_VERSION = f"UPDATE meta SET value = {SCHEMA_VERSION} WHERE name = 'schema_version'"

DDL = (
    DDL_010_META,
    DDL_011_META_ROWS,
    DDL_020_SESSIONS,
    DDL_021_SESSIONS_EXPIRY,
    DDL_030_KV,
    DDL_031_KV_SESSION,
    DDL_040_CHANGES,
    DDL_050_LOG_CHANGE,
    DDL_051_KV_TRIGGER,
    DDL_060_COMMIT_OPS,
    DDL_070_END_SESSION,
    DDL_080_REAP_SESSIONS,
    DDL_090_SCHEMA_VERSION,
)

# -- statements ------------------------------------------------------------------------------------

SELECT_SCHEMA_VERSION = "SELECT value FROM meta WHERE name = 'schema_version'"
SELECT_KEY = "SELECT value, version, session_id FROM kv WHERE key = %s"
SELECT_RANGE = "SELECT key, value, version, session_id FROM kv WHERE key >= %s AND key < %s ORDER BY key"
#: For prefixes with no finite upper bound (empty, or ending in U+10FFFF).
SELECT_FROM = "SELECT key, value, version, session_id FROM kv WHERE key >= %s ORDER BY key"
COMMIT_OPS = (
    "SELECT out_key, out_version, failure "
    "FROM commit_ops(%s::text[], %s::bigint[], %s::text[], %s::bytea[], %s::text[], %s::text[])"
)
OPEN_SESSION = (
    "INSERT INTO sessions (id, ttl, expires_at) "
    "VALUES (%(id)s, make_interval(secs => %(ttl)s), clock_timestamp() + make_interval(secs => %(ttl)s))"
)
#: No row back: the lease had ended (reaped, or expired and awaiting a reaper); never revive it.
RENEW_SESSION = (
    "UPDATE sessions SET expires_at = clock_timestamp() + ttl "
    "WHERE id = %s AND expires_at > clock_timestamp() RETURNING id"
)
END_SESSION = "SELECT end_session(%s)"
REAP_SESSIONS = "SELECT reap_sessions()"
#: Formatted with the quoted schema name: the trigger notifies a channel named after the schema.
LISTEN = "LISTEN {schema}"
SELECT_REV = "SELECT value FROM meta WHERE name = 'rev'"
SELECT_CHANGES = "SELECT rev, key FROM changes WHERE rev > %s ORDER BY rev LIMIT %s"
