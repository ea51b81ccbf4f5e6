//! Delivery: what the notifier shows when its schedule says so. The desktop flush (single
//! notifications up to a bound, the rest in one summary, outcomes replacing them), the push
//! flush (one message per request or one per burst, redacted when asked), the signed links
//! pushes carry, and the reports each delivery sends to askbusd.

use tokio::time::Instant;

use super::*;

impl Notifier {
    pub(super) fn expiry(&self, id: &str) -> u64 {
        let left = self.entries.get(id).map_or(0, |e| e.w.timeout_ms / 1000);
        crate::links::now_unix() + left.clamp(60, 7 * 24 * 3600)
    }

    /// The request's `shownSha256`, which its links are bound to.
    fn shown(&self, id: &str) -> Option<&str> {
        self.entries.get(id).map(|e| e.w.shown.as_str())
    }

    pub(super) fn open_link(&self, l: &Links, id: &str) -> Option<String> {
        let link = crate::links::Link::open(id, self.shown(id)?, self.expiry(id))
            .ok()?
            .redacted(self.redact);
        Some(format!("{}/o/{}", l.base, l.key.sign(&link)))
    }

    pub(super) fn answer_link(&self, l: &Links, id: &str, answer: &Answer) -> Option<String> {
        let link =
            crate::links::Link::answer(id, self.shown(id)?, answer.link_body(), self.expiry(id))
                .ok()?
                .redacted(self.redact);
        Some(format!("{}/a/{}", l.base, l.key.sign(&link)))
    }

