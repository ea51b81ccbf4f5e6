//! `askbus watch`: a live feed of the bus for operators. Connects as an observer (`watch`),
//! so it sees every request's arrival and end (who asked, who answered, how long it took, and
//! on which node when federated) but never question text or answers, and cannot answer.
//! Reconnects when askbusd restarts; each (re)connection first says the federation's state.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use askbus::client::{ClientError, Update, WatchSubscription};
use askbus::protocol::{BusEvent, ServerFrame};

use crate::term;

const CLIENT: &str = concat!("askbus-watch/", env!("CARGO_PKG_VERSION"));

pub async fn run(socket: &Path, json: bool) -> Result<ExitCode> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    tokio::select! {
        r = feed(socket, json) => r,
        _ = term.recv() => Ok(ExitCode::SUCCESS),
        _ = int.recv() => Ok(ExitCode::SUCCESS),
    }
}

async fn feed(socket: &Path, json: bool) -> Result<ExitCode> {
    let mut sub = WatchSubscription::new(socket, Some(CLIENT));
    let mut was_down = false;
    loop {
        match sub.next().await {
            Ok(Update::Connected(())) => {
                eprintln!(
                    "askbus watch: {} {}",
                    if was_down { "back on" } else { "watching" },
                    socket.display()
                );
                if let Some(state) = federation_state(socket).await {
                    eprintln!("askbus watch: {}", term::sanitize(&state));
                }
                was_down = false;
            }
            Ok(Update::Event(event)) => {
                let text = if json {
                    term::json(&serde_json::to_string(&ServerFrame::BusEvent(event))?).into_owned()
                } else {
                    line(&event)
                };
                // Each line is flushed as it happens (a feed piped into grep or jq must not
                // wait for a buffer); a reader that went away (`| head`) ends the feed quietly.
                let mut out = std::io::stdout();
                if let Err(e) = writeln!(out, "{text}").and_then(|()| out.flush()) {
                    if e.kind() == std::io::ErrorKind::BrokenPipe {
                        return Ok(ExitCode::SUCCESS);
                    }
                    return Err(e.into());
                }
            }
            Ok(Update::Down { error, .. }) => {
                if !was_down {
                    let why = match error {
                        ClientError::Closed => {
                            "askbusd closed the connection; retrying until it is back".to_owned()
                        }
                        e => {
                            let (text, hint, _) = crate::fail::describe(&e.into());
                            match hint {
                                Some(h) => format!("{text}; retrying until it is back. {h}"),
                                None => format!("{text}; retrying until it is back"),
                            }
                        }
                    };
                    eprintln!("askbus watch: {}", term::sanitize(&why));
                    was_down = true;
                }
            }
            // A daemon that refuses a watcher (a newer one with other rules) will not change
            // its mind: say why and stop instead of retrying forever.
            Err(ClientError::Rejected(e)) => {
                eprintln!(
                    "askbus watch: askbusd refused: {}: {}",
                    e.code,
                    term::sanitize(&e.message)
                );
                return Ok(ExitCode::from(crate::fail::exit::FAILURE));
            }
            // Another uid's daemon on the socket: reconnecting will not make it ours.
            Err(e) => {
                eprintln!("askbus watch: {}", term::sanitize(&e.to_string()));
                return Ok(ExitCode::from(crate::fail::exit::FAILURE));
            }
        }
    }
}

/// The federation's state from the daemon's stats, as a line; `None` for a daemon without
/// federation (or one that would not say: the feed matters more than this line).
async fn federation_state(socket: &Path) -> Option<String> {
    let mut conn = askbus::client::Connection::connect(socket).await.ok()?;
    let stats = conn.stats().await.ok()?;
    federation_line(stats.get("federation")?)
}

/// "federation: node devbox, connected to NATS, 2 other nodes seen (laptop, ci), 2 remote
/// pending, 1 shared, NATS round trip 412 µs, 1 reconnect"
fn federation_line(f: &serde_json::Value) -> Option<String> {
    let node = f.get("node")?.as_str()?;
    let connected = f.get("connected")?.as_bool()?;
    let mut out = format!(
        "federation: node {node}, {}",
        if connected {
            "connected to NATS"
        } else {
            "NOT connected to NATS (local questions still work)"
        }
    );
    if let Some(nodes) = f.get("nodes").and_then(|n| n.as_array()) {
        let names: Vec<&str> = nodes.iter().filter_map(|n| n.as_str()).collect();
        if names.is_empty() {
            out.push_str(", no other node seen");
        } else {
            out.push_str(&format!(
                ", {} other node{} seen ({})",
                names.len(),
                if names.len() == 1 { "" } else { "s" },
                names.join(", ")
            ));
        }
    }
    let count = |k: &str| f.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
    out.push_str(&format!(
        ", {} remote pending, {} shared",
        count("remotePending"),
        count("sharedPending")
    ));
    // 0 until the first heartbeat has been timed.
    if connected && count("rttUs") > 0 {
        out.push_str(&format!(", NATS round trip {} µs", count("rttUs")));
    }
    let reconnects = count("reconnects");
    out.push_str(&format!(
        ", {reconnects} reconnect{}",
        if reconnects == 1 { "" } else { "s" }
    ));
    Some(out)
}

