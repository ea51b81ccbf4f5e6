//! The crash loop of issue 28, against the real daemon on a store: N requests (2,000) from
//! all three producer kinds as real processes — long-lived Python (`clients/python`) and Node
//! (`clients/node`) producer processes with many requests each, and one `askbus ask` process
//! per request for the rest — answered by three racing UIs (each answers every request it is
//! sent, with an answer naming itself), while the daemon is SIGKILLed and restarted on the same
//! store and socket at least five times, at points chosen by a seeded random draw over the
//! count of acks the UIs have received (the seed is printed; `ASKBUS_CRASH_SEED` replays it,
//! `ASKBUS_CRASH_REQUESTS` sets N). Every producer resumes on its own, with the same ids.
//!
//! A quarter of the Python and Node processes' requests are approvals
//! (`tool-confirmation-request`, through each client's `confirm`), with no policy rule to decide
//! them (the harness runs the daemon with policies off): the three UIs race to decide each one
//! differently (the first allows once or dismisses, the second denies, the third allows always
//! or with an edit), each with
//! a message naming itself, so whose decision the producer got is plain. A quarter of the
//! `askbus ask` share is `askbus hook gemini` instead (Gemini CLI's BeforeTool input for the
//! same tool call): a hook resends its request under the same id when a kill cuts its
//! connection, as every producer does.
//!
//! Asserted afterwards:
//! - every request has exactly one terminal answer at its producer, `answered`, and no
//!   producer connection carries a second terminal frame for an id or one for an id it did not
//!   ask (the scripts watch the wire under their client); every producer process succeeds;
//! - no request is decided twice: at most one ack (`ask-user-ack`, `tool-confirmation-ack`) for
//!   an id, across every UI
//!   connection of every daemon;
//! - the answer a producer got is exactly the one its acked UI sent; where the ack was lost to
//!   a SIGKILL (committed, then killed before it went out), it is the answer of a UI whose
//!   connection died with that answer unacknowledged, and the one the history records; for an
//!   approval, the decision (`confirmed`, `outcome`, `message`, `payload`) likewise, so `confirmed` only
//!   where that UI allowed: never a decision no UI sent, and no restart or cut-off ever turns
//!   into proceed (the clients fail closed, and any reason but `answered`, or `dismissed`
//!   where the winning UI dismissed, fails the test);
//! - each `askbus hook` allowed (exit 0) only where its record says a UI allowed and that UI
//!   won, and denied (exit 2) with the denying UI's message (or the dismissal's) where one did
//!   not, kills or not: a restart is no reason to deny;
//! - `askbus history --json` holds exactly one ended record per request, each `answered` with
//!   that very answer and `decidedBy` that very UI; `askbus history verify` passes.

use crate::harness as common;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::clients::{questions_for, tool_for, ProducerScript};
use common::{Daemon, Raw};
use serde_json::{json, Value};
use tokio::sync::watch;

const UIS: usize = 3;
/// Long-lived producer processes per script language, and the requests each keeps in flight.
const SCRIPTS: usize = 2;
const SCRIPT_CONCURRENCY: usize = 16;
/// `askbus ask` processes running at once.
const ASK_PARALLEL: usize = 8;
const KILLS: usize = 6;
/// Every `APPROVE_EVERY`th request of a script process is an approval (see `ProducerScript`).
const APPROVE_EVERY: usize = 4;
/// Far beyond the run: a request that times out was lost.
const TIMEOUT_MS: u64 = 600_000;
/// How long any one phase may take before the test fails (waits are on events; this only
/// bounds a hang).
const PHASE: Duration = Duration::from_secs(180);
/// `askbus ask`'s status when no daemon answered its first connection (the question was never
/// asked: it is started again, as a script would).
const ASK_UNREACHABLE: i32 = 5;
/// More restarts of `askbus ask` than this, over a runner's requests, fail the test.
const MAX_ASK_RESTARTS: usize = 200;

/// The script processes still running, SIGKILLed when the test ends early (a failed
/// assertion must not leave producers behind).
#[derive(Default)]
struct Reaper(Arc<Mutex<HashMap<u32, bool>>>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for (&pid, &done) in self.0.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            if !done {
                // SAFETY: a pid we spawned and whose waiter has not reaped it.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
    }
}

