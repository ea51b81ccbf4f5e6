//! Prometheus metrics: the registry (metrics-exporter-prometheus, rendering the text
//! exposition format) and where it is served ([`MetricsListen`]); the `/metrics` HTTP endpoint
//! itself is `server::metrics`, which reads the hub (the hub owns this registry, so the
//! registry must not know the hub). Counters and gauges are read at scrape time from the same counters the
//! `stats` frame reports, so the two never disagree; only the latency histograms are fed as
//! answers happen. The `askbus_requests_*` families and `askbus_answer_latency_seconds` count
//! every request; `askbus_approval*` count approvals (tool confirmations) alone, so questions
//! are the difference.

mod federation;

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, Key, Level, Metadata,
    Recorder,
};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};

pub use federation::FedSummary;

use crate::broker::Snapshot;
use crate::telemetry::Counters;

const LATENCY: &str = "askbus_answer_latency_seconds";
const APPROVAL_LATENCY: &str = "askbus_approval_latency_seconds";

/// Observations the histogram may hold before they are folded into its buckets. The exporter
/// keeps every sample (24 bytes each) until a scrape or an upkeep drains them, and without
/// `--metrics-listen` nothing ever scrapes: a daemon that ran long would grow without bound.
const UPKEEP_EVERY: u64 = 1024;

/// Bucket bounds for the time a person takes to answer: seconds to an hour.
const LATENCY_BUCKETS: [f64; 12] = [
    0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0,
];

/// The daemon's Prometheus registry.
pub struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    latency: metrics::Histogram,
    approval_latency: metrics::Histogram,
    /// Observations since the last upkeep.
    unkept: AtomicU64,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(LATENCY.to_owned()), &LATENCY_BUCKETS)
            .expect("static buckets are valid")
            .set_buckets_for_metric(Matcher::Full(APPROVAL_LATENCY.to_owned()), &LATENCY_BUCKETS)
            .expect("static buckets are valid")
            .build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, describe);
        static METADATA: Metadata<'static> =
            Metadata::new(module_path!(), Level::INFO, Some(module_path!()));
        let latency = recorder.register_histogram(&Key::from_static_name(LATENCY), &METADATA);
        let approval_latency =
            recorder.register_histogram(&Key::from_static_name(APPROVAL_LATENCY), &METADATA);
        Metrics {
            recorder,
            handle,
            latency,
            approval_latency,
            unkept: AtomicU64::new(0),
        }
    }

    /// A UI answered or dismissed a request (`approval`: an approval) this long after it was
    /// accepted.
    pub fn observe_answer_latency_ms(&self, ms: u64, approval: bool) {
        self.latency.record(ms as f64 / 1000.0);
        if approval {
            self.approval_latency.record(ms as f64 / 1000.0);
        }
        if self.unkept.fetch_add(1, Ordering::Relaxed) + 1 >= UPKEEP_EVERY {
            self.unkept.store(0, Ordering::Relaxed);
            self.handle.run_upkeep();
        }
    }

    /// The text exposition of every metric, as of now; with `fed`, the federation gauges too.
    pub fn render(
        &self,
        snap: &Snapshot,
        c: &Counters,
        uptime: Duration,
        fed: Option<&FedSummary>,
    ) -> String {
        let get = Counters::get;
        metrics::with_local_recorder(&self.recorder, || {
            let s = &snap.stats;
            for (end, n) in s.ends() {
                counter!("askbus_requests_total", "outcome" => end.as_str()).absolute(n);
            }
            counter!("askbus_requests_accepted_total").absolute(s.accepted);
            let a = &s.approvals;
            for (end, n) in a.ends() {
                counter!("askbus_approvals_total", "outcome" => end.as_str()).absolute(n);
            }
            counter!("askbus_approvals_accepted_total").absolute(a.accepted);
            for (decision, n) in a.decisions() {
                counter!("askbus_approval_decisions_total", "decision" => decision.as_str())
                    .absolute(n);
            }
            counter!("askbus_approvals_confirmed_total").absolute(a.confirmed);
            for (decision, n) in ["allow", "deny"].iter().zip(snap.policy_decisions) {
                counter!("askbus_policy_decisions_total", "decision" => *decision).absolute(n);
            }
            for (sink, result, n) in s.notify.iter() {
                counter!("askbus_notifications_total", "sink" => sink.to_owned(), "result" => result.as_str())
                    .absolute(n);
            }
            gauge!("askbus_pending").set(snap.pending as f64);
            let r = snap.roles;
            for (role, n) in [
                ("producer", r.producer),
                ("ui", r.ui),
                ("watcher", r.watcher),
                ("idle", r.idle),
            ] {
                gauge!("askbus_connections", "role" => role).set(n as f64);
            }
            counter!("askbus_connections_accepted_total").absolute(get(&c.connections_total));
            counter!("askbus_connections_refused_total").absolute(get(&c.connections_refused));
            counter!("askbus_frames_received_total").absolute(get(&c.frames_in));
            counter!("askbus_frames_sent_total").absolute(get(&c.frames_out));
            // Every code, zeros too: a rate over a code never starts with a gap.
            for (code, n) in c.errors() {
                counter!("askbus_errors_total", "code" => code.as_str()).absolute(n);
            }
            counter!("askbus_queue_overflows_total").absolute(get(&c.queue_overflows));
            counter!("askbus_telemetry_lines_total").absolute(get(&c.telemetry_lines));
            counter!("askbus_telemetry_errors_total").absolute(get(&c.telemetry_errors));
            gauge!("askbus_uptime_seconds").set(uptime.as_secs_f64());
            gauge!("askbus_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
        });
        let mut text = self.handle.render();
        if let Some(f) = fed {
            federation::render(&mut text, f);
        }
        text
    }
}

