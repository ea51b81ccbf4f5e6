//! `askbus answer`: answers (or dismisses) one pending question, or allows or denies one
//! pending approval, as a UI would, and reports whether the answer won.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Result};

use crate::fail::Failure;

use askbus::client::{Ui, UiEvent};
use askbus::protocol::{Decision, Outcome, ToolOutcome, UiApproval};

use crate::term;

/// What the command line says to send.
#[derive(Debug, PartialEq)]
pub enum What {
    /// `--answer` flags, and whether `--other` allows free text on a choice or yes/no.
    Answers(Vec<String>, bool),
    Dismiss,
    Allow {
        always: bool,
    },
    Deny(Option<String>),
    Nothing,
}

impl What {
    /// clap keeps the flags apart (`conflicts_with`); this reads the one given.
    pub fn from_flags(
        answers: Vec<String>,
        other: bool,
        dismiss: bool,
        allow: bool,
        always: bool,
        deny: Option<Option<String>>,
    ) -> What {
        if dismiss {
            What::Dismiss
        } else if allow {
            What::Allow { always }
        } else if let Some(reason) = deny {
            What::Deny(reason)
        } else if !answers.is_empty() {
            What::Answers(answers, other)
        } else {
            What::Nothing
        }
    }
}

/// What the replay says is pending under the id.
enum Pending {
    Question(serde_json::Value),
    Approval(Box<UiApproval>),
}

fn usage(e: anyhow::Error) -> anyhow::Error {
    Failure::new(crate::fail::exit::USAGE, e).into()
}

pub async fn run(socket: &Path, id: &str, what: What, any_project: bool) -> Result<ExitCode> {
    if what == What::Nothing {
        return Err(usage(anyhow!(
            "say what to send: --answer INDEX=TEXT (one per question, from 0) for a question, \
             --allow [--always] or --deny [REASON] for an approval, or --dismiss; see \
             `askbus answer --help`"
        )));
    }
    let answers = match &what {
        What::Answers(raw, _) => parse(raw).map_err(usage)?,
        _ => BTreeMap::new(),
    };
    let mut ui = Ui::subscribe_via(
        socket,
        Some(concat!("askbus-answer/", env!("CARGO_PKG_VERSION"))),
        &askbus::protocol::SubscribeFilter::default(),
        Some("cli"),
    )
    .await?;
    // The replay says what the request is, so a flag that does not fit it (picks joined for
    // a question that takes one answer, --allow for a question, --always where the agent
    // does not offer it) is refused here instead of reaching the daemon.
    let mut replayed = 0;
    let mut pending = None;
    while replayed < ui.pending_at_subscribe() {
        match ui.next().await? {
            Some(UiEvent::Request(r)) => {
                replayed += 1;
                if r.correlation_id == id {
                    pending = Some(Pending::Question(r.questions));
                }
            }
            Some(UiEvent::Approval(a)) => {
                replayed += 1;
                if a.correlation_id == id {
                    pending = Some(Pending::Approval(a));
                }
            }
            Some(_) => {}
            None => bail!("askbusd closed the connection"),
        }
    }
    let shown = term::sanitize(id);
    let decision = match (&what, &pending) {
        (What::Answers(raw, other), Some(Pending::Question(questions))) => {
            check_repeats(raw, questions).map_err(usage)?;
            if !other {
                check_options(&answers, questions).map_err(usage)?;
            }
            None
        }
        (What::Answers(..), Some(Pending::Approval(a))) => {
            return Err(usage(anyhow!(
                "{shown} is an approval (tool {}), not a question: answer it with --allow \
                 [--always], --deny [REASON] or --dismiss",
                term::sanitize(a.tool_call["name"].as_str().unwrap_or("?"))
            )))
        }
        (What::Allow { .. } | What::Deny(_), Some(Pending::Question(_))) => {
            return Err(usage(anyhow!(
                "{shown} is a question, not an approval: answer it with --answer INDEX=TEXT \
                 or --dismiss"
            )))
        }
        (What::Allow { always: true }, Some(Pending::Approval(a))) => {
            let chosen = match always_outcome(a) {
                Ok(o) => o,
                // The agent has no "always" of its own: askbus's rule is the "always".
                Err(_) if !a.outcomes.iter().any(|o| crate::always::is_always(*o)) => {
                    ToolOutcome::ProceedAlways
                }
                Err(e) => return Err(usage(e)),
            };
            // askbus's own rule first, so the daemon decides the next identical call by it.
            Some(Decision::allow(write_always_rule(a, chosen, any_project)?))
        }
        // Not pending (or not visible to this user): the daemon says which.
        (What::Allow { always: true }, None) => Some(Decision::allow(ToolOutcome::ProceedAlways)),
        (What::Allow { always: false }, _) => Some(Decision::allow_once()),
        (What::Deny(reason), _) => Some(Decision::deny(reason.clone())),
        (What::Dismiss, Some(Pending::Approval(_))) => Some(Decision::Dismissed),
        (What::Dismiss | What::Answers(..), _) => None,
        (What::Nothing, _) => unreachable!("refused above"),
    };
    match (&decision, &what) {
        (Some(d), _) => ui.decide(id, d).await?,
        (None, What::Dismiss) => ui.dismiss(id).await?,
        (None, _) => ui.answer(id, &answers).await?,
    }
    loop {
        match ui.next().await? {
            Some(UiEvent::Ack {
                correlation_id,
                outcome,
            }) if correlation_id == id => {
                println!(
                    "{shown}: {}",
                    if outcome == Outcome::Dismissed {
                        "dismissed"
                    } else {
                        "answered"
                    }
                );
                return Ok(ExitCode::SUCCESS);
            }
            Some(UiEvent::ApprovalAck(ack)) if ack.correlation_id == id => {
                let said = match (ack.reason, ack.outcome) {
                    (Outcome::Dismissed, _) => "dismissed".to_owned(),
                    (_, ToolOutcome::Cancel) => "denied".to_owned(),
                    (_, ToolOutcome::ProceedOnce) => "allowed once".to_owned(),
                    (_, o) => format!("allowed: {} ({o})", o.label()),
                };
                println!("{shown}: {said}");
                return Ok(ExitCode::SUCCESS);
            }
            Some(UiEvent::Error(e)) if e.correlation_id.as_deref() == Some(id) => {
                eprintln!("askbus: {}: {}", e.code, term::sanitize_lines(&e.message));
                return Ok(ExitCode::from(crate::fail::exit::FAILURE));
            }
            Some(_) => continue,
            None => bail!("askbusd closed the connection before acknowledging the answer"),
        }
    }
}

