"""askbus: ask a person Gemini CLI ``ask_user`` questions from any process, through the
askbusd daemon, and answer them from any UI.

Producer (blocking)::

    import askbus
    r = askbus.ask([{"question": "Which database?", "header": "Database", "type": "choice",
                     "options": [{"label": "SQLite", "description": "one file"},
                                 {"label": "PostgreSQL", "description": "a server"}]}])
    print(r.raise_for_outcome().answers["0"])

UI (blocking)::

    for req in askbus.subscribe():
        req.answer({"0": "SQLite"})

The asyncio twins live in ``askbus.aio``; the dialog's answer encoding in
``askbus.answers``; every exception in ``askbus.errors`` (re-exported here).
"""

from __future__ import annotations

from . import answers, errors
from ._paths import default_socket_path
from ._sync import Event, Producer, Request, Subscription, ask, stats, subscribe
from .aio import AsyncProducer, AsyncRequest, AsyncSubscription, new_correlation_id
from .errors import (
    AskbusError,
    ConnectionLost,
    DaemonError,
    DaemonUnreachable,
    Dismissed,
    DuplicateCorrelationId,
    Forbidden,
    FrameTooLarge,
    InvalidFrame,
    InvalidJson,
    InvalidRequest,
    InvalidResponse,
    NoUi,
    NotAnswered,
    NotPending,
    NotSubscribed,
    ProtocolError,
    Shutdown,
    TimedOut,
    TooManyConnections,
    TooManyPending,
    UnknownType,
    UnsupportedProtocol,
    Withdrawn,
)
from .types import (
    AckOutcome,
    NoUiPolicy,
    Option,
    ProducerInfo,
    Question,
    Reason,
    Response,
    ToolResult,
    Welcome,
    Withdrawal,
    WithdrawReason,
)

__version__ = "0.1.0"

__all__ = [
    "AckOutcome",
    "AskbusError",
    "AsyncProducer",
    "AsyncRequest",
    "AsyncSubscription",
    "ConnectionLost",
    "DaemonError",
    "DaemonUnreachable",
    "Dismissed",
    "DuplicateCorrelationId",
    "Event",
    "Forbidden",
    "FrameTooLarge",
    "InvalidFrame",
    "InvalidJson",
    "InvalidRequest",
    "InvalidResponse",
    "NoUi",
    "NoUiPolicy",
    "NotAnswered",
    "NotPending",
    "NotSubscribed",
    "Option",
    "Producer",
    "ProducerInfo",
    "ProtocolError",
    "Question",
    "Reason",
    "Request",
    "Response",
    "Shutdown",
    "Subscription",
    "TimedOut",
    "TooManyConnections",
    "TooManyPending",
    "ToolResult",
    "UnknownType",
    "UnsupportedProtocol",
    "Welcome",
    "WithdrawReason",
    "Withdrawal",
    "Withdrawn",
    "answers",
    "ask",
    "default_socket_path",
    "errors",
    "new_correlation_id",
    "stats",
    "subscribe",
]
