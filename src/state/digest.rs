//! A digest of the whole replicated state: two replicas that applied the same log agree on
//! it byte for byte, with or without a snapshot install or a restart in between
//! (design.md section 9, "Replicas agree"). `RAFT.DIGEST` and `DEBUG DIGEST` show it.
//!
//! It is SHA-1 (Redis's `DEBUG DIGEST` is 40 hex digits too) over a defined encoding of every
//! part of the state, each part in sorted order: the revision, the cluster clock, every
//! stored entry (value, deadline, token, `modified`; expired entries not yet evicted
//! included, as they are state until an eviction entry removes them), the fences, the lock
//! queues and lock-delays, the blocked-pop queues, the script cache and budget, and the ACL
//! users. The parts are all B-tree maps or ordered collections, so nothing depends on a hash
//! order or an address. Hash fields and set members are taken in their stored order, which
//! is replicated state (HKEYS and SPOP depend on it).
//!
//! The encoding: every integer is 8 bytes big-endian, every byte string is its length then
//! its bytes, every collection its length then its items, and each part and each kind of
//! value has an explicit tag below (never a Rust declaration order). What is local to a node
//! is left out: the counts and indexes rebuilt on load, pending changes, recorded events,
//! this node's notification flags and the users' change generation.
//!
//! Cost: one pass over the state under the caller's lock (SHA-1 runs at several hundred
//! MB/s, so about a second for a million locks on the reference machine).

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use sha1::{Digest as _, Sha1};

use super::acl::{KeyPattern, User};
use super::keyspace::{Entry, Keyspace, Value};
use super::locks::{Holder, Kinds, LockMeta, Mode, Waiter, WaiterId};
use super::popq::{PopKind, PopWaiter};
use super::ClusterClock;

/// A digest: 20 bytes of SHA-1.
pub type StateDigest = [u8; 20];

/// The version of the encoding below; changing the encoding changes it.
const DIGEST_VERSION: u64 = 1;

/// The tag in front of each part of the state.
mod part {
    pub const REVISION: u8 = 1;
    pub const CLOCK: u8 = 2;
    pub const ENTRIES: u8 = 3;
    pub const FENCES: u8 = 4;
    pub const LOCKS: u8 = 5;
    pub const POPS: u8 = 6;
    pub const SCRIPTS: u8 = 7;
    pub const USERS: u8 = 8;
}

/// The tag in front of each kind of value.
mod kind {
    pub const STRING: u8 = 1;
    pub const HASH: u8 = 2;
    pub const LIST: u8 = 3;
    pub const SET: u8 = 4;
    pub const ZSET: u8 = 5;
}

/// The hasher with the encoding's primitives.
struct Feed(Sha1);

impl Feed {
    fn tag(&mut self, t: u8) {
        self.0.update([t]);
    }

    fn u64(&mut self, n: u64) {
        self.0.update(n.to_be_bytes());
    }

