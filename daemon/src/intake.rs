//! The one door every frame a peer sends passes: [`read`] turns a payload into a typed
//! [`Request`] or a typed [`Refused`], and [`read_remote`] does the same for a request that
//! did not come over a connection (another node's share, a record the store kept), rebuilt as
//! the frame its producer sent.
//!
//! Inside, the fast path (the client crate's `parse::fast`, then `questions::fast` or
//! `approvals::fast`) takes the frames every question and approval costs in one pass; when it
//! gives up, the reference (`parse::reference`, then `questions::normalize` or
//! `approvals::check`) decides alone and words every refusal. The fast path may only accept
//! what the reference accepts and must then yield the same: debug builds run the reference
//! beside every frame the fast path takes and assert it, here and nowhere else.

use serde_json::Value;

use crate::approvals;
use crate::broker::{Body, Valid};
use crate::protocol::parse::reference;
use crate::protocol::{
    parse_fast, AskUserRequest, AskUserResponse, CancelReason, FastFrame, FrameError,
    HistoryQueryFrame, Inbound, NotifyReport, RequestContext, RequestHead, RequestKind,
    SubscribeFilter, ToolConfirmationRequest, ToolConfirmationResponse,
};
use crate::questions;

/// What a peer's frame asks the daemon for, every check that needs no daemon state passed: a
/// request's questions validated and normalized, or its approval checked.
#[derive(Debug)]
pub enum Request {
    /// A producer asks (`ask-user-request` or `tool-confirmation-request`).
    Ask(Valid),
    /// A UI answers a question (`ask-user-response`).
    Answer(AskUserResponse),
    /// A UI decides an approval (`tool-confirmation-response`).
    Decide(ToolConfirmationResponse),
    /// A producer withdraws its own request (`ask-user-cancel`, `tool-confirmation-cancel`).
    Cancel {
        kind: RequestKind,
        id: String,
        reason: CancelReason,
    },
    Hello {
        protocol: u64,
        client: Option<String>,
        via: Option<String>,
    },
    Ping {
        id: Option<Value>,
    },
    Stats,
    Subscribe {
        client: Option<String>,
        filter: SubscribeFilter,
        via: Option<String>,
    },
    Watch {
        client: Option<String>,
    },
    NotifyReport(NotifyReport),
    History(HistoryQueryFrame),
}

/// A frame the door refuses, with what the peer is told.
#[derive(Debug, Clone, PartialEq)]
pub enum Refused {
    /// Not a request: the peer gets the error (and loses its connection when the code says so).
    Frame(FrameError),
    /// A request of `kind` whose own fields, questions or approval are invalid: the producer
    /// gets the error, and the rejection is counted and logged like every other end of a
    /// request (`err.correlation_id` is its id, when it had a usable one).
    Request {
        kind: RequestKind,
        context: Option<Box<RequestContext>>,
        err: FrameError,
    },
}

impl Refused {
    /// What the peer is told.
    pub fn error(&self) -> &FrameError {
        match self {
            Refused::Frame(err) | Refused::Request { err, .. } => err,
        }
    }
}

impl From<reference::Refusal> for Refused {
    /// The reference tells a request refused for its own fields by its kind.
    fn from(refusal: reference::Refusal) -> Refused {
        match refusal {
            reference::Refusal::Request(kind, err) => Refused::Request {
                kind,
                context: None,
                err,
            },
            reference::Refusal::Frame(err) => Refused::Frame(err),
        }
    }
}

/// Reads one frame's payload: the fast path first, and the reference alone when it gives up.
pub fn read(payload: &[u8]) -> Result<Request, Refused> {
    match fast(payload) {
        Some(request) => {
            #[cfg(debug_assertions)]
            assert_reference_agrees(payload, &request);
            Ok(request)
        }
        None => by_reference(payload),
    }
}

/// A request rebuilt as the frame its producer sent (by `federation::wire` from another
/// node's share, by the store from its record), through the same door as a local one: it
/// must be a valid request of `kind`. The error is what the log says of it.
pub fn read_remote(frame: &[u8], kind: RequestKind) -> Result<Valid, String> {
    match read(frame) {
        Ok(Request::Ask(valid)) if valid.body().kind() == kind => Ok(valid),
        Ok(_) => Err(match kind {
            RequestKind::Question => "not a question request".into(),
            RequestKind::Approval => "not an approval request".into(),
        }),
        Err(refused) => Err(refused.error().message.clone()),
    }
}

