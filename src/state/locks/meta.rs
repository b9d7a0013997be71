//! A lock key's record: its waiters, lock-delay and holders ([`LockMeta`]), as stored, and
//! the lock events it derives.

use std::collections::VecDeque;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// Who is waiting: the node serving the client, that node process's boot id, and a number
/// unique within the process. Only that node acts on a grant to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WaiterId {
    /// The node the client is connected to.
    pub node: u64,
    /// The boot id of that node's process (a restarted node purges its old waiters).
    pub boot: u64,
    /// Unique within the process.
    pub seq: u64,
}

/// One queued LOCK.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiter {
    /// Who to tell.
    pub id: WaiterId,
    /// The owner to grant the lock to.
    pub owner: Bytes,
    /// The lease the grant gets, in ms.
    pub ttl_ms: u64,
    /// The lock-delay of that lease, in ms.
    pub delay_ms: u64,
    /// Cluster time after which the waiter is skipped (`None`: waits for ever).
    pub deadline: Option<u64>,
}

/// A key's queue and lock-delay, and the holders of a shared lock or semaphore.
///
/// Stored with postcard. `kinds` and then `groups` were added after the first three fields:
/// a record written before them reads with them empty (see the `Deserialize` impl below).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LockMeta {
    /// Waiters in arrival (log) order.
    pub queue: VecDeque<Waiter>,
    /// The current lease's lock-delay: (its token, delay ms). It applies only if the lease
    /// with that token expires; a release or another write drops it.
    pub delay: Option<(u64, u64)>,
    /// No grant before this cluster time (a lease with a lock-delay expired).
    pub blocked_until: u64,
    /// The shared and semaphore side: waiters' modes and the holders.
    pub kinds: Kinds,
    /// The queued MLOCK waiters: each one's keys, in its command's order. Every key of an
    /// MLOCK holds the same row, and the waiter is in each of their queues.
    pub groups: Vec<(WaiterId, Vec<Bytes>)>,
}

/// How a lock is held or asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// LOCK: one holder, alone.
    Exclusive,
    /// RLOCK: any number of holders together, never beside an exclusive one.
    Shared,
    /// SEMACQUIRE with this LIMIT: at most that many holders.
    Semaphore(u32),
}

impl Mode {
    /// The name LOCKINFO reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Exclusive => "exclusive",
            Mode::Shared => "shared",
            Mode::Semaphore(_) => "semaphore",
        }
    }
}

/// One holder of a shared lock or a semaphore permit: its own lease and token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// The owner.
    pub owner: Bytes,
    /// Its fencing token (the revision of its grant).
    pub token: u64,
    /// Cluster time its lease ends.
    pub expire_at: u64,
    /// Renewed (RENEW, or re-acquired by its owner) since the grant.
    pub renewed: bool,
}

/// The shared and semaphore side of a key's lock record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kinds {
    /// The mode of every queued waiter that is not exclusive (a waiter missing here is an
    /// exclusive LOCK), by waiter id.
    pub modes: Vec<(WaiterId, Mode)>,
    /// How the holders hold the key: [`Mode::Shared`] or [`Mode::Semaphore`]; `None` while
    /// nobody holds it that way.
    pub mode: Option<Mode>,
    /// The holders, in grant order (never empty while `mode` is set).
    pub holders: Vec<Holder>,
}

impl<'de> Deserialize<'de> for LockMeta {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = LockMeta;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a lock record")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<LockMeta, A::Error> {
                use serde::de::Error;
                let queue = s
                    .next_element()?
                    .ok_or_else(|| A::Error::invalid_length(0, &self))?;
                let delay = s
                    .next_element()?
                    .ok_or_else(|| A::Error::invalid_length(1, &self))?;
                let blocked_until = s
                    .next_element()?
                    .ok_or_else(|| A::Error::invalid_length(2, &self))?;
                // A record written before `kinds` existed ends here: postcard reports the
                // end of its input as an error, which means "no kinds".
                let kinds = s.next_element().ok().flatten().unwrap_or_default();
                // The same for `groups`, added after `kinds`.
                let groups = s.next_element().ok().flatten().unwrap_or_default();
                Ok(LockMeta {
                    queue,
                    delay,
                    blocked_until,
                    kinds,
                    groups,
                })
            }
        }
        const FIELDS: &[&str] = &["queue", "delay", "blocked_until", "kinds", "groups"];
        d.deserialize_struct("LockMeta", FIELDS, V)
    }
}

