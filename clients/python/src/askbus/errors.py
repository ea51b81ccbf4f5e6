"""Every exception askbus raises. Errors the daemon reports keep its wire code and message;
one class per code, so callers catch exactly what they can act on.

Hierarchy::

    AskbusError                       .code, .message, .correlation_id
    ├── DaemonError                   an ``error`` frame from askbusd (one subclass per code)
    │   ├── InvalidRequest            .message is the reference ask_user tool's own text
    │   ├── DuplicateCorrelationId, TooManyPending, NotPending, NotSubscribed,
    │   │   InvalidResponse, FrameTooLarge, FrameTimeout, ...
    ├── DaemonUnreachable             .socket_path: nothing answers there
    │   └── UntrustedDaemon           .daemon_uid: another uid's daemon listens there
    ├── ConnectionLost                the connection dropped and could not be resumed
    ├── ProtocolError                 askbusd sent something this client cannot read
    └── NotAnswered                   raised by Response.raise_for_outcome(); .response
        ├── Dismissed, TimedOut, NoUi, Withdrawn, Shutdown
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Dict, Optional, Type

if TYPE_CHECKING:
    from .types import Response


class AskbusError(Exception):
    """Base of every askbus error.

    ``code`` is the daemon's wire error code for errors it reported (``invalid-request``,
    ``not-pending``, ...), the outcome (``dismissed``, ``timeout``, ...) for unanswered
    questions, and a client-side code (``daemon-unreachable``, ``connection-lost``,
    ``protocol-error``) for failures the client detected itself.
    """

    code: str = "askbus-error"

    def __init__(
        self,
        message: str,
        *,
        code: Optional[str] = None,
        correlation_id: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.correlation_id = correlation_id

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        cid = f", correlation_id={self.correlation_id!r}" if self.correlation_id else ""
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r}{cid})"


class DaemonError(AskbusError):
    """askbusd refused a frame; ``code`` and ``message`` are exactly what it sent."""


class InvalidJson(DaemonError):
    code = "invalid-json"


class InvalidFrame(DaemonError):
    code = "invalid-frame"


class UnknownType(DaemonError):
    code = "unknown-type"


class FrameTooLarge(DaemonError):
    code = "frame-too-large"


class FrameTimeout(DaemonError):
    """A frame was started but not completed within the daemon's ``--frame-timeout-ms``."""

    code = "frame-timeout"


class InvalidRequest(DaemonError):
    """The questions (or the request's own fields) are invalid. For questions, ``message`` is
    the reference ``AskUserTool``'s validation error, verbatim."""

    code = "invalid-request"


class DuplicateCorrelationId(DaemonError):
    code = "duplicate-correlation-id"


class TooManyPending(DaemonError):
    code = "too-many-pending"


class NotPending(DaemonError):
    """The question is not pending: another UI answered it first, it timed out, or its
    producer withdrew it. ``withdraw_reason`` says which, when this UI was told."""

    code = "not-pending"

    def __init__(
        self,
        message: str,
        *,
        code: Optional[str] = None,
        correlation_id: Optional[str] = None,
        withdraw_reason: Optional[str] = None,
    ) -> None:
        super().__init__(message, code=code, correlation_id=correlation_id)
        self.withdraw_reason = withdraw_reason


class NotSubscribed(DaemonError):
    code = "not-subscribed"


class InvalidResponse(DaemonError):
    code = "invalid-response"


class UnsupportedProtocol(DaemonError):
    code = "unsupported-protocol"


class Forbidden(DaemonError):
    code = "forbidden"


class TooManyConnections(DaemonError):
    code = "too-many-connections"


class OriginUnreachable(DaemonError):
    """Federation: an answer to another node's question could not reach that node (NATS
    down, the node gone, or no reply in time). The question is still pending."""

    code = "origin-unreachable"


class StoreUnavailable(DaemonError):
    """The daemon's store cannot write for now (disk full, I/O error): the request was not
    taken. Transient: producers ask again within their own timeout."""

    code = "store-unavailable"


