//! The workloads: the lock cycle (own keys or 4 hot keys), a read-heavy mix and a pipelined
//! cycle, each for Palisade (LOCK/FENCEDSET/UNLOCK) and for Redis (SET NX PX, SET, and an
//! EVALSHA compare-and-delete release); the two lock cycles also for etcd (see [`crate::etcd`])
//! and for Redlock over three Redis servers (the same commands on every server, a majority
//! needed, as redsync and node-redlock do).

use anyhow::bail;
use redis_protocol::resp2::types::OwnedFrame;

use crate::client::{int, is_error, Client};
use crate::etcd;

/// Which protocol family a target speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Palisade's own lock commands.
    Palisade,
    /// Plain Redis: SET NX PX + Lua release.
    Redis,
    /// etcd v3.4 through its JSON gateway: txn on create_revision, put, txn on value.
    Etcd,
    /// Redlock over several independent Redis servers: Redis's cycle sent to all of them,
    /// the lock held when a majority granted it.
    Redlock,
}

/// A client's connection to its target.
pub enum Conn {
    /// RESP, for Palisade and Redis.
    Resp(Client),
    /// An HTTP session with a lease, for etcd.
    Etcd(etcd::Session),
    /// One connection per Redis server, for Redlock.
    Redlock(Vec<Client>),
}

impl Conn {
    /// Connects to a target of kind `kind` at `addr`. An etcd session grants itself a lease of
    /// `lease_secs`, which must outlast the client. A Redlock `addr` lists its servers,
    /// separated by commas.
    pub async fn connect(kind: Kind, addr: &str, lease_secs: u64) -> anyhow::Result<Conn> {
        Ok(match kind {
            Kind::Palisade | Kind::Redis => Conn::Resp(Client::connect(addr).await?),
            Kind::Etcd => Conn::Etcd(etcd::Session::start(addr, lease_secs).await?),
            Kind::Redlock => {
                let mut servers = Vec::new();
                for a in addr.split(',') {
                    servers.push(Client::connect(a).await?);
                }
                Conn::Redlock(servers)
            }
        })
    }
}

/// What each client does in a loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// LOCK -> FENCEDSET -> UNLOCK on the client's own keys.
    Cycle,
    /// The same on 4 keys shared by all clients (contended).
    Hot,
    /// 9 GETs for every SET.
    Read,
    /// `depth` cycles at a time, each step pipelined.
    Pipeline(usize),
}

/// Redis's compare-and-delete release (what lock libraries run).
pub const RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/// Per-client state.
pub struct Worker {
    /// Client number.
    pub id: usize,
    /// Target kind.
    pub kind: Kind,
    /// The workload.
    pub workload: Workload,
    /// SHA of [`RELEASE`] on Redis targets.
    pub release_sha: Vec<u8>,
    /// Iteration counter (key rotation).
    pub n: u64,
}

/// The outcome of one step: how many operations completed, and how many were refused
/// (contention) or failed.
#[derive(Default, Debug, Clone, Copy)]
pub struct Step {
    /// Completed operations (cycles, or reads/writes for the read mix).
    pub done: u64,
    /// Lock attempts refused because another client held the lock.
    pub busy: u64,
    /// Error replies.
    pub errors: u64,
}

impl Worker {
    fn key(&self, i: u64) -> String {
        match self.workload {
            Workload::Hot => format!("bench:hot:{}", (self.n + i) % 4),
            _ => format!("bench:{}:{}", self.id, (self.n + i) % 1024),
        }
    }

    /// Runs one step of the workload. etcd runs the cycle and hot workloads only.
    pub async fn step(&mut self, c: &mut Conn) -> anyhow::Result<Step> {
        self.n += 1;
        match (c, self.workload) {
            (Conn::Resp(c), Workload::Cycle | Workload::Hot) => self.cycles(c, 1).await,
            (Conn::Resp(c), Workload::Pipeline(depth)) => self.cycles(c, depth).await,
            (Conn::Resp(c), Workload::Read) => self.read_mix(c).await,
            (Conn::Etcd(s), Workload::Cycle | Workload::Hot) => {
                let owner = format!("owner-{}-{}", self.id, self.n);
                s.cycle(&self.key(0), &owner).await
            }
            (Conn::Etcd(_), w) => {
                bail!("etcd targets run the cycle and hot workloads only, not {w:?}")
            }
            (Conn::Redlock(servers), Workload::Cycle | Workload::Hot) => {
                self.redlock_cycle(servers).await
            }
            (Conn::Redlock(_), w) => {
                bail!("redlock targets run the cycle and hot workloads only, not {w:?}")
            }
        }
    }