    fn bool(&mut self, b: bool) {
        self.tag(u8::from(b));
    }

    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.update(b);
    }

    fn len(&mut self, n: usize) {
        self.u64(n as u64);
    }

    fn opt_u64(&mut self, n: Option<u64>) {
        match n {
            None => self.tag(0),
            Some(n) => {
                self.tag(1);
                self.u64(n);
            }
        }
    }

    fn finish(self) -> StateDigest {
        self.0.finalize().into()
    }

    fn clock(&mut self, c: &ClusterClock) {
        let ClusterClock {
            term,
            boot,
            offset,
            now,
        } = *c;
        self.u64(term);
        self.u64(boot);
        self.u64(offset as u64);
        self.u64(now);
    }

    fn value(&mut self, v: &Value) {
        match v {
            Value::Str(s) => {
                self.tag(kind::STRING);
                self.bytes(s);
            }
            Value::Hash(h) => {
                self.tag(kind::HASH);
                self.len(h.len());
                for (f, v) in h.iter() {
                    self.bytes(f);
                    self.bytes(v);
                }
            }
            Value::List(l) => {
                self.tag(kind::LIST);
                self.len(l.len());
                l.iter().for_each(|e| self.bytes(e));
            }
            Value::Set(s) => {
                self.tag(kind::SET);
                self.len(s.len());
                s.iter().for_each(|m| self.bytes(m));
            }
            Value::ZSet(z) => {
                self.tag(kind::ZSET);
                self.len(z.len());
                for (m, score) in z.iter() {
                    self.bytes(m);
                    self.u64(score.to_bits());
                }
            }
        }
    }

    fn entry(&mut self, e: &Entry) {
        // Destructured, so that a new field is a compile error here until it is digested.
        let Entry {
            value,
            expire_at,
            token,
            modified,
        } = e;
        self.value(value);
        self.opt_u64(*expire_at);
        self.u64(*token);
        self.u64(*modified);
    }

    fn waiter_id(&mut self, id: &WaiterId) {
        let WaiterId { node, boot, seq } = *id;
        self.u64(node);
        self.u64(boot);
        self.u64(seq);
    }

    fn lock_meta(&mut self, m: &LockMeta) {
        let LockMeta {
            queue,
            delay,
            blocked_until,
            kinds,
            groups,
        } = m;
        self.len(queue.len());
        for w in queue {
            let Waiter {
                id,
                owner,
                ttl_ms,
                delay_ms,
                deadline,
            } = w;
            self.waiter_id(id);
            self.bytes(owner);
            self.u64(*ttl_ms);
            self.u64(*delay_ms);
            self.opt_u64(*deadline);
        }
        match delay {
            None => self.tag(0),
            Some((token, ms)) => {
                self.tag(1);
                self.u64(*token);
                self.u64(*ms);
            }
        }
        self.u64(*blocked_until);
        // Shared and semaphore holds: fed only when present, so that a record without them
        // digests as it did before they existed.
        if *kinds != Kinds::default() {
            self.tag(2);
            self.len(kinds.modes.len());
            for (id, mode) in &kinds.modes {
                self.waiter_id(id);
                self.mode(*mode);
            }
            match kinds.mode {
                None => self.tag(0),
                Some(m) => {
                    self.tag(1);
                    self.mode(m);
                }
            }
            self.len(kinds.holders.len());
            for h in &kinds.holders {
                let Holder {
                    owner,
                    token,
                    expire_at,
                    renewed,
                } = h;
                self.bytes(owner);
                self.u64(*token);
                self.u64(*expire_at);
                self.bool(*renewed);
            }
        }
        // MLOCK waiters' keys: fed only when present, as `kinds` are.
        if !groups.is_empty() {
            self.tag(3);
            self.len(groups.len());
            for (id, keys) in groups {
                self.waiter_id(id);
                self.len(keys.len());
                for k in keys {
                    self.bytes(k);
                }
            }
        }
    }

    fn mode(&mut self, m: Mode) {
        match m {
            Mode::Exclusive => self.tag(0),
            Mode::Shared => self.tag(1),
            Mode::Semaphore(n) => {
                self.tag(2);
                self.u64(u64::from(n));
            }
        }
    }

    fn pop_queue(&mut self, q: &VecDeque<PopWaiter>) {
        self.len(q.len());
        for w in q {
            let PopWaiter {
                id,
                kind,
                deadline,
                cmd,
                keys,
            } = w;
            self.waiter_id(id);
            self.tag(match kind {
                PopKind::List => 1,
                PopKind::ZSet => 2,
            });
            self.opt_u64(*deadline);
            self.bytes(cmd);
            self.len(keys.len());
            keys.iter().for_each(|k| self.bytes(k));
        }
    }

    fn user(&mut self, u: &User) {
        let User {
            enabled,
            nopass,
            sanitize,
            passwords,
            keys,
            channels,
            all_commands,
            rules,
        } = u;
        self.bool(*enabled);
        self.bool(*nopass);
        self.tag(match sanitize {
            None => 0,
            Some(false) => 1,
            Some(true) => 2,
        });
        self.len(passwords.len());
        passwords.iter().for_each(|p| self.bytes(p.as_bytes()));
        self.len(keys.len());
        for k in keys {
            let KeyPattern {
                pattern,
                read,
                write,
            } = k;
            self.bytes(pattern);
            self.bool(*read);
            self.bool(*write);
        }
        self.len(channels.len());
        channels.iter().for_each(|c| self.bytes(c));
        self.bool(*all_commands);
        self.len(rules.len());
        rules.iter().for_each(|r| self.bytes(r.as_bytes()));
    }

    /// A part: its tag, its length, then each (key, item) in key order.
    fn part<K: AsRef<[u8]>, V>(
        &mut self,
        tag: u8,
        map: &BTreeMap<K, V>,
        mut item: impl FnMut(&mut Self, &V),
    ) {
        self.tag(tag);
        self.len(map.len());
        for (k, v) in map {
            self.bytes(k.as_ref());
            item(self, v);
        }
    }
}

impl Keyspace {
    /// The digest of the whole replicated state (see the module docs for what it covers).
    pub fn digest(&self) -> StateDigest {
        let mut f = Feed(Sha1::new());
        f.u64(DIGEST_VERSION);
        f.tag(part::REVISION);
        f.u64(self.revision());
        f.tag(part::CLOCK);
        f.clock(self.clock());
        f.part(part::ENTRIES, self.entries(), Feed::entry);
        f.part(part::FENCES, self.fences(), |f, n| f.u64(*n));
        f.part(part::LOCKS, self.lock_metas(), Feed::lock_meta);
        f.part(part::POPS, self.pop_queues(), Feed::pop_queue);
        f.part(part::SCRIPTS, self.scripts(), |f, body: &Bytes| {
            f.bytes(body)
        });
        f.u64(self.script_budget_setting());
        f.part(part::USERS, self.users().stored(), Feed::user);
        f.finish()
    }

    /// The digest of the value stored at `key` (its value only, as Redis's
    /// `DEBUG DIGEST-VALUE`: equal values give equal digests), or `None` if nothing is
    /// stored there. An expired entry not yet evicted is still stored.
    pub fn digest_value(&self, key: &[u8]) -> Option<StateDigest> {
        let e = self.entries().get(key)?;
        let mut f = Feed(Sha1::new());
        f.u64(DIGEST_VERSION);
        f.value(&e.value);
        Some(f.finish())
    }
}
