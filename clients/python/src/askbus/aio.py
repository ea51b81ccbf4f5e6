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

The roles live in modules of their own, re-exported here (import from ``askbus.aio``, or the
``askbus`` package): ``_producer``, ``_request`` and ``_subscription`` (the UI side),
``_watch``; ``_pending`` and ``_reconnect`` hold what they share.
"""

from __future__ import annotations

from ._producer import AsyncProducer, ask, new_correlation_id, stats
from ._request import AsyncApproval, AsyncRequest
from ._subscription import AsyncEvent, AsyncSubscription, subscribe
from ._watch import AsyncWatch, watch

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
