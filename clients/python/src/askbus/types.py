"""The values askbus hands to callers: a producer's ``Response`` and its tool ``result``, who
asked (``ProducerInfo``), the daemon's ``Welcome``, a UI's ``Withdrawal`` event, and typed
shapes for the ask_user questions themselves."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Generic, List, Literal, Mapping, Optional, TypedDict, TypeVar, Union

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


@dataclass(frozen=True)
class ProducerInfo:
    """Who asked, as the daemon tells UIs: the name the producer announced (if any), and the
    process and user the daemon saw on the socket."""

    client: Optional[str]
    pid: Optional[int]
    uid: int


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
    #: ``"approval"`` for approvals, ``None`` for questions.
    kind: Optional[str] = None
    #: Approvals: ``toolCall.name`` and ``details.type``; on answered/dismissed, what the
    #: producer was told.
    tool: Optional[str] = None
    details_type: Optional[str] = None
    confirmed: Optional[bool] = None
    outcome: Optional[str] = None


R = TypeVar("R")


@dataclass(frozen=True)
class Withdrawal(Generic[R]):
    """A question left the UIs before this UI answered it; ``request`` is the object this UI
    was given for it (already marked ``withdrawn``)."""

    correlation_id: str
    reason: WithdrawReason
    request: R = field(repr=False, compare=False)