/// One event as a line for people: time (UTC), event, correlationId, who, and what it means.
/// Every field is bus data (names, ids, headers), so the line is sanitized whole.
pub fn line(e: &BusEvent) -> String {
    term::sanitize(&raw_line(e)).into_owned()
}

fn raw_line(e: &BusEvent) -> String {
    let time =
        e.ts.split_once('T')
            .map_or(e.ts.as_str(), |(_, t)| t)
            .to_owned();
    let producer = who(e.producer.client.as_deref(), e.producer.pid);
    // A request refused before it had a usable correlationId has none to show.
    let id = e.correlation_id.as_deref().unwrap_or("-");
    let mut out = format!("{time}  {:<13}  {id}  {producer}", e.event);
    // Federated: the node the request was asked on.
    if let Some(node) = &e.node {
        out.push_str(&format!(" on {node}"));
    }
    // Which agent and project it is about, when the request said.
    let about: Vec<_> = [&e.project, &e.agent].into_iter().flatten().collect();
    if !about.is_empty() {
        let about: Vec<&str> = about.iter().map(|v| v.as_str()).collect();
        out.push_str(&format!(" [{}]", about.join(" · ")));
    }
    match e.event.as_str() {
        "request" => {
            out.push_str(&format!(" uid {}", e.producer.uid));
            let questions: Vec<String> = e
                .question_types
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let header = e.headers.get(i).map_or("", String::as_str);
                    if header.is_empty() {
                        format!("Q{i} [{t}]")
                    } else {
                        format!("{header} [{t}]")
                    }
                })
                .collect();
            if !questions.is_empty() {
                out.push_str(&format!(": {}", questions.join(", ")));
            }
            if let Some(ms) = e.timeout_ms {
                out.push_str(&format!("; times out in {}", duration(ms)));
            }
        }
        "notify" => {
            if let Some(n) = &e.notify {
                out.push_str(&format!(": {} {}", n.sink, n.result.as_str()));
                if n.count > 1 {
                    out.push_str(&format!(" ({} requests)", n.count));
                }
                if let Some(err) = &n.error {
                    out.push_str(&format!(": {err}"));
                }
            }
        }
        "rejected" => {
            if let Some(code) = &e.code {
                out.push_str(&format!(": {code}"));
            }
        }
        _ => {
            out.push_str(&decider(e));
            if let Some(ms) = e.latency_ms {
                out.push_str(&format!(" after {}", duration(ms)));
            }
        }
    }
    out
}

/// Who or what ended it, from `decidedBy` (a daemon before it: the UI, if any): " allowed by
/// rule run_shell_command (User: x.toml)", " answered in the editor (acp)", " by alice via
/// telegram (askbus-telegram/0.1 (pid 7))", " by askbus-ui/0.1.0 (pid 7) on laptop".
fn decider(e: &BusEvent) -> String {
    let d = e.decided_by.as_deref();
    let kind = d.map_or("", |d| d.kind.as_str());
    let via = d
        .and_then(|d| d.via.as_deref())
        .filter(|v| !matches!(*v, "client" | "federation"));
    if let (Some(d), "rule") = (d, kind) {
        let rule = d.rule.as_ref();
        let field = |k: &str| rule.and_then(|r| r.get(k)).and_then(|v| v.as_str());
        let verb = match field("decision") {
            Some("allow") => "allowed",
            Some("deny") => "denied",
            _ => "decided",
        };
        let mut out = format!(" {verb} by rule");
        if let Some(tool) = field("toolName") {
            out.push_str(&format!(" {tool}"));
        }
        if let Some(source) = field("source") {
            out.push_str(&format!(" ({source})"));
        }
        return out;
    }
    let Some(ui) = &e.ui else {
        // A person decided outside askbus, as its producer said withdrawing it.
        return match (kind, via) {
            ("human", Some("acp")) => " answered in the editor (acp)".to_owned(),
            ("human", Some(via)) => format!(" answered elsewhere (via {via})"),
            ("human", None) => " answered elsewhere".to_owned(),
            _ => String::new(),
        };
    };
    let client = who(ui.client.as_deref(), ui.pid);
    let mut out = match (d.and_then(|d| d.user.as_deref()), via) {
        (Some(user), Some(via)) => format!(" by {user} via {via} ({client})"),
        (Some(user), None) => format!(" by {user} ({client})"),
        (None, Some(via)) => format!(" by {client} via {via}"),
        (None, None) => format!(" by {client}"),
    };
    if let Some(node) = &ui.node {
        out.push_str(&format!(" on {node}"));
    }
    out
}