/// The fast path: a request with plain questions, an approval whose fields are canonical, or
/// a response, in one pass over the payload. `None` leaves the frame to the reference.
fn fast(payload: &[u8]) -> Option<Request> {
    match parse_fast::<questions::fast::Questions>(payload)? {
        FastFrame::Request(head, questions) => {
            let normalized = questions::fast::check(questions, payload.len())?;
            Some(Request::Ask(Valid::new(head, Body::Questions(normalized))))
        }
        FastFrame::Approval(head, fields) => {
            Some(Request::Ask(approvals::fast::check(head, fields)?.into()))
        }
        // Only responses: nothing left to validate.
        FastFrame::Other(frame) => of_frame(frame).ok(),
    }
}

/// The reference path, which decides every frame and words every refusal.
fn by_reference(payload: &[u8]) -> Result<Request, Refused> {
    of_frame(reference::parse(payload)?)
}

/// A parsed frame as a request: a request's questions or approval checked by the reference.
fn of_frame(frame: Inbound) -> Result<Request, Refused> {
    Ok(match frame {
        Inbound::AskUserRequest(req) => Request::Ask(question(req)?),
        Inbound::ToolConfirmationRequest(req) => Request::Ask(approval(req)?),
        Inbound::AskUserResponse(resp) => Request::Answer(resp),
        Inbound::ToolConfirmationResponse(resp) => Request::Decide(resp),
        Inbound::AskUserCancel {
            correlation_id,
            reason,
        } => Request::Cancel {
            kind: RequestKind::Question,
            id: correlation_id,
            reason,
        },
        Inbound::ToolConfirmationCancel {
            correlation_id,
            reason,
        } => Request::Cancel {
            kind: RequestKind::Approval,
            id: correlation_id,
            reason,
        },
        Inbound::Hello {
            protocol,
            client,
            via,
        } => Request::Hello {
            protocol,
            client,
            via,
        },
        Inbound::Ping { id } => Request::Ping { id },
        Inbound::Stats => Request::Stats,
        Inbound::Subscribe {
            client,
            filter,
            via,
        } => Request::Subscribe {
            client,
            filter,
            via,
        },
        Inbound::Watch { client } => Request::Watch { client },
        Inbound::NotifyReport(report) => Request::NotifyReport(report),
        Inbound::History(query) => Request::History(query),
    })
}

/// The reference's validation and normalization of a request's questions.
fn question(req: AskUserRequest) -> Result<Valid, Refused> {
    let AskUserRequest {
        correlation_id,
        timeout_ms,
        no_ui,
        context,
        questions,
    } = req;
    match questions::normalize(&questions.into_params()) {
        Ok(normalized) => {
            let head = RequestHead {
                correlation_id,
                timeout_ms,
                no_ui,
                context,
            };
            Ok(Valid::new(head, Body::Questions(normalized)))
        }
        Err(message) => Err(Refused::Request {
            kind: RequestKind::Question,
            err: invalid_request(message, &correlation_id),
            context: context.map(Box::new),
        }),
    }
}

/// The reference's check of an approval's tool call, details and outcomes.
fn approval(req: ToolConfirmationRequest) -> Result<Valid, Refused> {
    approvals::check(req)
        .map(Valid::from)
        .map_err(|r| Refused::Request {
            kind: RequestKind::Approval,
            err: invalid_request(r.message, &r.correlation_id),
            context: r.context,
        })
}

/// A request's questions or approval failed the reference's checks: its message, verbatim.
fn invalid_request(message: String, id: &str) -> FrameError {
    FrameError::new(crate::protocol::ErrorCode::InvalidRequest, message).with_id(Some(id))
}

