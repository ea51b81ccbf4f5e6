"""The values askbus hands to callers: a producer's ``Response`` and its tool ``result``, who
asked (``ProducerInfo``), the daemon's ``Welcome``, a UI's ``Withdrawal`` event, and typed
shapes for the ask_user questions themselves."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import (
    Any, Dict, Generic, List, Literal, Mapping, Optional, Tuple, TypedDict, TypeVar, Union,
)

#: How a question ended, as its producer is told.
Reason = Literal["answered", "dismissed", "timeout", "no-ui", "withdrawn", "shutdown"]

#: Why a question left a UI. The first five come from the daemon; ``"lost"`` is this client's
#: own: the connection to the daemon dropped (e.g. it restarted) and the question did not
#: come back before ``resume_grace`` ran out.
WithdrawReason = Literal["answered", "timeout", "withdrawn", "producer-gone", "shutdown", "lost"]

#: What a request does when no UI is subscribed: wait for one until its timeout, or end at
#: once with reason ``no-ui``.
NoUiPolicy = Literal["wait", "reject"]

#: What a UI's answer came to, as the daemon acknowledged it.
AckOutcome = Literal["answered", "dismissed"]

#: A UI's answers: question index (``0`` or ``"0"``) to answer text.
Answers = Union[Mapping[str, str], Mapping[int, str], Mapping[Union[int, str], str]]

#: Question types the reference ask_user tool accepts.
QuestionType = Literal["choice", "text", "yesno"]


class Option(TypedDict):
    """One choice of a ``choice`` question."""

    label: str
    description: str


class _QuestionRequired(TypedDict):
    question: str
    header: str
    type: QuestionType


class Question(_QuestionRequired, total=False):
    """One ask_user question, as the Gemini CLI ask_user tool takes it."""

    options: List[Option]
    multiSelect: bool
    placeholder: str
    unconstrainedHeight: bool


@dataclass(frozen=True)
class ToolResult:
    """What the model is handed for the ask_user tool call, exactly as the reference
    ``AskUserTool`` would return it (``data`` holds the ``ask_user`` metrics)."""

    llm_content: str
    return_display: str
    data: Dict[str, Any]


@dataclass(frozen=True)
class Response:
    """The one terminal answer to a question.

    ``answers`` maps question index (``"0"`` to ``"3"``) to the answer text; it is empty
    unless ``reason == "answered"``. ``cancelled`` is true for every other reason.
    """

    correlation_id: str
    answers: Dict[str, str]
    cancelled: bool
    reason: Reason
    result: ToolResult

    @property
    def answered(self) -> bool:
        return self.reason == "answered"

    def raise_for_outcome(self) -> Response:
        """Returns ``self`` if the question was answered; otherwise raises ``Dismissed``,
        ``TimedOut``, ``NoUi``, ``Withdrawn`` or ``Shutdown`` (all ``NotAnswered``), whose
        message is the ``llm_content`` the model would be given."""
        if self.reason == "answered":
            return self
        from .errors import outcome_error

        raise outcome_error(self)


#: Gemini CLI core's ``ToolConfirmationOutcome``, in its order.
ToolOutcome = Literal[
    "proceed_once",
    "proceed_always",
    "proceed_always_and_save",
    "proceed_always_server",
    "proceed_always_tool",
    "modify_with_editor",
    "cancel",
]
TOOL_OUTCOMES = (
    "proceed_once",
    "proceed_always",
    "proceed_always_and_save",
    "proceed_always_server",
    "proceed_always_tool",
    "modify_with_editor",
    "cancel",
)


@dataclass(frozen=True)
class ApprovalResponse:
    """The one terminal answer to an approval (``tool-confirmation-response``).

    ``confirmed`` is true only when a UI approved (``reason == "answered"`` and an outcome
    other than ``cancel``); every other end is ``confirmed=False``, ``outcome="cancel"``, and
    ``message`` says why. For ``answered`` the ``message`` is what the person typed, if
    anything. Hand ``confirmed``/``outcome``/``payload`` to the agent, ``message`` as the
    reason it is told.
    """

    correlation_id: str
    confirmed: bool
    outcome: ToolOutcome
    reason: Reason
    message: Optional[str] = None
    payload: Optional[Dict[str, Any]] = None


#: How a confirmation ended: the daemon's reasons, ``"refused"`` (the daemon refused the
#: request: ``Confirmation.error`` says why) and ``"daemon-lost"`` (no daemon held it to its end).
ConfirmationReason = Literal[
    "answered", "dismissed", "timeout", "no-ui", "withdrawn", "shutdown", "refused", "daemon-lost"
]


@dataclass(frozen=True)
class Confirmation:
    """What ``AsyncProducer.confirm`` / ``Producer.confirm`` return, whatever happened.

    It **fails closed**: ``confirmed`` is true only when a person chose an approving outcome
    (``reason == "answered"``); a timeout, a dismissal, no UI, a shutdown, a refused request
    (``"refused"``, with the daemon's error in ``error``) or a daemon that could not be reached
    before the deadline (``"daemon-lost"``) are ``confirmed=False``, ``outcome="cancel"``, with
    a ``message`` that says why, for the agent.
    """

    correlation_id: str
    confirmed: bool
    outcome: ToolOutcome
    reason: ConfirmationReason
    message: Optional[str] = None
    payload: Optional[Dict[str, Any]] = None
    error: Optional[BaseException] = None

    @property
    def decided(self) -> bool:
        """A person decided (either way), rather than the request ending undecided."""
        return self.reason == "answered"

    @classmethod
    def from_response(cls, r: "ApprovalResponse") -> "Confirmation":
        # confirmed only for answered, whatever a daemon says: fail closed.
        confirmed = r.confirmed and r.reason == "answered" and r.outcome != "cancel"
        return cls(
            correlation_id=r.correlation_id,
            confirmed=confirmed,
            outcome=r.outcome if confirmed else "cancel",
            reason=r.reason,
            message=r.message,
            payload=r.payload if confirmed else None,
        )


@dataclass(frozen=True)
class ProducerInfo:
    """Who asked, as the daemon tells UIs: the name the producer announced (if any), and the
    process and user the daemon saw on the socket."""

    client: Optional[str]
    pid: Optional[int]
    uid: int


#: The context fields a request may carry, the environment variable each defaults to, and the
#: longest value the daemon accepts (characters).
CONTEXT_FIELDS: Tuple[Tuple[str, str, int], ...] = (
    ("agent", "ASKBUS_AGENT", 256),
    ("session", "ASKBUS_SESSION", 256),
    ("project", "ASKBUS_PROJECT", 128),
    ("cwd", "ASKBUS_CWD", 4096),
    ("title", "ASKBUS_TITLE", 256),
)


#: The agent's approval modes (``RequestContext.approval_mode``), as Gemini CLI spells them.
APPROVAL_MODES: Tuple[str, ...] = ("default", "autoEdit", "yolo", "plan")

#: The typed context fields: (attribute, wire name).
CONTEXT_TYPED_FIELDS: Tuple[Tuple[str, str], ...] = (
    ("approval_mode", "approvalMode"),
    ("interactive", "interactive"),
)


@dataclass(frozen=True)
class RequestContext:
    """Who is asking, about what: sent with a request, shown to UIs with it, and what their
    filters match. ``agent`` is the agent itself as ``name/version`` (not this library),
    ``session`` its own session id, ``project`` a short project name, ``cwd`` its working
    directory, ``title`` one line saying what it is doing. Each is optional; the daemon
    refuses an empty value, a value with control characters, or one longer than its limit
    (``CONTEXT_FIELDS``) with ``InvalidRequest`` naming the field.

    ``approval_mode`` (one of ``APPROVAL_MODES``; wire name ``approvalMode``) and
    ``interactive`` (a bool) say how the agent itself would decide a tool call: the daemon's
    policy rules with ``modes`` and ``interactive`` match them. Absent: ``default``,
    interactive. The daemon refuses any other mode with ``InvalidRequest``."""

    agent: Optional[str] = None
    session: Optional[str] = None
    project: Optional[str] = None
    cwd: Optional[str] = None
    title: Optional[str] = None
    approval_mode: Optional[str] = None
    interactive: Optional[bool] = None

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> RequestContext:
        """The context the ``ASKBUS_AGENT``, ``ASKBUS_SESSION``, ``ASKBUS_PROJECT``,
        ``ASKBUS_CWD`` and ``ASKBUS_TITLE`` environment variables give (empty ones count as
        unset)."""
        env = os.environ if environ is None else environ
        return cls(**{name: env.get(var) or None for name, var, _ in CONTEXT_FIELDS})

    @classmethod
    def of(cls, value: Union[RequestContext, Mapping[str, Optional[str]], None]) -> RequestContext:
        """A context from a ``RequestContext`` or a mapping of its fields."""
        if value is None:
            return cls()
        if isinstance(value, RequestContext):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(f"context must be a RequestContext or a mapping, not {type(value).__name__}")
        # The wire's names are accepted too, so a context read from a frame goes back as is.
        wire = {w: a for a, w in CONTEXT_TYPED_FIELDS}
        fields = {wire.get(k, k): v for k, v in value.items()}
        unknown = set(fields) - set(_context_attributes())
        if unknown:
            raise TypeError(f"unknown context field(s): {', '.join(sorted(unknown))}")
        return cls(**fields)

    def merged(self, over: RequestContext) -> RequestContext:
        """This context with every field ``over`` sets replaced."""
        return RequestContext(**{
            name: getattr(over, name) if getattr(over, name) is not None else getattr(self, name)
            for name in _context_attributes()
        })

    def to_wire(self) -> Dict[str, Any]:
        """The ``context`` object as sent: the fields that are set."""
        out: Dict[str, Any] = {name: getattr(self, name) for name, _, _ in CONTEXT_FIELDS
                               if getattr(self, name) is not None}
        for attr, wire in CONTEXT_TYPED_FIELDS:
            if getattr(self, attr) is not None:
                out[wire] = getattr(self, attr)
        return out


def _context_attributes() -> Tuple[str, ...]:
    return tuple(n for n, _, _ in CONTEXT_FIELDS) + tuple(a for a, _ in CONTEXT_TYPED_FIELDS)


@dataclass(frozen=True)
class Welcome:
    """The daemon's reply to ``hello``."""

    protocol: int
    server: str
    max_frame_bytes: int
    default_timeout_ms: int
    max_timeout_ms: int


@dataclass(frozen=True)
class UiInfo:
    """The UI whose response ended a question."""

    client: Optional[str]
    pid: Optional[int]
    #: Federation: the node the UI is connected to.
    node: Optional[str] = None


@dataclass(frozen=True)
class DecidedBy:
    """Who or what ended a request, as its history record and an observer's end event both
    say. ``kind`` is ``"human"``, ``"rule"``, ``"timeout"``, ``"no-ui"``, ``"producer"``,
    ``"shutdown"`` or ``"rejected"``; ``uid`` is the kernel's, ``via``, ``client`` and
    ``user`` what the deciding UI claimed (``via`` ``"acp"`` on a ``withdrawn`` event: the
    editor answered it); ``rule`` the policy rule that decided (``kind == "rule"``)."""

    kind: str
    via: Optional[str] = None
    uid: Optional[int] = None
    client: Optional[str] = None
    node: Optional[str] = None
    user: Optional[str] = None
    rule: Optional[Any] = None


@dataclass(frozen=True)
class BusEvent:
    """One thing that happened on the bus, as an observer (``askbus.watch()``) sees it: who
    and how long, never the question text or the answers.

    ``event`` is ``"request"`` (it became pending), an outcome (``"answered"``,
    ``"dismissed"``, ``"timeout"``, ``"no-ui"``, ``"withdrawn"``, ``"shutdown"``),
    ``"producer-gone"`` or ``"rejected"`` (then ``code`` is the error the producer got).
    """

    event: str
    ts: str
    correlation_id: str
    producer: ProducerInfo
    ui: Optional[UiInfo]
    latency_ms: Optional[int]
    timeout_ms: Optional[int]
    question_types: List[str]
    headers: List[str]
    code: Optional[str]
    #: The request's ``context.agent`` and ``context.project``, when it carried them.
    agent: Optional[str] = None
    project: Optional[str] = None
    #: ``"approval"`` for approvals, ``None`` for questions.
    kind: Optional[str] = None
    #: Approvals: ``toolCall.name`` and ``details.type``; on answered/dismissed, what the
    #: producer was told.
    tool: Optional[str] = None
    details_type: Optional[str] = None
    confirmed: Optional[bool] = None
    outcome: Optional[str] = None
    #: ``event == "notify"``: a notifier's delivery report (``sink``, ``result``: sent,
    #: failed or answered, ``count``, ``error``); ``producer`` is then the notifier.
    notify: Optional[Dict[str, Any]] = None
    #: Federation: the node the request was asked on.
    node: Optional[str] = None
    #: Ends (not ``rejected``): who or what decided it; ``None`` from a daemon before it.
    decided_by: Optional[DecidedBy] = None


R = TypeVar("R")


@dataclass(frozen=True)
class Withdrawal(Generic[R]):
    """A question left the UIs before this UI answered it; ``request`` is the object this UI
    was given for it (already marked ``withdrawn``)."""

    correlation_id: str
    reason: WithdrawReason
    request: R = field(repr=False, compare=False)