    /// The RESP lock cycles: Palisade's commands, or Redis's (etcd never comes here).
    async fn cycles(&mut self, c: &mut Client, depth: usize) -> anyhow::Result<Step> {
        let owner = format!("owner-{}-{}", self.id, self.n);
        let keys: Vec<String> = (0..depth as u64).map(|i| self.key(i * 7919)).collect();
        let mut step = Step::default();
        // 1. acquire
        for k in &keys {
            match self.kind {
                Kind::Palisade => {
                    c.queue(&[b"LOCK", k.as_bytes(), owner.as_bytes(), b"PX", b"10000"])
                }
                Kind::Redis | Kind::Etcd | Kind::Redlock => queue_acquire(c, k, &owner),
            }
        }
        let grants = c.flush(keys.len()).await?;
        let mut held = Vec::new();
        for (k, g) in keys.iter().zip(&grants) {
            let token = match (self.kind, g) {
                (Kind::Palisade, f) => int(f),
                (Kind::Redis, OwnedFrame::SimpleString(_)) => Some(0),
                _ => None,
            };
            match token {
                Some(t) => held.push((k.clone(), t)),
                None if is_error(g) => step.errors += 1,
                None => step.busy += 1,
            }
        }
        if held.is_empty() {
            return Ok(step);
        }
        // 2. write the resource
        for (k, t) in &held {
            let res = format!("res:{k}");
            match self.kind {
                Kind::Palisade => c.queue(&[
                    b"FENCEDSET",
                    res.as_bytes(),
                    b"value",
                    t.to_string().as_bytes(),
                ]),
                Kind::Redis | Kind::Etcd | Kind::Redlock => {
                    c.queue(&[b"SET", res.as_bytes(), b"value"])
                }
            }
        }
        let writes = c.flush(held.len()).await?;
        step.errors += writes.iter().filter(|w| is_error(w)).count() as u64;
        // 3. release
        for (k, _) in &held {
            match self.kind {
                Kind::Palisade => c.queue(&[b"UNLOCK", k.as_bytes(), owner.as_bytes()]),
                Kind::Redis | Kind::Etcd | Kind::Redlock => c.queue(&[
                    b"EVALSHA",
                    &self.release_sha,
                    b"1",
                    k.as_bytes(),
                    owner.as_bytes(),
                ]),
            }
        }
        let releases = c.flush(held.len()).await?;
        step.errors += releases.iter().filter(|r| is_error(r)).count() as u64;
        step.done += held.len() as u64;
        Ok(step)
    }

    /// One Redlock cycle: SET NX PX on every server at once, held if a majority granted it;
    /// then the data write on the servers that granted it (Redis's cycle writes its resource
    /// on the one server; here each granting server holds a copy), then the compare-and-delete
    /// release on every server, as redsync and node-redlock release (also after a failed
    /// acquire, which clears the minority that did grant).
    async fn redlock_cycle(&mut self, servers: &mut [Client]) -> anyhow::Result<Step> {
        let owner = format!("owner-{}-{}", self.id, self.n);
        let k = self.key(0);
        let res = format!("res:{k}");
        let mut step = Step::default();
        // 1. acquire on all
        let grants = on_all(servers, |_, c| {
            queue_acquire(c, &k, &owner);
            true
        })
        .await?;
        let granted: Vec<bool> = grants
            .iter()
            .map(|g| matches!(g, Some(OwnedFrame::SimpleString(_))))
            .collect();
        step.errors += grants.iter().flatten().filter(|g| is_error(g)).count() as u64;
        let held = granted.iter().filter(|g| **g).count() > servers.len() / 2;
        // 2. write the resource where the lock is held
        if held {
            let writes = on_all(servers, |i, c| {
                if granted[i] {
                    c.queue(&[b"SET", res.as_bytes(), b"value"]);
                }
                granted[i]
            })
            .await?;
            step.errors += writes.iter().flatten().filter(|w| is_error(w)).count() as u64;
        }
        // 3. release on all
        let releases = on_all(servers, |_, c| {
            c.queue(&[
                b"EVALSHA",
                &self.release_sha,
                b"1",
                k.as_bytes(),
                owner.as_bytes(),
            ]);
            true
        })
        .await?;
        step.errors += releases.iter().flatten().filter(|r| is_error(r)).count() as u64;
        if held {
            step.done += 1;
        } else {
            step.busy += 1;
        }
        Ok(step)
    }

    async fn read_mix(&mut self, c: &mut Client) -> anyhow::Result<Step> {
        let k = format!("res:{}", self.key(0));
        let reply = if self.n.is_multiple_of(10) {
            c.call(&[b"SET", k.as_bytes(), b"value"]).await?
        } else {
            c.call(&[b"GET", k.as_bytes()]).await?
        };
        Ok(Step {
            done: 1,
            busy: 0,
            errors: is_error(&reply) as u64,
        })
    }
}

/// Queues Redis's acquire of `key` for `owner`: SET NX PX 10000.
fn queue_acquire(c: &mut Client, key: &str, owner: &str) {
    c.queue(&[
        b"SET",
        key.as_bytes(),
        owner.as_bytes(),
        b"NX",
        b"PX",
        b"10000",
    ]);
}

/// Queues a command on each server that `queue(index, client)` says it queued one on, sends
/// them all before reading any reply (the servers work at once), then reads one reply per
/// server (None where nothing was sent).
async fn on_all(
    servers: &mut [Client],
    mut queue: impl FnMut(usize, &mut Client) -> bool,
) -> anyhow::Result<Vec<Option<OwnedFrame>>> {
    let mut sent = Vec::with_capacity(servers.len());
    for (i, c) in servers.iter_mut().enumerate() {
        let queued = queue(i, c);
        if queued {
            c.send().await?;
        }
        sent.push(queued);
    }
    let mut replies = Vec::with_capacity(servers.len());
    for (c, queued) in servers.iter_mut().zip(sent) {
        replies.push(if queued {
            c.receive(1).await?.pop()
        } else {
            None
        });
    }
    Ok(replies)
}
