//! The federation gauges of the `/metrics` text: what [`FedSummary`] says at the scrape,
//! appended to the registry's exposition (the hub builds the summary from the federation
//! task's state and the broker's counts).

/// Federation state at one moment (`stats`, metrics, `STATUS=`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FedSummary {
    pub connected: bool,
    pub nodes: usize,
    pub remote_pending: usize,
    pub shared_pending: usize,
    pub rtt_us: u64,
    pub reconnects: u64,
}

/// Appends the federation gauges to `text`.
pub(super) fn render(text: &mut String, f: &FedSummary) {
    use std::fmt::Write as _;
    let gauges = [
        (
            "askbus_federation_connected",
            "Whether this node is connected to NATS (1) or not (0).",
            "gauge",
            f.connected as u64 as f64,
        ),
        (
            "askbus_federation_nodes",
            "Other askbusd nodes heard from.",
            "gauge",
            f.nodes as f64,
        ),
        (
            "askbus_federation_remote_pending",
            "Other nodes' questions shown here.",
            "gauge",
            f.remote_pending as f64,
        ),
        (
            "askbus_federation_shared_pending",
            "This node's questions shared with the others.",
            "gauge",
            f.shared_pending as f64,
        ),
        (
            "askbus_federation_rtt_seconds",
            "Round trip to the NATS server at the last heartbeat.",
            "gauge",
            f.rtt_us as f64 / 1e6,
        ),
        (
            "askbus_federation_reconnects_total",
            "Times the NATS connection was lost.",
            "counter",
            f.reconnects as f64,
        ),
    ];
    for (name, help, kind, value) in gauges {
        let _ = write!(
            text,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
        );
    }
}