_BY_CODE: Dict[str, Type[DaemonError]] = {
    cls.code: cls
    for cls in (
        InvalidJson,
        InvalidFrame,
        UnknownType,
        FrameTooLarge,
        InvalidRequest,
        DuplicateCorrelationId,
        TooManyPending,
        NotPending,
        NotSubscribed,
        InvalidResponse,
        UnsupportedProtocol,
        Forbidden,
        TooManyConnections,
        FrameTimeout,
        OriginUnreachable,
        StoreUnavailable,
    )
}

#: Every wire error code this client knows, in the protocol's order.
ERROR_CODES = tuple(_BY_CODE)


def error_for_code(
    code: str, message: str, correlation_id: Optional[str] = None
) -> DaemonError:
    """The exception for an ``error`` frame; a code from a newer daemon gets ``DaemonError``."""
    cls = _BY_CODE.get(code, DaemonError)
    return cls(message, code=code, correlation_id=correlation_id)


class DaemonUnreachable(AskbusError):
    """No askbusd answers at ``socket_path`` (not running, wrong path, or no permission)."""

    code = "daemon-unreachable"

    def __init__(
        self,
        socket_path: str,
        message: Optional[str] = None,
        *,
        correlation_id: Optional[str] = None,
    ) -> None:
        super().__init__(
            message or f"cannot reach askbusd at {socket_path}",
            correlation_id=correlation_id,
        )
        self.socket_path = socket_path


class UntrustedDaemon(DaemonUnreachable):
    """The daemon at ``socket_path`` runs as another uid (``daemon_uid``) than this process or
    root: another user may have taken the socket path, so the client refuses to talk to it.
    Set ``ASKBUS_DAEMON_UID`` to that uid to trust a shared bus run by another account."""

    code = "untrusted-daemon"

    def __init__(self, socket_path: str, daemon_uid: int) -> None:
        super().__init__(
            socket_path,
            f"refusing askbusd at {socket_path}: it runs as uid {daemon_uid}, not as you "
            f"(uid {os.geteuid()}) or root, so another user may have taken the socket path; "
            f"if this is a shared bus you trust, set ASKBUS_DAEMON_UID={daemon_uid}",
        )
        self.daemon_uid = daemon_uid


class ConnectionLost(AskbusError):
    """The connection to askbusd dropped and this operation could not be carried over to a
    new one (reconnection is off, or the outcome cannot be known)."""

    code = "connection-lost"


class ProtocolError(AskbusError):
    """askbusd sent a frame this client cannot read."""

    code = "protocol-error"


class NotAnswered(AskbusError):
    """A question ended without an answer; ``response`` is the daemon's terminal response
    (``None`` only for a question withdrawn while the daemon was unreachable)."""

    code = "not-answered"

    def __init__(
        self,
        message: str,
        *,
        response: Optional[Response] = None,
        code: Optional[str] = None,
        correlation_id: Optional[str] = None,
    ) -> None:
        super().__init__(message, code=code, correlation_id=correlation_id)
        self.response = response


class Dismissed(NotAnswered):
    code = "dismissed"


class TimedOut(NotAnswered):
    code = "timeout"


class NoUi(NotAnswered):
    code = "no-ui"


class Withdrawn(NotAnswered):
    code = "withdrawn"


class Shutdown(NotAnswered):
    code = "shutdown"


_OUTCOMES: Dict[str, Type[NotAnswered]] = {
    cls.code: cls for cls in (Dismissed, TimedOut, NoUi, Withdrawn, Shutdown)
}


def outcome_error(response: Response) -> NotAnswered:
    """The exception ``raise_for_outcome`` raises for an unanswered response."""
    cls = _OUTCOMES.get(response.reason, NotAnswered)
    return cls(
        response.result.llm_content,
        response=response,
        code=response.reason,
        correlation_id=response.correlation_id,
    )
