//! Access control from peer credentials: who may connect as a producer, as a UI, or as an
//! operator (a UI that sees every user's questions), from SO_PEERCRED's uid and gid and the
//! peer's supplementary groups (SO_PEERGROUPS); and the per-uid connection quota. The broker
//! enforces what the rights mean (`broker::Rights`); this module only decides them.

use std::collections::{BTreeSet, HashMap};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};

use crate::broker::{PeerInfo, Rights};

/// A set of users and groups; a peer matches if its uid is listed, or its primary or any
/// supplementary gid is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Principals {
    pub uids: BTreeSet<u32>,
    pub gids: BTreeSet<u32>,
}

impl Principals {
    pub fn matches(&self, info: &PeerInfo) -> bool {
        self.uids.contains(&info.uid)
            || self.gids.contains(&info.gid)
            || info.groups.iter().any(|g| self.gids.contains(g))
    }
}

/// The access rules of one configuration. The daemon's own uid and root may always be
/// producers and UIs; only listed peers are operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRules {
    pub own_uid: u32,
    pub producers: Principals,
    pub uis: Principals,
    pub operators: Principals,
}

impl AccessRules {
    /// The default: the daemon's own uid and root only.
    pub fn new(own_uid: u32) -> Self {
        AccessRules {
            own_uid,
            producers: Principals::default(),
            uis: Principals::default(),
            operators: Principals::default(),
        }
    }

    /// What `info`'s credentials allow. An operator is a UI whatever the UI rules say.
    pub fn rights(&self, info: &PeerInfo) -> Rights {
        let trusted = info.uid == self.own_uid || info.uid == 0;
        let operator = self.operators.matches(info);
        Rights {
            produce: trusted || self.producers.matches(info),
            ui: trusted || operator || self.uis.matches(info),
            operator,
        }
    }

    /// Whether a peer with these rights may connect at all.
    pub fn may_connect(rights: Rights) -> bool {
        rights.produce || rights.ui
    }
}

/// The peer's supplementary groups (Linux's SO_PEERGROUPS, as they were at connect time).
/// Empty where the kernel does not say.
pub fn peer_groups(stream: &impl AsRawFd) -> Vec<u32> {
    let fd = stream.as_raw_fd();
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut len = (groups.len() * std::mem::size_of::<libc::gid_t>()) as libc::socklen_t;
        // SAFETY: the buffer is valid for `len` bytes; the kernel writes at most that many and
        // says how many it wrote (or would need, with ERANGE).
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let n = len as usize / std::mem::size_of::<libc::gid_t>();
        if rc == 0 {
            groups.truncate(n);
            return groups;
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ERANGE) && n > groups.len() {
            groups.resize(n, 0);
            continue;
        }
        return Vec::new();
    }
}

/// Connections per uid, for the per-uid quota (dbus-broker's per-user accounting).
#[derive(Debug, Default)]
pub struct UidConnections {
    counts: Mutex<HashMap<u32, usize>>,
}

/// One counted connection; dropping it frees the slot.
#[derive(Debug)]
pub struct UidSlot {
    owner: Arc<UidConnections>,
    uid: u32,
}

impl UidConnections {
    /// Counts a connection of `uid`, unless it already has `limit`.
    pub fn acquire(self: &Arc<Self>, uid: u32, limit: usize) -> Option<UidSlot> {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let n = counts.entry(uid).or_default();
        if *n >= limit {
            return None;
        }
        *n += 1;
        Some(UidSlot {
            owner: self.clone(),
            uid,
        })
    }

    #[cfg(test)]
    pub fn count(&self, uid: u32) -> usize {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts.get(&uid).copied().unwrap_or(0)
    }
}

impl Drop for UidSlot {
    fn drop(&mut self) {
        let mut counts = self.owner.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = counts.get_mut(&self.uid) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(uid: u32, gid: u32, groups: &[u32]) -> PeerInfo {
        PeerInfo {
            uid,
            gid,
            groups: groups.to_vec(),
            ..PeerInfo::default()
        }
    }

    #[test]
    fn defaults_allow_only_the_daemons_uid_and_root() {
        let rules = AccessRules::new(1000);
        let own = rules.rights(&peer(1000, 1000, &[]));
        assert_eq!(
            own,
            Rights {
                produce: true,
                ui: true,
                operator: false
            }
        );
        assert_eq!(rules.rights(&peer(0, 0, &[])), own);
        let other = rules.rights(&peer(1001, 1001, &[1000]));
        assert!(!AccessRules::may_connect(other));
    }

    #[test]
    fn rules_match_uids_primary_and_supplementary_groups() {
        let mut rules = AccessRules::new(999);
        rules.producers.uids.insert(1001);
        rules.uis.gids.insert(500);
        rules.operators.gids.insert(10);
        let producer = rules.rights(&peer(1001, 1001, &[]));
        assert!(producer.produce && !producer.ui && !producer.operator);
        let ui = rules.rights(&peer(1002, 1002, &[500]));
        assert!(!ui.produce && ui.ui && !ui.operator);
        let ui_by_primary = rules.rights(&peer(1003, 500, &[]));
        assert!(ui_by_primary.ui);
        let operator = rules.rights(&peer(1004, 1004, &[10]));
        assert!(operator.ui && operator.operator && !operator.produce);
        assert!(!AccessRules::may_connect(rules.rights(&peer(
            1005,
            1005,
            &[11]
        ))));
    }

    #[test]
    fn uid_slots_count_until_dropped() {
        let conns = Arc::new(UidConnections::default());
        let a = conns.acquire(7, 2).unwrap();
        let b = conns.acquire(7, 2).unwrap();
        assert!(conns.acquire(7, 2).is_none());
        assert!(
            conns.acquire(8, 2).is_some(),
            "other uids have their own quota"
        );
        drop(a);
        assert_eq!(conns.count(7), 1);
        let _c = conns.acquire(7, 2).unwrap();
        drop(b);
        assert_eq!(conns.count(7), 1);
    }

    #[test]
    fn peer_groups_reads_the_connecting_process_groups() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mine: Vec<u32> = nix::unistd::getgroups()
            .unwrap()
            .into_iter()
            .map(|g| g.as_raw())
            .collect();
        let mut got = peer_groups(&a);
        got.sort_unstable();
        let mut want = mine;
        want.sort_unstable();
        want.dedup();
        got.dedup();
        assert_eq!(got, want);
    }
}
