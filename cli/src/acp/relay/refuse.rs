//! The relay's guards at the edges: lines over the bound (passed on unread, or the session
//! ended when `--gate askbus` cannot be kept), the editor's answers that are not a decision
//! (an option the agent did not offer, a contradiction, a key twice), and the agent's ids
//! reused while still open. Nothing refused here ever becomes an approval.

use std::sync::Arc;

use serde_json::Value;

use askbus::protocol::CancelReason;

use super::super::wire::{self, IdKey};
use super::super::{permission, Event, Gate};
use super::{answered_in_editor, InFlight, Relay, What};

impl Relay {
    /// A piece of an agent's line over the bound, passed on unread: askbus is not asked, so
    /// with `--gate both` or `editor` the editor decides whatever it is. With `--gate askbus`
    /// the editor must never see a permission request or elicitation: a line that may be one
    /// ends the session instead (false: the pump stops, nothing more of it is passed on).
    pub fn agent_long(&self, piece: &[u8], first: bool, last: bool, may_matter: bool) -> bool {
        if may_matter && self.opts.gate == Gate::Askbus {
            self.fail(&format!(
                "the agent wrote a line of over {} bytes that may be a permission request or \
                 an elicitation; it cannot be asked in askbus and --gate askbus keeps it from \
                 the editor: ending the session (--max-line-bytes raises the bound)",
                self.opts.max_line
            ));
            return false;
        }
        if first {
            eprintln!(
                "askbus acp: a line of the agent's of over {} bytes is passed to the editor unread{}",
                self.opts.max_line,
                if may_matter { " (askbus does not ask it; the editor decides)" } else { "" }
            );
        }
        if !self.to_editor.write_piece(piece, last) {
            let _ = self.events.send(Event::EditorGone);
        }
        true
    }

    /// A piece of an editor's line over the bound, passed on to the agent unread.
    pub fn editor_long(&self, piece: &[u8], first: bool, last: bool) {
        if first {
            eprintln!(
                "askbus acp: a line of the editor's of over {} bytes is passed to the agent unread",
                self.opts.max_line
            );
        }
        self.to_agent.write_piece(piece, last);
    }

    /// The proxy cannot keep its promise: says why, and the session ends.
    pub(super) fn fail(&self, why: &str) {
        eprintln!("askbus acp: {why}");
        let _ = self.events.send(Event::Failed);
    }

    /// The editor answered a request of the agent's first. A well-formed answer goes to the
    /// agent as it is, and the askbus request is withdrawn as answered there (a person
    /// decided, in the editor: its record says `decidedBy` human via acp). An answer to a
    /// permission request that selects an option the agent did not offer, or contradicts
    /// itself, is never an approval: the agent is told no.
    pub(super) fn editor_answered(self: &Arc<Self>, id: IdKey, f: InFlight, line: &[u8]) {
        let fault = match &f.what {
            What::Permission(options) => wire::permission_answer_fault(line, options.offered()),
            What::Elicitation(_) => None,
        };
        match fault {
            None => {
                self.to_agent(line, true);
                if let Some(cid) = f.correlation_id {
                    self.withdraw(cid, answered_in_editor());
                }
            }
            Some(why) => {
                eprintln!(
                    "askbus acp: the editor's answer to request {id} is refused ({why}); the agent is told no"
                );
                self.to_agent(&wire::result_line(&id, &f.what.denied()), true);
                if let Some(cid) = f.correlation_id {
                    self.withdraw(cid, CancelReason::Withdrawn);
                }
            }
        }
    }

    /// A request whose id is one the agent already has in flight, or whose editor copy is
    /// still open: which one an answer is for would be anyone's guess, so both are denied
    /// (the first withdrawn from askbus and from the editor) and the new one is asked
    /// nowhere. True when it was.
    pub(super) fn reused(self: &Arc<Self>, id: &IdKey, permission: bool, params: &Value) -> bool {
        let mut st = self.state();
        if !st.inflight.contains_key(id) && !st.swallow.contains(id) {
            return false;
        }
        let first = st.inflight.remove(id);
        if first.as_ref().is_some_and(|f| f.editor_saw) {
            st.swallow.insert(id.clone());
        }
        drop(st);
        eprintln!(
            "askbus acp: the agent reused the id {id} of a request still open: both are denied"
        );
        if let Some(f) = first {
            if let Some(cid) = f.correlation_id {
                self.withdraw(cid, CancelReason::Withdrawn);
            }
            self.to_agent(&wire::result_line(id, &f.what.denied()), true);
            if f.editor_saw {
                self.to_editor(&wire::cancel_request_line(id), true);
            }
        }
        let denied = if permission {
            permission::deny_unmapped(params)
        } else {
            serde_json::json!({"action": "cancel"})
        };
        self.to_agent(&wire::result_line(id, &denied), true);
        true
    }
}
