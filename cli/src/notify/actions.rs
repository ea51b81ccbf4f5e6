//! What the desktop reports back: an action clicked (answered through askbusd like any UI;
//! the daemon's ack or refusal then replaces the notification), "Open", and a notification
//! closed by the person or the server.

use super::*;

impl Notifier {
    pub(super) async fn show_outcome(&mut self, nid: u32, title: &str, text: &str) {
        let Some(d) = &mut self.desktop else { return };
        let Some(desk) = &d.desktop else { return };
        let note = Note {
            replaces: nid,
            summary: title,
            body: text,
            actions: &[],
            urgency: Urgency::Low,
            expire_ms: 5000,
        };
        match desk.show(&note).await {
            Ok(id) => {
                d.shown.remove(&nid);
                d.shown.insert(id, Shown::Done);
            }
            Err(e) => eprintln!(
                "askbus notify: cannot update a notification: {}",
                term::sanitize(&e.to_string())
            ),
        }
    }

    pub(super) async fn signal(&mut self, signal: Signal) {
        let Some(d) = &mut self.desktop else { return };
        match signal {
            Signal::Closed { id } => match d.shown.remove(&id) {
                Some(Shown::One(rid)) => {
                    if let Some(e) = self.entries.get_mut(&rid) {
                        if e.nid == Some(id) {
                            e.nid = None;
                        }
                    }
                }
                Some(Shown::Summary) => {
                    d.summary = None;
                    d.in_summary.clear();
                }
                _ => {}
            },
            Signal::Action { id, key } => {
                let Some(shown) = d.shown.get(&id).cloned() else {
                    return;
                };
                match (shown, key.as_str()) {
                    (Shown::One(rid), ALWAYS_KEY) => self.click_always(id, &rid).await,
                    (Shown::One(rid), k) if k.starts_with('a') => {
                        let Ok(i) = k[1..].parse::<usize>() else {
                            return;
                        };
                        self.click(id, &rid, i).await;
                    }
                    (Shown::One(rid), _) => self.open(id, Some(rid)).await,
                    (Shown::Summary, _) => {
                        let first = d.in_summary.iter().next().map(|(_, id)| id.clone());
                        self.open(id, first).await;
                    }
                    (Shown::Done, _) => {}
                }
            }
        }
    }

    /// A button was clicked: answer through askbusd; the ack (or the refusal) updates it.
    pub(super) async fn click(&mut self, nid: u32, id: &str, choice: usize) {
        let Some(entry) = self.entries.get_mut(id) else {
            return;
        };
        let Some(c) = entry.w.choices.get(choice).cloned() else {
            return;
        };
        let title = entry.w.title();
        let Some(answerer) = self.answerer.clone() else {
            self.show_outcome(nid, &title, "askbusd is not reachable; nothing was sent.")
                .await;
            return;
        };
        entry.clicked = Some(nid);
        let sent = match &c.answer {
            Answer::Question(answers) => answerer.answer(id, answers).await,
            Answer::Approval(outcome) => answerer.decide(id, &Decision::allow(*outcome)).await,
        };
        if let Err(e) = sent {
            if let Some(entry) = self.entries.get_mut(id) {
                entry.clicked = None;
            }
            let text = format!("Not sent: {e}");
            self.show_outcome(nid, &title, &text).await;
        }
    }

    /// "Allow always", whose rule the notification's body says: the rule is written first
    /// (through `crate::always`, as every UI writes it), then the decision the offer sends
    /// goes through askbusd; a rule that cannot be written sends nothing.
    pub(super) async fn click_always(&mut self, nid: u32, id: &str) {
        let Some(entry) = self.entries.get_mut(id) else {
            return;
        };
        let Some(offer) = entry.w.always.clone() else {
            return;
        };
        let title = entry.w.title();
        let Some(answerer) = self.answerer.clone() else {
            self.show_outcome(nid, &title, "askbusd is not reachable; nothing was sent.")
                .await;
            return;
        };
        if let Err(e) = offer.apply(false) {
            let text = format!("Not sent: the rule was not written ({e})");
            self.show_outcome(nid, &title, &text).await;
            return;
        }
        entry.clicked = Some(nid);
        if let Err(e) = answerer.decide(id, &Decision::allow(offer.sent)).await {
            if let Some(entry) = self.entries.get_mut(id) {
                entry.clicked = None;
            }
            let text = format!("Not sent: {e}");
            self.show_outcome(nid, &title, &text).await;
        }
    }

    /// "Open": the question in `askbus web` through a single-use link, or how to answer it.
    pub(super) async fn open(&mut self, nid: u32, id: Option<String>) {
        let url = match (&self.links, &id) {
            (Some(l), Some(id)) => self.open_link(l, id),
            _ => None,
        };
        if let Some(url) = url {
            if let Err(e) = open::that_detached(&url) {
                eprintln!("askbus notify: cannot open a browser: {e}");
            } else {
                return;
            }
        }
        let title = id
            .as_ref()
            .and_then(|id| self.entries.get(id))
            .map_or_else(|| "askbus".to_owned(), |e| e.w.title());
        let body = "Answer it in a terminal: askbus ui (or start askbus web and give askbus notify --web-url).";
        let Some(d) = &mut self.desktop else { return };
        let Some(desk) = &d.desktop else { return };
        let is_summary = d.summary == Some(nid);
        let actions = open_actions();
        let note = Note {
            replaces: nid,
            summary: &title,
            body,
            actions: if is_summary { &actions } else { &[] },
            urgency: Urgency::Normal,
            expire_ms: 0,
        };
        if let Err(e) = desk.show(&note).await {
            eprintln!(
                "askbus notify: cannot update a notification: {}",
                term::sanitize(&e.to_string())
            );
        }
    }
}
