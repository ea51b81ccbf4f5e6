//! `askbus answer`: answers (or dismisses) one pending question as a UI would, and reports
//! whether the answer won.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Result};

use crate::fail::Failure;

use askbusd::client::{Ui, UiEvent};
use askbusd::protocol::Outcome;

use crate::term;

pub async fn run(socket: &Path, id: &str, raw: &[String], dismiss: bool) -> Result<ExitCode> {
    if raw.is_empty() && !dismiss {
        return Err(Failure::new(
            crate::ask::exit::USAGE,
            anyhow!(
                "say what to send: --answer INDEX=TEXT (one per question, from 0), or \
                 --dismiss to dismiss the dialog; see `askbus answer --help`"
            ),
        )
        .into());
    }
    let answers = parse(raw).map_err(|e| Failure::new(crate::ask::exit::USAGE, e))?;
    let mut ui = Ui::subscribe(
        socket,
        Some(concat!("askbus-answer/", env!("CARGO_PKG_VERSION"))),
    )
    .await?;
    // The replay says what the question is, so picks joined for a question that takes one
    // answer are refused here instead of arriving as free text.
    let mut replayed = 0;
    let mut asked = None;
    while replayed < ui.pending_at_subscribe() {
        match ui.next().await? {
            Some(UiEvent::Request(r)) => {
                replayed += 1;
                if r.correlation_id == id {
                    asked = Some(r.questions);
                }
            }
            Some(_) => {}
            None => bail!("askbusd closed the connection"),
        }
    }
    if let Some(questions) = asked {
        check_repeats(raw, &questions).map_err(|e| Failure::new(crate::ask::exit::USAGE, e))?;
    }
    if dismiss {
        ui.dismiss(id).await?;
    } else {
        ui.answer(id, &answers).await?;
    }
    loop {
        match ui.next().await? {
            Some(UiEvent::Ack {
                correlation_id,
                outcome,
            }) if correlation_id == id => {
                println!(
                    "{}: {}",
                    term::sanitize(id),
                    if outcome == Outcome::Dismissed {
                        "dismissed"
                    } else {
                        "answered"
                    }
                );
                return Ok(ExitCode::SUCCESS);
            }
            Some(UiEvent::Error(e)) if e.correlation_id.as_deref() == Some(id) => {
                eprintln!("askbus: {}: {}", e.code, term::sanitize_lines(&e.message));
                return Ok(ExitCode::FAILURE);
            }
            Some(_) => continue,
            None => bail!("askbusd closed the connection before acknowledging the answer"),
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
