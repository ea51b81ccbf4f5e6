//! The askbus side of the race: an intercepted request asked through askbusd (or handed to
//! `--fallback` when it cannot be), how askbus ended it, its withdrawal (the editor answered,
//! the turn or the request was cancelled, the agent is gone), the daemon connection and the
//! request's context.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use askbus::client::{new_correlation_id, Ask, Producer, ProducerOptions};
use askbus::protocol::{CancelReason, RequestContext};

use super::super::elicit;
use super::super::permission;
use super::super::wire::{self, IdKey};
use super::super::{Decision, Fallback, Gate};
use super::{InFlight, Relay, What};

/// What askbus is asked, for one intercepted request.
enum Body {
    Approval(Box<askbus::client::Confirm>),
    Questions(Box<Ask>),
}

impl Relay {
    /// A permission request or elicitation of the agent: asked through askbus (and sent on to
    /// the editor with `--gate both`), or handed to the fallback when askbus cannot ask it.
    pub(super) fn intercept(
        self: &Arc<Self>,
        line: &[u8],
        permission: bool,
        id: IdKey,
        params: Value,
    ) {
        let method = if permission {
            wire::REQUEST_PERMISSION
        } else {
            wire::ELICITATION_CREATE
        };
        if self.reused(&id, permission, &params) {
            return;
        }
        let session = params["sessionId"].as_str().map(str::to_owned);
        let mapped = if permission {
            permission::map(&params).map(|p| {
                let confirm = Box::new(p.confirm);
                (
                    What::Permission(p.options),
                    Body::Approval(confirm),
                    p.title,
                )
            })
        } else {
            elicit::map(&params).map(|e| {
                let ask = Ask {
                    questions: e.questions.clone(),
                    ..Ask::default()
                };
                let title = e.title.clone();
                (
                    What::Elicitation(Arc::new(e)),
                    Body::Questions(Box::new(ask)),
                    title,
                )
            })
        };
        let (what, body, title) = match mapped {
            Ok(m) => m,
            Err(why) => {
                eprintln!("askbus acp: {method} {id} cannot be asked through askbus: {why}");
                // The editor sees everything with --gate both; else the fallback decides.
                if self.opts.gate == Gate::Both {
                    return self.to_editor(line, true);
                }
                return self.unavailable(line, &id, None, permission, &params);
            }
        };
        let producer = self.rt.block_on(self.producer());
        let Some(producer) = producer else {
            return self.unavailable(line, &id, Some(&what), permission, &params);
        };
        let cid = new_correlation_id();
        let editor_saw = self.opts.gate == Gate::Both;
        let context = self.context(session.as_deref(), &title);
        self.state().inflight.insert(
            id.clone(),
            InFlight {
                line: line.to_vec(),
                session,
                editor_saw,
                correlation_id: Some(cid.clone()),
                what: what.clone(),
            },
        );
        if editor_saw {
            self.to_editor(line, true);
        }
        let me = self.clone();
        let (timeout_ms, no_ui) = (self.opts.timeout_ms, self.opts.no_ui);
        self.rt.spawn(async move {
            // Withdrawn before this task ran (the editor answered at once, the agent reused
            // the id): never asked. Past this check the ask is registered in its first poll,
            // before any withdrawal (spawned later, on the one worker) can send its cancel.
            let wanted = me
                .state()
                .inflight
                .get(&id)
                .is_some_and(|f| f.correlation_id.as_deref() == Some(cid.as_str()));
            if !wanted {
                return;
            }
            let decision = match (body, &what) {
                (Body::Approval(mut c), What::Permission(options)) => {
                    c.correlation_id = Some(cid);
                    c.timeout_ms = timeout_ms;
                    c.no_ui = no_ui;
                    c.context = context;
                    let confirmation = producer.confirm(*c).await;
                    permission::decision(&confirmation, options)
                }
                (Body::Questions(mut a), What::Elicitation(e)) => {
                    a.correlation_id = Some(cid);
                    a.timeout_ms = timeout_ms;
                    a.no_ui = no_ui;
                    a.context = context;
                    match producer.ask(*a).await {
                        Ok(r) => elicit::decision(&r, e),
                        Err(err) => Decision::Unavailable(err.to_string()),
                    }
                }
                _ => unreachable!("a body is asked as what it was mapped to"),
            };
            me.askbus_ended(id, decision);
        });
    }

    /// Askbus cannot take the request (no daemon, or one it cannot ask): `--fallback editor`
    /// hands it to the editor as if askbus were not there; `--fallback deny` denies it.
    fn unavailable(
        &self,
        line: &[u8],
        id: &IdKey,
        what: Option<&What>,
        permission: bool,
        params: &Value,
    ) {
        match self.opts.fallback {
            Fallback::Editor => self.to_editor(line, true),
            Fallback::Deny => {
                let result = match what {
                    Some(w) => w.denied(),
                    None if permission => permission::deny_unmapped(params),
                    None => serde_json::json!({"action": "cancel"}),
                };
                eprintln!(
                    "askbus acp: denied request {id}: askbus cannot ask it (--fallback deny)"
                );
                self.to_agent(&wire::result_line(id, &result), true)
            }
        }
    }

