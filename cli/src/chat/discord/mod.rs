//! Discord: the Gateway (a WebSocket we open, outbound only) brings the interactions, the
//! HTTP API posts and edits the messages. The bot identifies with no intents at all:
//! interactions (button taps, modal submissions) reach a bot whatever its intents, and it
//! reads no messages, so it needs no privileged intent.
//!
//! A message is `content` in escaped Discord markdown with `allowed_mentions: {parse: []}`
//! (nobody is pinged, whatever the text says) and action rows of buttons whose `custom_id` is
//! the sealed callback data. It is edited (`PATCH`) to the outcome with no components. Every
//! interaction is answered within Discord's 3 seconds through its callback, on a task of its
//! own so that a rate-limited post never delays it: a tap by a `DEFERRED_UPDATE_MESSAGE`
//! (the edit follows by `PATCH`), a refusal by an `EPHEMERAL` message only that person sees,
//! a typed answer or a deny reason by a `MODAL` whose submission comes back as a reply.
//!
//! This module owns what each engine op becomes; `rest` the HTTP API and its rate limits,
//! `gateway` the Gateway connection (heartbeats, resume, the interactions it brings),
//! `render` a card as a Discord message.

mod gateway;
mod render;
mod rest;

use reqwest::Method;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::platform::{
    edited, failure_text, modal_tap, posted, retrying, sender, In, Out, Perform,
};
use super::text::clip;
use render::{escape, render};
use rest::Rest;

pub const DEFAULT_API_BASE: &str = "https://discord.com/api/v10";
/// The modal that asks for a typed reply: its `custom_id` is this and the message's id.
const REPLY_MODAL: &str = "askbus-reply:";
/// The text input in that modal.
const REPLY_INPUT: &str = "text";
/// Interaction callback types (Discord's numbers).
const CHANNEL_MESSAGE: u8 = 4;
const DEFERRED_UPDATE: u8 = 6;
const MODAL: u8 = 9;
/// The EPHEMERAL message flag, and SUPPRESS_EMBEDS (no link previews).
const EPHEMERAL: u32 = 1 << 6;
const SUPPRESS_EMBEDS: u32 = 1 << 2;

#[derive(Clone)]
pub struct Config {
    /// `https://discord.com/api/v10`, or a stand-in (tests, self-hosted gateways).
    pub api_base: String,
    /// The bot token (Developer Portal, Bot, Reset Token).
    pub token: String,
    /// The channel to post in (its id, a snowflake).
    pub channel: String,
}

/// Starts the sender and the gateway; the engine's ends of their channels.
pub fn spawn(cfg: Config) -> (mpsc::UnboundedSender<Out>, mpsc::UnboundedReceiver<In>) {
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    let rest = Rest::new(&cfg.api_base, &cfg.token);
    let worker = Worker {
        rest: rest.clone(),
        channel: cfg.channel.clone(),
    };
    // Answers to interactions skip the queue: a post waiting out a rate limit must not
    // make a tap miss its 3 seconds.
    let (queued_tx, queued_rx) = mpsc::unbounded_channel();
    let answers = rest.clone();
    tokio::spawn(async move {
        let mut out_rx = out_rx;
        while let Some(op) = out_rx.recv().await {
            match op {
                Out::Toast { .. } | Out::Prompt { .. } => answer(&answers, op),
                other => {
                    if queued_tx.send(other).is_err() {
                        return;
                    }
                }
            }
        }
    });
    tokio::spawn(sender(worker, queued_rx, in_tx.clone()));
    tokio::spawn(gateway::gateway(cfg, rest, in_tx));
    (out_tx, in_rx)
}

struct Worker {
    rest: Rest,
    channel: String,
}

/// An interaction's handle: its id, its token, and whether it is a modal submission (`m`) or
/// a component's (`c`), tab-separated.
fn handle(id: &str, token: &str, modal: bool) -> String {
    format!("{id}\t{token}\t{}", if modal { 'm' } else { 'c' })
}

