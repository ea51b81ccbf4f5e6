//! The pending table: every request that is waiting for an answer, and the four indexes that
//! must agree with it (arrival order for replay, deadlines for the timer, counts and bytes per
//! uid for the quotas, the requests each producer connection owns for its disconnect). A
//! request is in all five or in none: `insert` and `remove` are the only ways in and out, so no
//! operation can lose a question by updating one index and forgetting another.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use tokio::time::Instant;

use super::body::{Body, Origin};
use super::PeerId;
use crate::protocol::{ProducerInfo, RequestContext};

/// What a pending request counts against its uid's byte budget: its body (normalized
/// questions' text or an approval's fields) and its correlationId, the bytes it keeps alive
/// while pending.
pub fn bytes_of(id: &str, body: &Body) -> usize {
    id.len() + body.bytes()
}

/// One pending request.
#[derive(Debug)]
pub struct Pending {
    /// Its place in arrival order (unique; from [`PendingTable::next_seq`]).
    pub seq: u64,
    /// Who asked: a connection here (while it is connected) or another node.
    pub origin: Origin,
    pub producer_info: ProducerInfo,
    /// Who is asking, about what, as the producer said (known fields only).
    pub context: Option<Box<RequestContext>>,
    /// What it asks: questions or an approval.
    pub body: Body,
    pub accepted_at: Instant,
    pub deadline: Instant,
    pub timeout_ms: u64,
}

/// What the requests of one producer uid hold.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct UidLoad {
    /// Requests pending (never 0: an uid with none has no entry).
    count: usize,
    /// The bytes they hold (see [`bytes_of`]), for the per-uid byte budget.
    bytes: usize,
}

/// The pending requests by correlationId, with the indexes kept in step.
#[derive(Debug)]
pub struct PendingTable {
    entries: HashMap<Arc<str>, Pending>,
    /// By arrival: replay order.
    by_seq: BTreeMap<u64, Arc<str>>,
    /// Deadlines: one ordered set instead of a timer per request, so 100,000 idle pending
    /// questions cost no wake-ups until the earliest one is due.
    deadlines: BTreeSet<(Instant, u64)>,
    /// Per producer uid: the per-uid quotas, and what a UI of that uid is told is pending.
    by_uid: HashMap<u32, UidLoad>,
    /// Per producer connection: the `seq`s of what its disconnect withdraws (in arrival
    /// order), and its own quota (local requests whose producer is connected only). Sequence numbers, not ids: no string is hashed again, and a
    /// set that empties and fills as a producer's questions come and go is one small node.
    by_producer: HashMap<PeerId, BTreeSet<u64>>,
    next_seq: u64,
}

impl Default for PendingTable {
    fn default() -> Self {
        PendingTable {
            entries: HashMap::new(),
            by_seq: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            by_uid: HashMap::new(),
            by_producer: HashMap::new(),
            next_seq: 1,
        }
    }
}

