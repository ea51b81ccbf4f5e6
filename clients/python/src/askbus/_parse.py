"""Strict parsing of the frames askbusd sends, without I/O (see proto/PROTOCOL.md): each
known type becomes a typed value, and a known type with a missing or mistyped field raises
``ProtocolError``. The framing and the frames this client sends are in ``_frames``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import DaemonError, ProtocolError, error_for_code
from .types import (
    APPROVAL_MODES,
    CONTEXT_FIELDS,
    TOOL_OUTCOMES,
    ApprovalResponse,
    BusEvent,
    DecidedBy,
    ProducerInfo,
    RequestContext,
    Response,
    ToolResult,
    UiInfo,
    Welcome,
)


@dataclass(frozen=True)
class Pong:
    id: Any = None
    has_id: bool = False


@dataclass(frozen=True)
class Subscribed:
    pending: int


@dataclass(frozen=True)
class UiRequest:
    """A question as a UI receives it: normalized questions, milliseconds left."""

    correlation_id: str
    questions: List[Dict[str, Any]]
    timeout_ms: int
    producer: ProducerInfo
    context: Optional[RequestContext] = None
    #: Federation: the node the question was asked on.
    node: Optional[str] = None


@dataclass(frozen=True)
class WithdrawnFrame:
    correlation_id: str
    reason: str
    #: Federation: the question's node, and for ``answered`` the UI that answered.
    node: Optional[str] = None
    answered_by: Optional[UiInfo] = None


@dataclass(frozen=True)
class Ack:
    correlation_id: str
    outcome: str


@dataclass(frozen=True)
class ApprovalRequest:
    """An approval as a UI receives it: the producer's fields as sent (``details`` is Gemini
    CLI core's ``SerializableConfirmationDetails``), the outcomes it may offer, ms left."""

    correlation_id: str
    tool_call: Dict[str, Any]
    outcomes: List[str]
    timeout_ms: int
    producer: ProducerInfo
    server_name: Optional[str] = None
    tool_annotations: Optional[Dict[str, Any]] = None
    subagent: Optional[str] = None
    details: Optional[Dict[str, Any]] = None
    context: Optional[RequestContext] = None
    #: Federation: the node the approval was asked on.
    node: Optional[str] = None


@dataclass(frozen=True)
class ApprovalWithdrawn:
    correlation_id: str
    reason: str
    #: Federation: the approval's node, and for ``answered`` the UI that decided.
    node: Optional[str] = None
    answered_by: Optional[UiInfo] = None


@dataclass(frozen=True)
class ApprovalAck:
    """This UI's decision won: ``reason`` is answered or dismissed, with what was recorded."""

    correlation_id: str
    reason: str
    confirmed: bool
    outcome: str


@dataclass(frozen=True)
class Stats:
    counters: Dict[str, Any]


@dataclass(frozen=True)
class HistoryPage:
    """The answer to ``history``: the store's records as the daemon sent them (newest first),
    and the cursor of the next page (``None`` after the last)."""

    records: List[Dict[str, Any]]
    cursor: Optional[str]


@dataclass(frozen=True)
class Watching:
    """The reply to ``watch``: the connection now observes the bus."""




@dataclass(frozen=True)
class Unknown:
    """A frame type this client does not know: newer daemons may add some."""

    type: str
    frame: Dict[str, Any]


ServerFrame = Union[
    Welcome,
    Pong,
    Subscribed,
    UiRequest,
    WithdrawnFrame,
    Ack,
    Response,
    DaemonError,
    Stats,
    Watching,
    BusEvent,
    ApprovalRequest,
    ApprovalWithdrawn,
    ApprovalAck,
    ApprovalResponse,
    Unknown,
]

_RESPONSE_REASONS = ("answered", "dismissed", "timeout", "no-ui", "withdrawn", "shutdown")
_WITHDRAW_REASONS = ("answered", "timeout", "withdrawn", "producer-gone", "shutdown")
_ACK_OUTCOMES = ("answered", "dismissed")
_MISSING: Any = object()


def _field(frame: Mapping[str, Any], key: str, kinds: Union[type, Tuple[type, ...]]) -> Any:
    value = frame.get(key, _MISSING)
    if value is _MISSING:
        raise ProtocolError(f"askbusd sent a {frame.get('type')} frame without {key!r}")
    # bool is an int in Python; no numeric field of the protocol is a boolean.
    wrong_bool = isinstance(value, bool) and bool not in (
        kinds if isinstance(kinds, tuple) else (kinds,)
    )
    if not isinstance(value, kinds) or wrong_bool:
        raise ProtocolError(
            f"askbusd sent a {frame.get('type')} frame whose {key!r} is {type(value).__name__}"
        )
    return value


