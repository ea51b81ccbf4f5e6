//! A request ready for the broker, of either kind: its questions validated and normalized, or
//! its approval checked, by the door (`crate::intake`, the fast path or the reference) outside
//! the lock (validation is the costly part of a request).

use super::body::Body;
use crate::approvals::ValidApproval;
use crate::protocol::{NoUiPolicy, RequestContext, RequestHead, TimeoutMs};

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
    /// A request whose envelope the parser read and whose body passed validation (built by
    /// the door, `crate::intake`).
    pub fn new(head: RequestHead, body: Body) -> Valid {
        Valid {
            correlation_id: head.correlation_id,
            timeout_ms: head.timeout_ms,
            no_ui: head.no_ui,
            context: head.context,
            body,
        }
    }

    pub fn body(&self) -> &Body {
        &self.body
    }

    pub fn context(&self) -> Option<&RequestContext> {
        self.context.as_ref()
    }

    pub fn correlation_id(&self) -> &str {
        &self.correlation_id
    }
}
