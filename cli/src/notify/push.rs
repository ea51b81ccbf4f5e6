//! The push sinks: an ntfy-compatible publish, a generic JSON webhook and Slack's
//! incoming-webhook shape, over HTTP(S) with reqwest (rustls). Each target has a worker with a
//! bounded queue that posts one message at a time, retries a failure with exponential
//! backoff, skips a message whose requests all ended meanwhile, and reports every result to
//! the notifier's loop (a failure is reported, never dropped silently).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::mpsc;

/// Messages queued per target; a full queue makes the notifier batch instead.
pub const QUEUE: usize = 16;

/// Where pushes go.
#[derive(Debug, Clone)]
pub enum Target {
    /// An ntfy topic URL (`https://ntfy.sh/mytopic`, or a self-hosted server's).
    Ntfy {
        topic_url: String,
        token: Option<String>,
        priority: u8,
        tags: Vec<String>,
    },
    /// Any URL taking a JSON POST (the body is documented in the README).
    Webhook { url: String, token: Option<String> },
    /// A Slack incoming webhook (`{"text": …}`).
    Slack { url: String },
}

impl Target {
    /// The sink's name in reports and metrics.
    pub fn sink(&self) -> &'static str {
        match self {
            Target::Ntfy { .. } => "ntfy",
            Target::Webhook { .. } => "webhook",
            Target::Slack { .. } => "slack",
        }
    }
}

/// A button on a push: `post` ones answer where they are tapped (ntfy's `http` action), the
/// others open a page (`view`).
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    pub label: String,
    pub url: String,
    pub post: bool,
}

/// One push: about one request, or a batch of them.
#[derive(Debug, Clone)]
pub struct Message {
    /// The requests it tells about; it is skipped once all of them ended.
    pub ids: Vec<String>,
    pub title: String,
    pub body: String,
    pub agent: String,
    pub project: Option<String>,
    /// "question", "approval" or "batch".
    pub kind: &'static str,
    pub click: Option<String>,
    pub actions: Vec<Action>,
}

/// How a push ended.
#[derive(Debug)]
pub enum Outcome {
    Sent {
        attempts: u32,
    },
    Failed {
        attempts: u32,
        error: String,
    },
    /// Every request it was about ended before it could be delivered.
    Skipped,
}

/// A worker's report.
#[derive(Debug)]
pub struct Report {
    pub sink: &'static str,
    pub ids: Vec<String>,
    pub outcome: Outcome,
}

/// Retry policy: `attempts` tries, waiting `initial`, then twice as long each time up to `max`.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    pub attempts: u32,
    pub initial: Duration,
    pub max: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: 6,
            initial: Duration::from_secs(2),
            max: Duration::from_secs(60),
        }
    }
}

/// The ids still waiting, shared with the workers so a retry never tells about an ended one.
pub type Alive = Arc<Mutex<HashSet<String>>>;

/// Starts `target`'s worker; its queue.
pub fn spawn(
    target: Target,
    retry: Retry,
    alive: Alive,
    reports: mpsc::UnboundedSender<Report>,
) -> mpsc::Sender<Message> {
    let (tx, mut rx) = mpsc::channel::<Message>(QUEUE);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .user_agent(concat!("askbus-notify/", env!("CARGO_PKG_VERSION")))
        .build()
        .expect("the HTTP client builds (rustls with bundled roots)");
    tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            let outcome = deliver(&http, &target, retry, &alive, &msg).await;
            let report = Report {
                sink: target.sink(),
                ids: msg.ids,
                outcome,
            };
            if reports.send(report).is_err() {
                return;
            }
        }
    });
    tx
}

async fn deliver(
    http: &reqwest::Client,
    target: &Target,
    retry: Retry,
    alive: &Alive,
    msg: &Message,
) -> Outcome {
    let mut delay = retry.initial;
    let mut attempt = 0;
    loop {
        let still = {
            let alive = alive.lock().unwrap_or_else(|e| e.into_inner());
            msg.ids.iter().any(|id| alive.contains(id))
        };
        if !still {
            return Outcome::Skipped;
        }
        attempt += 1;
        match post(http, target, msg).await {
            Ok(()) => return Outcome::Sent { attempts: attempt },
            Err(e) if !e.retry || attempt >= retry.attempts => {
                return Outcome::Failed {
                    attempts: attempt,
                    error: e.text,
                }
            }
            Err(e) => {
                eprintln!(
                    "askbus notify: {} push failed (attempt {attempt} of {}), retrying in {}: {}",
                    target.sink(),
                    retry.attempts,
                    crate::duration::short(delay),
                    crate::term::sanitize(&e.text)
                );
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(retry.max);
            }
        }
    }
}

