//! What the chat sends the engine: taps on a message's buttons (each checked against its
//! seal and the allowed users, then applied to the request), replies to a prompt, the
//! platform's acks of what was posted or edited, and its reconnects and cursor.

use super::{Engine, EARLY_REPLIES};
use crate::chat::card::{self, Step, User, View};
use crate::chat::platform::{In, Msg, Out, DIGEST_KEY};
use crate::chat::seal::Sealer;
use crate::chat::state::SavedMessage;
use crate::term;
use askbus::protocol::Decision;

/// What someone who may not answer is told (ephemerally, where the platform can).
const NOT_ALLOWED: &str = "You are not allowed to answer these requests.";
/// What a tap on a request that is over is told.
const OVER: &str = "This request is over.";

impl Engine {
    pub(super) async fn platform(&mut self, event: In) {
        match event {
            In::Posted { key, msg } if key == DIGEST_KEY => {
                self.digest_posting = false;
                self.digest_msg = Some(msg.clone());
                self.state.saved.digest = Some(msg);
                self.digest_dirty = true;
                self.dirty();
            }
            In::Posted { key, msg } => {
                let Ok(seq) = key.parse::<u64>() else { return };
                if let Some(mut card) = self.limbo.remove(&seq) {
                    let view = if self.redact {
                        card.redacted()
                    } else {
                        card.view()
                    };
                    card.version = card.version.wrapping_add(1);
                    self.send(Out::Edit {
                        msg,
                        view: View::<()>::clone_over(view),
                    });
                    return;
                }
                let Some(id) = self.by_seq.get(&seq).cloned() else {
                    return;
                };
                let Some(e) = self.entries.get_mut(&id) else {
                    return;
                };
                e.posting = false;
                e.msg = Some(msg.clone());
                let saved = SavedMessage {
                    digest: e.digest.clone(),
                    msg: msg.clone(),
                    version: e.card.version,
                };
                let changed = e.card.version != 0;
                let prompt = e.prompt.take().map(|tap| Out::Prompt {
                    key: e.seq.to_string(),
                    reply_to: msg.clone(),
                    text: e.card.prompt_text(),
                    tap,
                });
                self.by_msg.insert(msg.clone(), id.clone());
                self.state.saved.messages.insert(id.clone(), saved);
                self.dirty();
                if changed {
                    self.redraw(&id);
                }
                if let Some(p) = prompt {
                    self.send(p);
                }
                self.early_replies(&msg).await;
            }
            In::Prompted { key, msg } => {
                if let Some(id) = key.parse::<u64>().ok().and_then(|s| self.by_seq.get(&s)) {
                    let id = id.clone();
                    self.by_msg.insert(msg.clone(), id);
                    self.early_replies(&msg).await;
                }
            }
            In::Failed { key, error } => {
                eprintln!("askbus chat: cannot post: {}", term::sanitize(&error));
                if key == DIGEST_KEY {
                    self.digest_posting = false;
                    return;
                }
                let Ok(seq) = key.parse::<u64>() else { return };
                self.limbo.remove(&seq);
                let Some(id) = self.by_seq.remove(&seq) else {
                    return;
                };
                if let Some(e) = self.entries.get_mut(&id) {
                    // It waits in the digest for a slot again.
                    e.posting = false;
                    if e.live {
                        e.live = false;
                        self.live -= 1;
                    }
                    self.queued.insert((seq, id));
                    self.digest_dirty = true;
                }
            }
            In::Tap {
                cursor,
                reply,
                user,
                data,
                msg,
            } => {
                if !self.fresh(cursor) {
                    return;
                }
                self.tap(reply, user, &data, msg).await;
            }
            In::Reply {
                cursor,
                user,
                reply_to,
                text,
                ack,
            } => {
                if !self.fresh(cursor) {
                    return;
                }
                self.reply(user, reply_to, &text, ack).await;
            }
            In::Fatal(_) => {}
        }
    }

    /// Whether an event is new: at or below the saved cursor it was handled already (a
    /// redelivery after a dropped connection or a restart), and applying it again is refused.
    pub(super) fn fresh(&mut self, cursor: Option<u64>) -> bool {
        let Some(c) = cursor else { return true };
        if self.state.saved.cursor.is_some_and(|done| c <= done) {
            eprintln!("askbus chat: refused a redelivered update {c} (handled already)");
            return false;
        }
        self.state.saved.cursor = Some(c);
        self.dirty();
        true
    }