impl PendingTable {
    /// A sequence number for a new request (taken even by requests that end at once, so the
    /// numbers say the order requests were accepted in).
    pub fn next_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Adds a request under `id`, which must not be pending (the broker refuses duplicates
    /// before it gets here) with a `seq` from [`Self::next_seq`].
    pub fn insert(&mut self, id: Arc<str>, req: Pending) {
        let slot = match self.entries.entry(id) {
            Entry::Vacant(slot) if !self.by_seq.contains_key(&req.seq) => slot,
            e => panic!("{:?} (seq {}) is already pending", e.key(), req.seq),
        };
        let id = slot.key().clone();
        self.by_seq.insert(req.seq, id.clone());
        self.deadlines.insert((req.deadline, req.seq));
        let load = self.by_uid.entry(req.producer_info.uid).or_default();
        load.count += 1;
        load.bytes += bytes_of(&id, &req.body);
        if let Some(producer) = req.origin.producer() {
            self.by_producer
                .entry(producer)
                .or_default()
                .insert(req.seq);
        }
        slot.insert(req);
    }

    /// Takes the request out of the table and every index.
    pub fn remove(&mut self, id: &str) -> Option<Pending> {
        let req = self.entries.remove(id)?;
        self.by_seq.remove(&req.seq);
        self.deadlines.remove(&(req.deadline, req.seq));
        if let Entry::Occupied(mut e) = self.by_uid.entry(req.producer_info.uid) {
            let load = e.get_mut();
            load.count -= 1;
            load.bytes = (load.bytes).saturating_sub(bytes_of(id, &req.body));
            if load.count == 0 {
                e.remove();
            }
        }
        if let Some(producer) = req.origin.producer() {
            self.forget_producer(producer, req.seq);
        }
        Some(req)
    }

    fn forget_producer(&mut self, producer: PeerId, seq: u64) {
        if let Entry::Occupied(mut owned) = self.by_producer.entry(producer) {
            owned.get_mut().remove(&seq);
            if owned.get().is_empty() {
                owned.remove();
            }
        }
    }

    /// Changes who a local request's producer is (`None`: away), keeping `by_producer` in
    /// step. Does nothing to a remote request.
    pub fn set_producer(&mut self, id: &str, to: Option<PeerId>) {
        let Some(req) = self.entries.get_mut(id) else {
            return;
        };
        let Origin::Local { producer, .. } = &mut req.origin else {
            return;
        };
        let (before, seq) = (std::mem::replace(producer, to), req.seq);
        if let Some(p) = before {
            self.forget_producer(p, seq);
        }
        if let Some(p) = to {
            self.by_producer.entry(p).or_default().insert(seq);
        }
    }

    pub fn get(&self, id: &str) -> Option<&Pending> {
        self.entries.get(id)
    }

    pub fn contains(&self, id: &str) -> bool {
        self.entries.contains_key(id)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Requests pending from producers of `uid`.
    pub fn count_of_uid(&self, uid: u32) -> usize {
        self.by_uid.get(&uid).map_or(0, |l| l.count)
    }

    /// Bytes held by the requests pending from producers of `uid`.
    pub fn bytes_of_uid(&self, uid: u32) -> usize {
        self.by_uid.get(&uid).map_or(0, |l| l.bytes)
    }

    /// Requests pending from connection `peer`.
    pub fn count_of_producer(&self, peer: PeerId) -> usize {
        self.by_producer.get(&peer).map_or(0, BTreeSet::len)
    }

    /// Connections with at least one request pending.
    pub fn producers(&self) -> usize {
        self.by_producer.len()
    }

    /// The requests connection `peer` has pending, oldest first.
    pub fn owned_by(&self, peer: PeerId) -> Vec<Arc<str>> {
        let Some(owned) = self.by_producer.get(&peer) else {
            return Vec::new();
        };
        owned.iter().map(|seq| self.by_seq[seq].clone()).collect()
    }

    /// Every request, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Arc<str>, &Pending)> {
        self.after(0)
    }

    /// The requests that arrived after sequence number `seq`, oldest first.
    pub fn after(&self, seq: u64) -> impl Iterator<Item = (u64, &Arc<str>, &Pending)> {
        self.by_seq
            .range(seq + 1..)
            .map(|(&seq, id)| (seq, id, &self.entries[id]))
    }

    /// Every pending id, oldest first.
    pub fn ids(&self) -> Vec<Arc<str>> {
        self.by_seq.values().cloned().collect()
    }

    /// The earliest request whose deadline is at or before `now`.
    pub fn first_due(&self, now: Instant) -> Option<Arc<str>> {
        let &(deadline, seq) = self.deadlines.first()?;
        (deadline <= now).then(|| self.by_seq[&seq].clone())
    }

    /// When the next request times out, if any is pending.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(d, _)| *d)
    }

