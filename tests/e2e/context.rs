//! Request context end to end against the real daemon: what `askbus ask` (flags and `ASKBUS_*`
//! variables) and raw producers put in a request's context reaches the UIs (the Rust client,
//! raw frames, `askbus pending`), filtered UIs see and may answer only their own requests (live
//! and replayed), the no-UI rule counts only UIs that would be shown the request, bad values get
//! errors naming the field, and watchers and telemetry carry agent and project.

use crate::harness as common;

use askbusd::client::{Ui, UiEvent};
use askbusd::protocol::SubscribeFilter;
use common::{request_with, Daemon, Raw};
use serde_json::{json, Value};

const QUESTIONS: &str = r#"[{"question":"Ship it?","header":"Ship","type":"yesno"}]"#;

fn filter(project: Option<&str>, agent: Option<&str>) -> SubscribeFilter {
    SubscribeFilter {
        project: project.map(str::to_owned),
        agent: agent.map(str::to_owned),
        ..SubscribeFilter::default()
    }
}

/// Waits on the watcher for the `request` event of the next request to become pending.
async fn next_request_event(watcher: &mut Raw) -> Value {
    loop {
        let e = watcher.recv_type("bus-event").await;
        if e["event"] == "request" {
            return e;
        }
    }
}

async fn subscribed(d: &Daemon, filter: Value) -> (Raw, u64) {
    let mut ui = d.connect().await;
    ui.send(json!({"type": "subscribe", "client": "test-ui/1", "filter": filter}))
        .await;
    let sub = ui.recv_type("subscribed").await;
    (ui, sub["pending"].as_u64().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_context_reaches_filtered_uis_pending_watchers_and_telemetry() {
    let d = Daemon::start();
    let mut watcher = d.connect().await;
    watcher.send(json!({"type": "watch"})).await;
    watcher.recv_type("watching").await;

    // Flags, and a variable for what no flag says; a second producer only by variables.
    let web = common::spawn_with_stdin(
        d.cli()
            .args(["ask", "--project", "web", "--title", "Deploy to prod"])
            .args(["--agent", "claude-code/1.0.3", "--session", "s-1", "-"])
            .env("ASKBUS_CWD", "/src/web")
            .env("ASKBUS_PROJECT", "overridden-by-the-flag"),
        QUESTIONS,
    );
    let web_event = next_request_event(&mut watcher).await;
    let api = common::spawn_with_stdin(
        d.cli()
            .args(["ask", "-"])
            .env("ASKBUS_PROJECT", "api")
            .env("ASKBUS_AGENT", "gemini-cli/0.61.0")
            .env("ASKBUS_TITLE", ""),
        QUESTIONS,
    );
    let api_event = next_request_event(&mut watcher).await;
    assert_eq!(web_event["project"], "web");
    assert_eq!(web_event["agent"], "claude-code/1.0.3");
    assert!(web_event.get("title").is_none() && web_event.get("session").is_none());
    assert_eq!(api_event["project"], "api");
    assert_eq!(api_event["agent"], "gemini-cli/0.61.0");
    let web_id = web_event["correlationId"].as_str().unwrap().to_owned();
    let api_id = api_event["correlationId"].as_str().unwrap().to_owned();

    // The Rust client, filtered by project: replayed only its own, with the whole context.
    let mut rust_ui =
        Ui::subscribe_filtered(&d.socket, Some("rust-ui/1"), &filter(Some("web"), None))
            .await
            .unwrap();
    assert_eq!(rust_ui.pending_at_subscribe(), 1);
    let Some(UiEvent::Request(req)) = rust_ui.next().await.unwrap() else {
        panic!("expected the replayed request")
    };
    assert_eq!(req.correlation_id, web_id);
    let c = req.context.expect("a context");
    assert_eq!(c.project.as_deref(), Some("web"));
    assert_eq!(c.title.as_deref(), Some("Deploy to prod"));
    assert_eq!(c.agent.as_deref(), Some("claude-code/1.0.3"));
    assert_eq!(c.session.as_deref(), Some("s-1"));
    assert_eq!(c.cwd.as_deref(), Some("/src/web"));

    // A raw UI filtered by agent name (no version): only the api question, whose context has
    // no title (an empty variable counts as unset).
    let (mut agent_ui, n) = subscribed(&d, json!({"agent": "gemini-cli"})).await;
    assert_eq!(n, 1);
    let got = agent_ui.recv_type("ask-user-request").await;
    assert_eq!(got["correlationId"], api_id.as_str());
    assert_eq!(
        got["context"],
        json!({"agent": "gemini-cli/0.61.0", "project": "api"})
    );
    // An unfiltered UI sees both, as before.
    let (mut all_ui, n) = d.ui().await;
    assert_eq!(n, 2);
    all_ui.recv_type("ask-user-request").await;
    all_ui.recv_type("ask-user-request").await;

    // `askbus pending` filters and shows the context.
    let out = d
        .cli()
        .args(["pending", "--json", "--project", "web"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let list: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["context"]["title"], "Deploy to prod");
    let out = d
        .cli()
        .args(["pending", "--agent", "claude-code"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(&web_id), "{text}");
    assert!(!text.contains(&api_id), "{text}");
    assert!(
        text.contains("project web · agent claude-code/1.0.3 · session s-1 · cwd /src/web"),
        "{text}"
    );
    assert!(text.contains("title: Deploy to prod"), "{text}");
    let out = d
        .cli()
        .args(["pending", "--project", "nothing-here"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("No pending questions."));

    // A UI may not answer what its filter left out; the question stays pending.
    agent_ui
        .send(common::answer(&web_id, json!({"0": "No"})))
        .await;
    let err = agent_ui.recv_error("forbidden").await;
    assert!(err["message"].as_str().unwrap().contains("filter"), "{err}");

    // Live: a new web question goes to the web UI and the unfiltered one, not the agent UI.
    let mut producer = d.connect().await;
    producer
        .send(request_with(
            "live-web",
            json!({"context": {"project": "web", "agent": "other/2"}}),
        ))
        .await;
    let Some(UiEvent::Request(live)) = rust_ui.next().await.unwrap() else {
        panic!("expected the live request")
    };
    assert_eq!(live.correlation_id, "live-web");
    assert_eq!(
        all_ui.recv_type("ask-user-request").await["correlationId"],
        "live-web"
    );
    agent_ui.ping().await; // nothing came before the pong

    // The web UI answers its question: the CLI producer gets it.
    rust_ui
        .answer(&web_id, &[(0, "Yes".to_owned())].into_iter().collect())
        .await
        .unwrap();
    let out = web.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    agent_ui
        .send(common::answer(&api_id, json!({"0": "No"})))
        .await;
    let out = api.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));

    // Telemetry carries agent and project, never the title, session or cwd.
    let records = d.wait_telemetry(2);
    let web_record = records
        .iter()
        .find(|r| r["correlationId"] == web_id.as_str())
        .expect("the web record");
    assert_eq!(web_record["agent"], "claude-code/1.0.3");
    assert_eq!(web_record["project"], "web");
    let line = web_record.to_string();
    assert!(!line.contains("Deploy") && !line.contains("s-1") && !line.contains("/src/web"));
    let api_record = records
        .iter()
        .find(|r| r["correlationId"] == api_id.as_str())
        .expect("the api record");
    assert_eq!(api_record["project"], "api");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_context_values_are_refused_naming_the_field() {
    let d = Daemon::start();
    let out = common::spawn_with_stdin(
        d.cli().args(["ask", "--title", "two\nlines", "-"]),
        QUESTIONS,
    )
    .wait_with_output()
    .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "context.title must be one line without control characters"
    );
    let long = "p".repeat(129);
    let out = common::spawn_with_stdin(d.cli().args(["ask", "--project", &long, "-"]), QUESTIONS)
        .wait_with_output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("context.project must be at most 128"));

    let mut p = d.connect().await;
    for (context, message) in [
        (json!("web"), "context must be an object, not a string"),
        (
            json!({"agent": 7}),
            "context.agent must be a string, not a number",
        ),
        (json!({"session": ""}), "context.session must not be empty"),
        (
            json!({"cwd": "x".repeat(4097)}),
            "context.cwd must be at most 4096 characters",
        ),
    ] {
        p.send(request_with("bad", json!({"context": context})))
            .await;
        let err = p.recv_error("invalid-request").await;
        assert_eq!(err["message"], message);
        assert_eq!(err["correlationId"], "bad");
    }
    // Unknown keys are ignored, not forwarded; a context of only those is no context.
    let (mut ui, _) = d.ui().await;
    p.send(request_with(
        "future",
        json!({"context": {"project": "web", "colour": "blue"}}),
    ))
    .await;
    let got = ui.recv_type("ask-user-request").await;
    assert_eq!(got["context"], json!({"project": "web"}));
    p.send(request_with("bare", json!({"context": {"colour": "blue"}})))
        .await;
    let got = ui.recv_type("ask-user-request").await;
    assert_eq!(got["correlationId"], "bare");
    assert!(got.get("context").is_none(), "{got}");
    // Bad filters are refused without making the connection a UI.
    let mut bad_ui = d.connect().await;
    bad_ui
        .send(json!({"type": "subscribe", "filter": {"host": "x", "project": "web"}}))
        .await;
    let err = bad_ui.recv_error("invalid-frame").await;
    assert!(
        err["message"].as_str().unwrap().contains("\"host\""),
        "{err}"
    );
    bad_ui
        .send(common::answer("future", json!({"0": "Yes"})))
        .await;
    bad_ui.recv_error("not-subscribed").await;
    // Withdrawn by its producer's leaving, as usual.
    drop(p);
    ui.recv_type("ask-user-withdrawn").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_ui_counts_only_uis_whose_filter_matches() {
    let d = Daemon::start();
    let (mut web_ui, _) = subscribed(&d, json!({"project": "web"})).await;
    let mut p = d.connect().await;
    p.send(request_with(
        "api-q",
        json!({"noUi": "reject", "context": {"project": "api"}}),
    ))
    .await;
    let resp = p.recv_type("ask-user-response").await;
    assert_eq!(resp["reason"], "no-ui");
    p.send(request_with("untagged", json!({"noUi": "reject"})))
        .await;
    assert_eq!(p.recv_type("ask-user-response").await["reason"], "no-ui");
    p.send(request_with(
        "web-q",
        json!({"noUi": "reject", "context": {"project": "web"}}),
    ))
    .await;
    let got = web_ui.recv_type("ask-user-request").await;
    assert_eq!(got["correlationId"], "web-q");
    web_ui
        .send(common::answer("web-q", json!({"0": "SQLite"})))
        .await;
    assert_eq!(p.recv_type("ask-user-response").await["reason"], "answered");
}

/// The Rust client: every field's empty, over-long and multi-line value is refused with an
/// `invalid-request` naming the field (the Python and Node suites check the same per field).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_gets_every_bad_field_named() {
    use askbusd::client::{Ask, ClientError, Producer};
    use askbusd::protocol::{Code, ErrorCode, RequestContext, CONTEXT_LIMITS};

    let d = Daemon::start();
    let p = Producer::connect(&d.socket, Some("bad-context/1"))
        .await
        .unwrap();
    let mut n = 0;
    for (name, limit) in CONTEXT_LIMITS {
        for value in [String::new(), "x".repeat(limit + 1), "two\nlines".into()] {
            let mut context = RequestContext::default();
            let slot = match name {
                "agent" => &mut context.agent,
                "session" => &mut context.session,
                "project" => &mut context.project,
                "cwd" => &mut context.cwd,
                "title" => &mut context.title,
                other => panic!("a context field this test does not know: {other}"),
            };
            *slot = Some(value);
            let id = format!("bad-{n}");
            n += 1;
            let ask = Ask {
                questions: serde_json::from_str(QUESTIONS).unwrap(),
                correlation_id: Some(id.clone()),
                timeout_ms: None,
                no_ui: None,
                context: Some(context),
            };
            match p.ask(ask).await {
                Err(ClientError::Rejected(e)) => {
                    assert_eq!(e.code, Code::Known(ErrorCode::InvalidRequest), "{e:?}");
                    assert!(e.message.starts_with(&format!("context.{name} ")), "{e:?}");
                    assert_eq!(e.correlation_id.as_deref(), Some(id.as_str()));
                }
                other => panic!("{name}: {other:?}"),
            }
        }
    }
    assert_eq!(n, 15);
}