/// Writes the rule "allow always" (`chosen`) means for `a` into this user's policy file,
/// saying which rule and where before it does (the UIs' one path, `crate::always`); returns
/// the outcome to send.
fn write_always_rule(
    a: &UiApproval,
    chosen: ToolOutcome,
    any_project: bool,
) -> Result<ToolOutcome> {
    let offer = crate::always::offer(a, chosen);
    let Some(rule) = offer.as_ref().and_then(|o| o.rule(any_project)) else {
        eprintln!(
            "askbus: no rule written: the request is another user's (uid {}), or askbus cannot \
             say what \"always\" means for this call",
            a.producer.uid
        );
        return Ok(offer.map_or(
            if a.outcomes.contains(&chosen) {
                chosen
            } else {
                ToolOutcome::ProceedOnce
            },
            |o| o.sent,
        ));
    };
    println!("rule: {}", term::sanitize(&crate::always::describe(rule)));
    let offer = offer.as_ref().expect("a rule comes with its offer");
    offer
        .apply(any_project)
        .map_err(|e| anyhow!("the rule was not written: {e}"))?;
    Ok(offer.sent)
}

/// The outcome `--always` sends: the agent's "Allow always", or the one other "always" it
/// offers (for this tool, this server, and save); an error when it offers none.
fn always_outcome(a: &UiApproval) -> Result<ToolOutcome> {
    if a.outcomes.contains(&ToolOutcome::ProceedAlways) {
        return Ok(ToolOutcome::ProceedAlways);
    }
    let always: Vec<ToolOutcome> = a
        .outcomes
        .iter()
        .copied()
        .filter(|o| crate::always::is_always(*o))
        .collect();
    match always.as_slice() {
        [one] => Ok(*one),
        _ => {
            let offered: Vec<&str> = a.outcomes.iter().map(|o| o.label()).collect();
            let why = if always.is_empty() {
                "the agent does not offer \"Allow always\" for it"
            } else {
                "the agent offers several kinds of \"always\" and --always cannot say which"
            };
            bail!(
                "{}: {why} (it offers: {}); use --allow for this call only",
                term::sanitize(&a.correlation_id),
                offered.join(", ")
            )
        }
    }
}

