//! `askbus doctor`: what a newcomer needs to know when nothing seems to happen. Each check
//! prints one line (`ok`, `warn`, `FAIL`, or `--` for what does not apply) and, for a
//! problem, the command that fixes it: the daemon and whether systemd runs it, the socket's
//! owner and mode, the UIs subscribed (and the notifier among them), whether `askbus web`
//! serves this bus, each agent's hook, the config file, the policy rules, the store and its
//! history chain, and the link to NATS.
//! Exit status 1 when any check FAILs.
//!
//! This module owns the report (one `Check` per line, text or JSON) and the order of the
//! checks; `daemon` reaches askbusd and checks its socket, `stats` reads what its stats frame
//! says (UIs, notifier, policies, store, federation), `web` looks for `askbus web`, `setup`
//! the files on this machine (each agent's hook, the config).

mod daemon;
mod setup;
mod stats;
mod web;

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args as ClapArgs;
use serde::Serialize;

use crate::hook::Agent;
use crate::term;
use daemon::{daemon, socket_mode};
use setup::{config, hook};
use stats::{federation, policies, store, uis};
use web::web;

#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The checks as a JSON array of {check, status, detail, fix}
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Ok,
    Warn,
    Fail,
    /// Does not apply here (no daemon to ask, an agent that is not installed).
    Skip,
}

#[derive(Debug, Serialize)]
struct Check {
    check: &'static str,
    status: Status,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

#[derive(Default)]
struct Report(Vec<Check>);

impl Report {
    fn add(&mut self, check: &'static str, status: Status, detail: String, fix: Option<String>) {
        self.0.push(Check {
            check,
            status,
            detail,
            fix,
        });
    }
    fn ok(&mut self, check: &'static str, detail: String) {
        self.add(check, Status::Ok, detail, None);
    }
}

pub async fn run(socket: &Path, args: Args) -> Result<ExitCode> {
    let mut r = Report::default();
    let stats = daemon(&mut r, socket).await;
    socket_mode(&mut r, socket);
    match &stats {
        Some(s) => {
            uis(&mut r, s);
            policies(&mut r, s);
            store(&mut r, Some(s));
            federation(&mut r, s);
        }
        None => {
            for check in ["uis", "notifier", "policies", "federation"] {
                r.add(
                    check,
                    Status::Skip,
                    "not known: askbusd is not reachable".into(),
                    None,
                );
            }
            store(&mut r, None);
        }
    }
    web(&mut r, socket, stats.as_ref());
    for agent in [Agent::Claude, Agent::Gemini, Agent::Codex] {
        hook(&mut r, agent, socket);
    }
    config(&mut r);
    let failed = r.0.iter().any(|c| c.status == Status::Fail);
    if args.json {
        println!("{}", term::json(&serde_json::to_string_pretty(&r.0)?));
    } else {
        for c in &r.0 {
            let mark = match c.status {
                Status::Ok => "ok  ",
                Status::Warn => "warn",
                Status::Fail => "FAIL",
                Status::Skip => "--  ",
            };
            println!("{mark} {:<11} {}", c.check, term::sanitize_lines(&c.detail));
            if let Some(fix) = &c.fix {
                println!("     {:<11} fix: {}", "", term::sanitize_lines(fix));
            }
        }
        let problems =
            r.0.iter()
                .filter(|c| matches!(c.status, Status::Warn | Status::Fail))
                .count();
        println!(
            "{}",
            match problems {
                0 => "Nothing to fix.".to_owned(),
                1 => "1 thing to look at (above).".to_owned(),
                n => format!("{n} things to look at (above)."),
            }
        );
    }
    Ok(if failed {
        ExitCode::from(crate::fail::exit::FAILURE)
    } else {
        ExitCode::SUCCESS
    })
}