    /// Whether what askbusd has pending is all known: connected, and its replay in.
    pub(super) fn replayed(&self) -> bool {
        self.answerer.is_some() && self.sweep_at.is_none()
    }

    /// The taps held for the replay, applied (or refused) once it is in. After a restart the
    /// chat's first poll can bring a tap made while we were down before askbusd's replay
    /// brings the request it names; refusing it then would lose the person's answer.
    pub(super) async fn release_held(&mut self) {
        if self.held.is_empty() || !self.replayed() {
            return;
        }
        for (reply, user, data, msg) in std::mem::take(&mut self.held) {
            self.tap(reply, user, &data, msg).await;
        }
    }

    pub(super) fn toast(&self, reply: &str, text: &str, alert: bool) {
        self.send(Out::Toast {
            reply: reply.to_owned(),
            text: text.to_owned(),
            alert,
        });
    }

    pub(super) async fn tap(&mut self, reply: String, user: User, data: &str, msg: Option<Msg>) {
        let who = term::sanitize(&user.label()).into_owned();
        if !self.allowed.contains(&user.id) {
            eprintln!("askbus chat: refused a tap by {who}: not an allowed user");
            self.toast(&reply, NOT_ALLOWED, true);
            return;
        }
        let Some(opened) = Sealer::open(data) else {
            eprintln!("askbus chat: refused a tap by {who}: forged callback data");
            self.toast(&reply, "This button is not valid.", true);
            return;
        };
        let Some(id) = self.by_handle.get(&opened.handle).cloned() else {
            if !self.replayed() {
                // Perhaps a request the replay has not brought yet: tried again once it has.
                eprintln!("askbus chat: a tap by {who} waits for askbusd's replay");
                if self.held.len() == EARLY_REPLIES {
                    let (reply, ..) = self.held.remove(0);
                    self.toast(&reply, OVER, false);
                }
                self.held.push((reply, user, data.to_owned(), msg));
                return;
            }
            eprintln!("askbus chat: refused a tap by {who}: no pending request has that button (over, or forged)");
            self.toast(&reply, OVER, false);
            return;
        };
        let Some(e) = self.entries.get_mut(&id) else {
            return;
        };
        if !self.sealer.verify(&id, &e.digest, &opened) {
            eprintln!(
                "askbus chat: refused a tap by {who} on {}: forged callback data",
                term::sanitize(&id)
            );
            self.toast(&reply, "This button is not valid.", true);
            return;
        }
        if opened.version != e.card.version {
            eprintln!(
                "askbus chat: refused a tap by {who} on {}: replayed or stale (version {} of {})",
                term::sanitize(&id),
                opened.version,
                e.card.version
            );
            self.toast(
                &reply,
                "This message has changed: use its current buttons.",
                false,
            );
            return;
        }
        // (A tap can beat our own `Posted`, the platform showing the message before its
        // reply reaches us: the seal binds the request either way.)
        if msg
            .as_ref()
            .is_some_and(|m| e.msg.as_ref().is_some_and(|ours| ours != m))
        {
            eprintln!(
                "askbus chat: refused a tap by {who} on {}: the button is not on that request's message",
                term::sanitize(&id)
            );
            self.toast(&reply, "This button is not valid.", true);
            return;
        }
        let Some(action) = card::Action::decode(opened.action, opened.arg) else {
            self.toast(&reply, "This button is not valid.", true);
            return;
        };
        let step = e.card.tap(action, &user);
        self.apply(&id, step, Some(reply), &user).await;
    }

    /// A typed reply to `reply_to`; `ack` is the platform's handle when the reply itself
    /// must be answered (see [`In::Reply`]).
    pub(super) async fn reply(
        &mut self,
        user: User,
        reply_to: Option<Msg>,
        text: &str,
        ack: Option<String>,
    ) {
        let Some(reply_to) = reply_to else {
            if let Some(a) = &ack {
                self.toast(a, "", false);
            }
            return;
        };
        let Some(id) = self.by_msg.get(&reply_to).cloned() else {
            // Perhaps to a message whose `Posted` is still on its way: kept for it (the
            // platform's handle is acked now; it would expire while it waits).
            if let Some(a) = &ack {
                self.toast(a, "", false);
            }
            if self.early.len() == EARLY_REPLIES {
                self.early.remove(0);
            }
            self.early.push((user, reply_to, text.to_owned()));
            return;
        };
        let who = term::sanitize(&user.label()).into_owned();
        if !self.allowed.contains(&user.id) {
            eprintln!(
                "askbus chat: refused a reply by {who} to {}: not an allowed user",
                term::sanitize(&id)
            );
            if let Some(a) = &ack {
                self.toast(a, NOT_ALLOWED, true);
            }
            return;
        }
        let Some(e) = self.entries.get_mut(&id) else {
            if let Some(a) = &ack {
                self.toast(a, OVER, false);
            }
            return;
        };
        let step = e.card.reply(text, &user);
        self.apply(&id, step, ack, &user).await;
    }