/// What a UI did and was told; one UI's events are in the order they happened.
#[derive(Debug)]
enum Ui {
    Sent {
        ui: usize,
        cid: String,
        value: Value,
        gen: u64,
    },
    Ack {
        ui: usize,
        cid: String,
        outcome: String,
        /// For an approval, the decision the ack says this UI won with (`confirmed`, `outcome`).
        decided: Option<Value>,
        gen: u64,
    },
    /// `not-pending`: another UI won, or the request ended otherwise.
    NotPending {
        ui: usize,
        cid: String,
    },
    /// The connection died with this answer unacknowledged: its fate is not known to the UI.
    Lost {
        ui: usize,
        cid: String,
    },
    Unexpected {
        ui: usize,
        frame: Value,
    },
}

fn ui_name(ui: usize) -> String {
    format!("crash-ui-{ui}")
}

/// What the daemon tells the producer of a dismissed approval.
const DISMISSED: &str =
    "The user dismissed the confirmation without deciding, so the tool call was not approved.";

/// UI `ui`'s decision on approval `cid`, as the producer is to get it if it wins: each UI
/// decides differently (the first allows once, or dismisses one id in seven; the second denies;
/// the third allows always or, for half the ids, allows with an edit: `modify_with_editor` with
/// a payload), and its message (and payload) names the request and the UI. `payload` is null
/// when there is none.
fn decision(ui: usize, cid: &str) -> Value {
    let me = format!("{cid}@{}", ui_name(ui));
    let sum = cid.bytes().map(usize::from).sum::<usize>();
    let (confirmed, outcome, payload) = match ui % 3 {
        0 if sum % 7 == 3 => {
            return json!({"reason": "dismissed", "confirmed": false, "outcome": "cancel",
                          "message": DISMISSED, "payload": null})
        }
        0 => (true, "proceed_once", Value::Null),
        1 => (false, "cancel", Value::Null),
        _ if sum % 2 == 0 => (true, "modify_with_editor", json!({"newContent": me})),
        _ => (true, "proceed_always", Value::Null),
    };
    json!({"reason": "answered", "confirmed": confirmed, "outcome": outcome, "message": me,
           "payload": payload})
}

struct Shared {
    events: Mutex<Vec<Ui>>,
    /// Acks received, by every UI.
    acks: watch::Sender<usize>,
    /// Answers sent and without a verdict yet.
    open: watch::Sender<usize>,
    /// Subscriptions confirmed (`subscribed`), over the run.
    subscribed: watch::Sender<usize>,
}

impl Shared {
    fn push(&self, e: Ui) {
        self.events.lock().unwrap().push(e);
    }
}

/// One UI: subscribes to each daemon in turn (the next once `generation` says it is up) and
/// answers every request it is sent with "CID#q@NAME" for each question.
async fn ui(k: usize, socket: PathBuf, mut generation: watch::Receiver<u64>, shared: Arc<Shared>) {
    let name = ui_name(k);
    let mut seen = 0;
    loop {
        seen = *generation
            .wait_for(|g| *g > seen)
            .await
            .expect("the test holds the sender");
        // Refused: this daemon was killed already; wait for the next.
        let Ok(mut raw) = Raw::try_connect(&socket).await else {
            continue;
        };
        raw.send(json!({"type": "subscribe", "client": name})).await;
        let mut open: HashSet<String> = HashSet::new();
        while let Some(f) = raw.recv_within(Duration::from_secs(3600)).await {
            let cid = f["correlationId"].as_str().unwrap_or_default().to_owned();
            match f["type"].as_str().unwrap_or_default() {
                "subscribed" => shared.subscribed.send_modify(|n| *n += 1),
                "ask-user-request" => {
                    let n = f["questions"].as_array().map_or(0, Vec::len);
                    let value: serde_json::Map<String, Value> = (0..n)
                        .map(|q| (q.to_string(), json!(format!("{cid}#{q}@{name}"))))
                        .collect();
                    let value = Value::Object(value);
                    shared.push(Ui::Sent {
                        ui: k,
                        cid: cid.clone(),
                        value: value.clone(),
                        gen: seen,
                    });
                    if open.insert(cid.clone()) {
                        shared.open.send_modify(|n| *n += 1);
                    } else {
                        shared.push(Ui::Unexpected {
                            ui: k,
                            frame: f.clone(),
                        });
                    }
                    raw.send(common::answer(&cid, value)).await;
                }
                "tool-confirmation-request" => {
                    let mut value = decision(k, &cid);
                    // A UI offers only what the request offers (`askbus hook gemini` may offer
                    // fewer): an approving outcome not offered becomes allow-once.
                    let offered = f["outcomes"].as_array().cloned().unwrap_or_default();
                    if !offered.contains(&value["outcome"]) {
                        value["outcome"] = json!("proceed_once");
                        value["payload"] = Value::Null;
                    }
                    shared.push(Ui::Sent {
                        ui: k,
                        cid: cid.clone(),
                        value: value.clone(),
                        gen: seen,
                    });
                    if open.insert(cid.clone()) {
                        shared.open.send_modify(|n| *n += 1);
                    } else {
                        shared.push(Ui::Unexpected {
                            ui: k,
                            frame: f.clone(),
                        });
                    }
                    let mut frame = if value["reason"] == "dismissed" {
                        json!({"dismissed": true})
                    } else {
                        let mut frame = value;
                        let m = frame.as_object_mut().unwrap();
                        m.remove("reason");
                        if m["payload"].is_null() {
                            m.remove("payload");
                        }
                        frame
                    };
                    frame["type"] = json!("tool-confirmation-response");
                    frame["correlationId"] = json!(cid);
                    raw.send(frame).await;
                }
                "ask-user-ack" if open.remove(&cid) => {
                    shared.push(Ui::Ack {
                        ui: k,
                        cid,
                        outcome: f["outcome"].as_str().unwrap_or_default().to_owned(),
                        decided: None,
                        gen: seen,
                    });
                    shared.open.send_modify(|n| *n -= 1);
                    shared.acks.send_modify(|n| *n += 1);
                }
                "tool-confirmation-ack" if open.remove(&cid) => {
                    shared.push(Ui::Ack {
                        ui: k,
                        cid,
                        outcome: f["reason"].as_str().unwrap_or_default().to_owned(),
                        decided: Some(
                            json!({"confirmed": f["confirmed"], "outcome": f["outcome"]}),
                        ),
                        gen: seen,
                    });
                    shared.open.send_modify(|n| *n -= 1);
                    shared.acks.send_modify(|n| *n += 1);
                }
                "error" if f["code"] == "not-pending" && open.remove(&cid) => {
                    shared.push(Ui::NotPending { ui: k, cid });
                    shared.open.send_modify(|n| *n -= 1);
                }
                // Another UI won (or this one, and the ack is on its way after it).
                "ask-user-withdrawn" | "tool-confirmation-withdrawn" => {}
                _ => shared.push(Ui::Unexpected { ui: k, frame: f }),
            }
        }
        for cid in open.drain() {
            shared.push(Ui::Lost { ui: k, cid });
            shared.open.send_modify(|n| *n -= 1);
        }
    }
}

