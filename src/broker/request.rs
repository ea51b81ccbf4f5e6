//! A request ready for the broker: its questions validated and normalized outside the lock
//! (validation is the costly part of a request), by the fast path or the reference.

use super::BrokerError;
use crate::protocol::{AskUserRequest, NoUiPolicy, RequestContext, RequestHead, TimeoutMs};
use crate::questions::{self, QuestionMeta};

/// An ask-user-request whose questions passed the reference's validation, normalized. Built
/// outside the broker's lock: validation is the costly part of a request.
#[derive(Debug)]
pub struct ValidRequest {
    pub(super) correlation_id: String,
    pub(super) timeout_ms: Option<TimeoutMs>,
    pub(super) no_ui: Option<NoUiPolicy>,
    pub(super) context: Option<RequestContext>,
    /// The normalized questions' JSON text.
    pub(super) questions: Box<str>,
    pub(super) meta: Vec<QuestionMeta>,
}

impl ValidRequest {
    /// Validates and normalizes; on failure returns what `Broker::reject` takes.
    #[allow(clippy::type_complexity)]
    pub fn check(
        req: AskUserRequest,
    ) -> Result<ValidRequest, (String, Option<Box<RequestContext>>, BrokerError)> {
        match questions::check(req.questions) {
            Ok(normalized) => Ok(ValidRequest {
                meta: normalized.meta,
                questions: normalized.questions,
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
            meta: normalized.meta,
            questions: normalized.questions,
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
        assert!(
            req.correlation_id == self.correlation_id
                && req.timeout_ms == self.timeout_ms
                && req.no_ui == self.no_ui
                && req.context == self.context
                && *reference.questions == *self.questions
                && reference.meta == self.meta,
            "the fast path differs from the reference on {}",
            String::from_utf8_lossy(payload)
        );
    }
}