def _choice(frame: Mapping[str, Any], key: str, allowed: Sequence[str]) -> str:
    value = _field(frame, key, str)
    if value not in allowed:
        raise ProtocolError(f"askbusd sent a {frame.get('type')} frame with {key} {value!r}")
    return str(value)


def _optional(frame: Mapping[str, Any], key: str, kinds: Union[type, Tuple[type, ...]]) -> Any:
    if frame.get(key) is None:
        return None
    return _field(frame, key, kinds)


def parse_welcome(frame: Mapping[str, Any]) -> Welcome:
    return Welcome(
        protocol=_field(frame, "protocol", int),
        server=_field(frame, "server", str),
        max_frame_bytes=_field(frame, "maxFrameBytes", int),
        default_timeout_ms=_field(frame, "defaultTimeoutMs", int),
        max_timeout_ms=_field(frame, "maxTimeoutMs", int),
    )


def parse_producer(value: Any) -> ProducerInfo:
    if not isinstance(value, dict):
        raise ProtocolError("askbusd sent an ask-user-request whose producer is not an object")
    return ProducerInfo(
        client=_optional(value, "client", str),
        pid=_optional(value, "pid", int),
        uid=_field(value, "uid", int),
    )


def parse_ui_request(frame: Mapping[str, Any]) -> UiRequest:
    questions = _field(frame, "questions", list)
    if not all(isinstance(q, dict) for q in questions):
        raise ProtocolError("askbusd sent an ask-user-request whose questions are not objects")
    return UiRequest(
        correlation_id=_field(frame, "correlationId", str),
        questions=questions,
        timeout_ms=_field(frame, "timeoutMs", int),
        producer=parse_producer(_field(frame, "producer", dict)),
        context=parse_context(frame.get("context")),
        node=_optional(frame, "node", str),
    )


def parse_ui_info(value: Any, frame: str) -> Optional[UiInfo]:
    """``ui`` of a bus-event, ``answeredBy`` of a withdrawal."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ProtocolError(f"askbusd sent a {frame} whose UI is not an object")
    return UiInfo(client=_optional(value, "client", str), pid=_optional(value, "pid", int),
                  node=_optional(value, "node", str))


def parse_context(value: Any) -> Optional[RequestContext]:
    """A request's context as the daemon sends it to UIs; keys this client does not know are
    left out."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ProtocolError("askbusd sent an ask-user-request whose context is not an object")
    mode = _optional(value, "approvalMode", str)
    if mode is not None and mode not in APPROVAL_MODES:
        raise ProtocolError(f"askbusd sent a context whose approvalMode is {mode!r}")
    return RequestContext(**{name: _optional(value, name, str) for name, _, _ in CONTEXT_FIELDS},
                          approval_mode=mode, interactive=_optional(value, "interactive", bool))


def parse_response(frame: Mapping[str, Any]) -> Response:
    answers = _field(frame, "answers", dict)
    if not all(isinstance(v, str) for v in answers.values()):
        raise ProtocolError("askbusd sent an ask-user-response whose answers are not strings")
    result = _field(frame, "result", dict)
    return Response(
        correlation_id=_field(frame, "correlationId", str),
        answers=dict(answers),
        cancelled=_field(frame, "cancelled", bool),
        reason=_choice(frame, "reason", _RESPONSE_REASONS),  # type: ignore[arg-type]
        result=ToolResult(
            llm_content=_field(result, "llmContent", str),
            return_display=_field(result, "returnDisplay", str),
            data=_field(result, "data", dict),
        ),
    )


def parse_error(frame: Mapping[str, Any]) -> DaemonError:
    return error_for_code(
        _field(frame, "code", str),
        _field(frame, "message", str),
        _optional(frame, "correlationId", str),
    )


def _strings(frame: Mapping[str, Any], key: str) -> List[str]:
    value = _field(frame, key, list)
    if not all(isinstance(v, str) for v in value):
        raise ProtocolError(f"askbusd sent a {frame.get('type')} frame whose {key!r} has non-strings")
    return list(value)