fn describe() {
    describe_counter!(
        "askbus_requests_total",
        "Requests that ended, by outcome (rejected: refused before becoming pending)"
    );
    describe_counter!(
        "askbus_notifications_total",
        "Notifiers' deliveries (askbus notify's notify-report), by sink and result: sent, failed, answered (from a notification)"
    );
    describe_counter!(
        "askbus_requests_accepted_total",
        "Requests that passed validation and the limits and became pending"
    );
    describe_gauge!("askbus_pending", "Requests pending now");
    describe_counter!(
        "askbus_approvals_total",
        "Approvals (tool confirmations) that ended, by outcome; included in askbus_requests_total"
    );
    describe_counter!(
        "askbus_approvals_accepted_total",
        "Approvals accepted as pending; included in askbus_requests_accepted_total"
    );
    describe_counter!(
        "askbus_approval_decisions_total",
        "What UIs chose for answered approvals, by ToolConfirmationOutcome"
    );
    describe_counter!(
        "askbus_policy_decisions_total",
        "Approvals the policy rules decided without a person, by decision (allow, deny)"
    );
    describe_counter!(
        "askbus_approvals_confirmed_total",
        "Approvals whose producer was told confirmed: true"
    );
    describe_histogram!(
        APPROVAL_LATENCY,
        metrics::Unit::Seconds,
        "Time from an approval's acceptance to a UI's decision or dismissal; included in askbus_answer_latency_seconds"
    );
    describe_gauge!(
        "askbus_connections",
        "Connections served now, by role (ui, watcher, producer, or idle: none yet)"
    );
    describe_counter!(
        "askbus_connections_accepted_total",
        "Connections accepted on the socket (including those then refused)"
    );
    describe_counter!(
        "askbus_connections_refused_total",
        "Connections refused: uid not allowed, or a connection limit reached"
    );
    describe_histogram!(
        LATENCY,
        "Time from a request's acceptance to a UI's answer or dismissal"
    );
    describe_counter!("askbus_frames_received_total", "Frames read from peers");
    describe_counter!("askbus_frames_sent_total", "Frames written to peers");
    describe_counter!("askbus_errors_total", "Error frames sent, by code");
    describe_counter!(
        "askbus_queue_overflows_total",
        "Peers disconnected because they did not read what was queued for them"
    );
    describe_counter!(
        "askbus_telemetry_lines_total",
        "Telemetry lines written (one per request)"
    );
    describe_counter!(
        "askbus_telemetry_errors_total",
        "Telemetry writes that failed"
    );
    describe_gauge!("askbus_uptime_seconds", "Seconds since the daemon started");
    describe_gauge!("askbus_build_info", "The daemon's version (always 1)");
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
    fn latency_samples_folded_into_buckets_between_scrapes_are_all_counted() {
        let metrics = Metrics::new();
        let snap = crate::broker::Broker::new(crate::broker::Limits::default()).snapshot();
        // Several upkeeps' worth, half fast (100 ms) and half slow (3 s).
        let n = 3 * UPKEEP_EVERY + 8;
        for i in 0..n {
            metrics.observe_answer_latency_ms(if i % 2 == 0 { 100 } else { 3000 }, false);
        }
        let text = metrics.render(&snap, &Counters::default(), Duration::ZERO, None);
        for line in [
            format!("{LATENCY}_bucket{{le=\"0.1\"}} {}", n / 2),
            format!("{LATENCY}_bucket{{le=\"2.5\"}} {}", n / 2),
            format!("{LATENCY}_bucket{{le=\"5\"}} {n}"),
            format!("{LATENCY}_count {n}"),
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
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
