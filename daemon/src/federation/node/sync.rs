//! Catch-up without storage: a node that may have missed some of another's messages (it
//! joined late, either side reconnected, a sequence number was skipped, the other restarted)
//! asks that node for everything it has pending, page by page, as core requests on
//! `P.sync.<origin>.<asker>`; and this node serves its own pending the same way. Each page
//! carries the origin's epoch and sequence number when it was taken, so the asker can tell a
//! page from the live messages that overtook it.

use super::*;

/// A page's budget (bytes of shares), under NATS's default `max_payload` of 1 MiB; a page
/// holds at least one share whatever its size.
const PAGE_BYTES: usize = 512 * 1024;

/// At most this many pages per sync (a node sharing more than about 256 MiB of questions
/// is not followed past that).
const MAX_PAGES: usize = 512;

/// What a sync fetched: the origin's pending questions, each with the sequence number of
/// the page it came in.
pub(super) struct Fetched {
    pub epoch: u64,
    /// The sequence number of the first page: a question a live message shared after it is
    /// not withdrawn for being absent from the pages.
    pub first_seq: u64,
    pub last_seq: u64,
    pub items: Vec<(u64, wire::Entry)>,
    /// Shares over `max_frame_bytes`, refused.
    pub oversized: usize,
}

impl Task {
    /// Fetches `origin`'s pending in the background; the result comes back as `Synced`.
    pub(super) fn spawn_sync(
        &self,
        client: &async_nats::Client,
        origin: Arc<str>,
        run: u64,
        synced_tx: &mpsc::Sender<peers::Synced>,
    ) {
        self.status.syncs.fetch_add(1, Ordering::Relaxed);
        let subject = self.sync_subject(&origin);
        let client = client.clone();
        let tx = synced_tx.clone();
        let timeout = self.answer_timeout;
        let max_item = self.max_frame_bytes;
        tokio::spawn(async move {
            let result = fetch(&client, subject, timeout, max_item).await;
            let _ = tx
                .send(peers::Synced {
                    origin,
                    run,
                    result,
                })
                .await;
        });
    }

    /// Serves one page of this node's pending to the node named by the subject (the server
    /// lets only it publish there, and its reply goes to its own inbox).
    pub(super) async fn serve_sync(
        &self,
        client: &async_nats::Client,
        msg: async_nats::Message,
        seq: u64,
    ) {
        let wildcard = self.sync_wildcard();
        let reply = match request_shape(&msg, &wildcard) {
            Ok((_, reply)) => reply,
            Err(why) => return refuse(&self.status, &msg, why),
        };
        let body = match wire::parse_sync_request(&msg.payload) {
            Ok(after) => {
                let budget = PAGE_BYTES
                    .min(client.server_info().max_payload / 2)
                    .max(1024);
                self.page(after.as_deref(), seq, budget)
            }
            Err(why) => {
                // The asker is told (and logs) that it speaks another version.
                refuse(&self.status, &msg, &why);
                wire::error_reply("incompatible", &why)
            }
        };
        if let Err(e) = client.publish(reply, body.into()).await {
            tracing::warn!(error = %e, "federation: sync page not sent");
        }
    }

    /// The page of this node's shared questions after `after`, in correlationId order.
    fn page(&self, after: Option<&str>, seq: u64, budget: usize) -> Vec<u8> {
        let now = Instant::now();
        let now_sys = SystemTime::now();
        let mut shared = self.hub.run(|b, _, _| b.shared_questions(now));
        shared.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        let start = after.map_or(0, |a| shared.partition_point(|q| &*q.id <= a));
        let mut items = Vec::new();
        let mut bytes = 0;
        let mut next = None;
        for q in &shared[start..] {
            let item = wire::question(q, unix_ms(now_sys + q.remaining), self.epoch, seq);
            if !items.is_empty() && bytes + item.len() > budget {
                next = Some(shared[start + items.len() - 1].id.to_string());
                break;
            }
            bytes += item.len();
            items.push(item);
        }
        wire::sync_page(self.epoch, seq, &items, next.as_deref())
    }
}

/// Every page of `subject`'s pending.
async fn fetch(
    client: &async_nats::Client,
    subject: String,
    timeout: Duration,
    max_item: usize,
) -> Result<Fetched, String> {
    let mut after: Option<String> = None;
    let mut fetched: Option<Fetched> = None;
    for _ in 0..MAX_PAGES {
        let request = async_nats::Request::new()
            .payload(wire::sync_request(after.as_deref()).into())
            .timeout(Some(timeout));
        let msg = client
            .send_request(subject.clone(), request)
            .await
            .map_err(|e| format!("{subject}: {e}"))?;
        let page = wire::parse_sync_page(&msg.payload, max_item)?;
        let f = fetched.get_or_insert_with(|| Fetched {
            epoch: page.epoch,
            first_seq: page.seq,
            last_seq: page.seq,
            items: Vec::new(),
            oversized: 0,
        });
        if f.epoch != page.epoch {
            return Err("the node restarted while it was synced".into());
        }
        f.last_seq = page.seq;
        f.oversized += page.oversized;
        f.items
            .extend(page.items.into_iter().map(|e| (page.seq, e)));
        match page.next {
            Some(next) if after.as_deref().is_none_or(|a| a < next.as_str()) => after = Some(next),
            Some(_) => return Err("a sync page did not move on".into()),
            None => return Ok(fetched.expect("one page read")),
        }
    }
    Err(format!("more than {MAX_PAGES} pages"))
}