/// A finished producer: its name, and how it ended.
enum Done {
    Script(String, ExitStatus),
    /// An `askbus ask` runner thread, with what its processes printed (index, the one
    /// ask-user-response) and what went wrong.
    Asks {
        got: Vec<(usize, Value)>,
        /// `askbus hook gemini` runs: index, exit status, stdout, stderr.
        hooks: Vec<(usize, i32, String, String)>,
        failures: Vec<String>,
        restarts: usize,
    },
}

/// Gemini CLI's BeforeTool hook input for the approval of `index` (`tool_for`'s command).
fn hook_input(index: usize) -> String {
    json!({"session_id": "crash-loop", "transcript_path": "/tmp/crash/chats/s.json",
           "cwd": "/tmp", "hook_event_name": "BeforeTool",
           "timestamp": "2026-12-06T06:00:00.000Z", "tool_name": "run_shell_command",
           "tool_input": {"command": format!("make task-{index}")}})
    .to_string()
}

/// Runs `askbus hook gemini` for the approval of `index`: (exit status, stdout, stderr).
fn run_hook(socket: &Path, index: usize) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(common::cli_bin())
        .env("ASKBUS_SOCKET", socket)
        .args(["hook", "gemini", "--no-ui", "wait", "--timeout-ms"])
        .arg(TIMEOUT_MS.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run askbus hook");
    let _ = child
        .stdin
        .take()
        .unwrap()
        .write_all(hook_input(index).as_bytes());
    let out = child.wait_with_output().expect("askbus hook");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}: bad line {l:?}: {e}", path.display()))
        })
        .collect()
}

