"""The UI role: ``AsyncSubscription`` yields each pending request once (the daemon's replay,
then live ones) and each withdrawal, sends this UI's answers and waits for their acks, and
across a daemon restart resubscribes and keeps the requests it holds the same objects. Also
``subscribe``. Re-exported by ``askbus.aio``."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import (
    Any,
    AsyncIterator,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Tuple,
    Union,
    cast,
)

from . import _frames, _parse
from ._conn import Connection
from ._paths import PathLike, resolve_socket
from ._reconnect import RETRIABLE, Backoff, Tasks
from ._request import AsyncApproval, AsyncRequest
from .errors import AskbusError, ConnectionLost, DaemonError, NotPending
from .types import AckOutcome, Welcome, WithdrawReason, Withdrawal

__all__ = ["AsyncEvent", "AsyncSubscription", "subscribe"]

log = logging.getLogger("askbus")

_LOST: Any = object()  # an answer's connection dropped before the daemon replied
_END: Any = object()  # the subscription was closed


class _Failure:
    """The error that ended a subscription, queued so that every later read raises it."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


AsyncEvent = Union[AsyncRequest, Withdrawal[AsyncRequest]]


class AsyncSubscription:
    """A UI's subscription: yields each pending question once, oldest first, then live ones.

    ``async for req in sub`` yields only questions still pending; ``sub.events()`` yields the
    same ``AsyncRequest`` objects and, in order, a ``Withdrawal`` each time one leaves the
    UIs. ``on_withdrawn(request)`` is also called at that moment, from the event loop.

    With ``reconnect`` (the default), a dropped connection is re-established with backoff and
    the daemon's replay is taken again. Questions this UI already holds stay the same
    objects; one that has not come back ``resume_grace`` seconds after reconnecting (its
    producer gave up or died) is withdrawn with reason ``"lost"``, or ``"timeout"`` if its
    deadline passed first, or ``"shutdown"`` if the old daemon said it was shutting down.

    ``filter`` (keys ``project``, ``agent``, ``session``) makes the daemon show this UI only
    the questions whose context matches: only those are replayed and sent, and only those may
    it answer. ``agent`` matches ``name/version`` or just the name.
    """

    def __init__(
        self,
        socket: Optional[PathLike] = None,
        *,
        client: Optional[str] = None,
        filter: Optional[Mapping[str, str]] = None,
        on_withdrawn: Optional[Callable[[AsyncRequest], object]] = None,
        reconnect: bool = True,
        resume_grace: float = 3.0,
        via: Optional[str] = None,
    ) -> None:
        self.socket_path = resolve_socket(socket)
        self.client = client
        # How this UI reaches people (tui, web, ...): the daemon records it in decidedBy.
        self.via = via
        self.filter: Dict[str, str] = {k: v for k, v in (filter or {}).items() if v is not None}
        self.reconnect = reconnect
        self.resume_grace = resume_grace
        self.welcome: Optional[Welcome] = None
        self._on_withdrawn = on_withdrawn
        self._conn: Optional[Connection] = None
        self._gen = 0
        self._known: Dict[str, AsyncRequest] = {}
        self._acks: Dict[str, Tuple[asyncio.Future[Any], int]] = {}
        self._queue: Optional[asyncio.Queue[Any]] = None
        self._changed: Optional[asyncio.Future[None]] = None
        self._open_lock: Optional[asyncio.Lock] = None
        self._tasks = Tasks()
        self._opened = False
        self._closed = False

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def pending(self) -> List[AsyncRequest]:
        """The questions this UI holds that are still pending, oldest first."""
        return [r for r in self._known.values() if r.pending]

    async def __aenter__(self) -> AsyncSubscription:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __aiter__(self) -> AsyncSubscription:
        return self

    async def __anext__(self) -> AsyncRequest:
        while True:
            item = await self._next_item()
            if item is None:
                raise StopAsyncIteration
            if isinstance(item, AsyncRequest) and item.pending:
                return item

    def events(self) -> AsyncIterator[AsyncEvent]:
        """Questions and withdrawals, in the order the daemon sent them."""
        return self._events()

    async def _events(self) -> AsyncIterator[AsyncEvent]:
        while True:
            item = await self._next_item()
            if item is None:
                return
            yield item

    async def open(self) -> None:
        """Connects and subscribes (done by the first iteration otherwise). Raises
        ``DaemonUnreachable`` when no daemon answers."""
        if self._closed:
            raise ConnectionLost("this subscription is closed")
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
            self._queue = asyncio.Queue()
            self._changed = asyncio.get_running_loop().create_future()
        async with self._open_lock:
            if self._opened:
                return
            conn = await self._connect()
            self._install(conn)
            self._opened = True

    async def close(self) -> None:
        """Unsubscribes; iteration ends, answers in flight raise ``ConnectionLost``."""
        if self._closed:
            return
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        self._tasks.cancel_all()
        for fut, _ in self._acks.values():
            if not fut.done():
                fut.set_result(_LOST)
        self._acks.clear()
        for req in self._known.values():
            req._cancel_expiry()
        if self._queue is not None:
            self._queue.put_nowait(_END)
        self._notify()

    # -- internals ----------------------------------------------------------------------------

    async def _next_item(self) -> Optional[AsyncEvent]:
        if self._queue is None or not self._opened:
            await self.open()
        assert self._queue is not None
        item = await self._queue.get()
        if item is _END or isinstance(item, _Failure):
            self._queue.put_nowait(item)  # every later call ends the same way
            if isinstance(item, _Failure):
                raise item.error
            return None
        return cast(AsyncEvent, item)

    async def _connect(self) -> Connection:
        conn = await Connection.open(self.socket_path)
        try:
            self.welcome = await conn.handshake(self.client, self.via)
            await conn.send(_frames.subscribe(self.client, self.filter, self.via))
            while True:
                frame = await conn.recv()
                if frame is None:
                    raise ConnectionLost("askbusd closed the connection before subscribing us")
                if frame["type"] == "subscribed":
                    return conn
                if frame["type"] == "error":
                    raise _parse.parse_error(frame)
        except BaseException:
            conn.close()
            raise

    def _install(self, conn: Connection) -> None:
        self._gen += 1
        self._conn = conn
        gen = self._gen
        if any(r._confirmed_gen != gen for r in self._known.values()):
            asyncio.get_running_loop().call_later(
                self.resume_grace, self._drop_unconfirmed, gen
            )
        self._tasks.spawn(self._read_loop(conn, gen))
        self._notify()

    def _notify(self) -> None:
        """Wakes whatever waits for a change of connection or question state."""
        if self._changed is not None and not self._changed.done():
            self._changed.set_result(None)
        if not self._closed:
            self._changed = asyncio.get_running_loop().create_future()

    async def _wait_changed(self) -> None:
        assert self._changed is not None
        # Shielded: one waiter being cancelled must not cancel the future the others share.
        await asyncio.shield(self._changed)

    async def _read_loop(self, conn: Connection, gen: int) -> None:
        error: Optional[BaseException] = None
        try:
            while True:
                frame = await conn.recv()
                if frame is None:
                    break
                self._dispatch(frame, gen)
        except asyncio.CancelledError:
            conn.close()
            raise
        except Exception as e:
            if not isinstance(e, AskbusError):
                log.exception("askbus: unexpected error reading from askbusd")
            error = e
        finally:
            conn.close()
        self._connection_lost(conn, gen, error)

    def _dispatch(self, frame: Dict[str, Any], gen: int) -> None:
        parsed = _parse.parse_server_frame(frame)
        if isinstance(parsed, (_parse.UiRequest, _parse.ApprovalRequest)):
            self._on_request(parsed, gen)
        elif isinstance(parsed, (_parse.WithdrawnFrame, _parse.ApprovalWithdrawn)):
            req = self._known.get(parsed.correlation_id)
            if req is None:
                return
            if parsed.reason == "shutdown" and self.reconnect and not self._closed:
                # The daemon is stopping; its producers will ask the next one again.
                req._shutdown_seen = True
                req._confirmed_gen = None
                self._arm_expiry(req)
                self._notify()
                return
            self._withdraw(req, cast(WithdrawReason, parsed.reason))
        elif isinstance(parsed, _parse.Ack):
            entry = self._acks.pop(parsed.correlation_id, None)
            if entry is not None and not entry[0].done():
                entry[0].set_result(parsed.outcome)
        elif isinstance(parsed, _parse.ApprovalAck):
            entry = self._acks.pop(parsed.correlation_id, None)
            known = self._known.get(parsed.correlation_id)
            if isinstance(known, AsyncApproval):
                known.decision = parsed
            if entry is not None and not entry[0].done():
                entry[0].set_result(parsed.reason)
        elif isinstance(parsed, DaemonError):
            entry = (
                self._acks.pop(parsed.correlation_id, None) if parsed.correlation_id else None
            )
            if entry is not None and not entry[0].done():
                entry[0].set_result(parsed)
            else:
                log.warning("askbusd: %s: %s", parsed.code, parsed.message)

    def _on_request(
        self, frame: Union[_parse.UiRequest, _parse.ApprovalRequest], gen: int
    ) -> None:
        known = self._known.get(frame.correlation_id)
        if known is not None:
            # Already yielded and still pending (a replay after reconnecting, or its
            # producer's resend to a restarted daemon): the same object, not a duplicate.
            known._refresh(cast(Any, frame), gen)
            self._notify()
            return
        req: AsyncRequest = (
            AsyncApproval(self, frame, gen)
            if isinstance(frame, _parse.ApprovalRequest)
            else AsyncRequest(self, frame, gen)
        )
        self._known[req.correlation_id] = req
        assert self._queue is not None
        self._queue.put_nowait(req)

    def _withdraw(self, req: AsyncRequest, reason: WithdrawReason) -> None:
        if self._known.get(req.correlation_id) is req:
            del self._known[req.correlation_id]
        if req.withdrawn:
            return
        req._set_withdrawn(reason)
        if self._queue is not None:
            self._queue.put_nowait(Withdrawal(req.correlation_id, reason, req))
        if self._on_withdrawn is not None:
            try:
                self._on_withdrawn(req)
            except Exception:
                log.exception("askbus: on_withdrawn callback failed")
        self._notify()

    def _arm_expiry(self, req: AsyncRequest) -> None:
        if req._expiry is None:
            delay = max(0.0, req.deadline - time.monotonic())
            req._expiry = asyncio.get_running_loop().call_later(delay, self._expire, req)

    def _expire(self, req: AsyncRequest) -> None:
        req._expiry = None
        if self._known.get(req.correlation_id) is req and (
            self._conn is None or req._confirmed_gen != self._gen
        ):
            self._withdraw(req, "timeout")

    def _drop_unconfirmed(self, gen: int) -> None:
        if gen != self._gen or self._conn is None or self._closed:
            return
        for req in list(self._known.values()):
            if req._confirmed_gen != gen:
                self._withdraw(req, "shutdown" if req._shutdown_seen else "lost")

    def _connection_lost(
        self, conn: Connection, gen: int, error: Optional[BaseException]
    ) -> None:
        if self._conn is not conn:
            return
        self._conn = None
        for cid, (fut, fut_gen) in list(self._acks.items()):
            if fut_gen == gen:
                del self._acks[cid]
                if not fut.done():
                    fut.set_result(_LOST)
        if self._closed:
            return
        if error is not None:
            log.info("askbus: connection to %s lost: %s", self.socket_path, error)
        if not self.reconnect:
            for req in list(self._known.values()):
                self._withdraw(req, "lost")
            assert self._queue is not None
            self._queue.put_nowait(
                _Failure(error or ConnectionLost("askbusd closed the connection"))
            )
            self._notify()
            return
        for req in self._known.values():
            req._confirmed_gen = None
            self._arm_expiry(req)
        self._tasks.spawn(self._reconnect_loop())
        self._notify()

    async def _reconnect_loop(self) -> None:
        backoff = Backoff()
        while not self._closed:
            try:
                conn = await self._connect()
            except RETRIABLE as e:
                log.debug("askbus: resubscribing to %s: %s", self.socket_path, e)
                await asyncio.sleep(backoff.next())
                continue
            except AskbusError as e:
                assert self._queue is not None
                self._queue.put_nowait(_Failure(e))
                return
            if self._closed:
                conn.close()
                return
            self._install(conn)
            return

    async def _answer(
        self,
        req: AsyncRequest,
        answers: Dict[str, str],
        cancelled: bool,
        frame: Optional[Dict[str, Any]] = None,
    ) -> AckOutcome:
        if req._answer_lock is None:
            req._answer_lock = asyncio.Lock()
        cid = req.correlation_id
        async with req._answer_lock:
            sent = False
            while True:
                if req.outcome is not None:
                    raise NotPending(
                        f"question {cid} was already {req.outcome} by this UI",
                        correlation_id=cid,
                    )
                if req.withdrawn:
                    if sent:
                        raise ConnectionLost(
                            "the connection to askbusd was lost before it acknowledged the "
                            f"answer, and the question then ended ({req.withdraw_reason}): "
                            "the producer may or may not have received it",
                            correlation_id=cid,
                        )
                    raise NotPending(
                        f"question {cid} is no longer pending ({req.withdraw_reason})",
                        correlation_id=cid,
                        withdraw_reason=req.withdraw_reason,
                    )
                if self._closed:
                    raise ConnectionLost("this subscription is closed", correlation_id=cid)
                conn, gen = self._conn, self._gen
                if conn is None or req._confirmed_gen != gen:
                    # Reconnecting, or the question has not come back yet: wait for either.
                    await self._wait_changed()
                    continue
                fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                self._acks[cid] = (fut, gen)
                sent = True
                try:
                    await conn.send(
                        frame
                        if frame is not None
                        else _frames.ask_user_response(cid, answers, cancelled)
                    )
                except ConnectionLost:
                    pass  # the reader reports the drop to `fut`
                try:
                    result = await fut
                finally:
                    if self._acks.get(cid, (None,))[0] is fut:
                        del self._acks[cid]
                if result is _LOST:
                    continue
                if isinstance(result, DaemonError):
                    if isinstance(result, NotPending):
                        result.withdraw_reason = req.withdraw_reason
                    raise result
                req.outcome = cast(AckOutcome, result)
                req._cancel_expiry()
                if self._known.get(cid) is req:
                    del self._known[cid]
                self._notify()
                return req.outcome


def subscribe(
    socket: Optional[PathLike] = None,
    *,
    client: Optional[str] = None,
    filter: Optional[Mapping[str, str]] = None,
    on_withdrawn: Optional[Callable[[AsyncRequest], object]] = None,
    reconnect: bool = True,
    resume_grace: float = 3.0,
    via: Optional[str] = None,
) -> AsyncSubscription:
    """A UI subscription: ``async for req in subscribe(): await req.answer({...})``, or
    ``async with subscribe() as sub:`` to connect (and fail) before iterating. ``filter``:
    see ``AsyncSubscription``."""
    return AsyncSubscription(
        socket,
        client=client,
        filter=filter,
        on_withdrawn=on_withdrawn,
        reconnect=reconnect,
        resume_grace=resume_grace,
        via=via,
    )

