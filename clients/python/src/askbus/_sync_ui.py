"""The blocking API of UIs: ``subscribe()``, ``Subscription`` and the ``Request`` and
``Approval`` it yields, each over its ``askbus.aio`` twin on the shared I/O thread
(``_io_thread``)."""

from __future__ import annotations

import weakref
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Union

from . import aio
from ._io_thread import _IoThread
from ._paths import PathLike
from .types import (
    AckOutcome,
    Answers,
    ProducerInfo,
    Question,
    RequestContext,
    WithdrawReason,
    Withdrawal,
)


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