/// Runs `askbus ask` for each index it takes from `next` until none is left below `end`.
fn ask_runner(
    socket: PathBuf,
    files: Arc<Vec<PathBuf>>,
    next: Arc<AtomicUsize>,
    end: usize,
    done: mpsc::Sender<Done>,
) {
    let (mut got, mut hooks, mut failures, mut restarts) = (Vec::new(), Vec::new(), Vec::new(), 0);
    loop {
        let index = next.fetch_add(1, Ordering::SeqCst);
        if index >= end {
            break;
        }
        if index % APPROVE_EVERY == APPROVE_EVERY - 1 {
            loop {
                let (code, stdout, stderr) = run_hook(&socket, index);
                // No daemon at its connection: nothing was asked; the agent would run it again.
                if stderr.contains("cannot reach askbusd") && restarts < MAX_ASK_RESTARTS {
                    restarts += 1;
                    continue;
                }
                hooks.push((index, code, stdout, stderr));
                break;
            }
            continue;
        }
        loop {
            let out = Command::new(common::cli_bin())
                .env("ASKBUS_SOCKET", &socket)
                .arg("ask")
                .arg(&files[index % 3])
                .args(["--json", "--timeout-ms", &TIMEOUT_MS.to_string()])
                .args(["--client", &format!("crash-ask/{index}")])
                .output()
                .expect("run askbus ask");
            // Bounded, so a daemon that never comes back fails the test instead of this loop
            // running on after it.
            if out.status.code() == Some(ASK_UNREACHABLE) && restarts < MAX_ASK_RESTARTS {
                restarts += 1;
                continue;
            }
            let stdout = String::from_utf8_lossy(&out.stdout);
            let lines: Vec<&str> = stdout.lines().collect();
            if !out.status.success() || lines.len() != 1 {
                failures.push(format!(
                    "askbus ask for index {index}: {}, stdout {stdout:?}, stderr {:?}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ));
            } else {
                got.push((index, serde_json::from_str(lines[0]).expect("ask --json")));
            }
            break;
        }
    }
    let _ = done.send(Done::Asks {
        got,
        hooks,
        failures,
        restarts,
    });
}

fn wait_for<T>(
    rt: &tokio::runtime::Runtime,
    rx: &mut watch::Receiver<T>,
    what: &str,
    ok: impl FnMut(&T) -> bool,
    log: impl Fn() -> String,
) {
    let waited = rt.block_on(async { tokio::time::timeout(PHASE, rx.wait_for(ok)).await.is_ok() });
    assert!(waited, "never {what} within {PHASE:?}\n{}", log());
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[test]
fn crash_loop_every_request_decided_once_and_delivered_as_acked() {
    let n: usize = std::env::var("ASKBUS_CRASH_REQUESTS")
        .ok()
        .map(|v| v.parse().expect("ASKBUS_CRASH_REQUESTS"))
        .unwrap_or(2_000);
    let seed: u64 = std::env::var("ASKBUS_CRASH_SEED")
        .ok()
        .map(|v| v.parse().expect("ASKBUS_CRASH_SEED"))
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!(
        "crash loop: {n} requests, seed {seed} (ASKBUS_CRASH_SEED={seed} replays the kill points)"
    );
    let mut rng = fastrand::Rng::with_seed(seed);
    // Built (or found built) before anything starts, so its build is not in the run's time.
    common::clients::node_client();
    let started = Instant::now();

    let state = tempfile::tempdir().unwrap();
    let store = state.path().join("state/askbus.db");
    let mut d = Daemon::start_with(&["--store", store.to_str().unwrap()]);
    let socket = d.socket.clone();
    let dir = d.dir.path().join("crash");
    std::fs::create_dir(&dir).unwrap();

    // The split: a fifth by `askbus ask`, the rest by the Python and Node processes.
    let asks = n / 5;
    let python = (n - asks) / 2;
    let node = n - asks - python;
    let ask_start = python + node;

    let rt = common::rt();
    let (generation, generation_rx) = watch::channel(1u64);
    let shared = Arc::new(Shared {
        events: Mutex::new(Vec::new()),
        acks: watch::channel(0).0,
        open: watch::channel(0).0,
        subscribed: watch::channel(0).0,
    });
    let (mut acks_rx, mut open_rx, mut subscribed_rx) = (
        shared.acks.subscribe(),
        shared.open.subscribe(),
        shared.subscribed.subscribe(),
    );
    for k in 0..UIS {
        rt.spawn(ui(k, socket.clone(), generation_rx.clone(), shared.clone()));
    }
    let log = || tail(&d.log_text(), 30);
    wait_for(
        &rt,
        &mut subscribed_rx,
        "3 UIs subscribed",
        |s| *s >= UIS,
        log,
    );

    // The producers.
    let (done_tx, done_rx) = mpsc::channel();
    let reaper = Reaper::default();
    let mut scripts: Vec<(String, PathBuf, PathBuf, Vec<usize>)> = Vec::new();
    for (lang, range) in [("py", 0..python), ("node", python..python + node)] {
        for s in 0..SCRIPTS {
            let name = format!("{lang}{s}");
            let todo: Vec<usize> = range.clone().skip(s).step_by(SCRIPTS).collect();
            let script = ProducerScript {
                socket: &socket,
                name: &name,
                todo: &todo,
                concurrency: SCRIPT_CONCURRENCY,
                timeout_ms: TIMEOUT_MS,
                approve_every: APPROVE_EVERY,
                dir: &dir,
            };
            let mut child = if lang == "py" {
                script.python()
            } else {
                script.node()
            };
            scripts.push((name.clone(), script.log(), script.stderr(), todo));
            let done = done_tx.clone();
            let running = reaper.0.clone();
            running.lock().unwrap().insert(child.id(), false);
            std::thread::spawn(move || {
                let status = child.wait().expect("wait");
                running.lock().unwrap().insert(child.id(), true);
                let _ = done.send(Done::Script(name, status));
            });
        }
    }
    let files: Arc<Vec<PathBuf>> = Arc::new(
        (0..3)
            .map(|shape| {
                let f = dir.join(format!("questions-{shape}.json"));
                std::fs::write(&f, questions_for(shape).to_string()).unwrap();
                f
            })
            .collect(),
    );
    let next = Arc::new(AtomicUsize::new(ask_start));
    for _ in 0..ASK_PARALLEL {
        let (socket, files, next, done) =
            (socket.clone(), files.clone(), next.clone(), done_tx.clone());
        std::thread::spawn(move || ask_runner(socket, files, next, n, done));
    }
    drop(done_tx);

    // The kill points: by acks seen, between 5% and 85% of the run, in order.
    let mut points: Vec<usize> = (0..KILLS)
        .map(|_| rng.usize(n / 20..n * 85 / 100))
        .collect();
    points.sort_unstable();
    // Each daemon is killed only once its UIs have had n / 50 more acks, so every one of them
    // decides something before it dies (the acks after a restart can only be the new one's).
    let mut acked = 0;
    for (i, &point) in points.iter().enumerate() {
        let at = point.max(acked + n / 50);
        let log = || tail(&d.log_text(), 30);
        wait_for(&rt, &mut acks_rx, &format!("{at} acks"), |a| *a >= at, log);
        d.kill();
        acked = *acks_rx.borrow();
        d.restart();
        generation.send_replace(i as u64 + 2);
        eprintln!(
            "crash loop: SIGKILL {} at {acked} acks (point {point}), restarted ({:?} in)",
            i + 1,
            started.elapsed()
        );
    }

    // Every producer ends by itself.
    let mut statuses = Vec::new();
    let (mut asked, mut ask_failures, mut ask_restarts) = (Vec::new(), Vec::new(), 0);
    let mut hooks: Vec<(usize, i32, String, String)> = Vec::new();
    let finish = Instant::now() + PHASE;
    for _ in 0..SCRIPTS * 2 + ASK_PARALLEL {
        let wait = finish.saturating_duration_since(Instant::now());
        match done_rx.recv_timeout(wait) {
            Ok(Done::Script(name, status)) => statuses.push((name, status)),
            Ok(Done::Asks {
                got,
                hooks: h,
                failures,
                restarts,
            }) => {
                asked.extend(got);
                hooks.extend(h);
                ask_failures.extend(failures);
                ask_restarts += restarts;
            }
            Err(_) => panic!(
                "the producers did not finish within {PHASE:?}: {} acks\n{}",
                *acks_rx.borrow(),
                tail(&d.log_text(), 30)
            ),
        }
    }
    let took = started.elapsed();
    // Every answer a UI sent has its verdict (the acks of the last answers may trail the
    // producers' responses: they go to other connections).
    wait_for(
        &rt,
        &mut open_rx,
        "a verdict for every answer",
        |o| *o == 0,
        || tail(&d.log_text(), 30),
    );
    let (status, _) = d.terminate(Duration::from_secs(10));
    assert!(status.success(), "askbusd exited with {status}");
    let events = std::mem::take(&mut *shared.events.lock().unwrap());
    drop(rt);

    // 1. Every producer: one terminal answer per request, nothing else on the wire.
    for (name, status) in &statuses {
        let (_, _, err, _) = scripts.iter().find(|s| &s.0 == name).unwrap();
        assert!(
            status.success(),
            "producer {name} failed ({status}):\n{}",
            std::fs::read_to_string(err).unwrap_or_default()
        );
    }
    assert!(
        ask_failures.is_empty(),
        "askbus ask failed:\n{}",
        ask_failures.join("\n")
    );
    // correlationId -> (index, answers) as its producer received them; for an approval, the
    // decision (`confirmed`, `outcome`, `message`).
    let mut received: HashMap<String, (usize, Value)> = HashMap::new();
    let mut approvals: HashSet<String> = HashSet::new();
    for (name, log, _, todo) in &scripts {
        let lines = read_lines(log);
        assert!(
            lines.last().is_some_and(|l| l["done"] == true),
            "{name} did not finish"
        );
        let mut outcomes = 0;
        for l in &lines {
            for bad in ["dup", "foreign", "error"] {
                assert!(l.get(bad).is_none_or(Value::is_null), "{name}: {l}");
            }
            if let Some(cid) = l["cid"].as_str() {
                // An approval may be dismissed too (never confirmed: checked below).
                let dismissed = l["kind"] == "approval" && l["reason"] == "dismissed";
                assert!(l["reason"] == "answered" || dismissed, "{name}: {l}");
                let index: usize = cid
                    .strip_prefix(&format!("{name}:"))
                    .unwrap()
                    .parse()
                    .unwrap();
                let approval = index % APPROVE_EVERY == APPROVE_EVERY - 1;
                assert_eq!(l["kind"] == "approval", approval, "{name}: {l}");
                let got = if approval {
                    approvals.insert(cid.to_owned());
                    json!({"reason": l["reason"], "confirmed": l["confirmed"],
                           "outcome": l["outcome"], "message": l["message"],
                           "payload": l["payload"]})
                } else {
                    l["answers"].clone()
                };
                let again = received.insert(cid.to_owned(), (index, got));
                assert!(again.is_none(), "{name}: two terminal answers for {cid}");
                outcomes += 1;
            }
        }
        assert_eq!(outcomes, todo.len(), "{name}: one outcome per request");
    }
    assert_eq!(
        asked.len() + hooks.len(),
        asks,
        "every askbus ask printed its response, every askbus hook ended"
    );
    for (index, frame) in asked {
        assert_eq!(frame["type"], "ask-user-response", "{frame}");
        assert_eq!(frame["reason"], "answered", "{frame}");
        let cid = frame["correlationId"].as_str().unwrap().to_owned();
        let again = received.insert(cid.clone(), (index, frame["answers"].clone()));
        assert!(again.is_none(), "two askbus ask processes got {cid}");
    }
    assert_eq!(received.len(), n - hooks.len());

    // 2. The UIs: who won what, decided once.
    let mut sent: HashMap<(usize, &str), &Value> = HashMap::new();
    let mut acked: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut lost: HashSet<(usize, &str)> = HashSet::new();
    // Which daemons (1 to KILLS + 1) UIs answered and were acked on.
    let (mut answered_on, mut acked_on) = (HashSet::new(), HashSet::new());
    for e in &events {
        match e {
            Ui::Sent {
                ui,
                cid,
                value,
                gen,
            } => {
                sent.insert((*ui, cid), value);
                answered_on.insert(*gen);
            }
            Ui::Ack {
                ui,
                cid,
                outcome,
                decided,
                gen,
            } => {
                if let Some(d) = decided {
                    // The ack names the decision this UI sent (its Sent came before).
                    let mine = sent[&(*ui, cid.as_str())];
                    assert_eq!(outcome, &mine["reason"], "{cid}");
                    assert_eq!(d["confirmed"], mine["confirmed"], "{cid}: {d}");
                    assert_eq!(d["outcome"], mine["outcome"], "{cid}: {d}");
                } else {
                    assert_eq!(outcome, "answered", "{cid}");
                }
                acked.entry(cid).or_default().push(*ui);
                acked_on.insert(*gen);
            }
            Ui::Lost { ui, cid } => {
                lost.insert((*ui, cid));
            }
            Ui::NotPending { .. } => {}
            Ui::Unexpected { ui, frame } => panic!("{} got {frame}", ui_name(*ui)),
        }
    }
    let twice: Vec<_> = acked.iter().filter(|(_, uis)| uis.len() > 1).collect();
    if let Some((cid, _)) = twice.first() {
        let mine: Vec<String> = events
            .iter()
            .filter(|e| format!("{e:?}").contains(&format!("{cid:?}")))
            .map(|e| format!("{e:?}"))
            .collect();
        let log: Vec<String> = d
            .log_text()
            .lines()
            .filter(|l| l.contains(*cid) || l.contains("ready on") || l.contains("restored"))
            .map(str::to_owned)
            .collect();
        let rows = Command::new("sqlite3")
            .arg(&store)
            .arg(format!(
                "SELECT seq, delivery, reason, asked_at, ended_at, chain FROM requests WHERE correlation_id = '{cid}'"
            ))
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        panic!(
            "decided twice (two acks): {twice:?}\n{cid}: {}\nlog:\n{}\nrows:\n{rows}",
            mine.join("\n"),
            log.join("\n")
        );
    }

    // 3. Each answer is its acked UI's (or, its ack lost to a kill, a UI's whose connection
    //    died waiting for it).
    let mut winners: HashMap<&str, usize> = HashMap::new();
    let (mut acks_lost, mut approvals_cut) = (0, 0);
    let mut decisions: HashMap<String, usize> = HashMap::new();
    for (cid, (index, answers)) in &received {
        let obj = answers
            .as_object()
            .unwrap_or_else(|| panic!("{cid}: {answers}"));
        let first = if approvals.contains(cid) {
            // Fail closed: confirmed exactly when the outcome approves.
            assert_eq!(
                answers["confirmed"] == true,
                answers["outcome"] != "cancel",
                "{cid}: {answers}"
            );
            let key = if answers["reason"] == "dismissed" {
                "dismissed"
            } else {
                answers["outcome"].as_str().unwrap_or("?")
            };
            *decisions.entry(key.to_owned()).or_default() += 1;
            if answers["reason"] == "dismissed" {
                // Only the first UI dismisses; the message is the daemon's.
                format!("@{}", ui_name(0))
            } else {
                answers["message"].as_str().unwrap_or_default().to_owned()
            }
        } else {
            let n_questions = questions_for(*index).as_array().unwrap().len();
            assert_eq!(obj.len(), n_questions, "{cid}: {answers}");
            obj["0"].as_str().unwrap_or_default().to_owned()
        };
        let name = first.rsplit_once('@').map(|(_, n)| n).unwrap_or_default();
        let winner = (0..UIS)
            .find(|&k| ui_name(k) == name)
            .unwrap_or_else(|| panic!("{cid}: an answer no UI sent: {answers}"));
        assert_eq!(
            Some(&answers),
            sent.get(&(winner, cid.as_str())),
            "{cid}: the answer is not what {name} sent"
        );
        match acked.get(cid.as_str()) {
            Some(uis) => assert_eq!(
                uis[0],
                winner,
                "{cid}: acked to {} but {name}'s answer delivered",
                ui_name(uis[0])
            ),
            None => {
                assert!(
                    lost.contains(&(winner, cid.as_str())),
                    "{cid}: no UI was acked, and {name}'s answer was not cut off by a kill"
                );
                acks_lost += 1;
                approvals_cut += usize::from(approvals.contains(cid));
            }
        }
        winners.insert(cid, winner);
    }
    let acked_received = acked.keys().filter(|c| received.contains_key(**c)).count();
    assert_eq!(acked_received + acks_lost, received.len());
    // A UI told not-pending lost to a decision that was committed before it was told: never
    // its own, even across a kill.
    let mut not_pending = 0;
    for e in &events {
        if let Ui::NotPending { ui, cid } = e {
            assert_ne!(
                winners.get(cid.as_str()),
                Some(ui),
                "{cid}: told not-pending, yet its answer won"
            );
            not_pending += 1;
        }
    }

    // 4. The history: exactly N ended records, each the one decision.
    let history = Command::new(common::cli_bin())
        .args(["history", "--json", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(
        history.status.success(),
        "{}",
        String::from_utf8_lossy(&history.stderr)
    );
    let all: Vec<Value> = String::from_utf8_lossy(&history.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The hooks' records (their ids are the hook's own), by index, apart from the rest.
    let hook_indices: HashSet<usize> = hooks.iter().map(|h| h.0).collect();
    let hook_index = |r: &Value| {
        r["toolCall"]["args"]["command"]
            .as_str()
            .and_then(|c| c.strip_prefix("make task-"))
            .and_then(|i| i.parse::<usize>().ok())
            .filter(|i| hook_indices.contains(i))
    };
    let mut hook_records: HashMap<usize, &Value> = HashMap::new();
    let mut records: Vec<&Value> = Vec::new();
    for r in &all {
        match hook_index(r) {
            Some(i) => assert!(
                hook_records.insert(i, r).is_none(),
                "two records for hook {i}"
            ),
            None => records.push(r),
        }
    }
    // 5. `askbus hook`: it resends across a restart under the same id (the daemon re-attaches
    //    it), so it allows only when the winning UI allowed, and denies with that UI's message
    //    (or the dismissal's) when it did not.
    let (mut hook_allowed, mut hook_denied) = (0, 0);
    for (index, code, stdout, stderr) in &hooks {
        let r = hook_records.get(index);
        let cut = stderr.contains("lost its connection to askbusd");
        let winner = |r: &Value| {
            let client = r["decidedBy"]["client"].as_str().unwrap_or_default();
            let k = (0..UIS)
                .find(|&k| ui_name(k) == client)
                .unwrap_or_else(|| panic!("hook {index}: decided by no UI: {r}"));
            let cid = r["correlationId"].as_str().unwrap();
            let mine = sent
                .get(&(k, cid))
                .unwrap_or_else(|| panic!("hook {index}: {client} sent nothing: {r}"));
            for field in ["confirmed", "outcome", "message", "payload"] {
                assert_eq!(
                    r["decision"][field], mine[field],
                    "hook {index} {field}: {r}"
                );
            }
            let won = acked.get(cid).is_some_and(|u| u[0] == k) || lost.contains(&(k, cid));
            assert!(won, "hook {index}: {client} neither acked nor cut off: {r}");
            (*mine).clone()
        };
        // A hook resumes across a restart within its timeout (far beyond the run here): a kill
        // never cuts it off for good, and it gets the decision of the UI that won.
        assert!(!cut, "hook {index} gave up on askbusd: {stdout} {stderr}");
        let r = r.unwrap_or_else(|| panic!("hook {index}: no record ({code} {stdout} {stderr})"));
        assert_eq!(r["delivered"], true, "hook {index}: {r}");
        let mine = winner(r);
        assert_eq!(r["reason"], mine["reason"], "hook {index}: {r}");
        if mine["confirmed"] == true {
            assert_eq!(
                (*code, stdout.trim()),
                (0, r#"{"decision":"allow"}"#),
                "hook {index}: {stderr}"
            );
            hook_allowed += 1;
        } else {
            let message = r["decision"]["message"].as_str().unwrap();
            assert_eq!(*code, 2, "hook {index}: {stdout} {stderr}");
            let said = if mine["reason"] == "dismissed" {
                DISMISSED.to_owned()
            } else {
                format!("The user denied this tool call: {message}")
            };
            assert!(stderr.contains(&said), "hook {index}: {stderr}");
            hook_denied += 1;
        }
    }

    let strays: Vec<String> = records
        .iter()
        .filter(|r| !received.contains_key(r["correlationId"].as_str().unwrap()))
        .map(|r| {
            format!(
                "{} {} {} delivered={} producer={}",
                r["correlationId"], r["reason"], r["decidedBy"], r["delivered"], r["producer"]
            )
        })
        .collect();
    assert!(
        strays.is_empty(),
        "{} records of requests no producer got an answer for, e.g.:\n{}",
        strays.len(),
        strays[..strays.len().min(10)].join("\n")
    );
    assert_eq!(records.len(), received.len(), "one record per request");
    let mut undelivered = 0;
    let mut ids = HashSet::new();
    for r in records {
        let cid = r["correlationId"].as_str().unwrap();
        assert!(ids.insert(cid), "two records for {cid}");
        let (index, answers) = &received[cid];
        let reason = if approvals.contains(cid) {
            &answers["reason"]
        } else {
            &json!("answered")
        };
        assert_eq!(&r["reason"], reason, "{r}");
        assert!(r["endedAt"].is_string(), "{r}");
        if approvals.contains(cid) {
            assert_eq!(r["kind"], "approval", "{r}");
            let tool = tool_for(*index);
            assert_eq!(r["toolCall"], tool["toolCall"], "{r}");
            for field in ["confirmed", "outcome", "message", "payload"] {
                assert_eq!(r["decision"][field], answers[field], "{field}: {r}");
            }
        } else {
            assert_eq!(&r["answers"], answers, "{r}");
        }
        assert_eq!(r["decidedBy"]["kind"], "human", "{r}");
        assert_eq!(r["decidedBy"]["client"], ui_name(winners[cid]), "{r}");
        if r["delivered"] != true {
            undelivered += 1;
        }
    }
    let verify = Command::new(common::cli_bin())
        .args(["history", "verify", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    assert_eq!(
        undelivered, 0,
        "records marked undelivered, though every producer got its answer"
    );

    eprintln!(
        "crash loop: {} approvals among them, decided {decisions:?}, {approvals_cut} of their \
         acks cut off by a kill; {} askbus hook approvals: {hook_allowed} allowed, {hook_denied} \
         denied by a UI",
        approvals.len(),
        hooks.len(),
    );
    eprintln!(
        "crash loop: {n} requests ({python} Python, {node} Node, {} askbus ask, {} askbus hook) \
         ended once each through {KILLS} SIGKILLs in {took:?}; {} acked, {acks_lost} acks cut off by a kill \
         (the answer committed, and given to the producer after the restart), {} losing answers told not-pending; {} UI \
         answers cut off by kills; askbus ask and hook restarted {ask_restarts} times (no daemon \
         at their first connection); UIs answered on {} of the {} daemons, were acked on {}",
        asks - hooks.len(),
        hooks.len(),
        acked.len(),
        not_pending,
        lost.len(),
        answered_on.len(),
        KILLS + 1,
        acked_on.len()
    );
}
