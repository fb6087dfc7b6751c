"""Connections to durable's database, direct or behind a pooler.

Behind a transaction-mode pooler (PgBouncer's pool_mode = transaction) two
consecutive statements may run on two server sessions, so nothing may live
in a session: no server-side prepared statement (psycopg prepares a query
it runs often; prepare_threshold=None never does) and no LISTEN.

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
import time
import weakref

import psycopg
from psycopg import sql as pgsql

from .errors import RETRY_TRANSACTION, connection_lost, sqlstate

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


def execute(conn: psycopg.Connection, sql: str, params=()) -> psycopg.Cursor:
    """Run one statement.  Outside a transaction block it is a transaction of
    its own, rolled back whole by a serialization failure, a deadlock or a
    cancel: it runs again (with a short backoff).  Inside one the error goes
    up, and the block is retried as a whole (see Worker)."""
    for attempt in range(STATEMENT_RETRIES):
        try:
            return conn.execute(sql.replace("@api.", api_schema(conn) + "."), params)
        except psycopg.Error as e:
            if (sqlstate(e) not in RETRY_TRANSACTION or connection_lost(conn)
                    or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
                    or attempt == STATEMENT_RETRIES - 1):
                raise
            log.warning("%s (%s); retrying the statement", e.diag.message_primary, e.sqlstate)
            time.sleep(0.05 * 2 ** attempt)
    raise AssertionError("unreachable")
