//! Chaos: 32 producer and 6 UI processes (Python, through `clients/python`, which reconnects
//! and resends across daemon restarts) exchange N questions through the real daemon while the
//! test SIGKILLs random UIs (restarting them) and random producers (a replacement asks what the
//! killed one had not been answered, under new correlationIds), and once SIGKILLs the daemon
//! and starts it again on the same socket. Then every log is cross-checked:
//!
//! - every question of a producer process that was not killed ends exactly once, answered or
//!   dismissed (nothing times out: nothing is lost), and every question of the run is answered
//!   by some incarnation of its producer slot exactly once;
//! - no connection carries two terminal frames for one id, or a frame for an id its producer
//!   did not ask (the producer script watches the wire under the client);
//! - every delivered answer is the very one a UI process logged sending for that correlationId;
//! - a UI's `ask-user-ack` names the answer its producer received, and there is one winner per
//!   question, except for questions that straddle the daemon's SIGKILL (see `telemetry`);
//! - telemetry: see `check_telemetry` for what "one line per terminal outcome" can and cannot
//!   mean across a SIGKILL, and what is asserted;
//! - memory: the restarted daemon's VmRSS after the run, with everything drained, is within
//!   10% of its idle baseline taken after a warm-up.
//!
//! `ASKBUS_CHAOS_QUESTIONS` sets N (default 5,000; 50,000 for a soak), `ASKBUS_CHAOS_SEED` the
//! seed of the kill schedule.

use crate::harness as common;

use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::clients::questions_for;
use common::{answer, choice_request, Daemon, Raw};
use serde_json::{json, Value};

const PRODUCERS: usize = 32;
const UIS: usize = 6;
/// Questions each producer process keeps in flight.
const CONCURRENCY: usize = 8;
/// Far beyond what any question waits here: an outcome `timeout` means a question was lost.
const QUESTION_TIMEOUT_MS: u64 = 120_000;
/// How long to leave the daemon alone before reading its RSS: past its quiet time, after
/// which it hands freed heap memory back to the OS.
const QUIET: Duration =
    Duration::from_millis(askbusd::hub::QUIET_BEFORE_TRIM.as_millis() as u64 + 500);
/// The correlationId of the question that tells the test each UI has caught up.
const SYNC: &str = "sync-end";
/// Warm-up before an RSS baseline: questions per producer connection (2,048 in all).
const WARM_UP_PER_PRODUCER: usize = 64;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn monotonic_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out-pointer. CLOCK_MONOTONIC is also what Python's
    // time.monotonic() reads on Linux, so the scripts' timestamps compare with this one.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// A `/proc/PID/status` field in KiB: `VmRSS:` (what the 10% bound is about), or `RssAnon:`,
/// its heap and stacks part (the rest is the binary's pages, the same before and after).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn vm_rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: a pid we spawned and have not reaped.
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// One process: a producer or UI incarnation.
struct Proc {
    name: String,
    log: PathBuf,
    err: PathBuf,
    child: Option<Child>,
    killed: bool,
    /// Producers: the question indices it was given.
    todo: Vec<usize>,
    /// How much of the log has been counted for progress, and the outcomes seen in it.
    counted_bytes: usize,
    outcomes_seen: usize,
    finished: bool,
}

impl Proc {
    fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().expect("try_wait").is_none())
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    fn sigkill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
            self.killed = true;
        }
    }

    /// Counts the outcome lines appended since the last call.
    fn count_new_outcomes(&mut self) -> usize {
        let Ok(mut f) = std::fs::File::open(&self.log) else {
            return self.outcomes_seen;
        };
        f.seek(SeekFrom::Start(self.counted_bytes as u64)).unwrap();
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).unwrap();
        // Only whole lines: the rest is counted once it is complete.
        if let Some(end) = bytes.iter().rposition(|&b| b == b'\n') {
            self.outcomes_seen += bytes[..end]
                .split(|&b| b == b'\n')
                .filter(|l| l.starts_with(b"{\"cid\""))
                .count();
            self.counted_bytes += end + 1;
        }
        self.outcomes_seen
    }
}

struct Chaos {
    dir: PathBuf,
    socket: PathBuf,
    /// Per slot, its incarnations in order; the last is the current one.
    producers: Vec<Vec<Proc>>,
    uis: Vec<Vec<Proc>>,
}

