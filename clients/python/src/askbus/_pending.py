"""One request a producer is waiting on (a question, or an approval): its deadline across
reconnections, its resend state, the frames that ask and withdraw it, and the future its
``ask``/``confirm`` awaits. ``AsyncProducer`` (``_producer``) owns the table of them."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, Optional

from . import _frames
from ._reconnect import Backoff
from .errors import AskbusError
from .types import Response, Welcome

__all__ = ["PendingAsk"]


class PendingAsk:
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
        self.dup_backoff = Backoff()

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
