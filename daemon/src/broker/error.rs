//! Why the broker refuses an operation, and the one mapping of those reasons to wire codes.

use crate::protocol::{ErrorCode, FrameError, RequestKind, ToolOutcome};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrokerError {
    #[error("correlationId {0:?} is already pending")]
    DuplicateCorrelationId(String),
    #[error("the daemon's store cannot write now (disk full or an I/O error); retry shortly")]
    StoreUnavailable,
    #[error("this connection already has {0} pending requests")]
    TooManyPendingForConnection(usize),
    #[error("uid {uid} already has {limit} pending requests")]
    TooManyPendingForUid { uid: u32, limit: usize },
    #[error("the daemon already holds {0} pending requests")]
    TooManyPendingTotal(usize),
    #[error(
        "uid {uid}'s pending questions hold {held} bytes; this request's {size} more would \
         pass its budget of {limit} bytes (max_pending_bytes_per_uid)"
    )]
    TooManyPendingBytesForUid {
        uid: u32,
        held: usize,
        size: usize,
        limit: usize,
    },
    #[error("correlationId {0:?} is not pending (answered, timed out, withdrawn, or never asked)")]
    NotPending(String),
    #[error("only a subscribed UI may answer; send {{\"type\":\"subscribe\"}} first")]
    NotSubscribed,
    #[error("uid {0} may not ask questions on this askbusd")]
    NotAProducer(u32),
    #[error("uid {0} may not be a UI or watcher on this askbusd")]
    NotAUi(u32),
    /// Another user's question: the message names only what the UI itself sent.
    #[error("correlationId {0:?} was asked by another user; only an operator may answer it")]
    ForeignQuestion(String),
    /// A question this UI's subscribe filter leaves out: it was never shown it.
    #[error("correlationId {0:?} is outside this UI's subscribe filter; it was not shown to it")]
    OutsideFilter(String),
    #[error("answers key \"{index}\" is out of range: the request has {count} question(s)")]
    AnswerOutOfRange { index: usize, count: usize },
    #[error("these answers would make a tool result of up to {size} bytes; the limit is {limit}")]
    ResultTooLarge { size: usize, limit: usize },
    /// A response of the other kind: `kind` is what the pending request is.
    #[error("correlationId {id:?} is {}", match kind {
        RequestKind::Approval => "a tool confirmation; answer it with tool-confirmation-response",
        RequestKind::Question => "a question; answer it with ask-user-response",
    })]
    WrongKind { id: String, kind: RequestKind },
    #[error("outcome {outcome} is not offered by this request (it offers {})",
        offered.iter().map(|o| o.as_str()).collect::<Vec<_>>().join(", "))]
    OutcomeNotOffered {
        outcome: ToolOutcome,
        offered: Vec<ToolOutcome>,
    },
}

impl BrokerError {
    pub fn code(&self) -> ErrorCode {
        match self {
            BrokerError::DuplicateCorrelationId(_) => ErrorCode::DuplicateCorrelationId,
            BrokerError::StoreUnavailable => ErrorCode::StoreUnavailable,
            BrokerError::TooManyPendingForConnection(_)
            | BrokerError::TooManyPendingForUid { .. }
            | BrokerError::TooManyPendingBytesForUid { .. }
            | BrokerError::TooManyPendingTotal(_) => ErrorCode::TooManyPending,
            BrokerError::NotAProducer(_)
            | BrokerError::NotAUi(_)
            | BrokerError::ForeignQuestion(_)
            | BrokerError::OutsideFilter(_) => ErrorCode::Forbidden,
            BrokerError::NotPending(_) => ErrorCode::NotPending,
            BrokerError::NotSubscribed => ErrorCode::NotSubscribed,
            BrokerError::AnswerOutOfRange { .. }
            | BrokerError::ResultTooLarge { .. }
            | BrokerError::WrongKind { .. }
            | BrokerError::OutcomeNotOffered { .. } => ErrorCode::InvalidResponse,
        }
    }

    pub fn into_frame_error(self, correlation_id: &str) -> FrameError {
        FrameError::new(self.code(), self.to_string()).with_id(Some(correlation_id))
    }
}