/// Debug builds: what the fast path made of `payload` must be what the reference makes of it.
/// Compared as their `Debug` text, which shows every field (a `Valid`'s body has no
/// `PartialEq`; its questions and approval do, and print all they hold).
#[cfg(debug_assertions)]
fn assert_reference_agrees(payload: &[u8], fast: &Request) {
    let reference = by_reference(payload);
    assert_eq!(
        format!("{:?}", Ok::<_, Refused>(fast)),
        format!("{:?}", reference.as_ref()),
        "the fast path differs from the reference on {}",
        String::from_utf8_lossy(payload)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorCode;

    fn refused(payload: &str) -> Refused {
        read(payload.as_bytes()).unwrap_err()
    }

    #[test]
    fn plain_requests_take_the_fast_path_and_the_rest_the_reference() {
        let plain = r#"{"type":"ask-user-request","correlationId":"a","questions":[{"question":"Q?","header":"H","type":"text"}]}"#;
        assert!(fast(plain.as_bytes()).is_some());
        // An extra key in a question: valid, but only the reference reads it.
        let unusual = r#"{"type":"ask-user-request","correlationId":"a","questions":[{"question":"Q?","header":"H","type":"text","x":1}]}"#;
        assert!(fast(unusual.as_bytes()).is_none());
        for frame in [plain, unusual] {
            let Ok(Request::Ask(valid)) = read(frame.as_bytes()) else {
                panic!("{frame}")
            };
            assert_eq!(valid.correlation_id(), "a");
            assert_eq!(valid.body().kind(), RequestKind::Question);
        }
        let approval =
            r#"{"type":"tool-confirmation-request","correlationId":"b","toolCall":{"name":"n"}}"#;
        assert!(fast(approval.as_bytes()).is_some());
        let Ok(Request::Ask(valid)) = read(approval.as_bytes()) else {
            panic!()
        };
        assert_eq!(valid.body().kind(), RequestKind::Approval);
    }

    #[test]
    fn refusals_say_whether_a_request_was_refused() {
        let Refused::Request { kind, context, err } = refused(
            r#"{"type":"ask-user-request","correlationId":"a","context":{"project":"p"},"questions":[]}"#,
        ) else {
            panic!()
        };
        assert_eq!(
            (kind, err.code),
            (RequestKind::Question, ErrorCode::InvalidRequest)
        );
        assert_eq!(err.correlation_id.as_deref(), Some("a"));
        assert_eq!(context.unwrap().project.as_deref(), Some("p"));
        let Refused::Request { kind, err, .. } =
            refused(r#"{"type":"tool-confirmation-request","correlationId":"b"}"#)
        else {
            panic!()
        };
        assert_eq!(
            (kind, err.code),
            (RequestKind::Approval, ErrorCode::InvalidRequest)
        );
        // A request's own fields, refused by the parser: no usable id.
        let Refused::Request { kind, err, .. } =
            refused(r#"{"type":"tool-confirmation-request","correlationId":""}"#)
        else {
            panic!()
        };
        assert_eq!((kind, err.correlation_id), (RequestKind::Approval, None));
        for (frame, code) in [
            ("{", ErrorCode::InvalidJson),
            (r#"{"type":"nope"}"#, ErrorCode::UnknownType),
            (
                r#"{"type":"hello","protocol":2}"#,
                ErrorCode::UnsupportedProtocol,
            ),
        ] {
            let Refused::Frame(err) = refused(frame) else {
                panic!("{frame}")
            };
            assert_eq!(err.code, code, "{frame}");
        }
    }

    #[test]
    fn remote_requests_must_be_of_their_kind() {
        let q = br#"{"type":"ask-user-request","correlationId":"a","questions":[{"question":"Q?","header":"H","type":"text"}]}"#;
        assert!(read_remote(q, RequestKind::Question).is_ok());
        assert_eq!(
            read_remote(q, RequestKind::Approval).unwrap_err(),
            "not an approval request"
        );
        let ping = br#"{"type":"ping"}"#;
        assert_eq!(
            read_remote(ping, RequestKind::Question).unwrap_err(),
            "not a question request"
        );
        let bad = br#"{"type":"ask-user-request","correlationId":"a","questions":[]}"#;
        assert!(!read_remote(bad, RequestKind::Question)
            .unwrap_err()
            .is_empty());
    }
}
