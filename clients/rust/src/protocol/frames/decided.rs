//! `decidedBy`: who or what ended a request, as its history record and the watchers'
//! end `bus-event` both carry it (one type, so the two never differ).

use serde::{Deserialize, Serialize};

use super::End;

/// Who or what decided a request. `uid` comes from the kernel; `via`, `client` and `user` are
/// what the deciding UI claimed; `rule` is the policy rule, as the policy engine describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecidedBy {
    /// `human`, `timeout`, `no-ui`, `producer`, `shutdown`, `rule` or `rejected`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The policy rule that decided (`kind` `rule`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<serde_json::Value>,
}

impl DecidedBy {
    /// The decider of an end no UI chose (and the kind of one a UI did: `human`).
    pub fn of_end(end: End) -> DecidedBy {
        let kind = match end {
            End::Answered | End::Dismissed => "human",
            End::Timeout => "timeout",
            End::NoUi => "no-ui",
            End::Withdrawn | End::ProducerGone => "producer",
            End::Shutdown => "shutdown",
            End::Rejected => "rejected",
        };
        DecidedBy {
            kind: kind.to_owned(),
            via: None,
            uid: None,
            client: None,
            node: None,
            user: None,
            rule: None,
        }
    }
}
