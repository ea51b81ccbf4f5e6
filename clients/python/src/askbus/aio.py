"""The asyncio API, and the one implementation of both roles (the blocking API runs it on a
background thread):

- producers: ``await ask(questions)``, or an ``AsyncProducer`` for many asks on one
  connection, concurrent ones included (matched on correlationId). If the connection drops
  while questions are pending (the daemon restarted), the producer reconnects with backoff and
  resends each question with its correlationId and its remaining time, until its deadline;
- UIs: ``async for req in subscribe(): await req.answer({"0": "SQLite"})``. The subscription
  reconnects likewise, takes the replay, and never yields a question it already yielded that
  is still pending;
- observers: ``async for event in watch()``: who asked, who answered and how long, for ops.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import threading
import time
import uuid
from typing import (
    Any,
    AsyncIterator,
    Callable,
    Coroutine,
    Dict,
    List,
    Mapping,
    Optional,
    Set,
    Tuple,
    Union,
    cast,
)

from . import _frames
from ._conn import Connection
from ._paths import PathLike, resolve_socket
from .errors import (
    AskbusError,
    ConnectionLost,
    DaemonError,
    DaemonUnreachable,
    DuplicateCorrelationId,
    FrameTooLarge,
    NotPending,
    ProtocolError,
    TooManyConnections,
    Withdrawn,
)
from .types import (
    AckOutcome,
    Answers,
    ApprovalResponse,
    BusEvent,
    Confirmation,
    NoUiPolicy,
    ProducerInfo,
    Question,
    RequestContext,
    Response,
    Welcome,
    WithdrawReason,
    Withdrawal,
)

__all__ = [
    "AsyncApproval",
    "AsyncProducer",
    "AsyncRequest",
    "AsyncSubscription",
    "AsyncWatch",
    "ask",
    "new_correlation_id",
    "stats",
    "subscribe",
    "watch",
]

log = logging.getLogger("askbus")

#: Errors after which connecting again may succeed (the daemon is restarting, or busy).
_RETRIABLE = (DaemonUnreachable, ConnectionLost, ProtocolError, TooManyConnections)


def new_correlation_id() -> str:
    """A correlationId no other producer will pick: a random UUID."""
    return uuid.uuid4().hex


class _Backoff:
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


class _Tasks:
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


# =============================================================================================
# Producers.


class _PendingAsk:
    """One request (a question, or with ``approval`` an approval) this producer is waiting on."""

    def __init__(
        self,
        correlation_id: str,
        questions: Any,
        timeout_ms: Optional[int],
        no_ui: Optional[str],
        future: asyncio.Future[Any],
        context: Optional[Dict[str, str]] = None,
        approval: Optional[Dict[str, Any]] = None,
    ) -> None:
        self.correlation_id = correlation_id
        self.questions = questions
        #: The approval's fields (tool_call, details, outcomes, ...), None for a question.
        self.approval = approval
        self.timeout_ms = timeout_ms
        self.no_ui = no_ui
        self.context = context
        self.future = future
        #: time.monotonic() after which the question is over; set at its first send.
        self.deadline: Optional[float] = None
        self.sends = 0
        #: The connection generation the daemon has (or is about to have) it on.
        self.live_gen: Optional[int] = None
        self.cancel_requested = False
        #: A daemon that shut down answered `shutdown`; returned if no daemon comes back.
        self.shutdown_response: Optional[Response] = None
        self.last_error: Optional[AskbusError] = None
        self.dup_backoff = _Backoff()

    def set_deadline(self, welcome: Welcome, now: float) -> None:
        timeout = self.timeout_ms
        if timeout is None or timeout < 1:
            # A non-positive timeout is the daemon's to reject; until then use its default.
            timeout = welcome.default_timeout_ms
        self.deadline = now + min(timeout, welcome.max_timeout_ms) / 1000.0

    @property
    def done(self) -> bool:
        return self.future.done()

    def frame(self, timeout_ms: Optional[int]) -> Dict[str, Any]:
        if self.approval is not None:
            return _frames.tool_confirmation_request(
                self.correlation_id,
                timeout_ms=timeout_ms,
                no_ui=self.no_ui,
                context=self.context,
                **self.approval,
            )
        return _frames.ask_user_request(
            self.correlation_id, self.questions, timeout_ms, self.no_ui, self.context
        )

    def cancel_frame(self) -> Dict[str, Any]:
        if self.approval is not None:
            return _frames.tool_confirmation_cancel(self.correlation_id)
        return _frames.ask_user_cancel(self.correlation_id)

    def resolve(self, response: Any) -> None:
        if not self.future.done():
            self.future.set_result(response)

    def fail(self, error: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(error)


class AsyncProducer:
    """A producer connection to askbusd for any number of asks, concurrent ones included.

    Use it as ``async with AsyncProducer() as p: r = await p.ask(questions)``. It connects on
    first use; ``connect()`` raises ``DaemonUnreachable`` when no daemon answers. With
    ``reconnect`` (the default), a dropped connection (daemon restart, SIGTERM or SIGKILL) is
    re-established with backoff and every pending question is asked again under the same
    correlationId with its remaining time, so it reaches the UIs of the new daemon; a
    ``shutdown`` answer from a daemon that is stopping is treated the same way, and so is an
    ``ask`` made after the connection dropped while nothing was pending. Only when a
    question's deadline passes with no daemon to take it does its ``ask`` end: with that
    ``shutdown`` response if there was one, else ``DaemonUnreachable``.

    ``context`` (a ``RequestContext`` or a mapping of its fields: ``agent``, ``session``,
    ``project``, ``cwd``, ``title``) says who is asking, about what; UIs show it and filter on
    it. It goes with every question, on top of what the ``ASKBUS_AGENT``, ``ASKBUS_SESSION``,
    ``ASKBUS_PROJECT``, ``ASKBUS_CWD`` and ``ASKBUS_TITLE`` environment variables say, and an
    ``ask``'s own ``context`` overrides it field by field.
    """

    def __init__(
        self,
        socket: Optional[PathLike] = None,
        *,
        client: Optional[str] = None,
        reconnect: bool = True,
        context: Union[RequestContext, Mapping[str, Optional[str]], None] = None,
    ) -> None:
        self.socket_path = resolve_socket(socket)
        self.client = client
        self.context = RequestContext.from_env().merged(RequestContext.of(context))
        self.reconnect = reconnect
        self.welcome: Optional[Welcome] = None
        self._conn: Optional[Connection] = None
        self._gen = 0
        self._asks: Dict[str, _PendingAsk] = {}
        self._stats_waiters: List[asyncio.Future[Dict[str, Any]]] = []
        self._reconnector: Optional[asyncio.Task[None]] = None
        # asyncio primitives are made on first use, inside the loop that runs this producer
        # (Python 3.9 binds them to the loop current when they are created).
        self._connect_lock: Optional[asyncio.Lock] = None
        self._tasks = _Tasks()
        self._closed = False

    @property
    def connected(self) -> bool:
        return self._conn is not None

    @property
    def pending(self) -> List[str]:
        """correlationIds of the questions this producer is waiting on."""
        return list(self._asks)

    async def __aenter__(self) -> AsyncProducer:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Connects (``hello``/``welcome``) unless connected already."""
        if self._closed:
            raise ConnectionLost("this producer is closed")
        if self._connect_lock is None:
            self._connect_lock = asyncio.Lock()
        async with self._connect_lock:
            if self._conn is not None:
                return
            conn = await Connection.open(self.socket_path)
            try:
                welcome = await conn.handshake(self.client)
            except BaseException:
                conn.close()
                raise
            if self._closed:
                conn.close()
                raise ConnectionLost("this producer is closed")
            self._gen += 1
            self._conn = conn
            self.welcome = welcome
            self._tasks.spawn(self._read_loop(conn))

    async def ask(
        self,
        questions: Union[List[Question], List[Dict[str, Any]], Any],
        *,
        timeout_ms: Optional[int] = None,
        no_ui: Optional[NoUiPolicy] = None,
        correlation_id: Optional[str] = None,
        context: Union[RequestContext, Mapping[str, Optional[str]], None] = None,
    ) -> Response:
        """Asks and waits for the one terminal response. ``context`` overrides the
        producer's, field by field.

        Returns the ``Response`` for every outcome (answered, dismissed, timeout, no-ui,
        withdrawn, shutdown; see ``Response.raise_for_outcome``). Raises ``InvalidRequest``
        (with the reference tool's message) and the other ``DaemonError`` subclasses when the
        daemon refuses the request, and ``DaemonUnreachable`` when no daemon can be reached.
        Cancelling the awaiting task withdraws the question from the UIs.
        """
        cid = _frames.check_correlation_id(
            new_correlation_id() if correlation_id is None else correlation_id
        )
        if timeout_ms is not None and (
            isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int)
        ):
            raise TypeError(f"timeout_ms must be an int, not {type(timeout_ms).__name__}")
        # Fail here, in the caller, on values JSON cannot carry (the daemon never sees them).
        wire_context = self.context.merged(RequestContext.of(context)).to_wire()
        _frames.encode(_frames.ask_user_request(cid, questions, timeout_ms, no_ui, wire_context))
        if cid in self._asks:
            raise DuplicateCorrelationId(
                f"correlationId {cid!r} is already pending on this producer",
                correlation_id=cid,
            )
        loop = asyncio.get_running_loop()
        pa = _PendingAsk(cid, questions, timeout_ms, no_ui, loop.create_future(), wire_context)
        return cast(Response, await self._request(pa))

    async def confirm(
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
        """Asks a person to approve an agent's tool call (a ``tool-confirmation-request``,
        Gemini CLI core's: ``tool_call`` is ``{"name": ..., "args": {...}}``, ``details`` its
        ``SerializableConfirmationDetails``, ``outcomes`` what the agent can act on beyond
        ``proceed_once`` and ``cancel``) and waits for the decision.

        Never raises for how it ended: the ``Confirmation`` is ``confirmed`` only when a person
        approved; every other end (dismissed, timeout, no-ui, withdrawn, shutdown, a refused
        request, no daemon before the deadline) is ``confirmed=False`` with the reason and a
        message for the agent. Raises ``TypeError`` for arguments that cannot be sent at all.
        Cancelling the awaiting task withdraws the request from the UIs.
        """
        cid = _frames.check_correlation_id(
            new_correlation_id() if correlation_id is None else correlation_id
        )
        if timeout_ms is not None and (
            isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int)
        ):
            raise TypeError(f"timeout_ms must be an int, not {type(timeout_ms).__name__}")
        if not isinstance(tool_call, Mapping):
            raise TypeError(f"tool_call must be a mapping, not {type(tool_call).__name__}")
        approval: Dict[str, Any] = {
            "tool_call": tool_call,
            "details": details,
            "outcomes": outcomes,
            "server_name": server_name,
            "tool_annotations": tool_annotations,
            "subagent": subagent,
        }
        wire_context = self.context.merged(RequestContext.of(context)).to_wire()
        loop = asyncio.get_running_loop()
        pa = _PendingAsk(
            cid, None, timeout_ms, no_ui, loop.create_future(), wire_context, approval
        )
        _frames.encode(pa.frame(timeout_ms))
        try:
            response = await self._request(pa)
        except AskbusError as e:
            return _failed_confirmation(cid, e)
        if not isinstance(response, ApprovalResponse):
            return _failed_confirmation(
                cid, ProtocolError("askbusd answered an approval with a question's response")
            )
        return Confirmation.from_response(response)

    async def _request(self, pa: _PendingAsk) -> Any:
        """Sends a request and waits for its terminal frame (or the error that ended it)."""
        cid = pa.correlation_id
        if cid in self._asks:
            raise DuplicateCorrelationId(
                f"correlationId {cid!r} is already pending on this producer",
                correlation_id=cid,
            )
        self._asks[cid] = pa
        try:
            if self._conn is None and self._reconnector is None:
                if self._gen > 0 and self.reconnect and self.welcome is not None:
                    # Connected before, and the connection dropped while nothing was pending
                    # (the daemon restarting while this producer was idle): wait for a daemon
                    # within the question's deadline, as a pending question does, rather than
                    # fail because the ask fell in the restart window.
                    pa.set_deadline(self.welcome, time.monotonic())
                    self._reconnector = self._tasks.spawn(self._reconnect_loop())
                else:
                    await self.connect()
            # While a reconnection is under way the question waits for it, like the others.
            await self._send_ask(pa)
            return await pa.future
        except asyncio.CancelledError:
            # Awaiting the future and being cancelled cancels the future too; only a future
            # that holds a result means the question has ended.
            ended = pa.future.done() and not pa.future.cancelled()
            conn = self._conn
            if conn is not None and pa.live_gen == self._gen and not ended:
                # Awaited, not spawned: a process that exits right after its ask was
                # cancelled (Ctrl-C) still withdraws the question rather than abandon it.
                await _send_quietly(conn, pa.cancel_frame())
            raise
        finally:
            if self._asks.get(cid) is pa:
                del self._asks[cid]

    async def cancel(self, correlation_id: str) -> bool:
        """Withdraws a question this producer asked: its ``ask`` returns reason
        ``withdrawn``. Returns False if this producer has no such question pending.

        A question withdrawn while no daemon holds it (during a reconnection) ends its ``ask``
        with ``Withdrawn`` raised instead, there being no daemon response to return."""
        pa = self._asks.get(correlation_id)
        if pa is None or pa.done:
            return False
        pa.cancel_requested = True
        conn = self._conn
        if conn is not None and pa.live_gen == self._gen:
            try:
                await conn.send(pa.cancel_frame())
                return True
            except ConnectionLost:
                pass
        pa.fail(
            Withdrawn(
                "the question was withdrawn while askbusd did not hold it",
                correlation_id=correlation_id,
            )
        )
        return True

    async def stats(self) -> Dict[str, Any]:
        """The daemon's live counters (the ``stats`` frame, without its ``type``)."""
        await self.connect()
        conn = self._conn
        assert conn is not None
        waiter: asyncio.Future[Dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._stats_waiters.append(waiter)
        await conn.send(_frames.stats())
        return await waiter

    async def close(self) -> None:
        """Closes the connection; questions still pending end with ``ConnectionLost`` (the
        daemon withdraws them from the UIs)."""
        if self._closed:
            return
        self._closed = True
        if self._reconnector is not None:
            self._reconnector.cancel()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        self._tasks.cancel_all()
        for pa in list(self._asks.values()):
            pa.fail(ConnectionLost("the producer was closed", correlation_id=pa.correlation_id))
        for waiter in self._stats_waiters:
            if not waiter.done():
                waiter.set_exception(ConnectionLost("the producer was closed"))
        self._stats_waiters.clear()

    # -- internals ----------------------------------------------------------------------------

    async def _send_ask(self, pa: _PendingAsk) -> None:
        """Sends (or resends) a question on the current connection, unless it is there."""
        conn, gen, welcome = self._conn, self._gen, self.welcome
        if conn is None or welcome is None or pa.done or pa.live_gen == gen:
            return
        if pa.cancel_requested:
            pa.fail(
                Withdrawn(
                    "the question was withdrawn while askbusd did not hold it",
                    correlation_id=pa.correlation_id,
                )
            )
            return
        now = time.monotonic()
        timeout_ms = pa.timeout_ms
        if pa.deadline is None:
            pa.set_deadline(welcome, now)
        else:
            # A resend, or a first send that waited for a daemon: what is left of the deadline.
            remaining = pa.deadline - now
            if remaining <= 0:
                self._give_up(pa)
                return
            # The same deadline on the new daemon: what is left of it, not a fresh timeout.
            timeout_ms = max(1, math.ceil(remaining * 1000))
        payload = _frames.encode(pa.frame(timeout_ms))
        if len(payload) > welcome.max_frame_bytes:
            # Sent, it would make the daemon close the connection every other question shares.
            pa.fail(
                FrameTooLarge(
                    f"the request is {len(payload)} bytes; askbusd accepts frames of at most "
                    f"{welcome.max_frame_bytes} bytes",
                    correlation_id=pa.correlation_id,
                )
            )
            return
        pa.live_gen = gen
        pa.sends += 1
        try:
            await conn.send_payload(payload)
        except ConnectionLost:
            pass  # the reader sees the drop; the question goes out again on the next connection

    def _give_up(self, pa: _PendingAsk) -> None:
        if pa.shutdown_response is not None:
            pa.resolve(pa.shutdown_response)
        elif pa.last_error is not None:
            pa.fail(pa.last_error)
        else:
            pa.fail(
                DaemonUnreachable(
                    self.socket_path,
                    f"lost the connection to askbusd at {self.socket_path} and could not hand "
                    "the question to a daemon again before its deadline",
                    correlation_id=pa.correlation_id,
                )
            )

    async def _read_loop(self, conn: Connection) -> None:
        error: Optional[BaseException] = None
        try:
            while True:
                frame = await conn.recv()
                if frame is None:
                    break
                self._dispatch(frame)
        except asyncio.CancelledError:
            conn.close()
            raise
        except Exception as e:
            if not isinstance(e, AskbusError):
                log.exception("askbus: unexpected error reading from askbusd")
            error = e
        finally:
            conn.close()
        self._connection_lost(conn, error)

    def _dispatch(self, frame: Dict[str, Any]) -> None:
        kind = frame["type"]
        if kind in ("ask-user-response", "tool-confirmation-response"):
            response: Any = (
                _frames.parse_response(frame)
                if kind == "ask-user-response"
                else _frames.parse_approval_response(frame)
            )
            pa = self._asks.get(response.correlation_id)
            if pa is None:
                return
            if response.reason == "shutdown" and self.reconnect and not pa.cancel_requested:
                # The daemon is stopping; a new one will take the question again.
                pa.shutdown_response = response
                return
            pa.resolve(response)
        elif kind == "error":
            err = _frames.parse_error(frame)
            self._on_error(err)
        elif kind == "stats":
            if self._stats_waiters:
                waiter = self._stats_waiters.pop(0)
                if not waiter.done():
                    waiter.set_result({k: v for k, v in frame.items() if k != "type"})

    def _on_error(self, err: DaemonError) -> None:
        cid = err.correlation_id
        pa = self._asks.get(cid) if cid is not None else None
        if pa is None or err.code == "not-pending":
            # not-pending answers a cancel that crossed the question's own end: the response
            # already reached (or is about to reach) the ask.
            log.debug("askbusd: %s: %s", err.code, err.message)
            return
        resend = (err.code == "duplicate-correlation-id" and pa.sends > 1) or (
            err.code == "store-unavailable"
        )
        if resend and not pa.cancel_requested:
            # A resend found the id still pending (the daemon has not yet dropped the question
            # of our previous connection), or the daemon's store cannot write for now: ask
            # again shortly, until the deadline.
            pa.live_gen = None
            pa.last_error = err
            self._tasks.spawn(self._resend_later(pa, pa.dup_backoff.next()))
            return
        pa.fail(err)

    async def _resend_later(self, pa: _PendingAsk, delay: float) -> None:
        await asyncio.sleep(delay)
        if self._asks.get(pa.correlation_id) is pa:
            await self._send_ask(pa)

    def _connection_lost(self, conn: Connection, error: Optional[BaseException]) -> None:
        if self._conn is not conn:
            return
        self._conn = None
        for waiter in self._stats_waiters:
            if not waiter.done():
                waiter.set_exception(ConnectionLost("the connection to askbusd was lost"))
        self._stats_waiters.clear()
        if self._closed or not self._asks:
            return
        if error is not None:
            log.info("askbus: connection to %s lost: %s", self.socket_path, error)
        if not self.reconnect:
            for pa in list(self._asks.values()):
                if pa.shutdown_response is not None:
                    pa.resolve(pa.shutdown_response)
                else:
                    pa.fail(
                        ConnectionLost(
                            "the connection to askbusd was lost before the question ended",
                            correlation_id=pa.correlation_id,
                        )
                    )
            return
        if self._reconnector is None:
            self._reconnector = self._tasks.spawn(self._reconnect_loop())

    def _expire(self) -> None:
        now = time.monotonic()
        for pa in list(self._asks.values()):
            if pa.deadline is not None and pa.deadline <= now:
                self._give_up(pa)

    def _until_earliest_deadline(self) -> float:
        deadlines = [pa.deadline for pa in self._asks.values() if pa.deadline is not None]
        if not deadlines:
            return math.inf
        return max(0.001, min(deadlines) - time.monotonic())

    async def _reconnect_loop(self) -> None:
        backoff = _Backoff()
        try:
            while not self._closed and any(not pa.done for pa in self._asks.values()):
                if self._conn is None:
                    self._expire()
                    if all(pa.done for pa in self._asks.values()):
                        return
                    try:
                        await self.connect()
                    except _RETRIABLE as e:
                        log.debug("askbus: reconnecting to %s: %s", self.socket_path, e)
                        await asyncio.sleep(min(backoff.next(), self._until_earliest_deadline()))
                        continue
                    except AskbusError as e:
                        # unsupported-protocol, forbidden: no retry can change that.
                        for pa in list(self._asks.values()):
                            pa.fail(e)
                        return
                conn = self._conn
                for pa in list(self._asks.values()):
                    await self._send_ask(pa)
                if self._conn is conn:
                    return
        finally:
            self._reconnector = None


def _failed_confirmation(cid: str, error: AskbusError) -> Confirmation:
    """A confirmation that no person decided because of ``error``: never an approval."""
    if isinstance(error, Withdrawn):
        reason: Any = "withdrawn"
    elif isinstance(error, DaemonError) and not isinstance(error, NotPending):
        reason = "refused"
    else:
        reason = "daemon-lost"
    return Confirmation(
        correlation_id=cid,
        confirmed=False,
        outcome="cancel",
        reason=reason,
        message=f"{error}; the tool call was not approved.",
        error=error,
    )


async def _send_quietly(conn: Connection, frame: Mapping[str, Any]) -> None:
    try:
        await conn.send(frame)
    except ConnectionLost:
        pass


async def ask(
    questions: Union[List[Question], List[Dict[str, Any]], Any],
    *,
    timeout_ms: Optional[int] = None,
    no_ui: Optional[NoUiPolicy] = None,
    socket: Optional[PathLike] = None,
    client: Optional[str] = None,
    correlation_id: Optional[str] = None,
    context: Union[RequestContext, Mapping[str, Optional[str]], None] = None,
) -> Response:
    """Asks once on a connection of its own; see ``AsyncProducer.ask``."""
    async with AsyncProducer(socket, client=client, context=context) as producer:
        return await producer.ask(
            questions, timeout_ms=timeout_ms, no_ui=no_ui, correlation_id=correlation_id
        )


async def stats(socket: Optional[PathLike] = None) -> Dict[str, Any]:
    """The daemon's live counters."""
    async with AsyncProducer(socket, reconnect=False) as producer:
        return await producer.stats()


# =============================================================================================
# UIs.

_LOST: Any = object()  # an answer's connection dropped before the daemon replied
_END: Any = object()  # the subscription was closed


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class AsyncRequest:
    """A pending question as a UI sees it.

    ``questions`` are the normalized questions; ``timeout_ms`` is what was left when the
    daemon sent it (``remaining_ms`` is what is left now). ``withdrawn`` and
    ``withdraw_reason`` say whether and why it left the UIs before this UI answered it (the
    subscription's ``on_withdrawn`` callback and ``events()`` report it too, and
    ``wait_withdrawn()`` waits for it); ``outcome`` is set once this UI's own answer won.
    """

    def __init__(
        self, subscription: AsyncSubscription, frame: _frames.UiRequest, gen: int
    ) -> None:
        self._subscription = subscription
        self.correlation_id = frame.correlation_id
        # An approval (AsyncApproval) has no questions.
        self.questions = cast(List[Question], getattr(frame, "questions", []))
        self.timeout_ms = frame.timeout_ms
        self.producer: ProducerInfo = frame.producer
        #: Who is asking, about what (``None`` when the producer did not say).
        self.context: Optional[RequestContext] = frame.context
        self.received_at = time.monotonic()
        #: time.monotonic() at which the daemon times it out.
        self.deadline = self.received_at + frame.timeout_ms / 1000.0
        self.withdrawn = False
        self.withdraw_reason: Optional[WithdrawReason] = None
        self.outcome: Optional[AckOutcome] = None
        self._confirmed_gen: Optional[int] = gen
        self._shutdown_seen = False
        self._expiry: Optional[asyncio.TimerHandle] = None
        self._withdrawn_flag = threading.Event()
        self._withdrawn_waiters: List[asyncio.Future[WithdrawReason]] = []
        self._answer_lock: Optional[asyncio.Lock] = None
        self._proxy: Any = None  # the blocking API's wrapper, made by askbus.Subscription

    @property
    def pending(self) -> bool:
        """Still open for this UI to answer."""
        return not self.withdrawn and self.outcome is None

    @property
    def remaining_ms(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))

    async def answer(self, answers: Answers) -> AckOutcome:
        """Sends this UI's answers (question index to text; see ``askbus.answers`` for the
        encoding Gemini CLI's own dialog uses). Returns ``"answered"`` once the daemon
        acknowledged that the producer is being sent them. Raises ``NotPending`` if the
        question is gone (another UI answered first: ``withdraw_reason == "answered"``),
        ``InvalidResponse`` for an index past the last question."""
        return await self._subscription._answer(self, _frames.normalize_answers(answers), False)

    async def dismiss(self) -> AckOutcome:
        """Dismisses the dialog (the producer gets reason ``dismissed``); returns
        ``"dismissed"`` once acknowledged, raises as ``answer`` does."""
        return await self._subscription._answer(self, {}, True)

    async def wait_withdrawn(self) -> WithdrawReason:
        """Waits until the question is withdrawn and returns why (at once if it was)."""
        if self.withdraw_reason is not None:
            return self.withdraw_reason
        waiter: asyncio.Future[WithdrawReason] = asyncio.get_running_loop().create_future()
        self._withdrawn_waiters.append(waiter)
        return await waiter

    def _refresh(self, frame: _frames.UiRequest, gen: int) -> None:
        self.timeout_ms = frame.timeout_ms
        self.producer = frame.producer
        self.context = frame.context
        self.deadline = time.monotonic() + frame.timeout_ms / 1000.0
        self._confirmed_gen = gen
        self._shutdown_seen = False
        self._cancel_expiry()

    def _cancel_expiry(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None

    def _set_withdrawn(self, reason: WithdrawReason) -> None:
        self.withdrawn = True
        self.withdraw_reason = reason
        self._cancel_expiry()
        self._withdrawn_flag.set()
        for waiter in self._withdrawn_waiters:
            if not waiter.done():
                waiter.set_result(reason)
        self._withdrawn_waiters.clear()

    def __repr__(self) -> str:
        state = (
            f"withdrawn={self.withdraw_reason!r}"
            if self.withdrawn
            else (f"outcome={self.outcome!r}" if self.outcome else "pending")
        )
        return f"<AsyncRequest {self.correlation_id} {state} questions={len(self.questions)}>"


class AsyncApproval(AsyncRequest):
    """A pending approval (an agent's tool call) as a UI sees it, with the same lifecycle as
    a question (``pending``, ``withdrawn``, ``remaining_ms``, ``wait_withdrawn``).

    ``tool_call`` is ``{"name", "args"}``; ``details`` Gemini CLI core's
    ``SerializableConfirmationDetails`` (``type`` ``exec``, ``edit``, ``mcp``, ``info``, ...),
    as the producer sent them; ``outcomes`` the choices the UI may offer. Decide it with
    ``allow()``, ``deny(reason)`` or ``dismiss()``; ``questions`` is empty and ``answer``
    refuses (an approval is not a question). ``decision`` is the daemon's ack once this UI's
    decision won.
    """

    def __init__(
        self, subscription: AsyncSubscription, frame: _frames.ApprovalRequest, gen: int
    ) -> None:
        super().__init__(subscription, cast(Any, frame), gen)
        self.tool_call: Dict[str, Any] = frame.tool_call
        self.details: Optional[Dict[str, Any]] = frame.details
        self.outcomes: List[str] = frame.outcomes
        self.server_name: Optional[str] = frame.server_name
        self.tool_annotations: Optional[Dict[str, Any]] = frame.tool_annotations
        self.subagent: Optional[str] = frame.subagent
        self.decision: Optional[_frames.ApprovalAck] = None

    @property
    def tool(self) -> str:
        """``toolCall.name``."""
        return str(self.tool_call.get("name", ""))

    async def answer(self, answers: Answers) -> AckOutcome:
        raise TypeError("an approval is decided with allow(), deny() or dismiss(), not answer()")

    async def allow(
        self,
        outcome: str = "proceed_once",
        *,
        message: Optional[str] = None,
        payload: Optional[Mapping[str, Any]] = None,
    ) -> AckOutcome:
        """Approves the call with ``outcome`` (one of ``outcomes``: ``"proceed_always"`` for
        "Allow always" where offered). Returns ``"answered"`` once the daemon acknowledged it;
        raises ``NotPending`` if another UI was first, ``InvalidResponse`` (and the approval
        stays pending) for an outcome the request does not offer, ``ValueError`` for
        ``"cancel"`` (use ``deny``)."""
        if outcome == "cancel":
            raise ValueError("cancel denies the call: use deny()")
        frame = _frames.tool_confirmation_response(
            self.correlation_id, True, outcome, message, payload
        )
        return await self._subscription._answer(self, {}, False, frame)

    async def deny(self, reason: Optional[str] = None) -> AckOutcome:
        """Denies the call; ``reason`` is what the agent is told. Returns ``"answered"``."""
        frame = _frames.tool_confirmation_response(
            self.correlation_id, False, "cancel", reason or None
        )
        return await self._subscription._answer(self, {}, False, frame)

    async def dismiss(self) -> AckOutcome:
        """Closes it without deciding (never an approval); returns ``"dismissed"``."""
        frame = _frames.tool_confirmation_response(self.correlation_id, dismissed=True)
        return await self._subscription._answer(self, {}, True, frame)

    def __repr__(self) -> str:
        state = (
            f"withdrawn={self.withdraw_reason!r}"
            if self.withdrawn
            else (f"outcome={self.outcome!r}" if self.outcome else "pending")
        )
        return f"<AsyncApproval {self.correlation_id} {state} tool={self.tool!r}>"


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
        self._tasks = _Tasks()
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
                    raise _frames.parse_error(frame)
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
        parsed = _frames.parse_server_frame(frame)
        if isinstance(parsed, (_frames.UiRequest, _frames.ApprovalRequest)):
            self._on_request(parsed, gen)
        elif isinstance(parsed, (_frames.WithdrawnFrame, _frames.ApprovalWithdrawn)):
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
        elif isinstance(parsed, _frames.Ack):
            entry = self._acks.pop(parsed.correlation_id, None)
            if entry is not None and not entry[0].done():
                entry[0].set_result(parsed.outcome)
        elif isinstance(parsed, _frames.ApprovalAck):
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
        self, frame: Union[_frames.UiRequest, _frames.ApprovalRequest], gen: int
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
            if isinstance(frame, _frames.ApprovalRequest)
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
        backoff = _Backoff()
        while not self._closed:
            try:
                conn = await self._connect()
            except _RETRIABLE as e:
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


# =============================================================================================
# Observers.


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
                    raise _frames.parse_error(frame)
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
                return _frames.parse_bus_event(frame)
            if frame["type"] == "error":
                err = _frames.parse_error(frame)
                log.warning("askbusd: %s: %s", err.code, err.message)

    async def close(self) -> None:
        self._closed = True
        if self._conn is not None:
            self._conn.close()


def watch(socket: Optional[PathLike] = None, *, client: Optional[str] = None) -> AsyncWatch:
    """Observes the bus: ``async for event in watch(): print(event.event, event.latency_ms)``."""
    return AsyncWatch(socket, client=client)
