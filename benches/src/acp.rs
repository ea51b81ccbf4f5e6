//! `askbus bench acp`: what `askbus acp` costs an editor, side by side with a direct pipe. A
//! stand-in agent (`askbus-bench acp-agent`, hidden) writes `session/update` notifications of
//! a given size carrying the CLOCK_MONOTONIC time they were written; the bench reads them as
//! an editor would, once straight from the agent's stdout and once through `askbus acp`,
//! alternating A B A B. Latency: one notification in flight at a time (the bench asks for the
//! next when it has the last), one way, agent to editor. Throughput: the agent writes them all
//! at once and the bench reads them to the last; meanwhile the CPU time each process spends
//! (the agent, the proxy, the bench as the editor) is taken from the kernel's per-thread
//! accounting, per MiB that crossed: on a machine where the three share the cores, that is
//! what decides the ratio.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

#[derive(Debug, clap::Args)]
pub struct AcpArgs {
    /// Notifications per run (each mode)
    #[arg(long, default_value_t = 10_000)]
    messages: usize,
    /// Bytes per notification line
    #[arg(long, default_value_t = 2048)]
    size: usize,
    /// Runs of each side, alternating
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Notifications streamed through the proxy while its memory is sampled (0: skip)
    #[arg(long, default_value_t = 500_000)]
    memory_messages: usize,
}

/// The p50 the proxy may add per message, and the share of a direct pipe's throughput it keeps.
const TARGET_ADDED_P50_US: f64 = 50.0;
const TARGET_THROUGHPUT_RATIO: f64 = 0.9;

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given; CLOCK_MONOTONIC always exists.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The stand-in agent: `ping` writes one notification, `flood N` writes N, EOF ends it.
pub fn agent_main(size: usize) -> ExitCode {
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let head = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"bench","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":""#;
    let tail = "\"}}}}\n";
    let mut line = Vec::with_capacity(size + 64);
    let mut write_one = |out: &mut dyn Write| -> std::io::Result<()> {
        line.clear();
        line.extend_from_slice(head.as_bytes());
        line.extend_from_slice(format!("{:020} ", now_ns()).as_bytes());
        let pad = size.saturating_sub(line.len() + tail.len());
        line.resize(line.len() + pad, b'x');
        line.extend_from_slice(tail.as_bytes());
        out.write_all(&line)
    };
    for cmd in stdin.lock().lines() {
        let Ok(cmd) = cmd else { break };
        let ok = if let Some(n) = cmd.strip_prefix("flood ") {
            let n: usize = n.trim().parse().unwrap_or(0);
            (0..n)
                .try_for_each(|_| write_one(&mut out))
                .and_then(|()| out.flush())
        } else {
            write_one(&mut out).and_then(|()| out.flush())
        };
        if ok.is_err() {
            break;
        }
    }
    ExitCode::SUCCESS
}

struct Side {
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
}

fn start(proxy: bool, size: usize, sock: &std::path::Path) -> Result<Side> {
    let bench = std::env::current_exe().context("cannot find the askbus-bench binary")?;
    let me = crate::next_to_me("askbus")?;
    let agent = [
        bench.to_string_lossy().into_owned(),
        "acp-agent".into(),
        "--size".into(),
        size.to_string(),
    ];
    let mut cmd = if proxy {
        let mut c = Command::new(&me);
        c.arg("acp")
            .arg("--socket")
            .arg(sock)
            .arg("--")
            .args(&agent);
        c
    } else {
        let mut c = Command::new(&agent[0]);
        c.args(&agent[1..]);
        c
    };
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot start the agent")?;
    let to = child.stdin.take().expect("piped");
    let from = BufReader::with_capacity(64 * 1024, child.stdout.take().expect("piped"));
    Ok(Side { child, to, from })
}

