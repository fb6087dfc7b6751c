"""Reading a task's stream as it is written (durable_stream_read).

    async for chunk in pgdurable.read_stream(dsn, task_id, "tokens"):
        print(chunk.chunk, end="", flush=True)

A reader keeps the position of the last chunk it saw (chunk.seq) and, to
resume after either side crashed, starts again after it:
read_stream(..., after=seq) never yields a chunk twice or out of order.
The iterator ends at the stream's end: its close, or its task's finish.
It waits for the next chunk on LISTEN durable_stream, on a connection of
its own, and reads again at least every poll seconds; behind a
transaction-mode pooler (pooled=True) it only polls.
"""
from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any, AsyncIterator, NamedTuple

import psycopg
from psycopg import sql as pgsql

from .connection import API_SCHEMA_SQL

STREAM_CHANNEL = "durable_stream"  # DURABLE_STREAM_CHANNEL in src/core/core.h


class Chunk(NamedTuple):
    seq: int  # its position in the stream: 1, 2, ...
    chunk: Any  # the JSON value appended
    at: datetime  # when it was appended


READ_SQL = ("SELECT seq, chunk, at FROM {api}.durable_stream_read(%s::pg_catalog.int8,"
            " %s::pg_catalog.text, %s::pg_catalog.int8, %s::pg_catalog.int4)")


async def _connect(dsn: str, pooled: bool) -> psycopg.AsyncConnection:
    options: dict[str, Any] = {"autocommit": True}
    if pooled:
        options["prepare_threshold"] = None
    return await psycopg.AsyncConnection.connect(dsn, **options)


async def read_stream(dsn: str, task_id: int, stream: str, *, after: int = 0,
                      batch: int = 1000, poll: float = 5.0,
                      pooled: bool = False) -> AsyncIterator[Chunk]:
    """The chunks of the task's stream after position after, in order, as
    they come, until its end."""
    conn = await _connect(dsn, pooled)
    listener = None if pooled else await _connect(dsn, False)
    woken = asyncio.Event()
    listening = None
    try:
        row = await (await conn.execute(API_SCHEMA_SQL)).fetchone()
        if row is None:
            raise RuntimeError("the extension durable is not installed in this database")
        read = READ_SQL.format(api=pgsql.Identifier(row[0]).as_string(conn))
        if listener is not None:
            await listener.execute(f"LISTEN {STREAM_CHANNEL}")

            async def listen() -> None:
                async for notify in listener.notifies():
                    if notify.payload == str(task_id):
                        woken.set()
            listening = asyncio.create_task(listen())
        while True:
            woken.clear()  # a chunk committed from here on wakes the wait below
            rows = await (await conn.execute(read, (task_id, stream, after, batch))).fetchall()
            for seq, chunk, at in rows:
                if chunk is None:
                    return
                after = seq
                yield Chunk(seq, chunk, at)
            if len(rows) < batch:
                try:
                    await asyncio.wait_for(woken.wait(), poll)
                except asyncio.TimeoutError:
                    pass
    finally:
        if listening is not None:
            listening.cancel()
            try:
                await listening
            except (asyncio.CancelledError, psycopg.Error):
                pass
        for c in (conn, listener):
            if c is not None:
                await c.close()
