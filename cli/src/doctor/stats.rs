//! `askbus doctor`'s checks of what askbusd's stats frame says: the UIs subscribed on this
//! node and the notifier among them, the policy rules, the store (and its history chain,
//! read from the file), and the link to NATS.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

use super::{Report, Status};

/// The UIs subscribed on this node (another node's UIs are not counted: a hook hands its call
/// back when none is here), and whether the notifier is one of them.
pub(super) fn uis(r: &mut Report, stats: &Map<String, Value>) {
    let subs: Vec<&Value> = stats
        .get("subscribers")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let n = stats
        .get("uis")
        .and_then(Value::as_u64)
        .unwrap_or(subs.len() as u64);
    if n == 0 {
        r.add(
            "uis",
            Status::Warn,
            "no UI is subscribed: agents' hooks hand their calls back to the agent's own \
             prompt, and `askbus ask` waits"
                .into(),
            Some(
                "`askbus ui` (a terminal), `askbus web --open` (a browser), `askbus notify` \
                 (desktop and phone)"
                    .into(),
            ),
        );
    } else {
        let names: Vec<String> = subs
            .iter()
            .map(|s| {
                let client = s
                    .get("client")
                    .and_then(Value::as_str)
                    .unwrap_or("a client");
                let via = s.get("via").and_then(Value::as_str).unwrap_or("client");
                match s.get("pid").and_then(Value::as_i64) {
                    Some(pid) => format!("{client} ({via}, pid {pid})"),
                    None => format!("{client} ({via})"),
                }
            })
            .collect();
        let list = if names.is_empty() {
            String::new()
        } else {
            format!(": {}", names.join(", "))
        };
        r.ok(
            "uis",
            format!("{n} UI{} subscribed{list}", if n == 1 { "" } else { "s" }),
        );
    }
    // By the kind it claims, or by the name `askbus notify` subscribes with.
    let notifier = subs.iter().any(|s| {
        s.get("via").and_then(Value::as_str) == Some("notify")
            || s.get("client")
                .and_then(Value::as_str)
                .is_some_and(|c| c.starts_with("askbus-notify/"))
    });
    if notifier {
        r.ok("notifier", "askbus notify is running".into());
    } else {
        r.add(
            "notifier",
            Status::Warn,
            "askbus notify is not running: nothing tells you (desktop, phone) that an agent waits"
                .into(),
            Some("`askbus service install --notify --now` (or run `askbus notify`)".into()),
        );
    }
}

pub(super) fn policies(r: &mut Report, stats: &Map<String, Value>) {
    let Some(p) = stats.get("policies") else {
        r.add(
            "policies",
            Status::Skip,
            "this askbusd does not say (an older version)".into(),
            None,
        );
        return;
    };
    if p.get("enabled") != Some(&Value::Bool(true)) {
        r.ok(
            "policies",
            "off: every approval is asked of a person (askbusd --policies on to use rules)".into(),
        );
        return;
    }
    let errors: Vec<&str> = p
        .get("errors")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if errors.is_empty() {
        r.ok(
            "policies",
            "loaded without errors (`askbus policy list` shows the rules)".into(),
        );
    } else {
        r.add(
            "policies",
            Status::Warn,
            format!(
                "{} rule file error{} (those files' rules are not in force): {}",
                errors.len(),
                if errors.len() == 1 { "" } else { "s" },
                errors.join("; ")
            ),
            Some("fix the file, then `askbusd --check-config` and `systemctl --user reload askbusd` (or SIGHUP)".into()),
        );
    }
}

/// The store the daemon uses (or, with no daemon, the default file): whether it accepts
/// writes, and whether its history chain verifies.
pub(super) fn store(r: &mut Report, stats: Option<&Map<String, Value>>) {
    let path: PathBuf = match stats.and_then(|s| s.get("store")) {
        Some(s) if s.get("enabled") == Some(&Value::Bool(false)) => {
            r.ok(
                "store",
                "off (--no-store): nothing is kept across restarts".into(),
            );
            return;
        }
        Some(s) => {
            if s.get("available") == Some(&Value::Bool(false)) {
                r.add(
                    "store",
                    Status::Fail,
                    "askbusd cannot write its store: new requests are refused store-unavailable"
                        .into(),
                    Some("free disk space where the store is (it recovers by itself)".into()),
                );
            }
            match s.get("path").and_then(Value::as_str) {
                Some(p) => PathBuf::from(p),
                None => askbus::history::default_store_path(),
            }
        }
        None => askbus::history::default_store_path(),
    };
    if !path.exists() {
        let detail = format!("no store file at {}", path.display());
        r.add("store", Status::Skip, detail, None);
        return;
    }
    let conn = rusqlite::Connection::open_with_flags(
        &path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    );
    let checked = conn.and_then(|c| {
        c.busy_timeout(Duration::from_secs(5))?;
        askbus::history::store::verify(&c)
    });
    match checked {
        Ok(Ok(n)) => r.ok(
            "store",
            format!("{}: the history chain verifies ({n} records)", path.display()),
        ),
        Ok(Err(broken)) => r.add(
            "store",
            Status::Fail,
            format!("{}: the history chain does not verify: {broken}", path.display()),
            Some("the record was changed outside askbusd: `askbus history verify`, and keep the file as evidence".into()),
        ),
        Err(e) => r.add(
            "store",
            Status::Fail,
            format!("{}: cannot read it: {e}", path.display()),
            Some(format!("check its owner and mode: `ls -l {}`", path.display())),
        ),
    }
}

pub(super) fn federation(r: &mut Report, stats: &Map<String, Value>) {
    let Some(f) = stats.get("federation") else {
        r.add(
            "federation",
            Status::Skip,
            "off (askbusd --nats URL joins other machines)".into(),
            None,
        );
        return;
    };
    let node = f.get("node").and_then(Value::as_str).unwrap_or("?");
    let nodes: Vec<&str> = f
        .get("nodes")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if f.get("connected") == Some(&Value::Bool(true)) {
        r.ok(
            "federation",
            format!(
                "connected to NATS as node {node}; other nodes: {}",
                if nodes.is_empty() {
                    "none yet".to_owned()
                } else {
                    nodes.join(", ")
                }
            ),
        );
    } else {
        r.add(
            "federation",
            Status::Fail,
            format!("node {node} is not connected to NATS (the local bus works; other machines see nothing)"),
            Some("the reason is in askbusd's log (`journalctl --user -u askbusd`); as a service it needs network sockets: `askbus service install --now` writes the drop-in that allows them from the config's `nats` (or give `--nats URL`) and restarts askbusd (`sudo askbus service install --system --now` for the system bus)".into()),
        );
    }
}