impl Chaos {
    fn python(&self, script: &str, args: &[String], name: &str) -> Proc {
        let log = self.dir.join(format!("{name}.log"));
        let err = self.dir.join(format!("{name}.err"));
        let child = Command::new("python3")
            .arg(repo().join("tests/chaos").join(script))
            .args(args)
            .env("PYTHONPATH", repo().join("clients/python/src"))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run python3 (the chaos test needs it): {e}"));
        Proc {
            name: name.to_owned(),
            log,
            err,
            child: Some(child),
            killed: false,
            todo: Vec::new(),
            counted_bytes: 0,
            outcomes_seen: 0,
            finished: false,
        }
    }

    fn spawn_producer(&mut self, slot: usize, todo: Vec<usize>) {
        let name = format!("p{slot:02}.{}", self.producers[slot].len());
        let todo_file = self.dir.join(format!("{name}.todo"));
        let list: String = todo.iter().map(|i| format!("{i}\n")).collect();
        std::fs::write(&todo_file, list).unwrap();
        let args = [
            self.socket.display().to_string(),
            name.clone(),
            todo_file.display().to_string(),
            self.dir.join(format!("{name}.log")).display().to_string(),
            CONCURRENCY.to_string(),
            QUESTION_TIMEOUT_MS.to_string(),
        ];
        let mut p = self.python("producer.py", &args, &name);
        p.todo = todo;
        self.producers[slot].push(p);
    }

    fn spawn_ui(&mut self, slot: usize) {
        let name = format!("u{slot}.{}", self.uis[slot].len());
        let args = [
            self.socket.display().to_string(),
            slot.to_string(),
            name.clone(),
            self.dir.join(format!("{name}.log")).display().to_string(),
        ];
        let p = self.python("ui.py", &args, &name);
        self.uis[slot].push(p);
    }

    fn progress(&mut self) -> usize {
        self.producers
            .iter_mut()
            .flatten()
            .map(Proc::count_new_outcomes)
            .sum()
    }

    /// The indices of a slot that no incarnation has an outcome for yet.
    fn remaining(&self, slot: usize, all: &[usize]) -> Vec<usize> {
        let mut done = HashSet::new();
        for p in &self.producers[slot] {
            for line in read_lines(&p.log) {
                if let Some(cid) = line["cid"]
                    .as_str()
                    .filter(|_| line.get("reason").is_some())
                {
                    done.insert(index_of(cid));
                }
            }
        }
        all.iter().copied().filter(|i| !done.contains(i)).collect()
    }

    fn every_child(&mut self) -> impl Iterator<Item = &mut Proc> {
        self.producers
            .iter_mut()
            .chain(self.uis.iter_mut())
            .flatten()
    }

    fn signal_all(&mut self, sig: i32) {
        for p in self.every_child() {
            if let Some(c) = &p.child {
                signal(c, sig);
            }
        }
    }
}

impl Drop for Chaos {
    fn drop(&mut self) {
        // A failed assertion must not leave 38 Python processes behind.
        for p in self.every_child() {
            if let Some(mut c) = p.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

fn read_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}: bad line {l:?}: {e}", path.display()))
        })
        .collect()
}

/// "p07.2:123" → 123.
fn index_of(cid: &str) -> usize {
    cid.rsplit(':').next().unwrap().parse().unwrap()
}

/// How many questions producer.py asks for an index (see its `questions_for`).
fn question_count(index: usize) -> usize {
    [1, 2, 3][index % 3]
}

async fn stats(socket: &Path) -> Value {
    let mut c = Raw::connect(socket).await;
    c.send(json!({"type": "stats"})).await;
    c.recv_type("stats").await
}