    /// Applies the replies that came before `msg` was known.
    async fn early_replies(&mut self, msg: &Msg) {
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.early)
            .into_iter()
            .partition(|(_, m, _)| m == msg);
        self.early = later;
        for (user, m, text) in now {
            self.reply(user, Some(m), &text, None).await;
        }
    }

    pub(super) async fn apply(&mut self, id: &str, step: Step, reply: Option<String>, user: &User) {
        let ack = |this: &Self, text: &str, alert: bool| {
            if let Some(r) = &reply {
                this.toast(r, text, alert);
            }
        };
        match step {
            Step::Refuse(why) => ack(self, why, false),
            Step::Redraw => {
                ack(self, "", false);
                self.redraw(id);
            }
            Step::Prompt(_) => {
                self.redraw(id);
                let Some(e) = self.entries.get(id) else {
                    return;
                };
                match e.msg.clone() {
                    // The tap is acknowledged by the prompt itself (a modal must answer it).
                    Some(msg) => {
                        let text = e.card.prompt_text();
                        self.send(Out::Prompt {
                            key: e.seq.to_string(),
                            reply_to: msg,
                            text,
                            tap: reply,
                        });
                    }
                    None => {
                        if let Some(e) = self.entries.get_mut(id) {
                            e.prompt = Some(reply);
                        }
                    }
                }
            }
            Step::Answer(answers) => {
                let sent = match &self.answerer {
                    Some(a) => a
                        .answer_by(id, &answers, &user.label())
                        .await
                        .map_err(|e| e.to_string()),
                    None => Err("askbusd is not reachable".into()),
                };
                self.sent(id, sent, reply.as_deref(), user);
            }
            Step::Always(offer, any_project) => {
                // The rule first, as this process's user (the request is this user's: the
                // offer has no rule otherwise), so the daemon decides the next identical
                // call by it; a rule that cannot be written sends nothing.
                let sent = match offer.apply(any_project) {
                    Err(e) => Err(format!("the rule was not written, nothing was sent: {e}")),
                    Ok(written) => {
                        if let Some(r) = written {
                            eprintln!(
                                "askbus chat: {} chose {} for {}: wrote the rule: {}",
                                term::sanitize(&user.label()),
                                offer.chosen.as_str(),
                                term::sanitize(id),
                                term::sanitize(&crate::always::describe(&r))
                            );
                        }
                        match &self.answerer {
                            Some(a) => a
                                .decide_by(id, &Decision::allow(offer.sent), &user.label())
                                .await
                                .map_err(|e| e.to_string()),
                            None => Err("askbusd is not reachable".into()),
                        }
                    }
                };
                self.sent(id, sent, reply.as_deref(), user);
            }
            Step::Decide(decision) => {
                let sent = match &self.answerer {
                    Some(a) => a
                        .decide_by(id, &decision, &user.label())
                        .await
                        .map_err(|e| e.to_string()),
                    None => Err("askbusd is not reachable".into()),
                };
                self.sent(id, sent, reply.as_deref(), user);
            }
        }
    }

    pub(super) fn sent(
        &mut self,
        id: &str,
        sent: Result<(), String>,
        reply: Option<&str>,
        user: &User,
    ) {
        match sent {
            Ok(()) => {
                eprintln!(
                    "askbus chat: {} answered {} in {}",
                    term::sanitize(&user.label()),
                    term::sanitize(id),
                    self.via
                );
                if let Some(r) = reply {
                    self.toast(r, "", false);
                }
            }
            Err(e) => {
                if let Some(r) = reply {
                    let why = if e.starts_with("the rule was not written") {
                        "The rule was not written: nothing was sent."
                    } else {
                        "askbusd is not reachable: try again in a moment."
                    };
                    self.toast(r, why, true);
                }
                eprintln!("askbus chat: cannot send an answer: {}", term::sanitize(&e));
                if let Some(e) = self.entries.get_mut(id) {
                    e.card.reopen();
                }
            }
        }
        self.redraw(id);
    }
}
