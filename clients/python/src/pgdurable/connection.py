"""Connections to durable's database, direct or behind a pooler.

Behind a transaction-mode pooler (PgBouncer's pool_mode = transaction) two
consecutive statements may run on two server sessions, so nothing may live
in a session: no server-side prepared statement (psycopg prepares a query
it runs often; prepare_threshold=None never does) and no LISTEN.  A
connection that prepares and meets the error a pooler causes
(PREPARED_STATEMENT_LOST) prepares nothing more from then on, and tells
whoever watches it (the Worker, which goes over to pooled mode).

Nor a search_path: every statement resolves only to pg_catalog and durable's
objects whatever the role's search_path and whatever a database owner put in
public (an overload such as public.&(bigint, integer) wins over pg_catalog's
even when pg_catalog comes first).  durable's API functions are called in
the schema the extension is installed in (API, looked up once per
connection), with every argument cast to its parameter's type; built-in
functions as pg_catalog.f, operators as OPERATOR(pg_catalog.x), casts to
pg_catalog's types.  A statement names the API's schema as @api.
"""
from __future__ import annotations

import logging
import threading
import time
import weakref

import psycopg
from psycopg import sql as pgsql

from .errors import RETRY_TRANSACTION, connection_lost, describe, prepared_statement_lost, sqlstate

log = logging.getLogger("pgdurable")

READY_CHANNEL = "durable_ready"  # DURABLE_READY_CHANNEL in src/core/core.h
STATEMENT_RETRIES = 5


def connect(dsn: str, *, pooled: bool, application_name: str | None = None,
            **params) -> psycopg.Connection:
    options = {"autocommit": True, **params}
    if pooled:
        options["prepare_threshold"] = None
    if application_name:
        options["application_name"] = application_name
    return psycopg.connect(dsn, **options)


API_SCHEMA_SQL = ("SELECT n.nspname FROM pg_catalog.pg_extension e"
                  " JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace"
                  " WHERE e.extname OPERATOR(pg_catalog.=) 'durable'")
_api_schema: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def api_schema(conn: psycopg.Connection) -> str:
    """The schema durable's API functions are in, quoted as an identifier."""
    schema = _api_schema.get(conn)
    if schema is None:
        row = conn.execute(API_SCHEMA_SQL).fetchone()
        if row is None:
            raise RuntimeError("the extension durable is not installed in this database")
        schema = _api_schema[conn] = pgsql.Identifier(row[0]).as_string(conn)
    return schema


_pooler_watchers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def watch_for_pooler(conn: psycopg.Connection, found) -> None:
    """Call found(error) once if conn turns out to go through a transaction-mode pooler."""
    _pooler_watchers[conn] = found


def found_pooler(conn: psycopg.Connection, e: psycopg.Error) -> None:
    """conn met a pooler's error: it prepares nothing more, and its watcher hears of it."""
    conn.prepare_threshold = None
    found = _pooler_watchers.pop(conn, None)
    if found is not None:
        found(e)


def execute(conn: psycopg.Connection, sql: str, params=(), *, prepare: bool | None = None) -> psycopg.Cursor:
    """Run one statement.  Outside a transaction block it is a transaction of
    its own, rolled back whole by a serialization failure, a deadlock or a
    cancel: it runs again (with a short backoff).  Inside one the error goes
    up, and the block is retried as a whole (see Worker).  On a watched
    connection a statement a pooler lost (it never ran) runs again at once,
    unprepared.  prepare=False never prepares it (psycopg's prepare)."""
    for attempt in range(STATEMENT_RETRIES):
        try:
            return conn.execute(sql.replace("@api.", api_schema(conn) + "."), params, prepare=prepare)
        except psycopg.Error as e:
            if connection_lost(conn):
                raise
            idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            if prepared_statement_lost(e) and conn in _pooler_watchers:
                found_pooler(conn, e)
                if idle:
                    continue
                raise
            if sqlstate(e) not in RETRY_TRANSACTION or not idle or attempt == STATEMENT_RETRIES - 1:
                raise
            log.warning("%s (%s); retrying the statement", e.diag.message_primary, e.sqlstate)
            time.sleep(0.05 * 2 ** attempt)
    raise AssertionError("unreachable")


BACKEND_PID_SQL = "SELECT pg_catalog.pg_backend_pid()"
PROBE_SECONDS = 2.0  # how long the probe's other connection may wait for a session


def transaction_pooler(conn: psycopg.Connection, dsn: str, application_name: str) -> str | None:
    """Why conn goes through a transaction-mode pooler, or None.

    Two consecutive statements in two server sessions say so.  In one
    session, whose pid is the one the server reported at connect time, it
    is the server's own session.  Else a pooler reported its own (PgBouncer
    makes up a key): a statement of another connection, in the session
    conn's statement just ran in, says transaction mode (PgBouncer hands
    out the session used last first); in another one, session mode.  That
    other connection may wait for a session while the pool is busy: after
    PROBE_SECONDS nobody can tell, and pooled mode is the safe guess."""
    first = conn.execute(BACKEND_PID_SQL, prepare=False).fetchone()[0]
    second = conn.execute(BACKEND_PID_SQL, prepare=False).fetchone()[0]
    if first != second:
        return f"a transaction-mode pooler: two consecutive statements ran in server sessions {first} and {second}"
    if conn.info.backend_pid == first:
        return None
    other: list = []

    def probe() -> None:
        try:
            with connect(dsn, pooled=True, application_name=application_name, connect_timeout=5) as c:
                other.append(c.execute(BACKEND_PID_SQL).fetchone()[0])
        except psycopg.Error as e:
            other.append(e)
    thread = threading.Thread(target=probe, name="pgdurable-pooler-probe", daemon=True)
    thread.start()
    thread.join(PROBE_SECONDS)
    pooler = f"a pooler (server session {first}, not the {conn.info.backend_pid} reported at connect)"
    if not other:
        return f"{pooler} that gave another connection no session within {PROBE_SECONDS:g} s"
    if isinstance(other[0], BaseException):
        return f"{pooler} that another connection could not go through: {describe(other[0])}"
    if other[0] == first:
        return (f"a transaction-mode pooler: another connection's statement ran in server session {first},"
                " which this one's had just used")
    return None
