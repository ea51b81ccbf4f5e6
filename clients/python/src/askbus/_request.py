"""A pending request as a UI sees it: ``AsyncRequest`` (a question: ``answer``, ``dismiss``)
and ``AsyncApproval`` (a tool call: ``allow``, ``deny``, ``dismiss``), with their lifecycle
(pending, withdrawn and why, the deadline). The subscription (``_subscription``) makes them,
keeps them current across reconnections and sends their answers."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, cast

from . import _frames, _parse
from .types import (
    AckOutcome,
    Answers,
    ProducerInfo,
    Question,
    RequestContext,
    WithdrawReason,
)

if TYPE_CHECKING:
    from ._subscription import AsyncSubscription

__all__ = ["AsyncApproval", "AsyncRequest"]


class AsyncRequest:
    """A pending question as a UI sees it.

    ``questions`` are the normalized questions; ``timeout_ms`` is what was left when the
    daemon sent it (``remaining_ms`` is what is left now). ``withdrawn`` and
    ``withdraw_reason`` say whether and why it left the UIs before this UI answered it (the
    subscription's ``on_withdrawn`` callback and ``events()`` report it too, and
    ``wait_withdrawn()`` waits for it); ``outcome`` is set once this UI's own answer won.
    """

    def __init__(
        self, subscription: AsyncSubscription, frame: _parse.UiRequest, gen: int
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

    def _refresh(self, frame: _parse.UiRequest, gen: int) -> None:
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
        self, subscription: AsyncSubscription, frame: _parse.ApprovalRequest, gen: int
    ) -> None:
        super().__init__(subscription, cast(Any, frame), gen)
        self.tool_call: Dict[str, Any] = frame.tool_call
        self.details: Optional[Dict[str, Any]] = frame.details
        self.outcomes: List[str] = frame.outcomes
        self.server_name: Optional[str] = frame.server_name
        self.tool_annotations: Optional[Dict[str, Any]] = frame.tool_annotations
        self.subagent: Optional[str] = frame.subagent
        self.decision: Optional[_parse.ApprovalAck] = None

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
