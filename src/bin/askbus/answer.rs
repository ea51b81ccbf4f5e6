//! `askbus answer`: answers (or dismisses) one pending question as a UI would, and reports
//! whether the answer won.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Result};

use askbusd::client::{Ui, UiEvent};
use askbusd::protocol::Outcome;

use crate::term;

pub async fn run(socket: &Path, id: &str, raw: &[String], dismiss: bool) -> Result<ExitCode> {
    let mut answers = BTreeMap::new();
    for a in raw {
        let (k, v) = a
            .split_once('=')
            .ok_or_else(|| anyhow!("--answer takes INDEX=TEXT, got {a:?}"))?;
        let index: usize = k
            .trim()
            .parse()
            .map_err(|_| anyhow!("--answer {a:?}: {k:?} is not a question index"))?;
        answers.insert(index, v.to_owned());
    }
    let mut ui = Ui::subscribe(
        socket,
        Some(concat!("askbus-answer/", env!("CARGO_PKG_VERSION"))),
    )
    .await?;
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
