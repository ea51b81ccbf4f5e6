//! One `ask_user` tool call through askbusd: its own connection, a hello naming the MCP client,
//! one ask-user-request, and the wait for its one terminal frame, withdrawing the question
//! if the MCP client cancels the call.
//!
//! A connection per call (rather than one shared producer) means a daemon restarted between
//! calls is simply reconnected to, and a call that ends for any reason takes nothing else down.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use askbus::client::{ClientError, Connection};
use askbus::protocol::{
    ClientFrame, ErrorFrame, NoUiPolicy, ProducerResponse, RequestContext, ServerFrame,
    CONTEXT_LIMITS, MAX_CLIENT_CHARS,
};

/// How long a withdrawn call waits for the daemon to confirm before hanging up (which
/// withdraws it too, as producer-gone).
const WITHDRAW_GRACE: Duration = Duration::from_secs(5);

/// What the server adds to every request, from its command line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Policy {
    pub timeout_ms: Option<u64>,
    pub no_ui: Option<NoUiPolicy>,
}

/// How a call ended, when the daemon had its say.
#[derive(Debug)]
pub enum Ended {
    /// The request's terminal response: answered, dismissed, timeout, no-ui, withdrawn or
    /// shutdown, with the result the model is handed.
    Response(ProducerResponse),
    /// The daemon refused the request. For `invalid-request` the message is the reference's
    /// validation message.
    Refused(ErrorFrame),
}

/// A call that never got the daemon's answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error(
        "cannot connect to askbusd at {}: {source}. Start askbusd, or give `askbus mcp` the \
         socket it listens on with --socket.",
        path.display()
    )]
    Unreachable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("askbusd at {} refused the connection: {}: {}", path.display(), .frame.code, .frame.message)]
    Hello { path: PathBuf, frame: ErrorFrame },
    #[error("lost the connection to askbusd at {} before the question ended: {source}", path.display())]
    Lost { path: PathBuf, source: ClientError },
    #[error("the question was withdrawn, but askbusd at {} did not confirm it", path.display())]
    WithdrawUnconfirmed { path: PathBuf },
}

/// The request frame for a tool call's `arguments`.
///
/// Only `questions` is forwarded: the reference schema constrains nothing else and allows other
/// properties, so they cannot change how the call validates, and dropping them keeps a model's
/// stray `timeoutMs` or `correlationId` from steering the daemon. An absent `questions` stays
/// absent so the daemon reports it in the reference's words ("must have required property").
pub fn request_frame(
    correlation_id: &str,
    arguments: Option<&Map<String, Value>>,
    policy: Policy,
    context: Option<&RequestContext>,
) -> Bytes {
    let mut frame = Map::new();
    frame.insert("type".into(), "ask-user-request".into());
    frame.insert("correlationId".into(), correlation_id.into());
    if let Some(questions) = arguments.and_then(|a| a.get("questions")) {
        frame.insert("questions".into(), questions.clone());
    }
    if let Some(ms) = policy.timeout_ms {
        frame.insert("timeoutMs".into(), ms.into());
    }
    if let Some(no_ui) = policy.no_ui {
        frame.insert("noUi".into(), no_ui.as_str().into());
    }
    if let Some(context) = context.filter(|c| !c.is_empty()) {
        let value = serde_json::to_value(context).expect("a context serializes");
        frame.insert("context".into(), value);
    }
    Bytes::from(serde_json::to_vec(&Value::Object(frame)).expect("a JSON map serializes"))
}

/// The producer name UIs show: the MCP client's `name/version`, cut to what hello accepts.
pub fn client_name(name: &str, version: &str) -> Option<String> {
    let full = match (name.trim(), version.trim()) {
        ("", "") => return None,
        (n, "") => n.to_owned(),
        ("", v) => format!("unnamed MCP client/{v}"),
        (n, v) => format!("{n}/{v}"),
    };
    Some(full.chars().take(MAX_CLIENT_CHARS).collect())
}

