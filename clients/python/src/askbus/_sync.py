"""The blocking API: ``ask()``, ``Producer``, ``subscribe()``, ``Subscription``,
``Request`` and ``watch()``. Each runs the asyncio implementation (``askbus.aio``) on one shared background
I/O thread, so there is one implementation of reconnection and matching, any thread may
call in at once, and a UI can answer from its GUI thread while another iterates."""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from typing import (
    Any,
    Awaitable,
    Callable,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    TypeVar,
    Union,
)

from . import aio
from ._paths import PathLike
from .types import (
    AckOutcome,
    Answers,
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

T = TypeVar("T")


class _IoThread:
    """The event loop every blocking askbus object runs on, started on first use."""

    _lock = threading.Lock()
    _current: Optional[_IoThread] = None

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="askbus-io", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @classmethod
    def get(cls) -> _IoThread:
        with cls._lock:
            current = cls._current
            # After fork() the child has the object but not the thread.
            if current is None or current.pid != os.getpid():
                current = cls._current = _IoThread()
            return current

    def run(self, coro: Awaitable[T]) -> T:
        """Runs ``coro`` on the I/O thread and waits for it. Interrupting the wait (Ctrl-C)
        cancels it, which for an ask withdraws the question."""
        if os.getpid() != self.pid:
            if asyncio.iscoroutine(coro):
                coro.close()
            raise RuntimeError("askbus objects cannot be used across fork(); make new ones")
        if threading.current_thread() is self.thread:
            if asyncio.iscoroutine(coro):
                coro.close()
            raise RuntimeError(
                "a blocking askbus call was made from an askbus callback, which runs on the "
                "I/O thread; hand the work to another thread, or use askbus.aio"
            )
        done = threading.Event()
        box: Dict[str, Any] = {}

        def start() -> None:
            task = self.loop.create_task(_as_coroutine(coro))
            box["task"] = task
            task.add_done_callback(lambda _: done.set())

        def cancel() -> None:
            task = box.get("task")
            if task is None:
                # Interrupted before start() was even scheduled: nothing runs, nothing to wait.
                if asyncio.iscoroutine(coro):
                    coro.close()
                done.set()
            else:
                task.cancel()

        try:
            # Scheduling inside the try: a Ctrl-C that lands between scheduling and waiting
            # (the question may already be on the UIs by then) must still cancel it, or the
            # producer's close would abandon the question as producer-gone.
            self.loop.call_soon_threadsafe(start)
            done.wait()
        except BaseException:
            # Interrupted (Ctrl-C): cancel the operation and give it a moment to finish its
            # cancellation (an ask sends ask-user-cancel), so that it is not cut off when
            # the interpreter exits right after. Callbacks run in order, so cancel() finds
            # the task whenever start() was scheduled.
            self.loop.call_soon_threadsafe(cancel)
            done.wait(_CANCEL_GRACE)
            raise
        task: asyncio.Task[T] = box["task"]
        return task.result()

    def close_soon(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Schedules a close without waiting for it: for ``__del__``, which may run on any
        thread, or at interpreter exit when the loop is gone."""
        if os.getpid() != self.pid or self.loop.is_closed() or not self.thread.is_alive():
            return

        def start() -> None:
            self.loop.create_task(_as_coroutine(closer()))

        try:
            self.loop.call_soon_threadsafe(start)
        except RuntimeError:
            pass  # the loop closed meanwhile


def _forget_after_fork() -> None:
    # The child has the parent's objects but not its threads: start afresh, with a lock
    # that no vanished thread can be holding.
    _IoThread._lock = threading.Lock()
    _IoThread._current = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


#: How long an interrupted blocking call waits for its cancellation to be carried out. It
#: takes a millisecond when the machine is idle; on a loaded one a second was seen not to be
#: enough, and a question abandoned instead of withdrawn shows as producer-gone.
_CANCEL_GRACE = 5.0


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


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
# UIs.


class Request:
    """A pending question, as a UI sees it (the blocking twin of ``aio.AsyncRequest``).

    ``questions`` are normalized; ``withdrawn``/``withdraw_reason`` say whether and why it
    left the UIs (``wait_withdrawn()`` blocks until it does); ``outcome`` is set once this
    UI's answer won."""

    def __init__(self, inner: aio.AsyncRequest, io: _IoThread) -> None:
        self._inner = inner
        self._io = io

    @property
    def correlation_id(self) -> str:
        return self._inner.correlation_id

    @property
    def questions(self) -> List[Question]:
        return self._inner.questions

    @property
    def timeout_ms(self) -> int:
        return self._inner.timeout_ms

    @property
    def remaining_ms(self) -> int:
        return self._inner.remaining_ms

    @property
    def producer(self) -> ProducerInfo:
        return self._inner.producer

    @property
    def context(self) -> Optional[RequestContext]:
        """Who is asking, about what (``None`` when the producer did not say)."""
        return self._inner.context

    @property
    def withdrawn(self) -> bool:
        return self._inner.withdrawn

    @property
    def withdraw_reason(self) -> Optional[WithdrawReason]:
        return self._inner.withdraw_reason

    @property
    def outcome(self) -> Optional[AckOutcome]:
        return self._inner.outcome

    @property
    def pending(self) -> bool:
        return self._inner.pending

    def answer(self, answers: Answers) -> AckOutcome:
        """Sends the answers; returns ``"answered"`` once the daemon acknowledged them, or
        raises ``NotPending`` if another UI was first (``withdraw_reason == "answered"``) or
        the question otherwise ended. See ``aio.AsyncRequest.answer``."""
        return self._io.run(self._inner.answer(answers))

    def dismiss(self) -> AckOutcome:
        """Dismisses the dialog; returns ``"dismissed"`` once acknowledged."""
        return self._io.run(self._inner.dismiss())

    def wait_withdrawn(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the question is withdrawn (True) or ``timeout`` seconds pass."""
        return self._inner._withdrawn_flag.wait(timeout)

    def __repr__(self) -> str:
        return repr(self._inner).replace("AsyncRequest", "Request", 1)


class Approval(Request):
    """A pending approval (an agent's tool call), as a UI sees it (the blocking twin of
    ``aio.AsyncApproval``): decide it with ``allow()``, ``deny(reason)`` or ``dismiss()``."""

    _inner: aio.AsyncApproval

    @property
    def tool(self) -> str:
        return self._inner.tool

    @property
    def tool_call(self) -> Dict[str, Any]:
        return self._inner.tool_call

    @property
    def details(self) -> Optional[Dict[str, Any]]:
        return self._inner.details

    @property
    def outcomes(self) -> List[str]:
        return self._inner.outcomes

    @property
    def server_name(self) -> Optional[str]:
        return self._inner.server_name

    @property
    def subagent(self) -> Optional[str]:
        return self._inner.subagent

    def allow(
        self,
        outcome: str = "proceed_once",
        *,
        message: Optional[str] = None,
        payload: Optional[Mapping[str, Any]] = None,
    ) -> AckOutcome:
        """Approves with ``outcome`` (one of ``outcomes``); see ``aio.AsyncApproval.allow``."""
        return self._io.run(self._inner.allow(outcome, message=message, payload=payload))

    def deny(self, reason: Optional[str] = None) -> AckOutcome:
        """Denies; ``reason`` is what the agent is told."""
        return self._io.run(self._inner.deny(reason))

    def __repr__(self) -> str:
        return repr(self._inner).replace("AsyncApproval", "Approval", 1)


Event = Union[Request, Withdrawal[Request]]


class Subscription:
    """A UI's subscription (the blocking twin of ``aio.AsyncSubscription``): iterating
    yields each pending question once; ``events()`` also yields ``Withdrawal``s in order;
    ``on_withdrawn(request)`` is called on askbus's I/O thread when one is withdrawn (keep it
    short, and hand work to your own thread). Connects on creation."""

    def __init__(
        self,
        socket: Optional[PathLike] = None,
        *,
        client: Optional[str] = None,
        filter: Optional[Mapping[str, str]] = None,
        on_withdrawn: Optional[Callable[[Request], object]] = None,
        reconnect: bool = True,
        resume_grace: float = 3.0,
    ) -> None:
        self._io = _IoThread.get()
        self._on_withdrawn = on_withdrawn
        # Weakly: the I/O thread must not keep this object alive, so that a subscription
        # dropped without close() (a `break` out of `for req in subscribe()`) is closed.
        withdrawn = weakref.WeakMethod(self._withdrawn)

        def forward(inner: aio.AsyncRequest) -> None:
            method = withdrawn()
            if method is not None:
                method(inner)

        self._aio = aio.AsyncSubscription(
            socket,
            client=client,
            filter=filter,
            on_withdrawn=None if on_withdrawn is None else forward,
            reconnect=reconnect,
            resume_grace=resume_grace,
        )
        self._io.run(self._aio.open())

    @property
    def socket_path(self) -> str:
        return self._aio.socket_path

    @property
    def connected(self) -> bool:
        return self._aio.connected

    def _withdrawn(self, inner: aio.AsyncRequest) -> None:
        if self._on_withdrawn is not None:
            self._on_withdrawn(self._wrap(inner))

    def _wrap(self, inner: aio.AsyncRequest) -> Request:
        if inner._proxy is None:
            kind = Approval if isinstance(inner, aio.AsyncApproval) else Request
            inner._proxy = kind(inner, self._io)
        proxy: Request = inner._proxy
        return proxy

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Request]:
        return self

    def __next__(self) -> Request:
        inner = self._io.run(_next_request(self._aio))
        if inner is None:
            raise StopIteration
        return self._wrap(inner)

    def events(self) -> Iterator[Event]:
        """Questions and withdrawals, in the order the daemon sent them."""
        while True:
            item = self._io.run(self._aio._next_item())
            if item is None:
                return
            if isinstance(item, Withdrawal):
                yield Withdrawal(item.correlation_id, item.reason, self._wrap(item.request))
            else:
                yield self._wrap(item)

    def pending(self) -> List[Request]:
        return [self._wrap(r) for r in self._aio.pending()]

    def close(self) -> None:
        self._io.run(self._aio.close())

    def __del__(self) -> None:
        io = getattr(self, "_io", None)
        inner = getattr(self, "_aio", None)
        if io is not None and inner is not None:
            io.close_soon(inner.close)


async def _next_request(sub: aio.AsyncSubscription) -> Optional[aio.AsyncRequest]:
    # StopAsyncIteration cannot cross a thread as a future's exception; None stands for it.
    try:
        return await sub.__anext__()
    except StopAsyncIteration:
        return None


def subscribe(
    socket: Optional[PathLike] = None,
    *,
    client: Optional[str] = None,
    filter: Optional[Mapping[str, str]] = None,
    on_withdrawn: Optional[Callable[[Request], object]] = None,
    reconnect: bool = True,
    resume_grace: float = 3.0,
) -> Subscription:
    """Subscribes as a UI: ``for req in subscribe(): req.answer({"0": "SQLite"})``.
    ``filter`` (``project``, ``agent``, ``session``) shows it only the questions whose context
    matches.

    Raises ``DaemonUnreachable`` at once when no daemon answers."""
    return Subscription(
        socket,
        client=client,
        filter=filter,
        on_withdrawn=on_withdrawn,
        reconnect=reconnect,
        resume_grace=resume_grace,
    )


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