    /// Panics unless the five structures describe the same set of requests.
    #[cfg(test)]
    pub fn check_invariant(&self) {
        let n = self.entries.len();
        assert_eq!(self.by_seq.len(), n, "by_seq");
        assert_eq!(self.deadlines.len(), n, "deadlines");
        assert!(
            self.by_uid.values().all(|l| l.count > 0),
            "a zero count is kept"
        );
        let owned: usize = self.by_producer.values().map(BTreeSet::len).sum();
        let connected = self
            .entries
            .values()
            .filter(|r| r.origin.producer().is_some());
        assert_eq!(owned, connected.count(), "by_producer");
        assert!(self.by_producer.values().all(|s| !s.is_empty()));
        for (id, req) in &self.entries {
            assert_eq!(self.by_seq.get(&req.seq), Some(id));
            assert!(self.deadlines.contains(&(req.deadline, req.seq)));
            if let Some(producer) = req.origin.producer() {
                assert!(self.by_producer[&producer].contains(&req.seq));
            }
            assert!(req.seq < self.next_seq);
        }
        let mut uids: HashMap<u32, UidLoad> = HashMap::new();
        for (id, req) in &self.entries {
            let load = uids.entry(req.producer_info.uid).or_default();
            load.count += 1;
            load.bytes += bytes_of(id, &req.body);
        }
        assert_eq!(uids, self.by_uid, "by_uid");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Duration;

    fn pending(t: &mut PendingTable, producer: PeerId, uid: u32, at: Instant, ms: u64) -> Pending {
        Pending {
            seq: t.next_seq(),
            origin: Origin::local(producer),
            producer_info: ProducerInfo {
                client: None,
                pid: None,
                uid,
            },
            context: None,
            body: Body::Questions(crate::questions::Normalized {
                questions: "[]".into(),
                meta: Vec::new(),
            }),
            accepted_at: at,
            deadline: at + Duration::from_millis(ms),
            timeout_ms: ms,
        }
    }

    #[test]
    fn inserts_and_removes_keep_every_index_in_step() {
        let now = Instant::now();
        let mut t = PendingTable::default();
        for (n, (producer, uid, ms)) in [(1, 1000, 50), (1, 1000, 10), (2, 1001, 30), (3, 1000, 10)]
            .into_iter()
            .enumerate()
        {
            let p = pending(&mut t, producer, uid, now, ms);
            t.insert(Arc::from(format!("r{n}")), p);
            t.check_invariant();
        }
        assert_eq!(t.len(), 4);
        assert_eq!((t.count_of_uid(1000), t.count_of_uid(1001)), (3, 1));
        assert_eq!((t.count_of_producer(1), t.producers()), (2, 3));
        assert_eq!(t.owned_by(1), vec![Arc::from("r0"), Arc::from("r1")]);
        let order: Vec<_> = t.iter().map(|(_, id, _)| id.to_string()).collect();
        assert_eq!(order, ["r0", "r1", "r2", "r3"]);
        let later: Vec<_> = t.after(2).map(|(seq, _, _)| seq).collect();
        assert_eq!(later, [3, 4]);

        // Deadlines: the two 10 ms ones, in arrival order, then nothing until 30 ms.
        let at = now + Duration::from_millis(10);
        assert_eq!(t.next_deadline(), Some(at));
        assert_eq!(t.first_due(now), None);
        let first = t.first_due(at).unwrap();
        assert_eq!(&*first, "r1");
        t.remove(&first).unwrap();
        t.check_invariant();
        assert_eq!(t.first_due(at).as_deref(), Some("r3"));
        t.remove("r3").unwrap();
        t.check_invariant();
        assert_eq!(t.first_due(at), None);
        assert_eq!(
            t.producers(),
            2,
            "a producer with nothing left is no longer counted"
        );
        assert_eq!(t.count_of_producer(3), 0);

        assert!(t.remove("r3").is_none(), "a second removal finds nothing");
        for id in t.ids() {
            t.remove(&id).unwrap();
            t.check_invariant();
        }
        assert!(t.is_empty());
        assert_eq!(
            (t.count_of_uid(1000), t.producers(), t.next_deadline()),
            (0, 0, None)
        );
    }

    #[test]
    #[should_panic(expected = "already pending")]
    fn a_duplicate_id_is_refused() {
        let now = Instant::now();
        let mut t = PendingTable::default();
        let a = pending(&mut t, 1, 0, now, 5);
        let b = pending(&mut t, 2, 0, now, 5);
        t.insert(Arc::from("x"), a);
        t.insert(Arc::from("x"), b);
    }

    #[test]
    fn equal_deadlines_are_kept_apart_by_arrival() {
        let now = Instant::now();
        let mut t = PendingTable::default();
        for n in 0..100 {
            let p = pending(&mut t, n % 7, (n % 3) as u32, now, 1);
            t.insert(Arc::from(format!("{n}")), p);
        }
        t.check_invariant();
        let due = now + Duration::from_millis(1);
        let mut order = Vec::new();
        while let Some(id) = t.first_due(due) {
            t.remove(&id).unwrap();
            order.push(id.parse::<u64>().unwrap());
        }
        assert_eq!(order, (0..100).collect::<Vec<_>>());
        t.check_invariant();
    }
}
