//! The end-to-end suite: the real `askbusd` and `askbus` binaries over real sockets, one
//! module per area, linked once (ripgrep's and helix's layout). Each module's doc says what
//! it covers; `harness` starts daemons and speaks raw frames, `pty` drives a terminal.
//! Run one area with `cargo test --test e2e AREA::` (e.g. `cargo test --test e2e federation::`).

// The harness serves every module; no single module uses all of it.
#[allow(dead_code)]
mod harness;
#[allow(dead_code)]
mod pty;

mod access;
mod acp_stream;
mod approvals;
mod bench;
mod chaos;
mod chat_common;
mod chat_discord;
mod chat_slack;
mod chat_telegram;
mod cli;
mod cli_approvals;
mod cli_newuser;
mod cli_tools;
mod client_approvals;
mod config;
mod conformance_e2e;
mod context;
mod crash_loop;
mod decided_by;
mod exhaustion;
mod federation;
mod first_half_hour;
mod hook;
mod layering;
mod lifecycle;
mod metrics;
mod notify;
mod policy_conformance;
mod policy_context;
mod policy_daemon;
mod policy_uids;
mod proto_golden;
mod replay_bytes;
mod routing;
mod service;
mod shared_machine;
mod store;
mod store_history;
mod systemd;
mod ui_approvals;
mod ui_federation;
mod ui_pty;
mod ui_store;
mod version;
mod web_http;
mod wire_errors;
mod wire_fuzz;