struct PostError {
    text: String,
    retry: bool,
}

async fn post(http: &reqwest::Client, target: &Target, msg: &Message) -> Result<(), PostError> {
    let msg = &neutralized(msg);
    let (url, token, body) = match target {
        Target::Ntfy {
            topic_url,
            token,
            priority,
            tags,
        } => {
            let (base, topic) = split_topic(topic_url).ok_or_else(|| PostError {
                text: format!("{topic_url} is not a topic URL (https://HOST/TOPIC)"),
                retry: false,
            })?;
            (
                base,
                token.as_deref(),
                ntfy_body(topic, *priority, tags, msg),
            )
        }
        Target::Webhook { url, token } => (url.clone(), token.as_deref(), webhook_body(msg)),
        Target::Slack { url } => (url.clone(), None, slack_body(msg)),
    };
    let mut req = http.post(&url).json(&body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.map_err(|e| PostError {
        text: format!("{url}: {}", without_url(&e)),
        retry: true,
    })?;
    let status = resp.status();
    if status.is_success() {
        return Ok(());
    }
    // 429 and 5xx may pass; another 4xx (a wrong token, a bad topic) will not by retrying.
    let retry = status.is_server_error() || status.as_u16() == 429 || status.as_u16() == 408;
    let detail = resp.text().await.unwrap_or_default();
    Err(PostError {
        text: format!(
            "{url}: HTTP {status}{}",
            if detail.trim().is_empty() {
                String::new()
            } else {
                format!(": {}", crate::notify::waiting::clip(detail.trim(), 200))
            }
        ),
        retry,
    })
}

/// `msg` with every text that came off the bus (title, body, agent, project, button labels)
/// through the one neutralizer (`crate::term`): a phone's notification shade and a chat
/// channel render bidi overrides and invisible characters as faithfully as a terminal does.
/// The URLs are askbus's own.
pub fn neutralized(msg: &Message) -> Message {
    use crate::term::{sanitize, sanitize_lines};
    Message {
        ids: msg.ids.clone(),
        title: sanitize(&msg.title).into_owned(),
        body: sanitize_lines(&msg.body).into_owned(),
        agent: sanitize(&msg.agent).into_owned(),
        project: msg.project.as_deref().map(|p| sanitize(p).into_owned()),
        kind: msg.kind,
        click: msg.click.clone(),
        actions: msg
            .actions
            .iter()
            .map(|a| Action {
                label: sanitize(&a.label).into_owned(),
                url: a.url.clone(),
                post: a.post,
            })
            .collect(),
    }
}

/// reqwest's message without the URL it repeats (the caller names it once).
fn without_url(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    if let Some(u) = e.url() {
        s = s.replace(&format!(" ({u})"), "");
    }
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        s.push_str(&format!(": {inner}"));
        source = inner.source();
    }
    s
}

/// `https://ntfy.sh/alerts` → (`https://ntfy.sh/`, `alerts`): ntfy takes JSON published to
/// the server's root, which carries UTF-8 titles and actions without header encoding.
pub fn split_topic(topic_url: &str) -> Option<(String, &str)> {
    let trimmed = topic_url.trim_end_matches('/');
    let (base, topic) = trimmed.rsplit_once('/')?;
    if topic.is_empty() || !base.contains("://") || base.ends_with(':') || base.ends_with('/') {
        return None;
    }
    Some((format!("{base}/"), topic))
}

/// ntfy's JSON publish (`https://docs.ntfy.sh/publish/#publish-as-json`).
pub fn ntfy_body(topic: &str, priority: u8, tags: &[String], msg: &Message) -> Value {
    let mut body = json!({
        "topic": topic,
        "title": msg.title,
        "message": msg.body,
        "priority": priority,
        "tags": tags,
    });
    if let Some(click) = &msg.click {
        body["click"] = json!(click);
    }
    // ntfy shows at most three buttons.
    let actions: Vec<Value> = msg
        .actions
        .iter()
        .take(3)
        .map(|a| {
            if a.post {
                json!({"action": "http", "label": a.label, "url": a.url, "method": "POST",
                       "clear": true})
            } else {
                json!({"action": "view", "label": a.label, "url": a.url, "clear": true})
            }
        })
        .collect();
    if !actions.is_empty() {
        body["actions"] = json!(actions);
    }
    body
}

