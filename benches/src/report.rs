//! What a bench run reports: the latency summary of its histogram, requests/s, the target's
//! CPU and memory, and for `--baseline` the per-round figures, their medians and the
//! askbusd/relay ratios; printed for people or as one JSON object.

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

    fn fields(&self) -> [f64; 6] {
        [self.p50, self.p90, self.p99, self.p999, self.max, self.mean]
    }

    fn from_fields(f: [f64; 6]) -> Latency {
        Latency {
            p50: f[0],
            p90: f[1],
            p99: f[2],
            p999: f[3],
            max: f[4],
            mean: f[5],
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
    /// `question` or `approval`.
    pub kind: &'static str,
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
            "{}  {} {}s  P={} U={} C={}  frame {} B",
            self.target,
            self.mode,
            self.kind,
            self.producers,
            self.uis,
            self.in_flight,
            self.frame_bytes
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

/// The median of each figure over a target's rounds.
#[derive(Debug, Clone, Serialize)]
pub struct Medians {
    pub rounds: usize,
    pub requests_per_s: f64,
    pub latency_us: Latency,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_request: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_kib: Option<f64>,
}

pub fn median(mut v: Vec<f64>) -> f64 {
    assert!(!v.is_empty(), "the median of nothing");
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

impl Medians {
    pub fn of(runs: &[&Run]) -> Medians {
        let m = |f: &dyn Fn(&Run) -> f64| median(runs.iter().map(|r| f(r)).collect());
        let mut lat = [0.0; 6];
        for (i, l) in lat.iter_mut().enumerate() {
            *l = m(&|r| r.latency_us.fields()[i]);
        }
        let all_server = runs.iter().all(|r| r.server.is_some());
        Medians {
            rounds: runs.len(),
            requests_per_s: m(&|r| r.requests_per_s),
            latency_us: Latency::from_fields(lat),
            cpu_us_per_request: all_server
                .then(|| m(&|r| r.server.as_ref().expect("checked").cpu_us_per_request)),
            peak_rss_kib: all_server
                .then(|| m(&|r| r.server.as_ref().expect("checked").peak_rss_kib as f64)),
        }
    }
}

/// askbusd's figures over the relay's (medians over rounds). Throughput above 1 and latency
/// below 1 would mean askbusd beat the relay.
#[derive(Debug, Clone, Serialize)]
pub struct Ratios {
    pub throughput: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    #[serde(rename = "p99.9")]
    pub p999: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_per_request: Option<f64>,
}

impl Ratios {
    pub fn of(a: &Medians, b: &Medians) -> Ratios {
        Ratios {
            throughput: a.requests_per_s / b.requests_per_s,
            p50: a.latency_us.p50 / b.latency_us.p50,
            p90: a.latency_us.p90 / b.latency_us.p90,
            p99: a.latency_us.p99 / b.latency_us.p99,
            p999: a.latency_us.p999 / b.latency_us.p999,
            cpu_per_request: a
                .cpu_us_per_request
                .zip(b.cpu_us_per_request)
                .map(|(a, b)| a / b),
        }
    }
}

/// `--baseline`: both targets, alternated.
#[derive(Debug, Clone, Serialize)]
pub struct Baseline {
    pub runs: Vec<Run>,
    pub askbusd: Medians,
    pub relay: Medians,
    /// askbusd ÷ relay.
    pub ratios: Ratios,
}

impl Baseline {
    pub fn of(runs: Vec<Run>) -> Baseline {
        let pick = |t: &str| runs.iter().filter(|r| r.target == t).collect::<Vec<_>>();
        let askbusd = Medians::of(&pick("askbusd"));
        let relay = Medians::of(&pick("relay"));
        let ratios = Ratios::of(&askbusd, &relay);
        Baseline {
            runs,
            askbusd,
            relay,
            ratios,
        }
    }

    pub fn print(&self) {
        for (i, r) in self.runs.iter().enumerate() {
            print!("round {} ({}): ", i / 2 + 1, r.target);
            r.print();
        }
        println!();
        for (name, m) in [("askbusd", &self.askbusd), ("relay", &self.relay)] {
            print!(
                "median of {} {name} rounds: {:.0} requests/s",
                m.rounds, m.requests_per_s
            );
            if let Some(cpu) = m.cpu_us_per_request {
                print!(", {cpu:.2} CPU µs/request");
            }
            println!();
            print_latency(&m.latency_us);
        }
        let r = &self.ratios;
        print!(
            "askbusd / relay: throughput {:.3}, p50 {:.3}, p90 {:.3}, p99 {:.3}, p99.9 {:.3}",
            r.throughput, r.p50, r.p90, r.p99, r.p999
        );
        if let Some(c) = r.cpu_per_request {
            print!(", CPU per request {c:.3}");
        }
        println!();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }

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
