//! Faults: a seeded schedule of them, and how each is applied to a running cluster and
//! healed. One node fault is active at a time (Jepsen's start/stop nemesis); client pauses
//! run on their own timer, alongside (see `run`).

use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::common::cluster::Cluster;
use crate::common::{encode, Conn};

/// The kinds of node and network fault.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// kill -9 of a node (the leader half of the time), restarted when the fault ends.
    Kill,
    /// SIGSTOP of a node (the leader half of the time), SIGCONT when the fault ends.
    PauseNode,
    /// Cut the cluster into a majority and a minority at random.
    Partition,
    /// Cut the leader off from everyone.
    IsolateLeader,
    /// Two halves that can only talk through one bridge node.
    Bridge,
    /// Add latency to every peer RPC.
    Delay,
    /// Replace a member: RAFT.NODE REMOVE it, then RAFT.NODE ADD a fresh node.
    Replace,
    /// Kill a follower, let the log move past a snapshot, restart it and kill it again
    /// while it catches up (installs the snapshot), then restart it for good.
    SnapshotCrash,
    /// SIGSTOP of a client process (scheduled separately from node faults).
    PauseClient,
}

impl Kind {
    /// Every node/network fault kind.
    pub const NODE_FAULTS: [Kind; 8] = [
        Kind::Kill,
        Kind::PauseNode,
        Kind::Partition,
        Kind::IsolateLeader,
        Kind::Bridge,
        Kind::Delay,
        Kind::Replace,
        Kind::SnapshotCrash,
    ];
}

/// One scheduled fault.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Planned {
    /// Start, ms after the run began.
    pub at_ms: u64,
    /// How long it stays active, ms.
    pub dur_ms: u64,
    /// What it is.
    pub kind: Kind,
    /// A random number that picks targets at run time (members change during a run).
    pub pick: u64,
}

/// A fault as it happened: the schedule entry plus the nodes it hit and its real window.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Applied {
    /// What it was.
    pub kind: Kind,
    /// Start and end, µs after the run began.
    pub start_us: u64,
    /// End of the window.
    pub end_us: u64,
    /// What it did, in words (nodes, groups, delay).
    pub detail: String,
}

/// The fault schedule for a run of `duration_ms` using `kinds`, from `seed` alone.
pub fn schedule(seed: u64, duration_ms: u64, kinds: &[Kind]) -> Vec<Planned> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    let mut t = 2_000;
    if kinds.is_empty() {
        return out;
    }
    loop {
        let kind = kinds[rng.gen_range(0..kinds.len())];
        let dur_ms = match kind {
            Kind::Replace | Kind::SnapshotCrash => 0,
            _ => rng.gen_range(1_500..5_000),
        };
        if t + dur_ms + 2_000 > duration_ms {
            return out;
        }
        out.push(Planned {
            at_ms: t,
            dur_ms,
            kind,
            pick: rng.gen(),
        });
        t += dur_ms + rng.gen_range(1_500..3_500);
        if matches!(kind, Kind::Replace | Kind::SnapshotCrash) {
            t += 6_000; // they take a few seconds of their own
        }
    }
}

/// The live cluster as the nemesis sees it: which node ids are members now.
pub struct Target<'a> {
    /// The processes.
    pub cluster: &'a mut Cluster,
    /// Current voters.
    pub members: Vec<u64>,
    /// `--snapshot-every` of the nodes.
    pub snapshot_every: u64,
}

/// Sends one command to node `id` with a short timeout; the reply text, or None.
pub fn admin(cluster: &Cluster, id: u64, args: &[&str], timeout: Duration) -> Option<String> {
    call_addr(cluster.addr(id), args, timeout)
}

/// Sends one command to the node at `addr`; the reply text, or None.
pub fn call_addr(addr: SocketAddr, args: &[&str], timeout: Duration) -> Option<String> {
    let mut c = Conn::try_connect_addr(addr).ok()?;
    c.stream_clone().set_read_timeout(Some(timeout)).ok()?;
    c.try_send_raw(&encode(args)).ok()?;
    let r = c.try_read_reply().ok()?;
    Some(String::from_utf8_lossy(&r).into_owned())
}