async fn wait_stats(socket: &Path, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = stats(socket).await;
        if ok(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "never {what}: {s}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Traffic like the chaos's (ids `warm{tag}-…`): as many connections, the same questions and
/// as many in flight per producer, raced by every UI, every eleventh dismissed; then
/// everything closed and idle. The daemon's VmRSS then is its warm idle baseline: past the
/// one-time growth of a first load (allocator arenas and caches, buffers and tables grown to
/// their working size), which a few hundred questions do not reach.
async fn warm_up(d: &Daemon, tag: &str) -> u64 {
    let mut uis = Vec::new();
    for _ in 0..UIS {
        let (mut ui, _) = d.ui().await;
        uis.push(tokio::spawn(async move {
            while let Some(f) = ui.recv_within(Duration::from_secs(60)).await {
                if f["type"] == "ask-user-request" {
                    let id = f["correlationId"].as_str().unwrap();
                    let index: usize = id.rsplit('-').next().unwrap().parse().unwrap();
                    let n = f["questions"].as_array().unwrap().len();
                    let frame = if index.is_multiple_of(11) {
                        json!({"type": "ask-user-response", "correlationId": id, "cancelled": true})
                    } else {
                        let answers: serde_json::Map<String, Value> = (0..n)
                            .map(|q| (q.to_string(), json!(format!("{id}#{q}"))))
                            .collect();
                        answer(id, Value::Object(answers))
                    };
                    ui.send(frame).await;
                }
            }
        }));
    }
    let mut producers = Vec::new();
    for p in 0..PRODUCERS {
        let mut conn = d.connect().await;
        let tag = tag.to_owned();
        producers.push(tokio::spawn(async move {
            let request = |i: usize| {
                json!({"type": "ask-user-request", "correlationId": format!("warm{tag}-{p}-{i}"),
                       "questions": questions_for(i), "timeoutMs": QUESTION_TIMEOUT_MS})
            };
            for i in 0..CONCURRENCY {
                conn.send(request(i)).await;
            }
            for i in CONCURRENCY..WARM_UP_PER_PRODUCER + CONCURRENCY {
                let r = conn.recv_type("ask-user-response").await;
                assert!(
                    r["reason"] == "answered" || r["reason"] == "dismissed",
                    "{r}"
                );
                if i < WARM_UP_PER_PRODUCER {
                    conn.send(request(i)).await;
                }
            }
        }));
    }
    for p in producers {
        p.await.unwrap();
    }
    for ui in uis {
        ui.abort();
    }
    wait_stats(&d.socket, "idle after the warm-up", |s| {
        s["connections"] == 1 && s["pending"] == 0
    })
    .await;
    // Past the daemon's quiet time (`askbusd::hub::QUIET_BEFORE_TRIM`): it has trimmed its heap.
    tokio::time::sleep(QUIET).await;
    vm_rss_kib(d.pid())
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kill {
    Ui,
    Producer,
    Daemon,
}

#[test]
fn chaos_kills_lose_nothing_and_memory_returns() {
    let n: usize = std::env::var("ASKBUS_CHAOS_QUESTIONS")
        .ok()
        .map(|v| v.parse().expect("ASKBUS_CHAOS_QUESTIONS"))
        .unwrap_or(5_000);
    let seed: u64 = std::env::var("ASKBUS_CHAOS_SEED")
        .ok()
        .map(|v| v.parse().expect("ASKBUS_CHAOS_SEED"))
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("chaos: {n} questions, seed {seed} (ASKBUS_CHAOS_SEED={seed} replays the schedule)");
    let mut rng = fastrand::Rng::with_seed(seed);
    let rt = common::rt();
    let mut d = Daemon::start_with(&["--max-pending-per-connection", "256"]);
    let started = Instant::now();

    let baseline_first = rt.block_on(warm_up(&d, "1"));

    let dir = d.dir.path().join("chaos");
    std::fs::create_dir(&dir).unwrap();
    let mut chaos = Chaos {
        dir,
        socket: d.socket.clone(),
        producers: (0..PRODUCERS).map(|_| Vec::new()).collect(),
        uis: (0..UIS).map(|_| Vec::new()).collect(),
    };
    let slot_indices: Vec<Vec<usize>> = (0..PRODUCERS)
        .map(|s| (s..n).step_by(PRODUCERS).collect())
        .collect();
    for slot in 0..UIS {
        chaos.spawn_ui(slot);
    }
    rt.block_on(wait_stats(&d.socket, "6 UIs subscribed", |s| s["uis"] == 6));
    for (slot, todo) in slot_indices.iter().enumerate() {
        chaos.spawn_producer(slot, todo.clone());
    }

    // The kill schedule, by progress (outcomes logged / n), so it scales with n.
    let kills = (n / 500).max(6);
    let mut schedule: Vec<(f64, Kill)> = Vec::new();
    for _ in 0..kills {
        schedule.push((0.03 + rng.f64() * 0.9, Kill::Ui));
        schedule.push((0.03 + rng.f64() * 0.9, Kill::Producer));
    }
    schedule.push((0.3 + rng.f64() * 0.3, Kill::Daemon));
    schedule.sort_by(|a, b| a.0.total_cmp(&b.0));
    schedule.reverse();

    let mut ui_restarts: Vec<(Instant, usize)> = Vec::new();
    let (mut ui_kills, mut producer_kills) = (0, 0);
    let mut t_kill = f64::NAN;
    let mut telemetry_split = 0u64;
    let mut baseline = 0u64;
    let mut baseline_anon = 0u64;
    let deadline = Instant::now() + Duration::from_secs(60 + n as u64 / 20);
    loop {
        let done = chaos.progress();
        while schedule
            .last()
            .is_some_and(|(at, _)| *at <= done as f64 / n as f64)
        {
            let (_, action) = schedule.pop().unwrap();
            match action {
                Kill::Ui => {
                    let slot = rng.usize(0..UIS);
                    let ui = chaos.uis[slot].last_mut().unwrap();
                    if ui.running() {
                        ui.sigkill();
                        ui_kills += 1;
                        let delay = Duration::from_millis(rng.u64(0..300));
                        ui_restarts.push((Instant::now() + delay, slot));
                    }
                }
                Kill::Producer => {
                    let live: Vec<usize> = (0..PRODUCERS)
                        .filter(|&s| chaos.producers[s].last_mut().unwrap().running())
                        .collect();
                    if live.is_empty() {
                        continue;
                    }
                    let slot = live[rng.usize(0..live.len())];
                    chaos.producers[slot].last_mut().unwrap().sigkill();
                    producer_kills += 1;
                    let todo = chaos.remaining(slot, &slot_indices[slot]);
                    if !todo.is_empty() {
                        chaos.spawn_producer(slot, todo);
                    } else {
                        chaos.producers[slot].last_mut().unwrap().finished = true;
                    }
                }
                Kill::Daemon => {
                    t_kill = monotonic_secs();
                    d.kill();
                    telemetry_split = std::fs::metadata(&d.telemetry).unwrap().len();
                    // Freeze every client while the new daemon warms up alone, so its idle
                    // baseline is its own; they carry on (and reconnect) once thawed.
                    chaos.signal_all(libc::SIGSTOP);
                    d.restart();
                    baseline = rt.block_on(warm_up(&d, "2"));
                    baseline_anon = status_kib(d.pid(), "RssAnon:");
                    chaos.signal_all(libc::SIGCONT);
                    eprintln!(
                        "chaos: daemon SIGKILLed at {done}/{n} ended and restarted ({:?} in)",
                        started.elapsed()
                    );
                }
            }
        }
        let now = Instant::now();
        ui_restarts.retain(|&(at, slot)| {
            if at <= now {
                chaos.spawn_ui(slot);
                false
            } else {
                true
            }
        });
        let mut all_finished = true;
        for slot in 0..PRODUCERS {
            let p = chaos.producers[slot].last_mut().unwrap();
            if p.finished {
                continue;
            }
            match p.child.as_mut().unwrap().try_wait().unwrap() {
                None => all_finished = false,
                Some(status) => {
                    assert!(
                        status.success(),
                        "producer {} failed ({status}):\n{}",
                        p.name,
                        p.stderr()
                    );
                    p.finished = true;
                }
            }
        }
        if all_finished && schedule.iter().all(|(_, a)| *a != Kill::Daemon) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "chaos did not finish: {done}/{n} outcomes after {:?}\ndaemon log tail:\n{}",
            started.elapsed(),
            tail(&d.log_text(), 30)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let chaos_took = started.elapsed();
    for (_, slot) in ui_restarts.drain(..) {
        chaos.spawn_ui(slot);
    }
    assert!(!t_kill.is_nan(), "the daemon kill never happened");

    // Drain: nothing pending, then a last question that every UI logs on arrival: frames reach
    // a UI in order, so by then it has handled (and logged) every ack before it. Then the UIs go.
    rt.block_on(wait_stats(&d.socket, "drained", |s| s["pending"] == 0));
    let sync = rt.block_on(async {
        let mut c = d.connect().await;
        c.send(choice_request(SYNC)).await;
        c
    });
    let live: Vec<&Proc> = chaos
        .uis
        .iter()
        .map(|incarnations| incarnations.last().unwrap())
        .collect();
    let synced = Instant::now() + Duration::from_secs(60);
    for ui in &live {
        while !std::fs::read_to_string(&ui.log)
            .unwrap_or_default()
            .contains(&format!(r#"{{"sync":"{SYNC}"}}"#))
        {
            assert!(
                Instant::now() < synced,
                "{} never got the last question",
                ui.name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    drop(sync);
    // And every answer a live UI sent has its verdict: acknowledged, not pending (lost to
    // another UI, or gone), or, when the connection died before the daemon said, unknown.
    for ui in &live {
        loop {
            let mut open: HashMap<String, i64> = HashMap::new();
            for line in read_lines(&ui.log) {
                if let Some(cid) = line["sent"].as_str() {
                    *open.entry(cid.to_owned()).or_default() += 1;
                } else if let Some(cid) = line["ack"].as_str().or(line["lost"].as_str()) {
                    *open.entry(cid.to_owned()).or_default() -= 1;
                }
            }
            let waiting: Vec<&String> = open
                .iter()
                .filter(|(_, &n)| n > 0)
                .map(|(c, _)| c)
                .collect();
            if waiting.is_empty() {
                break;
            }
            assert!(
                Instant::now() < synced,
                "{}: answers without a verdict: {waiting:?}\n{}",
                ui.name,
                ui.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    for p in chaos.uis.iter_mut().flatten() {
        if let Some(mut c) = p.child.take() {
            signal(&c, libc::SIGTERM);
            let _ = c.wait();
        }
    }
    let final_stats = rt.block_on(wait_stats(&d.socket, "all disconnected", |s| {
        s["connections"] == 1
    }));
    std::thread::sleep(QUIET);
    let after = vm_rss_kib(d.pid());
    let after_anon = status_kib(d.pid(), "RssAnon:");
    let (status, _) = d.terminate(Duration::from_secs(10));
    assert!(status.success(), "askbusd exited with {status}");

    let report = verify(&chaos, t_kill);
    assert_eq!(report.outcomes, n, "every question of the run ended once");
    let telemetry = check_telemetry(&d.telemetry, telemetry_split, &report, t_kill);
    let accepted = final_stats["requests"]["accepted"].as_u64().unwrap();
    let rejected = final_stats["requests"]["rejected"].as_u64().unwrap();
    assert_eq!(rejected, 0, "{final_stats}");
    assert_eq!(
        telemetry.final_lines as u64,
        accepted + rejected,
        "the restarted daemon wrote one line per request it received"
    );

    eprintln!(
        "chaos: {} questions, each ended exactly once in its producer slot ({} answered, {} \
         dismissed), lost 0, in {chaos_took:?}",
        report.outcomes, report.answered, report.dismissed
    );
    eprintln!(
        "chaos: kills survived: {ui_kills} UI, {producer_kills} producer, 1 daemon; \
         {} questions of killed producers ended with them; {} crossed the daemon kill; {} \
         winning answers' acks died with it (their UIs were told the fate is unknown)",
        report.killed_producer_questions, report.straddled, report.acks_lost_at_kill
    );
    eprintln!(
        "chaos: telemetry: {} lines by the killed daemon ({} decided there but re-asked, {} \
         records still in its buffer at the kill{}), {} lines by the restarted daemon = its \
         {accepted} requests",
        telemetry.killed_lines,
        telemetry.decided_twice,
        telemetry.lost_at_kill,
        if telemetry.torn {
            ", last one torn"
        } else {
            ""
        },
        telemetry.final_lines
    );
    eprintln!(
        "chaos: the restarted daemon cut {} peers for not reading their queue (they reconnect)",
        final_stats["queueOverflows"]
    );
    let growth = after as f64 / baseline as f64 - 1.0;
    eprintln!(
        "chaos: askbusd VmRSS idle after warm-up {baseline} KiB (first daemon: \
         {baseline_first} KiB), after the run and drained {after} KiB ({:+.1}%); of which \
         anonymous (heap, stacks) {baseline_anon} KiB -> {after_anon} KiB",
        growth * 100.0
    );
    assert!(
        growth <= 0.10,
        "RSS {after} KiB is more than 10% above the idle baseline {baseline} KiB"
    );
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A producer's outcome for one question, with when it was asked and answered.
struct Outcome {
    reason: String,
    /// The UI process whose answer it is (`answered` only).
    winner: Option<String>,
    t_ask: f64,
    t_out: f64,
}

#[derive(Default)]
struct Report {
    /// Every outcome any producer process logged, by correlationId.
    outcomes_by_cid: HashMap<String, Outcome>,
    /// Every correlationId a producer process asked: whether that process was killed, and
    /// when it asked.
    asked: HashMap<String, (bool, f64)>,
    outcomes: usize,
    answered: usize,
    dismissed: usize,
    killed_producer_questions: usize,
    straddled: usize,
    /// Winning answers whose ack died with the killed daemon (the UI said "unknown").
    acks_lost_at_kill: usize,
}

impl Report {
    /// Asked before the daemon was killed and ended after it (or never, as far as we know:
    /// its producer was killed too): the question may have crossed the kill.
    fn straddles(&self, cid: &str, t_kill: f64) -> bool {
        match self.outcomes_by_cid.get(cid) {
            Some(o) => o.t_ask < t_kill && o.t_out >= t_kill,
            None => self
                .asked
                .get(cid)
                .is_some_and(|&(_, t_ask)| t_ask < t_kill),
        }
    }
}

fn verify(chaos: &Chaos, t_kill: f64) -> Report {
    let mut r = Report::default();
    let killed_uis: HashSet<&str> = chaos
        .uis
        .iter()
        .flatten()
        .filter(|p| p.killed)
        .map(|p| p.name.as_str())
        .collect();

    // What the UI processes sent and which acknowledgements they received.
    let mut sent: HashMap<String, Vec<(String, Value)>> = HashMap::new();
    let mut acks: HashMap<String, Vec<(String, String)>> = HashMap::new();
    // Answers whose connection died before the daemon acknowledged them: the UI was told it
    // cannot know whether the producer got them.
    let mut unknown: HashSet<(String, String)> = HashSet::new();
    for ui in chaos.uis.iter().flatten() {
        for line in read_lines(&ui.log) {
            if let Some(cid) = line["sent"].as_str() {
                sent.entry(cid.to_owned())
                    .or_default()
                    .push((ui.name.clone(), line["value"].clone()));
            } else if let Some(cid) = line["ack"].as_str() {
                acks.entry(cid.to_owned()).or_default().push((
                    ui.name.clone(),
                    line["outcome"].as_str().unwrap().to_owned(),
                ));
            } else if let Some(cid) = line["lost"].as_str() {
                if line["why"]
                    .as_str()
                    .is_some_and(|w| w.starts_with("connection"))
                {
                    unknown.insert((cid.to_owned(), ui.name.clone()));
                }
            }
        }
    }

    // Per slot: each index ends exactly once over all incarnations.
    for (slot, runs) in chaos.producers.iter().enumerate() {
        let mut ended: HashMap<usize, &str> = HashMap::new();
        for p in runs {
            let prefix = format!("{}:", p.name);
            let mut asks: HashMap<String, f64> = HashMap::new();
            let mut done = false;
            let mut mine = HashSet::new();
            for line in read_lines(&p.log) {
                assert!(
                    line.get("error").is_none(),
                    "{}: {line}\n{}",
                    p.name,
                    line["traceback"].as_str().unwrap_or("")
                );
                assert!(
                    line.get("dup").is_none(),
                    "{}: two terminal frames on one connection: {line}",
                    p.name
                );
                assert!(
                    line.get("foreign").is_none(),
                    "{}: another producer's response: {line}",
                    p.name
                );
                if line["done"] == true {
                    done = true;
                } else if let Some(cid) = line["ask"].as_str() {
                    let t = line["t"].as_f64().unwrap();
                    asks.insert(cid.to_owned(), t);
                    r.asked.insert(cid.to_owned(), (p.killed, t));
                } else {
                    let cid = line["cid"].as_str().expect("an outcome line").to_owned();
                    assert!(cid.starts_with(&prefix), "{}: {line}", p.name);
                    let t_ask = *asks.get(&cid).expect("asked before it ended");
                    let index = index_of(&cid);
                    if let Some(other) = ended.insert(index, &p.name) {
                        panic!("slot {slot} index {index} ended in {other} and {}", p.name);
                    }
                    assert!(mine.insert(cid.clone()), "{}: {cid} ended twice", p.name);
                    let reason = line["reason"].as_str().unwrap().to_owned();
                    let answers = line["answers"].clone();
                    let winner = match reason.as_str() {
                        "answered" => Some(check_answer(&cid, &answers, &sent)),
                        "dismissed" => {
                            assert!(
                                sent.get(&cid)
                                    .is_some_and(|s| s.iter().any(|(_, v)| v.is_null())),
                                "{cid} dismissed, but no UI dismissed it"
                            );
                            assert_eq!(answers, json!({}));
                            None
                        }
                        // timeout, no-ui, shutdown, withdrawn: the question was lost.
                        _ => panic!("{}: {cid} was lost: {line}", p.name),
                    };
                    r.outcomes_by_cid.insert(
                        cid,
                        Outcome {
                            reason,
                            winner,
                            t_ask,
                            t_out: line["t"].as_f64().unwrap(),
                        },
                    );
                }
            }
            if p.killed {
                r.killed_producer_questions += asks.len() - mine.len();
            } else {
                assert!(done, "{} never finished:\n{}", p.name, p.stderr());
                let expected: HashSet<String> =
                    p.todo.iter().map(|i| format!("{prefix}{i}")).collect();
                assert_eq!(mine, expected, "{}: not every question ended", p.name);
            }
        }
        let all: HashSet<usize> = slot_indices_of(slot, chaos).into_iter().collect();
        let ended_set: HashSet<usize> = ended.keys().copied().collect();
        assert_eq!(ended_set, all, "slot {slot}: not every question ended once");
    }
    r.outcomes = r.outcomes_by_cid.len();
    r.answered = r
        .outcomes_by_cid
        .values()
        .filter(|o| o.reason == "answered")
        .count();
    r.dismissed = r.outcomes - r.answered;

    // Acknowledgements: one winner per question, and the winner is told the truth.
    for (cid, list) in &acks {
        let straddles = r.straddles(cid, t_kill);
        if straddles {
            assert!(list.len() <= 2, "{cid}: acks {list:?}");
            continue;
        }
        assert_eq!(list.len(), 1, "{cid}: more than one winning UI: {list:?}");
        let (ui, outcome) = &list[0];
        if let Some(o) = r.outcomes_by_cid.get(cid) {
            assert_eq!(&o.reason, outcome, "{cid}: {ui} was acked {outcome}");
            if let Some(w) = &o.winner {
                assert_eq!(
                    w, ui,
                    "{cid}: {ui} was acked, but {w}'s answer was delivered"
                );
            }
        }
    }
    for (cid, o) in &r.outcomes_by_cid {
        if r.straddles(cid, t_kill) {
            r.straddled += 1;
            continue;
        }
        if let Some(w) = o.winner.as_deref().filter(|w| !killed_uis.contains(w)) {
            let got = acks.get(cid).map(Vec::as_slice).unwrap_or_default();
            if got.iter().any(|(ui, out)| ui == w && out == "answered") {
                continue;
            }
            // The ack died with the killed daemon after the producer's response got out.
            assert!(
                unknown.contains(&(cid.clone(), w.to_owned())),
                "{cid}: {w} won and lives, but was neither acknowledged nor told it cannot \
                 know: {got:?}"
            );
            r.acks_lost_at_kill += 1;
        }
    }
    r
}

fn slot_indices_of(slot: usize, chaos: &Chaos) -> Vec<usize> {
    // The first incarnation was given the whole slot.
    chaos.producers[slot][0].todo.clone()
}

/// The answer is one a UI process logged sending for this very question; returns that UI.
fn check_answer(
    cid: &str,
    answers: &Value,
    sent: &HashMap<String, Vec<(String, Value)>>,
) -> String {
    let first = answers["0"].as_str().expect("an answer to question 0");
    let ui = first
        .rsplit_once('@')
        .map(|(_, ui)| ui.to_owned())
        .unwrap_or_else(|| panic!("{cid}: answer {first:?} names no UI"));
    let expected: serde_json::Map<String, Value> = (0..question_count(index_of(cid)))
        .map(|q| (q.to_string(), json!(format!("{cid}#{q}@{ui}"))))
        .collect();
    assert_eq!(
        answers,
        &Value::Object(expected),
        "{cid}: another question's answer"
    );
    let by_ui = sent.get(cid).map(Vec::as_slice).unwrap_or_default();
    assert!(
        by_ui.iter().any(|(u, v)| *u == ui && v == answers),
        "{cid}: {answers} was never sent by {ui}"
    );
    ui
}

struct TelemetryReport {
    killed_lines: usize,
    final_lines: usize,
    decided_twice: usize,
    lost_at_kill: usize,
    torn: bool,
}

/// "One line per terminal outcome" across a SIGKILL of the daemon. The daemon hands each end
/// to its telemetry thread, which writes and flushes whatever is queued in bursts, without
/// ever holding up the broker. So:
///
/// - a daemon that exits cleanly (SIGTERM; here the restarted one) writes exactly one line
///   per request it received: asserted as line count = its `requests.accepted + rejected`,
///   no correlationId twice, and each line agrees with what the producer received (reason,
///   winning UI) — every outcome it delivered has its line;
/// - a daemon that is SIGKILLed loses the records still queued or buffered at that instant
///   (the last few ends it decided), and a write cut by the kill can leave a torn last line
///   (the next daemon starts on a fresh line). Its lines still never name an id twice, and
///   each agrees with what the producer received, unless the producer never got that
///   response (it died in the daemon's queue) and so asked the next daemon, which decided
///   again: the one case of two lines for one question, one per daemon ("decided twice").
///   An outcome with no line at all must have come from the killed daemon ("lost at kill").
fn check_telemetry(path: &Path, split: u64, r: &Report, t_kill: f64) -> TelemetryReport {
    let bytes = std::fs::read(path).unwrap();
    let (killed_part, final_part) = bytes.split_at(split as usize);
    let mut torn = false;
    let parse = |part: &[u8], allow_torn_last: bool, torn: &mut bool| {
        let text = String::from_utf8_lossy(part).into_owned();
        let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
        let mut by_cid: HashMap<String, Value> = HashMap::new();
        for (i, l) in lines.iter().enumerate() {
            let v: Value = match serde_json::from_str(l) {
                Ok(v) => v,
                Err(_) if allow_torn_last && i + 1 == lines.len() && !text.ends_with('\n') => {
                    *torn = true;
                    continue;
                }
                Err(e) => panic!("bad telemetry line {l:?}: {e}"),
            };
            assert_ne!(v["reason"], "rejected", "{v}");
            let cid = v["correlationId"].as_str().unwrap().to_owned();
            let again = by_cid.insert(cid.clone(), v);
            assert!(again.is_none(), "{cid} has two lines from one daemon");
        }
        by_cid
    };
    let a = parse(killed_part, true, &mut torn);
    let b = parse(final_part, false, &mut torn);
    for (part, tag, want) in [(&a, "warm1-", 1), (&b, "warm2-", 2)] {
        let warm: Vec<&Value> = part
            .iter()
            .filter(|(cid, _)| cid.starts_with("warm"))
            .map(|(_, v)| v)
            .collect();
        assert_eq!(
            warm.len(),
            PRODUCERS * WARM_UP_PER_PRODUCER,
            "warm-up {want}"
        );
        for v in warm {
            let cid = v["correlationId"].as_str().unwrap();
            assert!(cid.starts_with(tag), "{v}");
            let index: usize = cid.rsplit('-').next().unwrap().parse().unwrap();
            let want = if index.is_multiple_of(11) {
                "dismissed"
            } else {
                "answered"
            };
            assert_eq!(v["reason"], want, "{v}");
        }
    }
    let mut t = TelemetryReport {
        killed_lines: a.len() + usize::from(torn),
        final_lines: b.len(),
        decided_twice: 0,
        lost_at_kill: 0,
        torn,
    };
    let agrees = |rec: &Value, o: &Outcome| {
        rec["reason"] == o.reason.as_str()
            && o.winner.as_deref().is_none_or(|w| rec["ui"]["client"] == w)
    };
    for (cid, o) in &r.outcomes_by_cid {
        match (a.get(cid), b.get(cid)) {
            (old, Some(rec)) => {
                assert!(
                    agrees(rec, o),
                    "{cid}: line {rec} but the producer got {}",
                    o.reason
                );
                if old.is_some() {
                    assert!(o.t_ask < t_kill, "{cid} decided by both daemons");
                    t.decided_twice += 1;
                }
            }
            (Some(rec), None) => {
                assert!(
                    agrees(rec, o),
                    "{cid}: line {rec} but the producer got {}",
                    o.reason
                );
            }
            (None, None) => {
                assert!(
                    o.t_ask < t_kill,
                    "{cid}: the restarted daemon wrote no line for it"
                );
                t.lost_at_kill += 1;
            }
        }
    }
    // No line for a question nobody asked; the killed producers' questions ended with them.
    for (cid, rec) in a.iter().chain(b.iter()) {
        if cid.starts_with("warm") || cid == SYNC {
            continue;
        }
        let (killed, _) = *r
            .asked
            .get(cid)
            .unwrap_or_else(|| panic!("a line for {cid}, which nobody asked: {rec}"));
        if killed && !r.outcomes_by_cid.contains_key(cid) {
            let reason = rec["reason"].as_str().unwrap();
            assert!(
                ["producer-gone", "answered", "dismissed"].contains(&reason),
                "{cid} of a killed producer: {rec}"
            );
        }
    }
    t
}
