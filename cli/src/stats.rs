//! `askbus stats`: the daemon's live counters, as lines a person reads (`--json`: the stats
//! frame for scripts). Fields this version does not know are printed too, as `key: value`.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use serde_json::{Map, Value};

use askbus::client::Connection;

pub async fn run(socket: &Path, json: bool) -> Result<ExitCode> {
    let mut conn = Connection::connect(socket).await?;
    let stats = conn.stats().await?;
    if json {
        println!("{}", crate::term::json(&serde_json::to_string(&stats)?));
    } else {
        print!("{}", crate::term::sanitize_lines(&human(&stats)));
    }
    Ok(ExitCode::SUCCESS)
}

fn num(v: Option<&Value>) -> String {
    match v {
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => s.clone(),
        // A nested group of counters (e.g. approvals' outcomes) reads as its pairs.
        Some(obj @ Value::Object(_)) => format!("({})", pairs(Some(obj), false)),
        Some(other) => other.to_string(),
        None => "?".into(),
    }
}

/// "accepted 4 · rejected 1", the pairs of an object of counters (`skip_zero`: only the
/// non-zero ones).
fn pairs(obj: Option<&Value>, skip_zero: bool) -> String {
    let Some(Value::Object(m)) = obj else {
        return "?".into();
    };
    let parts: Vec<String> = m
        .iter()
        .filter(|(_, v)| !(skip_zero && v.as_f64() == Some(0.0)))
        .map(|(k, v)| format!("{k} {}", num(Some(v))))
        .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(" · ")
    }
}

pub fn human(s: &Map<String, Value>) -> String {
    if s.get("scope").and_then(Value::as_str) == Some("own") {
        return human_own(s);
    }
    let mut out = String::new();
    let mut line = |l: String| {
        out.push_str(&l);
        out.push('\n');
    };
    let uptime = s
        .get("uptimeMs")
        .and_then(Value::as_u64)
        .map(|ms| crate::duration::short(Duration::from_millis(ms)))
        .unwrap_or_else(|| "?".into());
    line(format!(
        "{} on {}, up {uptime}",
        num(s.get("server")),
        num(s.get("node"))
    ));
    line(format!(
        "pending questions: {}   connections: {} ({} UIs, {} producers waiting)",
        num(s.get("pending")),
        num(s.get("connections")),
        num(s.get("uis")),
        num(s.get("producers")),
    ));
    line(format!(
        "connections since start: {} ({} refused)",
        num(s.get("connectionsTotal")),
        num(s.get("connectionsRefused"))
    ));
    line(format!("requests: {}", pairs(s.get("requests"), false)));
    line(format!("outcomes: {}", pairs(s.get("outcomes"), false)));
    let lat = s.get("latencyMs");
    let field = |k: &str| num(lat.and_then(|l| l.get(k)));
    line(format!(
        "answer latency (ms, {} answers): p50 {} · p90 {} · p99 {} · max {}",
        field("count"),
        field("p50"),
        field("p90"),
        field("p99"),
        field("max")
    ));
    line(format!("errors sent: {}", pairs(s.get("errors"), true)));
    line(format!(
        "frames in {} · out {} · queue overflows {} · telemetry lines {} (errors {})",
        num(s.get("framesIn")),
        num(s.get("framesOut")),
        num(s.get("queueOverflows")),
        num(s.get("telemetryLines")),
        num(s.get("telemetryErrors"))
    ));
    const KNOWN: [&str; 18] = [
        "type",
        "server",
        "node",
        "uptimeMs",
        "connections",
        "producers",
        "uis",
        "pending",
        "connectionsTotal",
        "connectionsRefused",
        "requests",
        "outcomes",
        "latencyMs",
        "errors",
        "framesIn",
        "framesOut",
        "queueOverflows",
        "telemetryLines",
    ];
    for (k, v) in s {
        if KNOWN.contains(&k.as_str()) || k == "telemetryErrors" {
            continue;
        }
        let one = |v: &Value| match v {
            Value::Object(_) => pairs(Some(v), false),
            other => num(Some(other)),
        };
        // A list (the subscribed UIs) reads one entry after another, never as raw JSON.
        let text = match v {
            Value::Array(items) => items.iter().map(one).collect::<Vec<_>>().join("; "),
            other => one(other),
        };
        line(format!("{k}: {text}"));
    }
    out
}

/// The stats a uid other than the daemon's (and not an operator) is given: its own share.
fn human_own(s: &Map<String, Value>) -> String {
    let uptime = s
        .get("uptimeMs")
        .and_then(Value::as_u64)
        .map(|ms| crate::duration::short(Duration::from_millis(ms)))
        .unwrap_or_else(|| "?".into());
    format!(
        "{} on {}, up {uptime}\n\
         yours (uid {}): pending questions: {}   connections: {} ({} UIs, {} producers waiting)\n\
         daemon-wide counters are shown to the daemon's own user, root and operators only\n",
        num(s.get("server")),
        num(s.get("node")),
        num(s.get("uid")),
        num(s.get("pending")),
        num(s.get("connections")),
        num(s.get("uis")),
        num(s.get("producers")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_golden_stats_frame_reads_as_lines() {
        let v: Value =
            serde_json::from_str(include_str!("../../proto/examples/server/stats.json")).unwrap();
        let mut m = v.as_object().unwrap().clone();
        m.insert("federation".into(), serde_json::json!({"peers": 2}));
        let text = human(&m);
        assert!(text.starts_with("askbusd/0.1.0 on vm, up 0s\n"), "{text}");
        assert!(
            text.contains("pending questions: 0   connections: 5 (2 UIs, 0 producers waiting)"),
            "{text}"
        );
        assert!(
            text.contains("outcomes: answered 2 · dismissed 1 · timeout 0"),
            "{text}"
        );
        assert!(
            text.contains("errors sent: invalid-request 1 · not-pending 1\n"),
            "{text}"
        );
        assert!(text.contains("p90 209.791"), "{text}");
        assert!(text.contains("federation: peers 2"), "{text}");
        assert!(!text.contains('{'), "{text}");
    }
}