    pub(super) async fn flush_desktop(&mut self, now: Instant) {
        let Some(d) = &mut self.desktop else { return };
        let Some(desk) = &d.desktop else { return };
        let due = d.schedule.take_due(now);
        let mut overflow = due.batch;
        let open_singles = |d: &DesktopSink| {
            d.shown
                .values()
                .filter(|s| matches!(s, Shown::One(_)))
                .count()
        };
        for id in due.singles {
            let Some(e) = self.entries.get(&id) else {
                continue;
            };
            if e.nid.is_none() && open_singles(d) >= MAX_OPEN {
                overflow.push(id);
                continue;
            }
            let mut actions: Vec<(String, String)> =
                e.w.choices
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (format!("a{i}"), c.label.clone()))
                    .collect();
            if e.w.always.is_some() {
                actions.push((ALWAYS_KEY.into(), "Allow always".into()));
            }
            actions.extend(open_actions());
            let body = e.w.desktop_body();
            let note = Note {
                replaces: e.nid.unwrap_or(0),
                summary: &e.w.title(),
                body: &body,
                actions: &actions,
                urgency: match e.w.kind {
                    Kind::Question => Urgency::Normal,
                    Kind::Approval => Urgency::Critical,
                },
                expire_ms: 0,
            };
            match desk.show(&note).await {
                Ok(nid) => {
                    if let Some(old) = e.nid.filter(|&o| o != nid) {
                        d.shown.remove(&old);
                    }
                    d.shown.insert(nid, Shown::One(id.clone()));
                    if let Some(e) = self.entries.get_mut(&id) {
                        e.nid = Some(nid);
                    }
                    self.reports.sent("desktop", &[id]);
                }
                Err(e) => {
                    self.reports.failed("desktop", &[id], &e.to_string());
                }
            }
        }
        for id in overflow {
            if let Some(e) = self.entries.get(&id) {
                if e.nid.is_none() {
                    d.in_summary.insert((e.seq, id));
                    d.summary_dirty = true;
                }
            }
        }
        if !d.summary_dirty {
            return;
        }
        d.summary_dirty = false;
        if d.in_summary.is_empty() {
            if let Some(nid) = d.summary.take() {
                d.shown.remove(&nid);
                let _ = desk.close(nid).await;
            }
            return;
        }
        let titles: Vec<String> = d
            .in_summary
            .iter()
            .take(3)
            .filter_map(|(_, id)| self.entries.get(id).map(|e| e.w.title()))
            .collect();
        let n = d.in_summary.len();
        let mut body = titles.join("\n");
        if n > titles.len() {
            body.push_str(&format!("\n…and {} more", n - titles.len()));
        }
        let title = format!("{n} requests are waiting");
        let actions = open_actions();
        let note = Note {
            replaces: d.summary.unwrap_or(0),
            summary: &title,
            body: &body,
            actions: &actions,
            urgency: Urgency::Normal,
            expire_ms: 0,
        };
        let ids: Vec<String> = d.in_summary.iter().map(|(_, id)| id.clone()).collect();
        match desk.show(&note).await {
            Ok(nid) => {
                if let Some(old) = d.summary.filter(|&o| o != nid) {
                    d.shown.remove(&old);
                }
                d.summary = Some(nid);
                d.shown.insert(nid, Shown::Summary);
                self.reports.sent("desktop", &ids);
            }
            Err(e) => self.reports.failed("desktop", &ids, &e.to_string()),
        }
    }

    pub(super) fn flush_push(&mut self, now: Instant) {
        for i in 0..self.push.len() {
            let due = self.push[i].schedule.take_due(now);
            let mut batch = due.batch;
            for id in due.singles {
                let Some(msg) = self.single_message(&id) else {
                    continue;
                };
                if self.push[i].tx.try_send(msg).is_err() {
                    batch.push(id);
                } else {
                    self.pushed.insert(&id);
                }
            }
            if batch.is_empty() {
                continue;
            }
            let ids = batch.clone();
            let msg = self.batch_message(batch);
            if let Err(e) = self.push[i].tx.try_send(msg) {
                // The queue is full of retries: put them back, to go out in a later batch.
                let msg = match e {
                    mpsc::error::TrySendError::Full(m) | mpsc::error::TrySendError::Closed(m) => m,
                };
                let sink = self.push[i].sink;
                for id in &msg.ids {
                    if let Some(e) = self.entries.get(id) {
                        self.push[i].schedule.add(id, e.seq, now + WINDOW);
                    }
                }
                eprintln!(
                    "askbus notify: {sink}: {} pushes still queued; the next batch waits",
                    push::QUEUE
                );
            } else {
                for id in &ids {
                    self.pushed.insert(id);
                }
            }
        }
        self.pushed.save();
    }

    pub(super) fn single_message(&self, id: &str) -> Option<push::Message> {
        let e = self.entries.get(id)?;
        let w = &e.w;
        let mut actions = Vec::new();
        let mut click = None;
        let mut always = false;
        if let Some(l) = &self.links {
            for c in w.push_choices(self.redact) {
                if let Some(url) = self.answer_link(l, id, &c.answer) {
                    actions.push(push::Action {
                        label: c.label.clone(),
                        url,
                        post: true,
                    });
                }
            }
            // "Allow always…" opens its answer link's page, which says the rule it writes
            // before its one button; it never answers where it is tapped. Not in a redacted
            // push: that page would name the command.
            if let (Some(o), false) = (&w.always, self.redact) {
                if let Some(url) = self.answer_link(l, id, &Answer::Approval(o.chosen)) {
                    always = true;
                    actions.push(push::Action {
                        label: "Allow always…".into(),
                        url,
                        post: false,
                    });
                }
            }
            click = self.open_link(l, id);
            if let Some(url) = &click {
                actions.push(push::Action {
                    label: "Open".into(),
                    url: url.clone(),
                    post: false,
                });
            }
        }
        // ntfy shows three buttons. Allow, Deny and "Allow always…" stay, and "Open" is the
        // tap on the notification itself (its click); otherwise keep "Open" as the third.
        if always && actions.len() > 3 {
            actions.truncate(3);
        } else if actions.len() > 3 {
            let open = actions.pop();
            actions.truncate(2);
            actions.extend(open);
        }
        let (title, body) = if self.redact {
            ("askbus".to_owned(), w.redacted_body())
        } else {
            (w.title(), w.body.clone())
        };
        Some(push::Message {
            ids: vec![id.to_owned()],
            title,
            body,
            agent: w.agent.clone(),
            project: w.project.clone(),
            kind: match w.kind {
                Kind::Question => "question",
                Kind::Approval => "approval",
            },
            click,
            actions,
        })
    }

    pub(super) fn batch_message(&self, ids: Vec<String>) -> push::Message {
        let mut agents: Vec<&str> = Vec::new();
        for id in &ids {
            if let Some(e) = self.entries.get(id) {
                if !agents.contains(&e.w.agent.as_str()) {
                    agents.push(&e.w.agent);
                }
            }
        }
        let title = format!("{} requests are waiting", ids.len());
        let shown: Vec<&str> = agents.iter().take(3).copied().collect();
        let mut body = format!("from {}", shown.join(", "));
        if agents.len() > shown.len() {
            body.push_str(&format!(" and {} more agents", agents.len() - shown.len()));
        }
        let click = self.links.as_ref().and_then(|l| self.open_link(l, &ids[0]));
        let actions = click
            .iter()
            .map(|url| push::Action {
                label: "Open".into(),
                url: url.clone(),
                post: false,
            })
            .collect();
        push::Message {
            agent: agents.first().map_or_else(String::new, |a| (*a).to_owned()),
            project: None,
            ids,
            title,
            body,
            kind: "batch",
            click,
            actions,
        }
    }

    pub(super) fn push_report(&mut self, r: push::Report) {
        match r.outcome {
            push::Outcome::Sent { attempts } => {
                if attempts > 1 {
                    eprintln!("askbus notify: {} delivered on attempt {attempts}", r.sink);
                }
                self.reports.sent(r.sink, &r.ids)
            }
            push::Outcome::Failed { attempts, error } => {
                let text = format!("gave up after {attempts} attempts: {error}");
                self.reports.failed(r.sink, &r.ids, &text);
            }
            push::Outcome::Skipped => {}
        }
    }
}
