"""The runner's LISTEN, on a connection of its own: the store's ``Subscription``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import asyncpg

from daemon.pg.store.base import StoreUnavailable
from daemon.pg.store.postgres.pool import UNAVAILABLE, describe
from daemon.pg.store.queries.admin import CHANNEL
from daemon.pg.store.queries.runs import PING


class PgListening:
    """A LISTEN on its own connection. ``lost`` once the connection closes."""

    def __init__(self, conn: asyncpg.Connection, on_message: Callable[[str], None]) -> None:
        self._conn = conn
        self._on_message = on_message
        self._lost = asyncio.Event()

    def _notified(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        self._on_message(payload)

    def _terminated(self, _conn: object) -> None:
        self._lost.set()

    async def start(self) -> None:
        self._conn.add_termination_listener(self._terminated)
        await self._conn.add_listener(CHANNEL, self._notified)

    @property
    def lost(self) -> bool:
        return self._lost.is_set() or self._conn.is_closed()

    async def wait_lost(self) -> None:
        await self._lost.wait()

    async def ping(self) -> None:
        try:
            await self._conn.fetchval(PING, timeout=5.0)
        except UNAVAILABLE as exc:
            self._lost.set()
            raise StoreUnavailable(describe(exc)) from None

    async def close(self) -> None:
        self._lost.set()
        with contextlib.suppress(*UNAVAILABLE):
            await asyncio.wait_for(self._conn.close(), timeout=2.0)
        if not self._conn.is_closed():
            self._conn.terminate()


async def start_listening(
    conn: asyncpg.Connection, on_message: Callable[[str], None]
) -> PgListening:
    """LISTEN on ``conn`` (which it then owns: closed when the LISTEN fails or is closed)."""
    listening = PgListening(conn, on_message)
    try:
        await listening.start()
    except UNAVAILABLE as exc:
        await listening.close()
        raise StoreUnavailable(describe(exc)) from None
    return listening