fn split_handle(h: &str) -> (&str, &str, bool) {
    let mut it = h.splitn(3, '\t');
    let id = it.next().unwrap_or("");
    let token = it.next().unwrap_or("");
    (id, token, it.next() == Some("m"))
}

/// Answers an interaction (at most two tries: its token is good for 3 seconds).
async fn callback(rest: Rest, handle: String, body: Value) {
    let (id, token, _) = split_handle(&handle);
    if id.is_empty() || token.is_empty() {
        return;
    }
    let path = format!("/interactions/{id}/{token}/callback");
    let route = "POST /interactions/callback";
    let r = retrying("discord", route, 2, || {
        rest.call(Method::POST, &path, route, Some(&body), false)
    })
    .await;
    if let Err(e) = r {
        eprintln!(
            "askbus chat: cannot answer a discord interaction: {}",
            failure_text(e)
        );
    }
}

/// Answers an interaction on a task of its own: a tap's ack or ephemeral notice, a modal.
fn answer(rest: &Rest, op: Out) {
    match op {
        Out::Toast { reply, text, .. } => {
            let body = if text.is_empty() {
                json!({"type": DEFERRED_UPDATE})
            } else {
                json!({"type": CHANNEL_MESSAGE, "data": {"content": escape(&text),
                    "flags": EPHEMERAL, "allowed_mentions": {"parse": []}}})
            };
            tokio::spawn(callback(rest.clone(), reply, body));
        }
        Out::Prompt {
            reply_to,
            text,
            tap,
            ..
        } => {
            let Some(tap) = modal_tap(tap, "Discord") else {
                return;
            };
            let body = if split_handle(&tap).2 {
                // A modal cannot answer a modal: the message's Answer button opens the next.
                json!({"type": DEFERRED_UPDATE})
            } else {
                json!({"type": MODAL, "data": {
                    "custom_id": format!("{REPLY_MODAL}{reply_to}"),
                    "title": "askbus",
                    "components": [
                        {"type": 10, "content": escape(&clip(&text, 1900))},
                        {"type": 18, "label": "Your answer", "component": {
                            "type": 4, "custom_id": REPLY_INPUT, "style": 2,
                            "min_length": 1, "max_length": 4000, "required": true}}]}})
            };
            tokio::spawn(callback(rest.clone(), tap, body));
        }
        Out::Post { .. } | Out::Edit { .. } => {}
    }
}

impl Perform for Worker {
    async fn perform(&mut self, op: Out) -> Option<In> {
        match op {
            Out::Post { key, view } => {
                let (content, components) = render(&view);
                let body = json!({"content": content, "components": components,
                    "allowed_mentions": {"parse": []}, "flags": SUPPRESS_EMBEDS});
                let path = format!("/channels/{}/messages", self.channel);
                let route = format!("POST {path}");
                let r = retrying("discord", &route, 8, || {
                    self.rest
                        .call(Method::POST, &path, &route, Some(&body), true)
                })
                .await;
                posted(key, r, |m| {
                    m.get("id").and_then(Value::as_str).map(str::to_owned)
                })
            }
            Out::Edit { msg, view } => {
                let (content, components) = render(&view);
                let body = json!({"content": content, "components": components,
                    "allowed_mentions": {"parse": []}});
                let path = format!("/channels/{}/messages/{msg}", self.channel);
                // Edits of every message of the channel share one limit.
                let route = format!("PATCH /channels/{}/messages/{{id}}", self.channel);
                let r = retrying("discord", &route, 8, || {
                    self.rest
                        .call(Method::PATCH, &path, &route, Some(&body), true)
                })
                .await;
                edited(r)
            }
            op @ (Out::Toast { .. } | Out::Prompt { .. }) => {
                answer(&self.rest, op);
                None
            }
        }
    }
}
