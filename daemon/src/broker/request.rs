//! A request ready for the broker, of either kind: its questions validated and normalized (by
//! the fast path or the reference), or its approval checked, outside the lock (validation is
//! the costly part of a request).

use super::body::Body;
use super::BrokerError;
use crate::approvals::ValidApproval;
use crate::protocol::{AskUserRequest, NoUiPolicy, RequestContext, RequestHead, TimeoutMs};
use crate::questions;

/// A request that passed validation: its envelope and its [`Body`]. Built outside the
/// broker's lock: validation is the costly part of a request.
#[derive(Debug)]
pub struct Valid {
    pub(super) correlation_id: String,
    pub(super) timeout_ms: Option<TimeoutMs>,
    pub(super) no_ui: Option<NoUiPolicy>,
    pub(super) context: Option<RequestContext>,
    pub(super) body: Body,
}

/// The name the question constructors have always had.
pub type ValidRequest = Valid;

impl From<ValidApproval> for Valid {
    fn from(a: ValidApproval) -> Valid {
        Valid {
            correlation_id: a.correlation_id,
            timeout_ms: a.timeout_ms,
            no_ui: a.no_ui,
            context: a.context,
            body: Body::Approval(Box::new(a.body)),
        }
    }
}

impl Valid {
    pub fn body(&self) -> &Body {
        &self.body
    }

    pub fn context(&self) -> Option<&RequestContext> {
        self.context.as_ref()
    }

    /// Validates and normalizes; on failure returns what `Broker::reject` takes.
    #[allow(clippy::type_complexity)]
    pub fn check(
        req: AskUserRequest,
    ) -> Result<ValidRequest, (String, Option<Box<RequestContext>>, BrokerError)> {
        match questions::check(req.questions) {
            Ok(normalized) => Ok(ValidRequest {
                body: Body::Questions(normalized),
                correlation_id: req.correlation_id,
                timeout_ms: req.timeout_ms,
                no_ui: req.no_ui,
                context: req.context,
            }),
            Err(msg) => Err((
                req.correlation_id,
                req.context.map(Box::new),
                BrokerError::InvalidQuestions(msg),
            )),
        }
    }

    /// The fast path: a request whose plain questions `protocol::parse_fast` read from a
    /// payload of `payload_len` bytes; `None` leaves it to `parse_inbound` and [`Self::check`].
    pub fn fast(
        head: RequestHead,
        questions: questions::fast::Questions,
        payload_len: usize,
    ) -> Option<ValidRequest> {
        let normalized = questions::fast::check(questions, payload_len)?;
        Some(ValidRequest {
            body: Body::Questions(normalized),
            correlation_id: head.correlation_id,
            timeout_ms: head.timeout_ms,
            no_ui: head.no_ui,
            context: head.context,
        })
    }

    /// The whole fast path for one `ask-user-request` payload (frame, then questions): `None`
    /// for anything it leaves to `parse_inbound` and [`Self::check`]. Debug builds check the
    /// result against the reference.
    pub fn fast_from(payload: &[u8]) -> Option<ValidRequest> {
        match crate::protocol::parse_fast::<questions::fast::Questions>(payload)? {
            crate::protocol::FastFrame::Request(head, questions) => {
                let req = Self::fast(head, questions, payload.len())?;
                #[cfg(debug_assertions)]
                req.assert_reference_agrees(payload);
                Some(req)
            }
            _ => None,
        }
    }

    pub fn correlation_id(&self) -> &str {
        &self.correlation_id
    }

    /// Debug builds: a request the fast path took from `payload` must be what the reference
    /// paths (`protocol::parse::reference`, then `questions::normalize`) make of it.
    #[cfg(debug_assertions)]
    pub fn assert_reference_agrees(&self, payload: &[u8]) {
        let frame = crate::protocol::parse::reference::parse(payload);
        let Ok(crate::protocol::Inbound::AskUserRequest(req)) = frame else {
            panic!("the fast path took a request the reference refuses: {frame:?}");
        };
        let reference = questions::normalize(&req.questions.into_params())
            .expect("the reference accepts the questions the fast path took");
        let Body::Questions(mine) = &self.body else {
            panic!("a question request holds questions");
        };
        assert!(
            req.correlation_id == self.correlation_id
                && req.timeout_ms == self.timeout_ms
                && req.no_ui == self.no_ui
                && req.context == self.context
                && reference == *mine,
            "the fast path differs from the reference on {}",
            String::from_utf8_lossy(payload)
        );
    }
}