impl LockMeta {
    /// True when the record holds nothing worth keeping at `now`.
    pub(in crate::state) fn idle(&self, now: u64) -> bool {
        self.queue.is_empty()
            && self.delay.is_none()
            && self.blocked_until <= now
            && self.kinds.holders.is_empty()
            && self.kinds.modes.is_empty()
            && self.groups.is_empty()
    }

    /// The keys of a queued MLOCK waiter (`None`: a waiter of one key).
    pub(in crate::state) fn group_of(&self, id: WaiterId) -> Option<&Vec<Bytes>> {
        self.groups.iter().find(|(w, _)| *w == id).map(|(_, ks)| ks)
    }

    /// The position of the first waiter whose wait has not run out at `now`.
    pub(in crate::state) fn first_live(&self, now: u64) -> Option<usize> {
        self.queue
            .iter()
            .position(|w| w.deadline.is_none_or(|d| d > now))
    }

    /// The mode of a queued waiter.
    pub(in crate::state) fn mode_of(&self, id: WaiterId) -> Mode {
        self.kinds
            .modes
            .iter()
            .find(|(w, _)| *w == id)
            .map_or(Mode::Exclusive, |(_, m)| *m)
    }

    /// True if a hold in `mode` fits beside the current shared or semaphore holders (the
    /// caller has checked that no exclusive lease is held).
    pub(in crate::state) fn admits(&self, mode: Mode) -> bool {
        let k = &self.kinds;
        match mode {
            Mode::Exclusive => k.holders.is_empty(),
            Mode::Shared => k.holders.is_empty() || k.mode == Some(Mode::Shared),
            Mode::Semaphore(n) => {
                k.holders.is_empty()
                    || (matches!(k.mode, Some(Mode::Semaphore(_))) && k.holders.len() < n as usize)
            }
        }
    }

    /// Drops the modes and MLOCK keys of waiters no longer queued.
    pub(in crate::state) fn tidy(&mut self) {
        let queue = &self.queue;
        self.kinds
            .modes
            .retain(|(id, _)| queue.iter().any(|w| w.id == *id));
        self.groups
            .retain(|(id, _)| queue.iter().any(|w| w.id == *id));
        if self.kinds.holders.is_empty() {
            self.kinds.mode = None;
        }
    }
}

/// What a lock event reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockEventKind {
    /// The lock was granted (at once, or to a waiter).
    Granted,
    /// The holder released it (UNLOCK), or a grant to a gone client was released.
    Released,
    /// The lease ran out.
    Expired,
    /// The holder renewed it (RENEW, or LOCK again by the same owner).
    Renewed,
}

impl LockEventKind {
    /// The event's name in keyspace notifications.
    pub fn name(self) -> &'static str {
        match self {
            LockEventKind::Granted => "lock_granted",
            LockEventKind::Released => "lock_released",
            LockEventKind::Expired => "lock_expired",
            LockEventKind::Renewed => "lock_renewed",
        }
    }
}

/// A lock event as a keyspace notification: (channel, message) pairs. The keyspace channel
/// carries the event with the lease's token and owner; the keyevent channel carries the key,
/// as Redis's keyevent channels do.
pub fn lock_notifications(
    kind: LockEventKind,
    key: &[u8],
    token: u64,
    owner: &[u8],
) -> [(Bytes, Bytes); 2] {
    let name = kind.name();
    let mut keyspace = b"__keyspace@0__:".to_vec();
    keyspace.extend_from_slice(key);
    let mut message = format!("{name} {token} ").into_bytes();
    message.extend_from_slice(owner);
    [
        (Bytes::from(keyspace), Bytes::from(message)),
        (
            Bytes::from(format!("__keyevent@0__:{name}")),
            Bytes::copy_from_slice(key),
        ),
    ]
}