/// The time stamp in a notification line.
fn stamp(line: &[u8]) -> Option<u64> {
    let at = memchr::memmem::find(line, br#""text":""#)? + 8;
    std::str::from_utf8(line.get(at..at + 20)?)
        .ok()?
        .parse()
        .ok()
}

struct Measured {
    p50_us: f64,
    p99_us: f64,
    msgs_per_s: f64,
    /// CPU µs per MiB streamed: the agent, the proxy (0 for the direct pipe), the editor.
    cpu: [f64; 3],
}

/// Nanoseconds on a CPU so far, summed over the threads of `pid` (`/proc/PID/task/*/schedstat`).
fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// This thread's CPU time so far, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given; the thread clock always exists.
    unsafe {
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The agent `askbus acp` started (its one child).
fn child_of(pid: u32) -> Option<u32> {
    let kids = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    kids.split_whitespace().next()?.parse().ok()
}

fn measure(proxy: bool, a: &AcpArgs, sock: &std::path::Path) -> Result<Measured> {
    let mut side = start(proxy, a.size, sock)?;
    let mut line = Vec::with_capacity(a.size + 64);
    let mut lat = Vec::with_capacity(a.messages);
    for _ in 0..a.messages {
        side.to.write_all(b"ping\n")?;
        side.to.flush()?;
        line.clear();
        if side.from.read_until(b'\n', &mut line)? == 0 {
            bail!("the agent ended early");
        }
        let at = now_ns();
        let sent = stamp(&line).context("a notification without its time stamp")?;
        lat.push(at.saturating_sub(sent));
    }
    lat.sort_unstable();
    let pick = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
    let (p50_us, p99_us) = (pick(0.5), pick(0.99));
    let (agent, proxy) = if proxy {
        let me = side.child.id();
        (
            child_of(me).context("askbus acp started no agent")?,
            Some(me),
        )
    } else {
        (side.child.id(), None)
    };
    let cpu = |at: &mut [u64; 3]| {
        *at = [cpu_ns(agent), proxy.map_or(0, cpu_ns), thread_cpu_ns()];
    };
    let (mut before, mut after) = ([0; 3], [0; 3]);
    cpu(&mut before);
    let started = Instant::now();
    writeln!(side.to, "flood {}", a.messages)?;
    side.to.flush()?;
    for _ in 0..a.messages {
        line.clear();
        if side.from.read_until(b'\n', &mut line)? == 0 {
            bail!("the agent ended early");
        }
    }
    let msgs_per_s = a.messages as f64 / started.elapsed().as_secs_f64();
    cpu(&mut after);
    let mib = (a.messages * a.size) as f64 / 1048576.0;
    let per_mib = |i: usize| after[i].saturating_sub(before[i]) as f64 / 1000.0 / mib;
    drop(side.to);
    let _ = side.child.wait();
    Ok(Measured {
        p50_us,
        p99_us,
        msgs_per_s,
        cpu: [per_mib(0), per_mib(1), per_mib(2)],
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The resident set of `pid`, in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Streams `a.memory_messages` notifications through the proxy in ten bursts and samples its
/// resident memory after each: a long session's stream compressed (it keeps no state per
/// message, so the samples should not grow).
fn memory(a: &AcpArgs, sock: &std::path::Path) -> Result<Vec<u64>> {
    let mut side = start(true, a.size, sock)?;
    let mut line = Vec::with_capacity(a.size + 64);
    let burst = (a.memory_messages / 10).max(1);
    let mut samples = Vec::new();
    for _ in 0..10 {
        writeln!(side.to, "flood {burst}")?;
        side.to.flush()?;
        for _ in 0..burst {
            line.clear();
            if side.from.read_until(b'\n', &mut line)? == 0 {
                bail!("the agent ended early");
            }
        }
        samples.push(rss_kib(side.child.id()).context("cannot read the proxy's memory")?);
    }
    drop(side.to);
    let _ = side.child.wait();
    Ok(samples)
}

pub fn run(a: AcpArgs) -> Result<ExitCode> {
    if a.messages == 0 || a.rounds == 0 {
        bail!("--messages and --rounds must be at least 1");
    }
    // No daemon: notifications never reach it, and the proxy must not depend on one.
    let sock: PathBuf =
        std::env::temp_dir().join(format!("askbus-bench-acp-{}/none.sock", std::process::id()));
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    println!(
        "askbus acp forwarding: {} session/update notifications of {} bytes, {} rounds, A B A B",
        a.messages, a.size, a.rounds
    );
    println!(
        "{:<8} {:>6} {:>10} {:>10} {:>14}   CPU µs per MiB: {:>7} {:>7} {:>7}",
        "side", "round", "p50 µs", "p99 µs", "msgs/s", "agent", "proxy", "editor"
    );
    for round in 1..=a.rounds {
        for proxy in [false, true] {
            let m = measure(proxy, &a, &sock)?;
            let name = if proxy { "acp" } else { "direct" };
            println!(
                "{name:<8} {round:>6} {:>10.1} {:>10.1} {:>14.0}                   {:>7.0} {:>7.0} {:>7.0}",
                m.p50_us, m.p99_us, m.msgs_per_s, m.cpu[0], m.cpu[1], m.cpu[2]
            );
            if proxy {
                proxied.push(m);
            } else {
                direct.push(m);
            }
        }
    }
    let p50 = |v: &[Measured]| median(v.iter().map(|m| m.p50_us).collect());
    let tput = |v: &[Measured]| median(v.iter().map(|m| m.msgs_per_s).collect());
    let added = p50(&proxied) - p50(&direct);
    let ratio = tput(&proxied) / tput(&direct);
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    println!(
        "added p50 per message: {added:.1} µs (target <= {TARGET_ADDED_P50_US} µs): {}",
        verdict(added <= TARGET_ADDED_P50_US)
    );
    println!(
        "throughput: {ratio:.2}x a direct pipe (target >= {TARGET_THROUGHPUT_RATIO}x): {}",
        verdict(ratio >= TARGET_THROUGHPUT_RATIO)
    );
    let cpu = |v: &[Measured], i: usize| median(v.iter().map(|m| m.cpu[i]).collect());
    let (ends, through) = (
        cpu(&direct, 0) + cpu(&direct, 2),
        cpu(&proxied, 0) + cpu(&proxied, 1) + cpu(&proxied, 2),
    );
    println!(
        "CPU per MiB (medians): direct {ends:.0} µs (agent {:.0} + editor {:.0}); through the proxy {through:.0} µs (agent {:.0} + proxy {:.0} + editor {:.0}): {:.2}x",
        cpu(&direct, 0),
        cpu(&direct, 2),
        cpu(&proxied, 0),
        cpu(&proxied, 1),
        cpu(&proxied, 2),
        through / ends,
    );
    if a.memory_messages > 0 {
        let samples = memory(&a, &sock)?;
        let mib = |k: u64| k as f64 / 1024.0;
        println!(
            "proxy memory over {} notifications ({:.0} MiB streamed): {:.1} MiB after the first tenth, {:.1} MiB at the end (max {:.1})",
            a.memory_messages,
            (a.memory_messages * a.size) as f64 / 1048576.0,
            mib(samples[0]),
            mib(*samples.last().expect("ten samples")),
            mib(*samples.iter().max().expect("ten samples")),
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #[test]
    fn stamps_are_read_back() {
        let line = br#"{"content":{"type":"text","text":"00000000000000001234 xxx"}}"#;
        assert_eq!(super::stamp(line), Some(1234));
        assert_eq!(super::stamp(b"{}"), None);
    }
}