impl Target<'_> {
    /// The leader as the members report it (None if there is no agreement right now).
    fn leader(&self) -> Option<u64> {
        for id in &self.members {
            if self.cluster.info(*id, "role").as_deref() == Some("leader") {
                return Some(*id);
            }
        }
        None
    }

    /// The leader half of the time (when there is one), otherwise a random member.
    fn pick_node(&self, pick: u64) -> u64 {
        if pick.is_multiple_of(2) {
            if let Some(l) = self.leader() {
                return l;
            }
        }
        self.members[(pick / 2) as usize % self.members.len()]
    }

    /// Cuts every link between `a` and `b` (both directions, on both sides): blackhole
    /// routes in the nodes' namespaces with `CHAOS_NET=netns`, else the peer-transport hook.
    fn cut(&mut self, a: &[u64], b: &[u64]) {
        if let Some(net) = self.cluster.net.as_mut() {
            for x in a {
                for y in b {
                    net.cut(*x, *y);
                }
            }
            return;
        }
        for (side, other) in [(a, b), (b, a)] {
            let ids: Vec<String> = other.iter().map(u64::to_string).collect();
            for id in side {
                let mut args = vec!["RAFT.FAULT", "DROP"];
                args.extend(ids.iter().map(String::as_str));
                admin(self.cluster, *id, &args, Duration::from_secs(2));
            }
        }
    }

    /// Heals every network fault on every member.
    pub fn heal(&mut self) {
        if let Some(net) = self.cluster.net.as_mut() {
            net.heal();
        }
        // The hook's HEAL also ends a DELAY (which uses the hook with either network).
        for id in &self.members {
            admin(
                self.cluster,
                *id,
                &["RAFT.FAULT", "HEAL"],
                Duration::from_secs(2),
            );
        }
    }

    /// Applies `p`, keeps it for its duration, heals it; returns what it did.
    pub fn apply(&mut self, p: &Planned) -> String {
        let hold = Duration::from_millis(p.dur_ms);
        let mut rng = StdRng::seed_from_u64(p.pick);
        let mut shuffled = self.members.clone();
        shuffled.shuffle(&mut rng);
        match p.kind {
            Kind::Kill => {
                let id = self.pick_node(p.pick);
                self.cluster.kill9(id);
                thread::sleep(hold);
                self.cluster.restart(id);
                format!("kill -9 node {id}, restart")
            }
            Kind::PauseNode => {
                let id = self.pick_node(p.pick);
                self.cluster.signal(id, "STOP");
                thread::sleep(hold);
                self.cluster.signal(id, "CONT");
                format!("SIGSTOP node {id}")
            }
            Kind::Partition | Kind::IsolateLeader => {
                let minority_len = (self.members.len() - 1) / 2;
                let minority: Vec<u64> = match (p.kind, self.leader()) {
                    (Kind::IsolateLeader, Some(l)) => vec![l],
                    _ => shuffled[..minority_len.max(1)].to_vec(),
                };
                let majority: Vec<u64> = self
                    .members
                    .iter()
                    .copied()
                    .filter(|m| !minority.contains(m))
                    .collect();
                self.cut(&minority, &majority);
                thread::sleep(hold);
                self.heal();
                format!("partition {minority:?} | {majority:?}")
            }
            Kind::Bridge => {
                let half = shuffled.len() / 2;
                let bridge = shuffled[half];
                let (a, b) = (&shuffled[..half], &shuffled[half + 1..]);
                self.cut(a, b);
                thread::sleep(hold);
                self.heal();
                format!("bridge {a:?} - {bridge} - {b:?}")
            }
            Kind::Delay => {
                let ms = rng.gen_range(20..150).to_string();
                for id in &self.members {
                    admin(
                        self.cluster,
                        *id,
                        &["RAFT.FAULT", "DELAY", &ms],
                        Duration::from_secs(2),
                    );
                }
                thread::sleep(hold);
                self.heal();
                format!("peer RPC delay {ms} ms on every node")
            }
            Kind::Replace => self.replace(p.pick),
            Kind::SnapshotCrash => self.snapshot_crash(p.pick),
            Kind::PauseClient => String::new(),
        }
    }

    /// Sends an admin command to any member until one answers `+OK` (or time runs out).
    fn admin_until_ok(&self, args: &[&str], within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        let mut last = String::new();
        while Instant::now() < deadline {
            for id in &self.members {
                match admin(self.cluster, *id, args, Duration::from_secs(10)) {
                    Some(r) if r.starts_with("+OK") => return Ok(()),
                    Some(r) => last = r.trim_end().to_string(),
                    None => {}
                }
            }
            thread::sleep(Duration::from_millis(200));
        }
        Err(last)
    }

    fn replace(&mut self, pick: u64) -> String {
        let old = self.members[pick as usize % self.members.len()];
        let removed = self.admin_until_ok(
            &["RAFT.NODE", "REMOVE", &old.to_string()],
            Duration::from_secs(20),
        );
        if let Err(e) = removed {
            return format!("replace: REMOVE {old} failed: {e}");
        }
        self.members.retain(|m| *m != old);
        self.cluster.kill9(old);
        let new = self.cluster.spawn_joiner();
        let addr = self.cluster.peer_addr(new);
        let added = self.admin_until_ok(
            &["RAFT.NODE", "ADD", &new.to_string(), &addr],
            Duration::from_secs(30),
        );
        match added {
            Ok(()) => {
                self.members.push(new);
                format!("replace node {old} with node {new}")
            }
            Err(e) => format!("replace: removed {old}, ADD {new} failed: {e}"),
        }
    }

    fn snapshot_crash(&mut self, pick: u64) -> String {
        let leader = self.leader();
        let followers: Vec<u64> = self
            .members
            .iter()
            .copied()
            .filter(|m| Some(*m) != leader)
            .collect();
        let Some(&id) = followers.get(pick as usize % followers.len().max(1)) else {
            return "snapshot-crash: no follower".into();
        };
        self.cluster.kill9(id);
        // Let the others move past a snapshot (and purge the log behind it).
        let others: Vec<u64> = self.members.iter().copied().filter(|m| *m != id).collect();
        let start = others
            .iter()
            .map(|o| self.cluster.info_u64(*o, "last_log_index"))
            .max()
            .unwrap_or(0);
        let deadline = Instant::now() + Duration::from_secs(8);
        while Instant::now() < deadline {
            let now = others
                .iter()
                .map(|o| self.cluster.info_u64(*o, "last_log_index"))
                .max()
                .unwrap_or(0);
            if now > start + 2 * self.snapshot_every + 10 {
                break;
            }
            thread::sleep(Duration::from_millis(100));
        }
        let purged = others
            .iter()
            .map(|o| self.cluster.info_u64(*o, "purged_index"))
            .max()
            .unwrap_or(0);
        self.cluster.restart(id);
        let had = self.cluster.info_u64(id, "last_log_index");
        thread::sleep(Duration::from_millis(pick % 300));
        self.cluster.kill9(id);
        thread::sleep(Duration::from_millis(500));
        self.cluster.restart(id);
        let needs = if purged > had {
            "needed a snapshot"
        } else {
            "could catch up from the log"
        };
        format!(
            "kill -9 follower {id}; restart (its log ended at {had}, the others had purged up to \
             {purged}: it {needs}); kill -9 again {} ms into catch-up; restart",
            pick % 300
        )
    }
}
