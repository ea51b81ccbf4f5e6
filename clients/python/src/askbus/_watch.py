"""The observer role: ``AsyncWatch`` (and ``watch``) yields a ``BusEvent`` for every request
that becomes pending and every request's end, for ops tooling. Re-exported by
``askbus.aio``."""

from __future__ import annotations

import logging
from typing import Optional

from . import _frames, _parse
from ._conn import Connection
from ._paths import PathLike, resolve_socket
from .errors import ConnectionLost
from .types import BusEvent

__all__ = ["AsyncWatch", "watch"]

log = logging.getLogger("askbus")


class AsyncWatch:
    """An observer of the bus (ops tooling): ``async for event in watch()`` yields a
    ``BusEvent`` for every question that becomes pending and for every question's end, from
    the moment of watching (there is no replay). Events never carry question text or
    answers. Iteration ends when the daemon closes the connection or ``close()`` is called.
    """

    def __init__(self, socket: Optional[PathLike] = None, *, client: Optional[str] = None) -> None:
        self.socket_path = resolve_socket(socket)
        self.client = client
        self._conn: Optional[Connection] = None
        self._closed = False

    async def __aenter__(self) -> AsyncWatch:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __aiter__(self) -> AsyncWatch:
        return self

    async def open(self) -> None:
        """Connects and starts watching. Raises ``DaemonUnreachable`` when no daemon answers."""
        if self._closed:
            raise ConnectionLost("this watch is closed")
        if self._conn is not None:
            return
        conn = await Connection.open(self.socket_path)
        try:
            await conn.handshake(self.client)
            await conn.send(_frames.watch(self.client))
            while True:
                frame = await conn.recv()
                if frame is None:
                    raise ConnectionLost("askbusd closed the connection before watching began")
                if frame["type"] == "watching":
                    break
                if frame["type"] == "error":
                    raise _parse.parse_error(frame)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    async def __anext__(self) -> BusEvent:
        await self.open()
        conn = self._conn
        assert conn is not None
        while True:
            try:
                frame = await conn.recv()
            except ConnectionLost:
                if self._closed:
                    raise StopAsyncIteration from None
                raise
            if frame is None:
                raise StopAsyncIteration
            if frame["type"] == "bus-event":
                return _parse.parse_bus_event(frame)
            if frame["type"] == "error":
                err = _parse.parse_error(frame)
                log.warning("askbusd: %s: %s", err.code, err.message)

    async def close(self) -> None:
        self._closed = True
        if self._conn is not None:
            self._conn.close()


def watch(socket: Optional[PathLike] = None, *, client: Optional[str] = None) -> AsyncWatch:
    """Observes the bus: ``async for event in watch(): print(event.event, event.latency_ms)``."""
    return AsyncWatch(socket, client=client)
