"""What the long-lived client objects (producer, subscription) share to survive a daemon
restart: the backoff between attempts, which errors are worth another attempt, and the set of
background tasks (read loops, reconnection loops) an object owns and cancels when it closes."""

from __future__ import annotations

import asyncio
import random
from typing import Any, Coroutine, Set

from .errors import ConnectionLost, DaemonUnreachable, ProtocolError, TooManyConnections

#: Errors after which connecting again may succeed (the daemon is restarting, or busy).
RETRIABLE = (DaemonUnreachable, ConnectionLost, ProtocolError, TooManyConnections)


class Backoff:
    """The reconnection policy every askbus client shares (proto/PROTOCOL.md, "Clients"):
    50 ms doubling to 2 s, each delay drawn from its upper half, so clients reconnecting to a
    restarted daemon do not arrive all at once."""

    def __init__(self, initial: float = 0.05, maximum: float = 2.0) -> None:
        self._next = initial
        self._max = maximum

    def next(self) -> float:
        delay = self._next
        self._next = min(self._next * 2, self._max)
        return delay * random.uniform(0.5, 1.0)


class Tasks:
    """Background tasks kept referenced (asyncio holds only weak references) and cancelled
    together when their owner closes."""

    def __init__(self) -> None:
        self._tasks: Set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