/// The `answers` object from `--answer INDEX=TEXT` flags. Several flags for one index are the
/// picks of a multiSelect, joined with ", " as a UI joins them (an answer is one string per
/// question, so the alternative of keeping only the last would silently drop picks).
pub fn parse(raw: &[String]) -> Result<BTreeMap<usize, String>> {
    let mut answers: BTreeMap<usize, String> = BTreeMap::new();
    for a in raw {
        let (k, v) = a.split_once('=').ok_or_else(|| {
            anyhow!("--answer takes INDEX=TEXT (e.g. `--answer 0=Yes`), got `{a}`")
        })?;
        let index: usize = k.trim().parse().map_err(|_| {
            anyhow!(
                "--answer `{a}`: `{}` is not a question index (0 for the first question, \
                 1 for the second…)",
                k.trim()
            )
        })?;
        answers
            .entry(index)
            .and_modify(|prev| {
                prev.push_str(", ");
                prev.push_str(v);
            })
            .or_insert_with(|| v.to_owned());
    }
    Ok(answers)
}

/// Refuses several `--answer` flags for one question unless it is a multiSelect.
fn check_repeats(raw: &[String], questions: &serde_json::Value) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for a in raw {
        let Some(i) = a
            .split_once('=')
            .and_then(|(k, _)| k.trim().parse::<usize>().ok())
        else {
            continue;
        };
        if !seen.insert(i) {
            let q = questions.get(i);
            let multi =
                q.and_then(|q| q.get("multiSelect")) == Some(&serde_json::Value::Bool(true));
            if !multi {
                bail!(
                    "{} takes one answer, but --answer {i}=… was given more than once (only a \
                     multiSelect takes several picks)",
                    crate::explain::name("question", i)
                );
            }
        }
    }
    Ok(())
}

/// Refuses an answer to a choice (or yes/no) question that is none of its options, unless
/// `--other` says free text is meant: a typo (`0=sqlite` for `SQLite`) would otherwise reach
/// the agent as the "Other" row's text, silently. Says which option it may have meant.
fn check_options(answers: &BTreeMap<usize, String>, questions: &serde_json::Value) -> Result<()> {
    for (&i, text) in answers {
        let Some(q) = questions.get(i) else { continue };
        let labels: Vec<&str> = match q.get("type").and_then(|t| t.as_str()) {
            Some("choice") => q
                .get("options")
                .and_then(|o| o.as_array())
                .map(|o| {
                    o.iter()
                        .filter_map(|o| o.get("label").and_then(|l| l.as_str()))
                        .collect()
                })
                .unwrap_or_default(),
            Some("yesno") => vec!["Yes", "No"],
            _ => continue,
        };
        let multi = q.get("multiSelect") == Some(&serde_json::Value::Bool(true));
        // A multiSelect's picks are joined with ", " (a label may hold ", " itself).
        let picks: Vec<&str> = if multi && !labels.contains(&text.as_str()) {
            text.split(", ").collect()
        } else {
            vec![text.as_str()]
        };
        for pick in picks {
            if labels.contains(&pick) {
                continue;
            }
            let near = labels
                .iter()
                .find(|l| l.eq_ignore_ascii_case(pick.trim()))
                .map(|l| format!(" Did you mean `--answer {i}={l}`?"))
                .unwrap_or_default();
            let header = q.get("header").and_then(|h| h.as_str()).unwrap_or("");
            bail!(
                "{}, \"{}\", is answered with one of its options: {}; {:?} is none of them.\
                 {near} To send it as free text (the \"Other\" row), add --other.",
                crate::explain::name("question", i),
                term::sanitize(header),
                labels
                    .iter()
                    .map(|l| term::sanitize(l).into_owned())
                    .collect::<Vec<_>>()
                    .join(", "),
                term::sanitize(pick),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<BTreeMap<usize, String>> {
        parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn repeated_indexes_join_as_a_multiselect() {
        let a = p(&["0=SQLite", "1=Yes", "0=DuckDB"]).unwrap();
        assert_eq!(a[&0], "SQLite, DuckDB");
        assert_eq!(a[&1], "Yes");
        assert_eq!(p(&["0=A, B"]).unwrap()[&0], "A, B");
        assert_eq!(p(&["0=x=y"]).unwrap()[&0], "x=y");
        let e = p(&["first=A"]).unwrap_err().to_string();
        assert!(e.contains("`first` is not a question index"), "{e}");
        assert!(p(&["A"]).unwrap_err().to_string().contains("INDEX=TEXT"));
    }
}
