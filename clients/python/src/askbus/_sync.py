"""The blocking API: ``ask()``, ``Producer``, ``subscribe()``, ``Subscription``,
``Request`` and ``watch()``. Each runs the asyncio implementation (``askbus.aio``) on one shared background
I/O thread (``_io_thread``), so there is one implementation of reconnection and matching, any
thread may call in at once, and a UI can answer from its GUI thread while another iterates.
This module holds the producers and observers; the UIs' side is in ``_sync_ui``, re-exported
here."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Mapping, Optional, Union

from . import aio
from ._io_thread import _IoThread
from ._paths import PathLike
from ._sync_ui import Approval, Event, Request, Subscription, subscribe
from .types import (
    BusEvent,
    Confirmation,
    NoUiPolicy,
    Question,
    RequestContext,
    Response,
    Welcome,
)

__all__ = [
    "Approval",
    "Event",
    "Producer",
    "Request",
    "Subscription",
    "Watch",
    "ask",
    "stats",
    "subscribe",
    "watch",
]

# =============================================================================================
# Producers.


class Producer:
    """A producer connection for many asks; ``ask`` may be called from several threads at
    once. See ``askbus.aio.AsyncProducer`` for the reconnection guarantees.

    ``with Producer() as p: p.ask(questions)`` connects on entry (raising
    ``DaemonUnreachable`` at once when no daemon answers); used without ``with`` it connects
    on the first ask, and ``close()`` ends it."""

    def __init__(
        self,
        socket: Optional[PathLike] = None,
        *,
        client: Optional[str] = None,
        reconnect: bool = True,
        context: Union[RequestContext, Mapping[str, Optional[str]], None] = None,
    ) -> None:
        """``context``: who is asking, about what (see ``aio.AsyncProducer``)."""
        self._io = _IoThread.get()
        self._aio = aio.AsyncProducer(
            socket, client=client, reconnect=reconnect, context=context
        )

    @property
    def socket_path(self) -> str:
        return self._aio.socket_path

    @property
    def welcome(self) -> Optional[Welcome]:
        return self._aio.welcome

    @property
    def connected(self) -> bool:
        return self._aio.connected

    def __enter__(self) -> Producer:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> None:
        self._io.run(self._aio.connect())

    def ask(
        self,
        questions: Union[List[Question], List[Dict[str, Any]], Any],
        *,
        timeout_ms: Optional[int] = None,
        no_ui: Optional[NoUiPolicy] = None,
        correlation_id: Optional[str] = None,
        context: Union[RequestContext, Mapping[str, Optional[str]], None] = None,
    ) -> Response:
        """Asks and blocks until the terminal response; see ``AsyncProducer.ask``."""
        return self._io.run(
            self._aio.ask(
                questions,
                timeout_ms=timeout_ms,
                no_ui=no_ui,
                correlation_id=correlation_id,
                context=context,
            )
        )

    def confirm(
        self,
        tool_call: Mapping[str, Any],
        *,
        details: Optional[Mapping[str, Any]] = None,
        outcomes: Optional[List[str]] = None,
        server_name: Optional[str] = None,
        tool_annotations: Optional[Mapping[str, Any]] = None,
        subagent: Optional[str] = None,
        timeout_ms: Optional[int] = None,
        no_ui: Optional[NoUiPolicy] = None,
        correlation_id: Optional[str] = None,
        context: Union[RequestContext, Mapping[str, Optional[str]], None] = None,
    ) -> Confirmation:
        """Asks a person to approve a tool call and blocks until the decision; fails closed
        (``confirmed`` only when a person approved). See ``AsyncProducer.confirm``."""
        return self._io.run(
            self._aio.confirm(
                tool_call,
                details=details,
                outcomes=outcomes,
                server_name=server_name,
                tool_annotations=tool_annotations,
                subagent=subagent,
                timeout_ms=timeout_ms,
                no_ui=no_ui,
                correlation_id=correlation_id,
                context=context,
            )
        )

    def cancel(self, correlation_id: str) -> bool:
        """Withdraws a pending question (from another thread than the one asking)."""
        return self._io.run(self._aio.cancel(correlation_id))

    def stats(self) -> Dict[str, Any]:
        return self._io.run(self._aio.stats())

    def close(self) -> None:
        self._io.run(self._aio.close())

    def __del__(self) -> None:
        # A producer dropped without close(): do not leave its connection open for good.
        io = getattr(self, "_io", None)
        inner = getattr(self, "_aio", None)
        if io is not None and inner is not None:
            io.close_soon(inner.close)


def ask(
    questions: Union[List[Question], List[Dict[str, Any]], Any],
    *,
    timeout_ms: Optional[int] = None,
    no_ui: Optional[NoUiPolicy] = None,
    socket: Optional[PathLike] = None,
    client: Optional[str] = None,
    correlation_id: Optional[str] = None,
    context: Union[RequestContext, Mapping[str, Optional[str]], None] = None,
) -> Response:
    """Asks once and blocks until the question ends.

    Returns the ``Response`` whatever the outcome (call ``.raise_for_outcome()`` to turn a
    dismissal, timeout, ... into an exception). Raises ``InvalidRequest`` carrying the
    reference ask_user tool's message for invalid questions, other ``DaemonError`` subclasses
    for other refusals, and ``DaemonUnreachable`` when no daemon answers at the socket.
    """
    with Producer(socket, client=client, context=context) as producer:
        return producer.ask(
            questions, timeout_ms=timeout_ms, no_ui=no_ui, correlation_id=correlation_id
        )


def stats(socket: Optional[PathLike] = None) -> Dict[str, Any]:
    """The daemon's live counters."""
    return _IoThread.get().run(aio.stats(socket))


# =============================================================================================
# Observers.


class Watch:
    """The blocking twin of ``aio.AsyncWatch``: ``for event in askbus.watch(): ...``.
    Connects on creation; ``close()`` (from another thread) ends the iteration."""

    def __init__(self, socket: Optional[PathLike] = None, *, client: Optional[str] = None) -> None:
        self._io = _IoThread.get()
        self._aio = aio.AsyncWatch(socket, client=client)
        self._io.run(self._aio.open())

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[BusEvent]:
        return self

    def __next__(self) -> BusEvent:
        event = self._io.run(_next_event(self._aio))
        if event is None:
            raise StopIteration
        return event

    def close(self) -> None:
        self._io.run(self._aio.close())

    def __del__(self) -> None:
        io = getattr(self, "_io", None)
        inner = getattr(self, "_aio", None)
        if io is not None and inner is not None:
            io.close_soon(inner.close)


async def _next_event(w: aio.AsyncWatch) -> Optional[BusEvent]:
    try:
        return await w.__anext__()
    except StopAsyncIteration:
        return None


def watch(socket: Optional[PathLike] = None, *, client: Optional[str] = None) -> Watch:
    """Observes the bus: ``for event in askbus.watch(): print(event.event, event.latency_ms)``.

    Raises ``DaemonUnreachable`` at once when no daemon answers."""
    return Watch(socket, client=client)