fn who(client: Option<&str>, pid: Option<i32>) -> String {
    let name = client.unwrap_or("unnamed");
    match pid {
        Some(pid) => format!("{name} (pid {pid})"),
        None => name.to_owned(),
    }
}

/// "250 ms", "4.3 s", "10m 00s", "2h 05m": short, and exact enough for a feed.
fn duration(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms} ms"),
        1_000..=59_999 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{}m {:02}s", ms / 60_000, (ms / 1000) % 60),
        _ => format!("{}h {:02}m", ms / 3_600_000, (ms / 60_000) % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(v: serde_json::Value) -> BusEvent {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn request_line() {
        let e = event(json!({"event": "request", "ts": "2026-05-01T12:00:01.123Z",
            "correlationId": "c1", "producer": {"client": "deploy-agent/2.1", "pid": 42, "uid": 1000},
            "timeoutMs": 600000, "questionTypes": ["choice", "text"], "headers": ["Database", ""]}));
        assert_eq!(
            line(&e),
            "12:00:01.123Z  request        c1  deploy-agent/2.1 (pid 42) uid 1000: \
             Database [choice], Q1 [text]; times out in 10m 00s"
        );
        let e = event(json!({"event": "request", "ts": "t", "correlationId": "c1",
            "producer": {"client": "askbus-mcp/0.1.0", "pid": 42, "uid": 0},
            "agent": "claude-code/1.0", "project": "web\u{1b}]0;x",
            "questionTypes": ["text"], "headers": ["Name"]}));
        assert_eq!(
            line(&e),
            "t  request        c1  askbus-mcp/0.1.0 (pid 42) [web\u{241b}]0;x · claude-code/1.0] \
             uid 0: Name [text]"
        );
    }

    #[test]
    fn federated_lines_name_the_nodes() {
        let e = event(json!({"event": "request", "ts": "t", "correlationId": "c1",
            "producer": {"client": "agent/1", "pid": 42, "uid": 1000}, "node": "devbox",
            "questionTypes": ["yesno"], "headers": ["Deploy"]}));
        assert_eq!(
            line(&e),
            "t  request        c1  agent/1 (pid 42) on devbox uid 1000: Deploy [yesno]"
        );
        let e = event(
            json!({"event": "answered", "ts": "t", "correlationId": "c1",
            "producer": {"client": "agent/1", "pid": 42, "uid": 1000}, "node": "devbox",
            "ui": {"client": "askbus-ui/0.1.0", "pid": 7, "node": "lap\u{1b}[2Jtop"},
            "latencyMs": 12, "questionTypes": [], "headers": []}),
        );
        assert_eq!(
            line(&e),
            "t  answered       c1  agent/1 (pid 42) on devbox by askbus-ui/0.1.0 (pid 7) on \
             lap\u{241b}[2Jtop after 12 ms"
        );
    }

    #[test]
    fn federation_state_line() {
        let f = json!({"connected": true, "node": "devbox", "nodes": ["laptop", "ci"],
            "remotePending": 2, "sharedPending": 1, "rttUs": 412, "reconnects": 1,
            "forwarded": 0, "forwardErrors": 0});
        assert_eq!(
            federation_line(&f).unwrap(),
            "federation: node devbox, connected to NATS, 2 other nodes seen (laptop, ci), 2 \
             remote pending, 1 shared, NATS round trip 412 µs, 1 reconnect"
        );
        let f = json!({"connected": false, "node": "ci", "nodes": [], "remotePending": 0,
            "sharedPending": 3, "rttUs": 0, "reconnects": 4});
        assert_eq!(
            federation_line(&f).unwrap(),
            "federation: node ci, NOT connected to NATS (local questions still work), no other \
             node seen, 0 remote pending, 3 shared, 4 reconnects"
        );
        assert_eq!(federation_line(&json!({"peers": 2})), None);
    }

    #[test]
    fn end_lines() {
        let e = event(
            json!({"event": "answered", "ts": "2026-05-01T12:00:05.456Z",
            "correlationId": "c1", "producer": {"pid": 42, "uid": 0},
            "ui": {"client": "askbus-ui/0.1.0", "pid": 7}, "latencyMs": 4321,
            "questionTypes": ["choice"], "headers": ["Database"]}),
        );
        assert_eq!(
            line(&e),
            "12:00:05.456Z  answered       c1  unnamed (pid 42) by askbus-ui/0.1.0 (pid 7) after 4.3 s"
        );
        let e = event(
            json!({"event": "producer-gone", "ts": "t", "correlationId": "c2",
            "producer": {"client": "a", "pid": null, "uid": 0}, "latencyMs": 12,
            "questionTypes": [], "headers": []}),
        );
        assert_eq!(line(&e), "t  producer-gone  c2  a after 12 ms");
        let e = event(
            json!({"event": "rejected", "ts": "t", "correlationId": "c3",
            "producer": {"client": "a", "pid": 1, "uid": 0}, "code": "invalid-request",
            "questionTypes": [], "headers": []}),
        );
        assert_eq!(line(&e), "t  rejected       c3  a (pid 1): invalid-request");
        let e = event(
            json!({"event": "rejected", "ts": "t", "correlationId": null,
            "producer": {"client": "a", "pid": 1, "uid": 0}, "code": "invalid-request",
            "questionTypes": [], "headers": []}),
        );
        assert_eq!(line(&e), "t  rejected       -  a (pid 1): invalid-request");
    }

    #[test]
    fn decided_by_lines() {
        let end = |extra: serde_json::Value| {
            let mut v = json!({"event": "answered", "ts": "t", "correlationId": "c1",
                "producer": {"client": "a", "pid": 1, "uid": 0}, "latencyMs": 3,
                "questionTypes": [], "headers": []});
            for (k, x) in extra.as_object().unwrap() {
                v[k] = x.clone();
            }
            line(&event(v))
        };
        assert_eq!(
            end(
                json!({"ui": {"client": "policy (User: x.toml)", "pid": null},
                "decidedBy": {"kind": "rule", "rule": {"toolName": "run_shell_command",
                "decision": "allow", "priority": 1, "source": "User: x.toml"}}})
            ),
            "t  answered       c1  a (pid 1) allowed by rule run_shell_command (User: x.toml) \
             after 3 ms"
        );
        assert_eq!(
            end(json!({"event": "withdrawn",
                "decidedBy": {"kind": "human", "via": "acp", "uid": 0, "client": "a"}})),
            "t  withdrawn      c1  a (pid 1) answered in the editor (acp) after 3 ms"
        );
        assert_eq!(
            end(json!({"event": "withdrawn", "decidedBy": {"kind": "producer"}})),
            "t  withdrawn      c1  a (pid 1) after 3 ms"
        );
        assert_eq!(
            end(json!({"ui": {"client": "askbus-telegram/0.1", "pid": 7},
                "decidedBy": {"kind": "human", "via": "telegram", "uid": 0, "user": "alice",
                "client": "askbus-telegram/0.1"}})),
            "t  answered       c1  a (pid 1) by alice via telegram (askbus-telegram/0.1 (pid 7)) \
             after 3 ms"
        );
        assert_eq!(
            end(json!({"ui": {"client": "askbus-ui/0.1.0", "pid": 7},
                "decidedBy": {"kind": "human", "via": "client", "uid": 0}})),
            "t  answered       c1  a (pid 1) by askbus-ui/0.1.0 (pid 7) after 3 ms"
        );
    }

    #[test]
    fn notify_lines() {
        let e = event(json!({"event": "notify", "ts": "t", "correlationId": "c1",
            "producer": {"client": "askbus-notify/0.1.0", "pid": 9, "uid": 0},
            "questionTypes": [], "headers": [],
            "notify": {"sink": "ntfy", "result": "failed", "count": 3, "error": "HTTP 500"}}));
        assert_eq!(
            line(&e),
            "t  notify         c1  askbus-notify/0.1.0 (pid 9): ntfy failed (3 requests): HTTP 500"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(duration(999), "999 ms");
        assert_eq!(duration(1_060), "1.1 s");
        assert_eq!(duration(61_000), "1m 01s");
        assert_eq!(duration(7_500_000), "2h 05m");
    }
}