def parse_decided_by(value: Any) -> Optional[DecidedBy]:
    """``decidedBy`` of an end bus-event (and of a history record)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ProtocolError("askbusd sent a decidedBy that is not an object")
    return DecidedBy(kind=_field(value, "kind", str), via=_optional(value, "via", str),
                     uid=_optional(value, "uid", int), client=_optional(value, "client", str),
                     node=_optional(value, "node", str), user=_optional(value, "user", str),
                     rule=value.get("rule"))


def parse_bus_event(frame: Mapping[str, Any]) -> BusEvent:
    ui = frame.get("ui")
    if ui is not None and not isinstance(ui, dict):
        raise ProtocolError("askbusd sent a bus-event whose ui is not an object")
    return BusEvent(
        event=_field(frame, "event", str),
        ts=_field(frame, "ts", str),
        correlation_id=_field(frame, "correlationId", str),
        producer=parse_producer(_field(frame, "producer", dict)),
        ui=parse_ui_info(ui, "bus-event"),
        latency_ms=_optional(frame, "latencyMs", int),
        timeout_ms=_optional(frame, "timeoutMs", int),
        question_types=_strings(frame, "questionTypes"),
        headers=_strings(frame, "headers"),
        code=_optional(frame, "code", str),
        agent=_optional(frame, "agent", str),
        project=_optional(frame, "project", str),
        kind=_optional(frame, "kind", str),
        tool=_optional(frame, "tool", str),
        details_type=_optional(frame, "detailsType", str),
        confirmed=_optional(frame, "confirmed", bool),
        outcome=_optional(frame, "outcome", str),
        notify=_optional(frame, "notify", dict),
        node=_optional(frame, "node", str),
        decided_by=parse_decided_by(frame.get("decidedBy")),
    )


def parse_approval_request(frame: Mapping[str, Any]) -> ApprovalRequest:
    outcomes = _strings(frame, "outcomes")
    if any(o not in TOOL_OUTCOMES for o in outcomes):
        raise ProtocolError("askbusd sent a tool-confirmation-request with an unknown outcome")
    return ApprovalRequest(
        correlation_id=_field(frame, "correlationId", str),
        tool_call=_field(frame, "toolCall", dict),
        outcomes=outcomes,
        timeout_ms=_field(frame, "timeoutMs", int),
        producer=parse_producer(_field(frame, "producer", dict)),
        server_name=_optional(frame, "serverName", str),
        tool_annotations=_optional(frame, "toolAnnotations", dict),
        subagent=_optional(frame, "subagent", str),
        details=_optional(frame, "details", dict),
        context=parse_context(frame.get("context")),
        node=_optional(frame, "node", str),
    )


def parse_approval_response(frame: Mapping[str, Any]) -> ApprovalResponse:
    return ApprovalResponse(
        correlation_id=_field(frame, "correlationId", str),
        confirmed=_field(frame, "confirmed", bool),
        outcome=_choice(frame, "outcome", TOOL_OUTCOMES),  # type: ignore[arg-type]
        reason=_choice(frame, "reason", _RESPONSE_REASONS),  # type: ignore[arg-type]
        message=_optional(frame, "message", str),
        payload=_optional(frame, "payload", dict),
    )


def parse_server_frame(frame: Dict[str, Any]) -> ServerFrame:
    """Any daemon frame, typed. Unknown types parse as ``Unknown``; a known type with a
    missing or mistyped field raises ``ProtocolError``."""
    kind = frame["type"]
    if kind == "welcome":
        return parse_welcome(frame)
    if kind == "pong":
        return Pong(id=frame.get("id"), has_id="id" in frame)
    if kind == "subscribed":
        return Subscribed(pending=_field(frame, "pending", int))
    if kind == "ask-user-request":
        return parse_ui_request(frame)
    if kind == "ask-user-withdrawn":
        return WithdrawnFrame(
            correlation_id=_field(frame, "correlationId", str),
            reason=_choice(frame, "reason", _WITHDRAW_REASONS),
            node=_optional(frame, "node", str),
            answered_by=parse_ui_info(frame.get("answeredBy"), kind),
        )
    if kind == "ask-user-ack":
        return Ack(
            correlation_id=_field(frame, "correlationId", str),
            outcome=_choice(frame, "outcome", _ACK_OUTCOMES),
        )
    if kind == "ask-user-response":
        return parse_response(frame)
    if kind == "error":
        return parse_error(frame)
    if kind == "stats":
        return Stats(counters={k: v for k, v in frame.items() if k != "type"})
    if kind == "watching":
        return Watching()
    if kind == "history":
        records = _field(frame, "records", list)
        cursor = frame.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            raise ProtocolError("history: cursor must be a string or null")
        return HistoryPage(records=records, cursor=cursor)
    if kind == "bus-event":
        return parse_bus_event(frame)
    if kind == "tool-confirmation-request":
        return parse_approval_request(frame)
    if kind == "tool-confirmation-withdrawn":
        return ApprovalWithdrawn(
            correlation_id=_field(frame, "correlationId", str),
            reason=_choice(frame, "reason", _WITHDRAW_REASONS),
            node=_optional(frame, "node", str),
            answered_by=parse_ui_info(frame.get("answeredBy"), kind),
        )
    if kind == "tool-confirmation-ack":
        return ApprovalAck(
            correlation_id=_field(frame, "correlationId", str),
            reason=_choice(frame, "reason", _ACK_OUTCOMES),
            confirmed=_field(frame, "confirmed", bool),
            outcome=_choice(frame, "outcome", TOOL_OUTCOMES),
        )
    if kind == "tool-confirmation-response":
        return parse_approval_response(frame)
    return Unknown(type=kind, frame=frame)
