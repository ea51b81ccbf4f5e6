"""The producer role: ``AsyncProducer`` asks questions (``ask``) and approvals (``confirm``)
on one connection, matches their terminal frames on correlationId, and across a daemon
restart reconnects and resends each pending request with what is left of its deadline. Also
the one-shot ``ask`` and ``stats``. Re-exported by ``askbus.aio``."""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from typing import Any, Dict, List, Mapping, Optional, Union, cast

from . import _frames, _parse
from ._conn import Connection
from ._paths import PathLike, resolve_socket
from ._pending import PendingAsk
from ._reconnect import RETRIABLE, Backoff, Tasks
from .errors import (
    AskbusError,
    ConnectionLost,
    DaemonError,
    DaemonUnreachable,
    DuplicateCorrelationId,
    FrameTooLarge,
    NotPending,
    ProtocolError,
    Withdrawn,
)
from .types import (
    ApprovalResponse,
    Confirmation,
    NoUiPolicy,
    Question,
    RequestContext,
    Response,
    Welcome,
)

__all__ = ["AsyncProducer", "ask", "new_correlation_id", "stats"]

log = logging.getLogger("askbus")


def new_correlation_id() -> str:
    """A correlationId no other producer will pick: a random UUID."""
    return uuid.uuid4().hex


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
        self._asks: Dict[str, PendingAsk] = {}
        self._stats_waiters: List[asyncio.Future[Dict[str, Any]]] = []
        self._reconnector: Optional[asyncio.Task[None]] = None
        # asyncio primitives are made on first use, inside the loop that runs this producer
        # (Python 3.9 binds them to the loop current when they are created).
        self._connect_lock: Optional[asyncio.Lock] = None
        self._tasks = Tasks()
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
        pa = PendingAsk(cid, questions, timeout_ms, no_ui, loop.create_future(), wire_context)
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
        pa = PendingAsk(
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

    async def _request(self, pa: PendingAsk) -> Any:
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

    async def _send_ask(self, pa: PendingAsk) -> None:
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

    def _give_up(self, pa: PendingAsk) -> None:
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
                _parse.parse_response(frame)
                if kind == "ask-user-response"
                else _parse.parse_approval_response(frame)
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
            err = _parse.parse_error(frame)
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

    async def _resend_later(self, pa: PendingAsk, delay: float) -> None:
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
        backoff = Backoff()
        try:
            while not self._closed and any(not pa.done for pa in self._asks.values()):
                if self._conn is None:
                    self._expire()
                    if all(pa.done for pa in self._asks.values()):
                        return
                    try:
                        await self.connect()
                    except RETRIABLE as e:
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
