//! Every delivery is recorded: a line on stderr (the journal, under systemd), and a
//! `notify-report` frame to askbusd, which counts it in its metrics
//! (`askbus_notifications_total{sink,result}`) and shows it to `askbus watch`. Reports made
//! while askbusd is away wait in a bounded queue and go out on reconnect.

use std::collections::VecDeque;

use askbus::client::UiAnswerer;
use askbus::protocol::{ClientFrame, NotifyResult, MAX_REPORT_ERROR_CHARS, MAX_REPORT_IDS};

/// Reports kept while askbusd is away; older ones are dropped past this (and said so).
const QUEUE: usize = 256;

struct Pending {
    sink: &'static str,
    result: NotifyResult,
    ids: Vec<String>,
    error: Option<String>,
}

#[derive(Default)]
pub struct Reporter {
    queue: VecDeque<Pending>,
    dropped: u64,
}

impl Reporter {
    pub fn sent(&mut self, sink: &'static str, ids: &[String]) {
        self.record(sink, NotifyResult::Sent, ids, None);
    }

    pub fn failed(&mut self, sink: &'static str, ids: &[String], error: &str) {
        self.record(sink, NotifyResult::Failed, ids, Some(error));
    }

    pub fn answered(&mut self, id: &str) {
        self.record("desktop", NotifyResult::Answered, &[id.to_owned()], None);
    }

    fn record(
        &mut self,
        sink: &'static str,
        result: NotifyResult,
        ids: &[String],
        error: Option<&str>,
    ) {
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
        if self.queue.len() == QUEUE {
            self.queue.pop_front();
            self.dropped += 1;
        }
        self.queue.push_back(Pending {
            sink,
            result,
            ids: ids.iter().take(MAX_REPORT_IDS).cloned().collect(),
            error: error.map(|e| crate::notify::waiting::clip(e, MAX_REPORT_ERROR_CHARS)),
        });
    }

    /// Sends what is queued on `ui`'s connection; what fails to go stays queued.
    pub async fn flush(&mut self, ui: &UiAnswerer) {
        if self.dropped > 0 {
            eprintln!(
                "askbus notify: {} delivery reports could not reach askbusd (it was away too long)",
                self.dropped
            );
            self.dropped = 0;
        }
        while let Some(p) = self.queue.front() {
            let frame = ClientFrame::NotifyReport {
                sink: p.sink,
                result: p.result,
                correlation_ids: &p.ids,
                error: p.error.as_deref(),
            };
            if ui.send(&frame).await.is_err() {
                return;
            }
            self.queue.pop_front();
        }
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}
