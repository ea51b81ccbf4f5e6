//! What a bench run reports: the latency summary of its histogram, requests/s, the target's
//! CPU and memory; printed for people or as one JSON object.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Round-trip latency in microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    #[serde(rename = "p99.9")]
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

impl Latency {
    /// From a histogram of nanoseconds.
    pub fn of(h: &Histogram<u64>) -> Latency {
        let us = |ns: u64| ns as f64 / 1000.0;
        Latency {
            p50: us(h.value_at_quantile(0.50)),
            p90: us(h.value_at_quantile(0.90)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
            mean: h.mean() / 1000.0,
        }
    }
}

/// The target's own cost over the measured phase (only when the bench started it).
#[derive(Debug, Clone, Serialize)]
pub struct Server {
    pub cpu_ms: f64,
    pub cpu_us_per_request: f64,
    /// VmHWM at the end of the run: the process's peak resident memory.
    pub peak_rss_kib: u64,
}

/// One run against one target.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub target: &'static str,
    pub mode: &'static str,
    pub producers: usize,
    pub uis: usize,
    pub in_flight: usize,
    pub frame_bytes: usize,
    pub warmup: u64,
    pub requests: u64,
    pub elapsed_s: f64,
    pub requests_per_s: f64,
    pub latency_us: Latency,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<Server>,
    /// Whether askbusd wrote telemetry (absent for the relay and a daemon we did not start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<bool>,
}

impl Run {
    pub fn print(&self) {
        println!(
            "{}  {}  P={} U={} C={}  frame {} B",
            self.target, self.mode, self.producers, self.uis, self.in_flight, self.frame_bytes
        );
        println!(
            "  {} requests in {:.3} s: {:.0} requests/s",
            self.requests, self.elapsed_s, self.requests_per_s
        );
        print_latency(&self.latency_us);
        if let Some(s) = &self.server {
            println!(
                "  {} CPU {:.0} ms ({:.2} µs/request), peak RSS {} KiB",
                self.target, s.cpu_ms, s.cpu_us_per_request, s.peak_rss_kib
            );
        }
    }
}

fn print_latency(l: &Latency) {
    println!(
        "  round trip µs: p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
        l.p50, l.p90, l.p99, l.p999, l.max
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_is_in_microseconds() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for ns in [10_000u64, 20_000, 30_000] {
            h.record(ns).unwrap();
        }
        let l = Latency::of(&h);
        assert!((l.p50 - 20.0).abs() < 0.1, "{l:?}");
        assert!((l.max - 30.0).abs() < 0.1, "{l:?}");
    }
}
