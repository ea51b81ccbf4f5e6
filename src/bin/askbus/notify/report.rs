//! Every delivery is recorded: a line on stderr (the journal, under systemd) and a count per
//! sink and result, so nothing the notifier tried is lost silently.

use std::collections::BTreeMap;

/// What happened to one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Result {
    Sent,
    Failed,
    /// A request was answered from a notification (a desktop button).
    Answered,
}

impl Result {
    pub fn as_str(self) -> &'static str {
        match self {
            Result::Sent => "sent",
            Result::Failed => "failed",
            Result::Answered => "answered",
        }
    }
}

#[derive(Debug, Default)]
pub struct Reporter {
    counts: BTreeMap<(&'static str, Result), u64>,
}

impl Reporter {
    pub fn sent(&mut self, sink: &'static str, ids: &[String]) {
        self.record(sink, Result::Sent, ids, None);
    }

    pub fn failed(&mut self, sink: &'static str, ids: &[String], error: &str) {
        self.record(sink, Result::Failed, ids, Some(error));
    }

    pub fn answered(&mut self, id: &str) {
        self.record("desktop", Result::Answered, &[id.to_owned()], None);
    }

    fn record(&mut self, sink: &'static str, result: Result, ids: &[String], error: Option<&str>) {
        *self.counts.entry((sink, result)).or_default() += 1;
        let about = match ids {
            [] => String::new(),
            [one] => format!(" {one}"),
            [first, ..] => format!(" {first} and {} more", ids.len() - 1),
        };
        let line = match error {
            Some(e) => format!("{sink} {}{about}: {e}", result.as_str()),
            None => format!("{sink} {}{about}", result.as_str()),
        };
        eprintln!("askbus notify: {}", crate::term::sanitize(&line));
    }
}
