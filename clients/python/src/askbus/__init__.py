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

Observer (ops)::

    for event in askbus.watch():
        print(event.event, event.correlation_id, event.latency_ms)

The asyncio twins live in ``askbus.aio``; the dialog's answer encoding in
``askbus.answers``; every exception in ``askbus.errors`` (re-exported here).
"""

from __future__ import annotations

from . import answers, errors
from ._paths import default_socket_path
from ._sync import (
    Approval, Event, Producer, Request, Subscription, Watch, ask, stats, subscribe, watch,
)
from .aio import (
    AsyncApproval, AsyncProducer, AsyncRequest, AsyncSubscription, AsyncWatch, new_correlation_id,
)
from .errors import (
    AskbusError,
    ConnectionLost,
    DaemonError,
    DaemonUnreachable,
    UntrustedDaemon,
    Dismissed,
    DuplicateCorrelationId,
    Forbidden,
    FrameTimeout,
    OriginUnreachable,
    StoreUnavailable,
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
    Answers,
    ApprovalResponse,
    BusEvent,
    Confirmation,
    ConfirmationReason,
    DecidedBy,
    NoUiPolicy,
    Option,
    ToolOutcome,
    ProducerInfo,
    Question,
    Reason,
    APPROVAL_MODES,
    RequestContext,
    Response,
    ToolResult,
    UiInfo,
    Welcome,
    Withdrawal,
    WithdrawReason,
)

__version__ = "0.1.0"

__all__ = [
    "AckOutcome",
    "Answers",
    "Approval",
    "ApprovalResponse",
    "AskbusError",
    "AsyncApproval",
    "AsyncProducer",
    "AsyncRequest",
    "AsyncSubscription",
    "AsyncWatch",
    "BusEvent",
    "DecidedBy",
    "Confirmation",
    "ConfirmationReason",
    "ConnectionLost",
    "DaemonError",
    "DaemonUnreachable",
    "UntrustedDaemon",
    "Dismissed",
    "DuplicateCorrelationId",
    "Event",
    "Forbidden",
    "FrameTimeout",
    "OriginUnreachable",
    "StoreUnavailable",
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
    "APPROVAL_MODES",
    "RequestContext",
    "Response",
    "Shutdown",
    "Subscription",
    "TimedOut",
    "TooManyConnections",
    "TooManyPending",
    "ToolOutcome",
    "ToolResult",
    "UnknownType",
    "UiInfo",
    "UnsupportedProtocol",
    "Watch",
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
    "watch",
]
