//! Frames peers send the daemon, as the parsers in `super::super::parse` yield them: each
//! frame's own fields checked, the questions of a request not yet validated.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::{
    NoUiPolicy, RequestContext, SubscribeFilter, ToolConfirmationRequest, ToolConfirmationResponse,
};

/// A frame a peer sent, after the checks that need no daemon state.
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    Hello {
        protocol: u64,
        client: Option<String>,
        /// The kind of UI the peer says it is (`decidedBy.via`), as claimed.
        via: Option<String>,
    },
    Ping {
        /// `Some(Value::Null)` when the peer sent `"id": null`: echoed as sent.
        id: Option<Value>,
    },
    Stats,
    Subscribe {
        client: Option<String>,
        /// Which requests this UI is shown; the default shows everything it may see.
        filter: SubscribeFilter,
        /// The kind of UI it says it is (`decidedBy.via`), as claimed.
        via: Option<String>,
    },
    /// Observe the bus (ops): every request's arrival and end, without question text.
    Watch {
        client: Option<String>,
    },
    AskUserRequest(AskUserRequest),
    AskUserCancel {
        correlation_id: String,
        /// Why the producer withdraws it.
        reason: CancelReason,
    },
    AskUserResponse(AskUserResponse),
    /// An approval to ask; its tool call and details are checked by `approvals::check`.
    ToolConfirmationRequest(ToolConfirmationRequest),
    ToolConfirmationCancel {
        correlation_id: String,
        /// Why the producer withdraws it.
        reason: CancelReason,
    },
    ToolConfirmationResponse(ToolConfirmationResponse),
    /// A notifier's delivery report: counted and shown to observers, never answered.
    NotifyReport(super::NotifyReport),
    /// A query of the store's records (`history`), answered with one `history` frame.
    History(super::HistoryQueryFrame),
}

/// Why a producer withdraws its own request (`reason` of `ask-user-cancel` and
/// `tool-confirmation-cancel`). Either way the request ends `withdrawn` for its producer and
/// the UIs; the difference is what its record says decided it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CancelReason {
    /// Nobody decided it (`reason` absent or `withdrawn`): `decidedBy` `producer`.
    #[default]
    Withdrawn,
    /// A person answered it outside askbus (`answered-elsewhere`), e.g. in the editor an
    /// `askbus acp` proxy stands in front of: `decidedBy` `human`, `via` as claimed (else
    /// `client`).
    AnsweredElsewhere { via: Option<String> },
}

impl CancelReason {
    /// The `reason` value on the wire.
    pub fn as_str(&self) -> &'static str {
        match self {
            CancelReason::Withdrawn => "withdrawn",
            CancelReason::AnsweredElsewhere { .. } => "answered-elsewhere",
        }
    }

    /// The `via` it claims, if any.
    pub fn via(&self) -> Option<&str> {
        match self {
            CancelReason::Withdrawn => None,
            CancelReason::AnsweredElsewhere { via } => via.as_deref(),
        }
    }
}

/// Whether `via` is a well-formed `via` token: 1 to [`MAX_VIA_CHARS`] lowercase ASCII letters,
/// digits or `-`, starting with a letter (`acp`, `tui`, `web`, …).
pub fn valid_via(via: &str) -> bool {
    via.len() <= MAX_VIA_CHARS
        && via.starts_with(|c: char| c.is_ascii_lowercase())
        && via
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The longest `via` accepted.
pub const MAX_VIA_CHARS: usize = 32;

/// An ask-user-request whose own fields are valid; `questions` is not yet validated.
#[derive(Debug, Clone, PartialEq)]
pub struct AskUserRequest {
    pub correlation_id: String,
    pub timeout_ms: Option<TimeoutMs>,
    pub no_ui: Option<NoUiPolicy>,
    /// Who is asking, about what (`None` when absent, `null`, or without a known field).
    pub context: Option<RequestContext>,
    pub questions: RequestQuestions,
}

/// A request's questions as they arrived, for the reference's validation.
#[derive(Debug, Clone)]
pub enum RequestQuestions {
    /// The JSON text of the frame's `questions` value, from a frame whose own fields were all
    /// plain (the hot path reads them without building a tree).
    Raw(Box<RawValue>),
    /// The whole frame: it is the `params` object the reference tool validates, so a missing
    /// `questions` is reported exactly as the reference reports it.
    Params(Value),
}

impl RequestQuestions {
    /// The `params` object the reference validates. Of a raw frame only `questions` is kept:
    /// validation reads nothing else of `params`.
    pub fn into_params(self) -> Value {
        match self {
            RequestQuestions::Params(params) => params,
            RequestQuestions::Raw(raw) => {
                // The text was read as JSON once already, so it reads again.
                let questions: Value =
                    serde_json::from_str(raw.get()).expect("raw questions are valid JSON");
                let mut params = Map::new();
                params.insert("questions".to_owned(), questions);
                Value::Object(params)
            }
        }
    }
}

/// Equal when they hold the same `questions` (what validation reads), however they arrived.
impl PartialEq for RequestQuestions {
    fn eq(&self, other: &Self) -> bool {
        let questions = |q: &Self| q.clone().into_params().get("questions").cloned();
        questions(self) == questions(other)
    }
}

/// A requested timeout: a positive integer, possibly beyond what `u64` holds (then clamped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutMs {
    Ms(u64),
    /// An integral value too large for u64: clamps to the daemon's maximum.
    Huge,
}

impl TimeoutMs {
    pub fn clamp(self, max: u64) -> u64 {
        match self {
            TimeoutMs::Ms(ms) => ms.min(max),
            TimeoutMs::Huge => max,
        }
    }
}

/// A UI's answer, with its shape checked; whether its indices fit the request is the broker's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskUserResponse {
    pub correlation_id: String,
    pub answers: BTreeMap<usize, String>,
    pub cancelled: bool,
    /// Who answered, as the UI claims (a chat platform's user id and name): `decidedBy.user`.
    pub user: Option<String>,
}