/// The request context of a call: `ASKBUS_*` variables first (the MCP client's server config
/// may set them), else the MCP client's `name/version` as `agent` and its first `file://` root
/// (or this server's working directory, which the client chose) as `cwd`, its name (or the
/// directory's) as `project`. Values are made acceptable (control characters dropped, cut to
/// their limit) rather than have the daemon refuse the question over them.
pub fn context(
    env: impl Fn(&str) -> Option<String>,
    client: Option<(&str, &str)>,
    root: Option<(&str, Option<&str>)>,
    cwd: Option<&Path>,
) -> RequestContext {
    let var = |name: &str| env(name).filter(|v| !v.is_empty());
    let (dir, root_name) = match root.and_then(|(uri, name)| Some((file_path(uri)?, name))) {
        Some((path, name)) => (Some(path), name.map(str::to_owned)),
        None => (cwd.map(|p| p.to_string_lossy().into_owned()), None),
    };
    let base = dir.as_deref().and_then(|d| {
        Path::new(d)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
    });
    let mut c = RequestContext {
        agent: var("ASKBUS_AGENT").or_else(|| client.and_then(|(n, v)| client_name(n, v))),
        session: var("ASKBUS_SESSION"),
        project: var("ASKBUS_PROJECT").or(root_name).or(base),
        cwd: var("ASKBUS_CWD").or(dir),
        title: var("ASKBUS_TITLE"),
        ..RequestContext::default()
    };
    for (name, slot) in [
        ("agent", &mut c.agent),
        ("session", &mut c.session),
        ("project", &mut c.project),
        ("cwd", &mut c.cwd),
        ("title", &mut c.title),
    ] {
        let max = CONTEXT_LIMITS
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(256, |(_, m)| *m);
        *slot = slot
            .take()
            .map(|v| {
                v.chars()
                    .filter(|c| !c.is_control())
                    .take(max)
                    .collect::<String>()
            })
            .filter(|v| !v.trim().is_empty());
    }
    c
}

/// The local path of a `file://` URI (percent-escapes decoded), if it is one.
fn file_path(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("file://")?;
    // `file:///x` or `file://localhost/x`; another host is not a local directory.
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    if !path.starts_with('/') {
        return None;
    }
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    let path = String::from_utf8_lossy(&out).into_owned();
    Some(if path.len() > 1 {
        path.trim_end_matches('/').to_owned()
    } else {
        path
    })
}

/// How long the daemon will wait for the question: the policy's timeout, else the daemon's
/// default, clamped to its maximum (as the daemon itself decides it).
pub fn effective_timeout_ms(policy: Policy, default_ms: u64, max_ms: u64) -> u64 {
    policy.timeout_ms.unwrap_or(default_ms).min(max_ms)
}