    /// How askbus ended a request: the first answer wins, the editor's copy is cancelled.
    fn askbus_ended(&self, id: IdKey, decision: Decision) {
        let mut st = self.state();
        let Some(f) = st.inflight.get_mut(&id) else {
            // The editor answered first, or the turn was cancelled.
            return;
        };
        let result = match decision {
            Decision::Withdrawn => return,
            Decision::Decided(v) => v,
            Decision::Ended => f.what.denied(),
            Decision::Unavailable(why) => match self.opts.fallback {
                Fallback::Deny => {
                    eprintln!("askbus acp: denied request {id}: {why} (--fallback deny)");
                    f.what.denied()
                }
                Fallback::Editor => {
                    f.correlation_id = None;
                    if f.editor_saw {
                        eprintln!("askbus acp: request {id} is the editor's to answer: {why}");
                        return;
                    }
                    eprintln!("askbus acp: request {id} goes to the editor: {why}");
                    f.editor_saw = true;
                    let line = f.line.clone();
                    drop(st);
                    return self.to_editor(&line, true);
                }
            },
        };
        let f = st.inflight.remove(&id).expect("found above");
        if f.editor_saw {
            st.swallow.insert(id.clone());
        }
        drop(st);
        self.to_agent(&wire::result_line(&id, &result), true);
        if f.editor_saw {
            self.to_editor(&wire::cancel_request_line(&id), true);
        }
    }

    /// The editor cancelled a session's turn: its requests are withdrawn from askbus, and
    /// those the editor never saw are answered `cancelled` here (the editor answers its own).
    pub(super) fn cancel_session(self: &Arc<Self>, session: &str) {
        let mut answers = Vec::new();
        let mut withdraw = Vec::new();
        {
            let mut st = self.state();
            let ids: Vec<IdKey> = st
                .inflight
                .iter()
                .filter(|(_, f)| f.session.as_deref() == Some(session))
                .map(|(id, _)| id.clone())
                .collect();
            for id in ids {
                let f = st.inflight.get_mut(&id).expect("listed above");
                withdraw.extend(f.correlation_id.take());
                if !f.editor_saw {
                    let f = st.inflight.remove(&id).expect("listed above");
                    answers.push(wire::result_line(&id, &f.what.cancelled()));
                }
            }
        }
        for cid in withdraw {
            self.withdraw(cid, CancelReason::Withdrawn);
        }
        for line in answers {
            self.to_agent(&line, true);
        }
    }

    /// The agent cancelled one of its requests (`$/cancel_request`).
    pub(super) fn agent_cancelled(self: &Arc<Self>, line: &[u8], id: IdKey) {
        let mut st = self.state();
        let Some(f) = st.inflight.get_mut(&id) else {
            drop(st);
            return self.to_editor(line, true);
        };
        let cid = f.correlation_id.take();
        if f.editor_saw {
            // The editor answers it (ACP: a cancelled request still gets its response).
            drop(st);
            self.to_editor(line, true);
        } else {
            st.inflight.remove(&id);
            drop(st);
            self.to_agent(&wire::cancelled_error_line(&id), true);
        }
        if let Some(cid) = cid {
            self.withdraw(cid, CancelReason::Withdrawn);
        }
    }

    /// Withdraws an askbus request, saying why (its answer, if one races in, is ignored).
    pub(super) fn withdraw(self: &Arc<Self>, cid: String, why: CancelReason) {
        let me = self.clone();
        let task = self.rt.spawn(async move {
            let producer = me.producer.lock().await.clone();
            if let Some(producer) = producer {
                let _ = producer.cancel_because(&cid, &why).await;
            }
        });
        let mut tasks = self.withdrawals.lock().unwrap_or_else(|e| e.into_inner());
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    /// The agent is gone: every askbus request it left is withdrawn (UIs take it off the
    /// screen), waiting a little for the withdrawals to reach askbusd.
    pub async fn withdraw_all(&self) {
        let cids: Vec<String> = {
            let mut st = self.state();
            st.inflight
                .drain()
                .filter_map(|(_, f)| f.correlation_id)
                .collect()
        };
        let producer = self.producer.lock().await.clone();
        if let Some(producer) = producer {
            for cid in cids {
                let _ = tokio::time::timeout(Duration::from_secs(2), producer.cancel(&cid)).await;
            }
        }
        let tasks: Vec<_> = self
            .withdrawals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .collect();
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(2), t).await;
        }
    }

    /// The daemon connection, made on first need and again after a failed attempt (an
    /// established one reconnects by itself across a daemon restart).
    async fn producer(&self) -> Option<Arc<Producer>> {
        let mut p = self.producer.lock().await;
        if p.is_none() {
            let options = ProducerOptions {
                client: Some(self.opts.client.clone()),
                ..ProducerOptions::default()
            };
            match Producer::connect_with(&self.opts.socket, options).await {
                Ok(producer) => *p = Some(Arc::new(producer)),
                Err(e) => eprintln!("askbus acp: {e}"),
            }
        }
        p.clone()
    }

    /// The request's context: the agent (its `initialize` answer, else the command), the
    /// session, its cwd and project, and a title.
    fn context(&self, session: Option<&str>, title: &str) -> Option<RequestContext> {
        let st = self.state();
        let cwd = session.and_then(|s| st.sessions.get(s)).cloned();
        let project = std::env::var("ASKBUS_PROJECT")
            .ok()
            .filter(|p| !p.trim().is_empty())
            .or_else(|| {
                cwd.as_deref()
                    .and_then(|c| Path::new(c).file_name())
                    .map(|n| n.to_string_lossy().into_owned())
            });
        let agent = st
            .agent
            .clone()
            .unwrap_or_else(|| self.opts.agent_command.clone());
        let clean = |v: Option<String>, max| {
            v.map(|v| crate::hook::one_line(&v, max))
                .filter(|v| !v.is_empty())
        };
        RequestContext {
            agent: clean(Some(agent), 256),
            session: clean(session.map(str::to_owned), 256),
            project: clean(project, 128),
            cwd: clean(cwd, 4096),
            title: clean(Some(title.to_owned()), 256),
            ..RequestContext::default()
        }
        .into_option()
    }
}