/// The generic webhook's body.
pub fn webhook_body(msg: &Message) -> Value {
    json!({
        "source": "askbus",
        "kind": msg.kind,
        "correlationIds": msg.ids,
        "agent": msg.agent,
        "project": msg.project,
        "title": msg.title,
        "message": msg.body,
        "click": msg.click,
        "actions": msg.actions.iter().map(|a| json!({
            "label": a.label, "url": a.url, "method": if a.post { "POST" } else { "GET" }
        })).collect::<Vec<_>>(),
    })
}

/// Slack's incoming-webhook shape: `text` in Slack's mrkdwn, links as `<url|label>`. A link
/// opens the confirm page (a GET never answers), so a Slack button is one more tap.
pub fn slack_body(msg: &Message) -> Value {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut text = format!("*{}*\n{}", esc(&msg.title), esc(&msg.body));
    let links: Vec<String> = msg
        .actions
        .iter()
        .map(|a| format!("<{}|{}>", a.url, esc(&a.label)))
        .chain(
            msg.click
                .iter()
                .filter(|c| !msg.actions.iter().any(|a| &a.url == *c))
                .map(|c| format!("<{c}|Open>")),
        )
        .collect();
    if !links.is_empty() {
        text.push('\n');
        text.push_str(&links.join(" · "));
    }
    json!({ "text": text })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg() -> Message {
        Message {
            ids: vec!["c1".into()],
            title: "gemini-cli · Deploy".into(),
            body: "Deploy <now>?".into(),
            agent: "gemini-cli".into(),
            project: None,
            kind: "question",
            click: Some("http://h/o/T".into()),
            actions: vec![
                Action {
                    label: "Yes".into(),
                    url: "http://h/a/Y".into(),
                    post: true,
                },
                Action {
                    label: "Open".into(),
                    url: "http://h/o/T".into(),
                    post: false,
                },
            ],
        }
    }

    #[test]
    fn topic_urls() {
        assert_eq!(
            split_topic("https://ntfy.sh/alerts"),
            Some(("https://ntfy.sh/".into(), "alerts"))
        );
        assert_eq!(
            split_topic("http://127.0.0.1:9/sub/t/"),
            Some(("http://127.0.0.1:9/sub/".into(), "t"))
        );
        assert_eq!(split_topic("https://ntfy.sh"), None);
        assert_eq!(split_topic("alerts"), None);
    }

    #[test]
    fn ntfy_json() {
        let b = ntfy_body("t", 4, &["robot".into()], &msg());
        assert_eq!(b["topic"], "t");
        assert_eq!(b["priority"], 4);
        assert_eq!(b["click"], "http://h/o/T");
        assert_eq!(b["actions"][0]["action"], "http");
        assert_eq!(b["actions"][0]["method"], "POST");
        assert_eq!(b["actions"][1]["action"], "view");
    }

    #[test]
    fn every_bus_text_is_neutralized_before_it_leaves() {
        let evil = "\x1b]52;c;cHduZWQ=\x07\u{202E}\u{200B}";
        let mut m = msg();
        m.title = format!("t{evil}");
        m.body = format!("line one{evil}\nline two");
        m.agent = format!("a{evil}");
        m.project = Some(format!("p{evil}"));
        m.actions[0].label = format!("Yes{evil}");
        let n = neutralized(&m);
        for body in [ntfy_body("t", 3, &[], &n), webhook_body(&n), slack_body(&n)] {
            let text = body.to_string();
            let v: Value = serde_json::from_str(&text).unwrap();
            let mut strings = Vec::new();
            fn walk(v: &Value, out: &mut Vec<String>) {
                match v {
                    Value::String(s) => out.push(s.clone()),
                    Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
                    Value::Object(o) => o.values().for_each(|x| walk(x, out)),
                    _ => {}
                }
            }
            walk(&v, &mut strings);
            for s in strings {
                assert!(
                    !s.contains(|c: char| c != '\n' && crate::term::is_unsafe(c)),
                    "{s:?}"
                );
            }
        }
        assert_eq!(n.body.lines().count(), 2);
        assert!(n.actions[0].label.starts_with("Yes␛]52"));
    }

    #[test]
    fn slack_text_escapes_and_links() {
        let b = slack_body(&msg());
        assert_eq!(
            b["text"],
            "*gemini-cli · Deploy*\nDeploy &lt;now&gt;?\n<http://h/a/Y|Yes> · <http://h/o/T|Open>"
        );
    }
}
