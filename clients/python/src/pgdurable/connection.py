"""Connections to durable's database, direct or behind a pooler.

Behind a transaction-mode pooler (PgBouncer's pool_mode = transaction) two
consecutive statements may run on two server sessions, so nothing may live
in a session: no server-side prepared statement (psycopg prepares a query
it runs often; prepare_threshold=None never does) and no LISTEN.
"""
from __future__ import annotations

import logging
import time

import psycopg

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


def execute(conn: psycopg.Connection, sql: str, params=()) -> psycopg.Cursor:
    """Run one statement.  Outside a transaction block it is a transaction of
    its own, rolled back whole by a serialization failure, a deadlock or a
    cancel: it runs again (with a short backoff).  Inside one the error goes
    up, and the block is retried as a whole (see Worker)."""
    for attempt in range(STATEMENT_RETRIES):
        try:
            return conn.execute(sql, params)
        except psycopg.Error as e:
            if (sqlstate(e) not in RETRY_TRANSACTION or connection_lost(conn)
                    or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
                    or attempt == STATEMENT_RETRIES - 1):
                raise
            log.warning("%s (%s); retrying the statement", e.diag.message_primary, e.sqlstate)
            time.sleep(0.05 * 2 ** attempt)
    raise AssertionError("unreachable")
