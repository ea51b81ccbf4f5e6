//! Prometheus metrics: the registry (the two latency histograms, and the text exposition
//! format written by hand) and where it is served ([`MetricsListen`]); the `/metrics` HTTP
//! endpoint itself is `server::metrics`, which reads the hub (the hub owns this registry, so the
//! registry must not know the hub). Counters and gauges are read at scrape time from the same
//! counters the `stats` frame reports, so the two never disagree; only the latency histograms
//! are fed as answers happen. The `askbus_requests_*` families and
//! `askbus_answer_latency_seconds` count every request; `askbus_approval*` count approvals
//! (tool confirmations) alone, so questions are the difference.
//!
//! No metrics library: every family is known here and read at scrape time, so a recorder, its
//! registry and a facade (metrics + metrics-exporter-prometheus, ~15 crates) would only stand
//! between these counters and the ~100 lines of text they become.

mod federation;

use std::fmt::{self, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use federation::FedSummary;

use crate::broker::Snapshot;
use crate::telemetry::Counters;

const LATENCY: &str = "askbus_answer_latency_seconds";
const APPROVAL_LATENCY: &str = "askbus_approval_latency_seconds";

/// Bucket bounds for the time a person takes to answer, in ms: 0.1 s to an hour.
const LATENCY_BUCKETS_MS: [u64; 12] = [
    100, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000, 900_000, 1_800_000, 3_600_000,
];

/// A histogram of latencies in ms: one count per bucket (not cumulative; the exposition adds
/// them up), the count and the sum. Observations are whole ms, so the sum is exact.
#[derive(Debug, Default)]
struct Histogram {
    buckets: [AtomicU64; LATENCY_BUCKETS_MS.len()],
    count: AtomicU64,
    sum_ms: AtomicU64,
}

impl Histogram {
    fn observe(&self, ms: u64) {
        // Prometheus buckets are `le`: an observation on a bound counts in that bound's bucket.
        if let Some(i) = LATENCY_BUCKETS_MS.iter().position(|&le| ms <= le) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.sum_ms.fetch_add(ms, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    fn write(&self, out: &mut Exposition, name: &str, help: &str) {
        out.family(name, help, "histogram");
        // The count is read first: a scrape racing an observation may show it in a bucket
        // but not yet in the count, never a count larger than `+Inf`.
        let count = self.count.load(Ordering::Relaxed);
        let mut cumulative = 0;
        for (le, n) in LATENCY_BUCKETS_MS.iter().zip(&self.buckets) {
            cumulative += n.load(Ordering::Relaxed);
            let le = *le as f64 / 1000.0;
            let _ = writeln!(out.0, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        let inf = cumulative.max(count);
        let _ = writeln!(out.0, "{name}_bucket{{le=\"+Inf\"}} {inf}");
        let sum = self.sum_ms.load(Ordering::Relaxed) as f64 / 1000.0;
        let _ = writeln!(out.0, "{name}_sum {sum}");
        let _ = writeln!(out.0, "{name}_count {inf}");
    }
}

/// The text exposition format (version 0.0.4) being written: a family is its HELP and TYPE
/// lines, then its samples, then a blank line.
struct Exposition(String);

impl Exposition {
    fn family(&mut self, name: &str, help: &str, kind: &str) {
        if !self.0.is_empty() {
            self.0.push('\n');
        }
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// One sample: `labels` are (name, value) pairs, values escaped as the format requires.
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl fmt::Display) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                self.0.push_str(k);
                self.0.push_str("=\"");
                for c in v.chars() {
                    match c {
                        '\\' => self.0.push_str("\\\\"),
                        '"' => self.0.push_str("\\\""),
                        '\n' => self.0.push_str("\\n"),
                        c => self.0.push(c),
                    }
                }
                self.0.push('"');
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }

    /// A family of one unlabelled sample.
    fn single(&mut self, name: &str, help: &str, kind: &str, value: impl fmt::Display) {
        self.family(name, help, kind);
        self.sample(name, &[], value);
    }
}

/// The daemon's Prometheus registry.
#[derive(Debug, Default)]
pub struct Metrics {
    latency: Histogram,
    approval_latency: Histogram,
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// A UI answered or dismissed a request (`approval`: an approval) this long after it was
    /// accepted.
    pub fn observe_answer_latency_ms(&self, ms: u64, approval: bool) {
        self.latency.observe(ms);
        if approval {
            self.approval_latency.observe(ms);
        }
    }

    /// The text exposition of every metric, as of now.
    pub fn render(
        &self,
        snap: &Snapshot,
        c: &Counters,
        uptime: Duration,
        fed: Option<&FedSummary>,
    ) -> String {
        let get = Counters::get;
        let mut out = Exposition(String::with_capacity(8 * 1024));
        let s = &snap.stats;
        let a = &s.approvals;
        out.family(
            "askbus_requests_total",
            "Requests that ended, by outcome (rejected: refused before becoming pending)",
            "counter",
        );
        for (end, n) in s.ends() {
            out.sample("askbus_requests_total", &[("outcome", end.as_str())], n);
        }
        out.single(
            "askbus_requests_accepted_total",
            "Requests that passed validation and the limits and became pending",
            "counter",
            s.accepted,
        );
        out.family(
            "askbus_approvals_total",
            "Approvals (tool confirmations) that ended, by outcome; included in askbus_requests_total",
            "counter",
        );
        for (end, n) in a.ends() {
            out.sample("askbus_approvals_total", &[("outcome", end.as_str())], n);
        }
        out.single(
            "askbus_approvals_accepted_total",
            "Approvals accepted as pending; included in askbus_requests_accepted_total",
            "counter",
            a.accepted,
        );
        out.family(
            "askbus_approval_decisions_total",
            "What UIs chose for answered approvals, by ToolConfirmationOutcome",
            "counter",
        );
        for (decision, n) in a.decisions() {
            let labels = [("decision", decision.as_str())];
            out.sample("askbus_approval_decisions_total", &labels, n);
        }
        out.single(
            "askbus_approvals_confirmed_total",
            "Approvals whose producer was told confirmed: true",
            "counter",
            a.confirmed,
        );
        out.family(
            "askbus_policy_decisions_total",
            "Approvals the policy rules decided without a person, by decision (allow, deny)",
            "counter",
        );
        for (decision, n) in ["allow", "deny"].into_iter().zip(snap.policy_decisions) {
            out.sample(
                "askbus_policy_decisions_total",
                &[("decision", decision)],
                n,
            );
        }
        // Sinks are known only once a notifier reports: no samples, no family.
        for (i, (sink, result, n)) in s.notify.iter().enumerate() {
            if i == 0 {
                out.family(
                    "askbus_notifications_total",
                    "Notifiers' deliveries (askbus notify's notify-report), by sink and result: sent, failed, answered (from a notification)",
                    "counter",
                );
            }
            let labels = [("sink", sink), ("result", result.as_str())];
            out.sample("askbus_notifications_total", &labels, n);
        }
        out.single(
            "askbus_pending",
            "Requests pending now",
            "gauge",
            snap.pending,
        );
        out.family(
            "askbus_connections",
            "Connections served now, by role (ui, watcher, producer, or idle: none yet)",
            "gauge",
        );
        let r = snap.roles;
        for (role, n) in [
            ("producer", r.producer),
            ("ui", r.ui),
            ("watcher", r.watcher),
            ("idle", r.idle),
        ] {
            out.sample("askbus_connections", &[("role", role)], n);
        }
        for (name, help, n) in [
            (
                "askbus_connections_accepted_total",
                "Connections accepted on the socket (including those then refused)",
                &c.connections_total,
            ),
            (
                "askbus_connections_refused_total",
                "Connections refused: uid not allowed, or a connection limit reached",
                &c.connections_refused,
            ),
            (
                "askbus_frames_received_total",
                "Frames read from peers",
                &c.frames_in,
            ),
            (
                "askbus_frames_sent_total",
                "Frames written to peers",
                &c.frames_out,
            ),
        ] {
            out.single(name, help, "counter", get(n));
        }
        // Every code, zeros too: a rate over a code never starts with a gap.
        out.family(
            "askbus_errors_total",
            "Error frames sent, by code",
            "counter",
        );
        for (code, n) in c.errors() {
            out.sample("askbus_errors_total", &[("code", code.as_str())], n);
        }
        for (name, help, n) in [
            (
                "askbus_queue_overflows_total",
                "Peers disconnected because they did not read what was queued for them",
                &c.queue_overflows,
            ),
            (
                "askbus_telemetry_lines_total",
                "Telemetry lines written (one per request)",
                &c.telemetry_lines,
            ),
            (
                "askbus_telemetry_errors_total",
                "Telemetry writes that failed",
                &c.telemetry_errors,
            ),
        ] {
            out.single(name, help, "counter", get(n));
        }
        out.single(
            "askbus_uptime_seconds",
            "Seconds since the daemon started",
            "gauge",
            uptime.as_secs_f64(),
        );
        out.family(
            "askbus_build_info",
            "The daemon's version (always 1)",
            "gauge",
        );
        let version = [("version", env!("CARGO_PKG_VERSION"))];
        out.sample("askbus_build_info", &version, 1);
        self.latency.write(
            &mut out,
            LATENCY,
            "Time from a request's acceptance to a UI's answer or dismissal",
        );
        self.approval_latency.write(
            &mut out,
            APPROVAL_LATENCY,
            "Time from an approval's acceptance to a UI's decision or dismissal; included in askbus_answer_latency_seconds",
        );
        if let Some(f) = fed {
            federation::render(&mut out.0, f);
        }
        out.0
    }
}

/// Where `/metrics` is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricsListen {
    /// A loopback address only: the counts are nobody else's business.
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl fmt::Display for MetricsListen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetricsListen::Tcp(a) => write!(f, "http://{a}/metrics"),
            MetricsListen::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

impl FromStr for MetricsListen {
    type Err = String;

    /// A path (it contains a `/`) or a loopback `IP:PORT`.
    fn from_str(s: &str) -> Result<Self, String> {
        if s.contains('/') {
            return Ok(MetricsListen::Unix(PathBuf::from(s)));
        }
        let addr: SocketAddr = s.parse().map_err(|_| {
            format!("{s:?} is neither a loopback IP:PORT nor a Unix socket path (with a /)")
        })?;
        if !addr.ip().is_loopback() {
            return Err(format!(
                "{addr} is not a loopback address; serve metrics on 127.0.0.1, [::1] or a Unix socket"
            ));
        }
        Ok(MetricsListen::Tcp(addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_buckets_are_cumulative_and_bounds_inclusive() {
        let metrics = Metrics::new();
        let snap = crate::broker::Broker::new(crate::broker::Limits::default()).snapshot();
        // Half on the 0.1 s bound (counted in it), half at 3 s; one past the last bound.
        let n = 3000;
        for i in 0..n {
            metrics.observe_answer_latency_ms(if i % 2 == 0 { 100 } else { 3000 }, i == 0);
        }
        metrics.observe_answer_latency_ms(3_600_001, false);
        let text = metrics.render(&snap, &Counters::default(), Duration::ZERO, None);
        for line in [
            format!("{LATENCY}_bucket{{le=\"0.1\"}} {}", n / 2),
            format!("{LATENCY}_bucket{{le=\"2.5\"}} {}", n / 2),
            format!("{LATENCY}_bucket{{le=\"5\"}} {n}"),
            format!("{LATENCY}_bucket{{le=\"3600\"}} {n}"),
            format!("{LATENCY}_bucket{{le=\"+Inf\"}} {}", n + 1),
            format!("{LATENCY}_count {}", n + 1),
            format!(
                "{LATENCY}_sum {}",
                (n / 2 * 3100 + 3_600_001) as f64 / 1000.0
            ),
            format!("{APPROVAL_LATENCY}_bucket{{le=\"0.1\"}} 1"),
            format!("{APPROVAL_LATENCY}_count 1"),
            format!("{APPROVAL_LATENCY}_sum 0.1"),
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
    }

    #[test]
    fn every_family_has_help_and_type_and_label_values_are_escaped() {
        let mut out = Exposition(String::new());
        out.family("x_total", "X", "counter");
        out.sample("x_total", &[("sink", "a\\b\"c\nd"), ("result", "sent")], 2);
        assert_eq!(
            out.0,
            "# HELP x_total X\n# TYPE x_total counter\nx_total{sink=\"a\\\\b\\\"c\\nd\",result=\"sent\"} 2\n"
        );
        let snap = crate::broker::Broker::new(crate::broker::Limits::default()).snapshot();
        let text = Metrics::new().render(&snap, &Counters::default(), Duration::ZERO, None);
        let mut families = std::collections::BTreeSet::new();
        for line in text.lines().filter(|l| !l.is_empty()) {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap();
                assert!(families.insert(name.to_owned()), "{name} twice");
                let help = format!("# HELP {name} ");
                assert!(text.contains(&help), "no HELP for {name}");
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap();
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s).filter(|f| families.contains(*f)))
                    .unwrap_or(name);
                assert!(families.contains(family), "{line}: no TYPE before it");
            }
        }
        assert_eq!(families.len(), 21, "{families:?}");
    }

    #[test]
    fn listen_addresses_are_loopback_or_paths() {
        assert_eq!(
            "127.0.0.1:9464".parse::<MetricsListen>(),
            Ok(MetricsListen::Tcp("127.0.0.1:9464".parse().unwrap()))
        );
        assert!("[::1]:9464".parse::<MetricsListen>().is_ok());
        assert_eq!(
            "/run/askbusd/metrics.sock".parse::<MetricsListen>(),
            Ok(MetricsListen::Unix("/run/askbusd/metrics.sock".into()))
        );
        let err = "0.0.0.0:9464".parse::<MetricsListen>().unwrap_err();
        assert!(err.contains("not a loopback"), "{err}");
        assert!("localhost:9464".parse::<MetricsListen>().is_err());
    }
}
