//! The policy rows: an approval a rule decides (no person asked) against a plain question a
//! UI answers, both of the approval's size on the wire; and a question's round trip with the
//! shipped rules plus 1,000 of the user's own loaded against a daemon with its policies off,
//! since questions never consult the rules. Both daemons load the same rules, written to a
//! user tier of the bench's own, and a probe proves the rule decides before anything is timed.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use super::{median, row, stats, Bound, Counts, Row};
use crate::load::{self, Reader};
use crate::spawn::{Kind, Target};
use crate::wire::{Request, RequestKind};
use crate::{client_runtime, daemon_kind, default_size, measure, On};

/// The rule that allows the bench's approval (`Request::approval`: `rm -rf build && cargo
/// build --release`). The daemon allows a compound command only when each part would be
/// allowed alone, so both parts are named.
const ALLOW: &str = r#"
[[rule]]
toolName = "run_shell_command"
commandPrefix = ["rm -rf build", "cargo build"]
decision = "allow"
priority = 500
"#;

/// 1,000 rules of the kinds people write (command prefixes and patterns, MCP servers, file
/// paths in the arguments), none of which matches the bench's approval, then [`ALLOW`].
fn user_rules() -> String {
    let mut s = String::with_capacity(160 * 1001);
    for i in 0..1000 {
        let rule = match i % 4 {
            0 => format!(
                "toolName = \"run_shell_command\"\ncommandPrefix = \"deploy-{i} --prod\"\n\
                 decision = \"deny\"\ndenyMessage = \"not from an agent\"\n"
            ),
            1 => format!("toolName = \"*\"\nmcpName = \"server-{i}\"\ndecision = \"ask_user\"\n"),
            2 => format!(
                "toolName = \"write_file\"\nargsPattern = '\"file_path\":\"/srv/app-{i}/'\n\
                 decision = \"deny\"\n"
            ),
            _ => format!(
                "toolName = \"run_shell_command\"\ncommandRegex = \"^make target-{i}( |$)\"\n\
                 decision = \"allow\"\n"
            ),
        };
        s.push_str("[[rule]]\n");
        s.push_str(&rule);
        s.push_str(&format!("priority = {}\n\n", 100 + i % 800));
    }
    s.push_str(ALLOW);
    s
}

pub(super) fn rows(
    c: &Counts,
    bin: &std::path::Path,
    threads: usize,
    rounds: u64,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let (approvals, questions) = super::sequential_approvals_and_questions(c, threads)?;
    let mut ruled = daemon_kind(Some(bin), true, &approvals.workload)?;
    let mut off = ruled.clone();
    if let Kind::Askbusd { policies, .. } = &mut ruled {
        *policies = Some(user_rules());
    }
    if let Kind::Askbusd { args, .. } = &mut off {
        args.extend(["--policies".into(), "off".into()]);
    }
    let probe = probe(&ruled, threads)?;

    let (mut by_rule, mut asked, mut asked_off) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        by_rule.push(
            measure(&On::Start(ruled.clone()), &approvals)?
                .latency_us
                .p50,
        );
        asked.push(
            measure(&On::Start(ruled.clone()), &questions)?
                .latency_us
                .p50,
        );
        asked_off.push(measure(&On::Start(off.clone()), &questions)?.latency_us.p50);
    }
    let (by_rule, asked, asked_off) = (median(by_rule), median(asked), median(asked_off));
    rows.push(row(
        "approval a rule allows (1,000 user rules): sequential round trip p50 vs a question's",
        Bound::Le(1.1),
        by_rule / asked,
        "×",
        json!({"approval_by_rule_us": by_rule, "question_us": asked, "probe": probe}),
    ));
    rows.push(row(
        "question round trip p50 with 1,000 user rules loaded vs policies off",
        Bound::Le(1.1),
        asked / asked_off,
        "×",
        json!({"rules_us": asked, "off_us": asked_off}),
    ));
    Ok(())
}

/// Sends one approval to `kind` with no UI subscribed: only a rule can answer it, and it must
/// be allowed by the bench's own rule with the rules loading cleanly, else what the row times
/// is not a rule's decision.
fn probe(kind: &Kind, threads: usize) -> Result<Value> {
    let target = Target::start(kind)?;
    let rt = client_runtime(threads)?;
    let socket = target.socket().to_owned();
    let answer = rt.block_on(async {
        // The load errors first: a bad rule file leaves the probe unanswered, and says why.
        let errors = stats(&socket).await?["policies"]["errors"].clone();
        if !errors.as_array().is_some_and(|e| e.is_empty()) {
            bail!("the bench's policy rules did not load cleanly: {errors}");
        }
        let (rd, mut wr) = load::connect(&socket).await?.into_split();
        let mut rd = Reader::new(rd);
        let mut out = Vec::new();
        let request = Request::approval(default_size(RequestKind::Approval), 7)?;
        request.write(b"probe-1", &mut out);
        wr.write_all(&out).await?;
        let frame = tokio::time::timeout(Duration::from_secs(5), rd.frame())
            .await
            .context("no rule answered the probe approval within 5 s")??;
        Ok::<Value, anyhow::Error>(serde_json::from_slice(&frame)?)
    });
    target.stop()?;
    let answer = answer?;
    let allowed = answer["type"] == "tool-confirmation-response"
        && answer["correlationId"] == "probe-1"
        && answer["confirmed"] == true
        && answer["outcome"] == "proceed_once";
    if !allowed {
        bail!("the probe approval was not allowed by the bench's rule: {answer}");
    }
    Ok(answer)
}
