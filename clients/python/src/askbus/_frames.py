"""Protocol v1 on the wire, without I/O: the length-prefixed JSON framing and the frames this
client sends (see proto/PROTOCOL.md). Strict parsing of the frames askbusd sends is in
``_parse``."""

from __future__ import annotations

import json
import struct
from typing import Any, Dict, Mapping, Optional, Sequence

from .errors import ProtocolError
from .types import TOOL_OUTCOMES, Answers

PROTOCOL_VERSION = 1
LENGTH_PREFIX = struct.Struct(">I")
#: Longest frame accepted from the daemon. Its frames may exceed its own inbound limit (a
#: response repeats the answers in its result), so clients allow more, as the Rust one does.
MAX_INBOUND_FRAME = 16 * 1024 * 1024
#: Longest correlationId the daemon accepts, in characters (code points).
MAX_CORRELATION_ID_CHARS = 128

_MISSING: Any = object()

# ---------------------------------------------------------------------------------------------
# Framing.


def encode(frame: Mapping[str, Any]) -> bytes:
    """One frame's JSON payload (no length prefix). NaN and infinities are refused: they are
    not JSON, and the daemon would reject the frame as a whole."""
    text = json.dumps(frame, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.encode("utf-8")


def with_prefix(payload: bytes) -> bytes:
    return LENGTH_PREFIX.pack(len(payload)) + payload


def decode(payload: bytes) -> Dict[str, Any]:
    """A daemon frame's payload as a JSON object with a string ``type``."""
    try:
        value = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ProtocolError(f"askbusd sent a frame that is not UTF-8 JSON: {e}") from None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ProtocolError("askbusd sent a frame that is not a JSON object with a string type")
    return value


# ---------------------------------------------------------------------------------------------
# Frames this client sends.


def hello(client: Optional[str] = None, via: Optional[str] = None) -> Dict[str, Any]:
    """``via`` claims how a UI reaches people (``tui``, ``web``, ...), recorded in decidedBy."""
    frame: Dict[str, Any] = {"type": "hello", "protocol": PROTOCOL_VERSION}
    if client is not None:
        frame["client"] = client
    if via is not None:
        frame["via"] = via
    return frame


def ping(id: Any = _MISSING) -> Dict[str, Any]:
    frame: Dict[str, Any] = {"type": "ping"}
    if id is not _MISSING:
        frame["id"] = id
    return frame


def stats() -> Dict[str, Any]:
    return {"type": "stats"}


def notify_report(
    sink: str,
    result: str,
    correlation_ids: Sequence[str] = (),
    error: Optional[str] = None,
) -> Dict[str, Any]:
    """A notifier's delivery report: ``result`` is sent, failed or answered."""
    frame: Dict[str, Any] = {"type": "notify-report", "sink": sink, "result": result,
                             "correlationIds": list(correlation_ids)}
    if error is not None:
        frame["error"] = error
    return frame


def watch(client: Optional[str] = None) -> Dict[str, Any]:
    frame: Dict[str, Any] = {"type": "watch"}
    if client is not None:
        frame["client"] = client
    return frame


def subscribe(
    client: Optional[str] = None,
    filter: Optional[Mapping[str, str]] = None,
    via: Optional[str] = None,
) -> Dict[str, Any]:
    frame: Dict[str, Any] = {"type": "subscribe"}
    if client is not None:
        frame["client"] = client
    if via is not None:
        frame["via"] = via
    if filter:
        frame["filter"] = dict(filter)
    return frame


def history(
    filter: Optional[Mapping[str, Any]] = None,
    limit: Optional[int] = None,
    cursor: Optional[str] = None,
) -> Dict[str, Any]:
    """A query of the daemon's store: records newest first (only the caller's own uid's unless
    it is an operator)."""
    frame: Dict[str, Any] = {"type": "history"}
    if filter is not None:
        frame["filter"] = dict(filter)
    if limit is not None:
        frame["limit"] = limit
    if cursor is not None:
        frame["cursor"] = cursor
    return frame


def ask_user_request(
    correlation_id: str,
    questions: Any,
    timeout_ms: Optional[int] = None,
    no_ui: Optional[str] = None,
    context: Optional[Mapping[str, str]] = None,
) -> Dict[str, Any]:
    frame: Dict[str, Any] = {
        "type": "ask-user-request",
        "correlationId": correlation_id,
        "questions": questions,
    }
    if timeout_ms is not None:
        frame["timeoutMs"] = timeout_ms
    if no_ui is not None:
        frame["noUi"] = no_ui
    if context:
        frame["context"] = dict(context)
    return frame


def ask_user_cancel(correlation_id: str) -> Dict[str, Any]:
    return {"type": "ask-user-cancel", "correlationId": correlation_id}


def ask_user_response(
    correlation_id: str, answers: Mapping[str, str], cancelled: bool = False
) -> Dict[str, Any]:
    # `answers` is always sent, `{}` for a dismissal, as Gemini CLI's own dialog does.
    frame: Dict[str, Any] = {
        "type": "ask-user-response",
        "correlationId": correlation_id,
        "answers": dict(answers),
    }
    if cancelled:
        frame["cancelled"] = True
    return frame


def tool_confirmation_request(
    correlation_id: str,
    tool_call: Mapping[str, Any],
    details: Optional[Mapping[str, Any]] = None,
    outcomes: Optional[Sequence[str]] = None,
    timeout_ms: Optional[int] = None,
    no_ui: Optional[str] = None,
    server_name: Optional[str] = None,
    context: Optional[Mapping[str, Any]] = None,
    tool_annotations: Optional[Mapping[str, Any]] = None,
    subagent: Optional[str] = None,
) -> Dict[str, Any]:
    frame: Dict[str, Any] = {
        "type": "tool-confirmation-request",
        "correlationId": correlation_id,
        "toolCall": dict(tool_call),
    }
    if server_name is not None:
        frame["serverName"] = server_name
    if tool_annotations is not None:
        frame["toolAnnotations"] = dict(tool_annotations)
    if subagent is not None:
        frame["subagent"] = subagent
    if details is not None:
        frame["details"] = dict(details)
    if outcomes is not None:
        frame["outcomes"] = list(outcomes)
    if timeout_ms is not None:
        frame["timeoutMs"] = timeout_ms
    if no_ui is not None:
        frame["noUi"] = no_ui
    if context is not None:
        frame["context"] = dict(context)
    return frame


def tool_confirmation_cancel(
    correlation_id: str, reason: Optional[str] = None, via: Optional[str] = None
) -> Dict[str, Any]:
    """``reason="answered-elsewhere"`` with ``via`` records that a person decided elsewhere
    (an editor's own prompt), not that the agent withdrew the call."""
    frame: Dict[str, Any] = {"type": "tool-confirmation-cancel", "correlationId": correlation_id}
    if reason is not None:
        frame["reason"] = reason
    if via is not None:
        frame["via"] = via
    return frame


def tool_confirmation_response(
    correlation_id: str,
    confirmed: Optional[bool] = None,
    outcome: Optional[str] = None,
    message: Optional[str] = None,
    payload: Optional[Mapping[str, Any]] = None,
    dismissed: bool = False,
    user: Optional[str] = None,
) -> Dict[str, Any]:
    """A decision (``confirmed`` and ``outcome``), or ``dismissed=True`` with neither.
    ``user`` names the person who decided (a chat platform's user), recorded as claimed."""
    frame: Dict[str, Any] = {"type": "tool-confirmation-response", "correlationId": correlation_id}
    if dismissed:
        frame["dismissed"] = True
        return frame
    if confirmed is None:
        raise ValueError("a decision needs confirmed (or dismissed=True)")
    frame["confirmed"] = confirmed
    if outcome is not None:
        if outcome not in TOOL_OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(TOOL_OUTCOMES)}, not {outcome!r}")
        frame["outcome"] = outcome
    if message is not None:
        frame["message"] = message
    if payload is not None:
        frame["payload"] = dict(payload)
    if user is not None:
        frame["user"] = user
    return frame


def check_correlation_id(correlation_id: object) -> str:
    """The daemon's own rules for a correlationId. Checked before sending because the daemon
    cannot say which request a bad id belonged to, so its error could reach no caller."""
    if not isinstance(correlation_id, str):
        raise TypeError(f"correlation_id must be a str, not {type(correlation_id).__name__}")
    if not correlation_id:
        raise ValueError("correlation_id must not be empty")
    if len(correlation_id) > MAX_CORRELATION_ID_CHARS:
        raise ValueError(
            f"correlation_id must be at most {MAX_CORRELATION_ID_CHARS} characters"
        )
    return correlation_id


def normalize_answers(answers: Answers) -> Dict[str, str]:
    """``{0: "x"}`` or ``{"0": "x"}`` to the wire's string keys; the daemon checks the rest."""
    out: Dict[str, str] = {}
    for key, value in answers.items():
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise TypeError(f"answer keys are question indices, not {key!r}")
        if not isinstance(value, str):
            raise TypeError(f"answer {key!r} must be a str, not {type(value).__name__}")
        out[str(key)] = value
    return out