/// Asks once and waits for the end. When `cancel` fires, the question is withdrawn and the
/// daemon's confirmation (reason `withdrawn`, or the answer that won the race) is returned.
/// Once the daemon has welcomed the connection, `timeout_ms` holds how long the question may
/// wait (for progress notifications' `total`).
pub async fn ask(
    socket: &Path,
    client: Option<&str>,
    request: Bytes,
    correlation_id: &str,
    cancel: &CancellationToken,
    policy: Policy,
    timeout_ms: &OnceLock<u64>,
) -> Result<Ended, CallError> {
    let lost = |source| CallError::Lost {
        path: socket.to_owned(),
        source,
    };
    let mut conn = Connection::connect(socket).await.map_err(|e| match e {
        ClientError::Connect { path, source } => CallError::Unreachable { path, source },
        other => lost(other),
    })?;
    match conn.hello(client).await {
        Ok(ServerFrame::Welcome {
            default_timeout_ms,
            max_timeout_ms,
            ..
        }) => {
            let _ = timeout_ms.set(effective_timeout_ms(
                policy,
                default_timeout_ms,
                max_timeout_ms,
            ));
        }
        Ok(_) => {}
        Err(ClientError::Rejected(frame)) => {
            return Err(CallError::Hello {
                path: socket.to_owned(),
                frame,
            })
        }
        Err(e) => return Err(lost(e)),
    }
    match conn.send_raw(request).await {
        Ok(()) => {}
        // The daemon said why before closing (e.g. frame-too-large): that is its refusal.
        Err(ClientError::Rejected(frame)) => return Ok(Ended::Refused(frame)),
        Err(e) => return Err(lost(e)),
    }
    let grace = tokio::time::sleep(Duration::from_secs(365 * 24 * 3600));
    tokio::pin!(grace);
    let mut withdrawn = false;
    loop {
        let frame = tokio::select! {
            biased;
            _ = cancel.cancelled(), if !withdrawn => {
                withdrawn = true;
                grace.as_mut().reset(Instant::now() + WITHDRAW_GRACE);
                conn.send(&ClientFrame::AskUserCancel { correlation_id, reason: None, via: None })
                    .await
                    .map_err(lost)?;
                continue;
            }
            _ = &mut grace => {
                return Err(CallError::WithdrawUnconfirmed { path: socket.to_owned() });
            }
            // Cancel-safe: the framed reader keeps a partly read frame for the next call.
            frame = conn.recv() => frame.map_err(lost)?,
        };
        match frame {
            Some(ServerFrame::AskUserResponse(r)) if r.correlation_id == correlation_id => {
                return Ok(Ended::Response(r))
            }
            // An error without an id is about the connection itself, so about this request.
            Some(ServerFrame::Error(e))
                if e.correlation_id
                    .as_deref()
                    .is_none_or(|id| id == correlation_id) =>
            {
                return Ok(Ended::Refused(e))
            }
            Some(_) => continue,
            None => return Err(lost(ClientError::Closed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn frame(args: Value, policy: Policy) -> Value {
        let args = args.as_object().cloned();
        serde_json::from_slice(&request_frame("c-1", args.as_ref(), policy, None)).unwrap()
    }

    #[test]
    fn forwards_questions_only() {
        let q = json!([{"question": "Q?", "header": "H", "type": "text"}]);
        let f = frame(
            json!({"questions": q, "timeoutMs": 5, "correlationId": "x", "noUi": "bogus"}),
            Policy::default(),
        );
        assert_eq!(
            f,
            json!({"type": "ask-user-request", "correlationId": "c-1", "questions": q})
        );
    }

    #[test]
    fn absent_questions_stay_absent_and_null_stays_null() {
        let f = frame(json!({}), Policy::default());
        assert!(f.get("questions").is_none());
        let f =
            serde_json::from_slice::<Value>(&request_frame("c-1", None, Policy::default(), None))
                .unwrap();
        assert!(f.get("questions").is_none());
        let f = frame(json!({"questions": null}), Policy::default());
        assert_eq!(f["questions"], Value::Null);
    }

    #[test]
    fn policy_from_flags() {
        let f = frame(
            json!({"questions": []}),
            Policy {
                timeout_ms: Some(1500),
                no_ui: Some(NoUiPolicy::Reject),
            },
        );
        assert_eq!(f["timeoutMs"], 1500);
        assert_eq!(f["noUi"], "reject");
    }

    #[test]
    fn effective_timeouts() {
        let p = |timeout_ms| Policy {
            timeout_ms,
            no_ui: None,
        };
        assert_eq!(effective_timeout_ms(p(None), 600_000, 86_400_000), 600_000);
        assert_eq!(
            effective_timeout_ms(p(Some(1500)), 600_000, 86_400_000),
            1500
        );
        assert_eq!(effective_timeout_ms(p(Some(u64::MAX)), 600_000, 9000), 9000);
    }

    #[test]
    fn client_names() {
        assert_eq!(
            client_name("claude-code", "2.1.0").as_deref(),
            Some("claude-code/2.1.0")
        );
        assert_eq!(client_name("codex", "").as_deref(), Some("codex"));
        assert_eq!(client_name("", " "), None);
        assert_eq!(
            client_name("", "1").as_deref(),
            Some("unnamed MCP client/1")
        );
        let long = client_name(&"é".repeat(300), "1").unwrap();
        assert_eq!(long.chars().count(), MAX_CLIENT_CHARS);
    }

    #[test]
    fn context_from_the_client_its_roots_or_the_directory() {
        let none = |_: &str| None;
        let c = context(
            none,
            Some(("claude-code", "1.0.3")),
            Some(("file:///home/dev/src/my%20app/", None)),
            Some(Path::new("/elsewhere")),
        );
        assert_eq!(c.agent.as_deref(), Some("claude-code/1.0.3"));
        assert_eq!(c.cwd.as_deref(), Some("/home/dev/src/my app"));
        assert_eq!(c.project.as_deref(), Some("my app"));
        // A named root names the project; a non-file root falls back to the directory.
        let c = context(none, None, Some(("file:///w/x", Some("Website"))), None);
        assert_eq!(c.project.as_deref(), Some("Website"));
        let c = context(
            none,
            None,
            Some(("https://example.com/repo", None)),
            Some(Path::new("/src/api")),
        );
        assert_eq!(c.cwd.as_deref(), Some("/src/api"));
        assert_eq!(c.project.as_deref(), Some("api"));
        // The environment wins; values are made acceptable to the daemon.
        let env = |k: &str| match k {
            "ASKBUS_PROJECT" => Some("from-env".to_owned()),
            "ASKBUS_TITLE" => Some("two\nlines".to_owned()),
            "ASKBUS_SESSION" => Some(String::new()),
            _ => None,
        };
        let c = context(
            env,
            Some(("evil\u{1b}]0;x", "9")),
            None,
            Some(Path::new("/")),
        );
        assert_eq!(c.project.as_deref(), Some("from-env"));
        assert_eq!(c.title.as_deref(), Some("twolines"));
        assert_eq!(c.session, None);
        assert_eq!(c.agent.as_deref(), Some("evil]0;x/9"));
        assert_eq!(c.cwd.as_deref(), Some("/"));
        assert_eq!(c.check(), Ok(()));
    }
}
