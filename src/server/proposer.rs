//! Application-level batching of writes (docs/architecture.md, "Batching writes").
//!
//! Commands from any connection queue here; the proposer takes everything queued and
//! proposes it as one log entry (`Batch`), so one fsync serves many commands. Entries are
//! handed to openraft in queue order, which keeps each connection's pipeline in order. A
//! bounded number of batches may be in flight; while they are, the next batch grows.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::forward::{ForwardError, Leader, LeaderLink};

use crate::cmd::Command;
use crate::raft::{Batch, Raft};
use crate::raft_types::{Deliver, TypeConfig};
use crate::resp::Reply;
use openraft::raft::ClientWriteResult;

/// The reply to a forwarded write that reached a node that no longer leads: it was not
/// proposed, so a retry is safe.
pub const NOT_LEADER: &str =
    "TRYAGAIN leadership changed before the forwarded write was proposed; it was not applied";

/// Most commands in one log entry.
pub const MAX_BATCH: usize = 4096;
/// Most batches proposed but not yet applied. Under openraft 0.9 this was 2: its core synced
/// one entry at a time, so more, smaller batches only meant more syncs in a row. openraft
/// 0.10 submits an append without waiting for its sync and one sync completes every append
/// queued behind it, so more batches in flight overlap the leader's sync, the followers'
/// syncs and the round trips (docs/performance.md has the measurements).
pub const MAX_IN_FLIGHT: usize = 8;

/// A queued write.
struct Pending {
    cmd: Command,
    /// The ACL user the command runs for (None: the node's own work), for the leader's
    /// check when it is forwarded.
    user: Option<Arc<str>>,
    reply: oneshot::Sender<Reply>,
    /// Forwarded here by a follower that took this node for the leader: proposed here or
    /// refused, never forwarded again (see [`Proposer::submit_forwarded`]).
    forwarded: bool,
}

/// Counters the proposer keeps for INFO and housekeeping.
#[derive(Default, Debug)]
pub struct ProposerStats {
    /// Batches proposed.
    pub batches: AtomicU64,
    /// Commands proposed.
    pub commands: AtomicU64,
    /// Monotonic ms (see [`Clock`]) of the last proposal.
    pub last_proposal_ms: AtomicU64,
}

/// The process's monotonic clock, in ms since start. Leader timestamps come from here.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    epoch: Instant,
    /// Random id of this process; identifies the clock's origin in log entries.
    pub boot: u64,
    /// Test-only clock fault: a constant offset in ms (`--test-clock-offset-ms`).
    offset_ms: i64,
    /// Test-only clock fault: rate error in parts per million (`--test-clock-rate-ppm`).
    rate_ppm: i64,
}

impl Clock {
    /// Starts the clock.
    pub fn new() -> Clock {
        Clock::with_fault(0, 0)
    }

    /// Starts a clock that is off by `offset_ms` and runs fast (or slow, if negative) by
    /// `rate_ppm` parts per million. Only the chaos tests set these (clock faults).
    pub fn with_fault(offset_ms: i64, rate_ppm: i64) -> Clock {
        Clock {
            epoch: Instant::now(),
            boot: rand::random::<u64>() | 1,
            offset_ms,
            rate_ppm: rate_ppm.max(-999_999),
        }
    }

    /// Milliseconds since the clock started (monotonic).
    pub fn now_ms(&self) -> u64 {
        let real = self.epoch.elapsed().as_millis() as i64;
        let skewed = real + real * self.rate_ppm / 1_000_000 + self.offset_ms;
        skewed.max(0) as u64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// Handle for submitting writes.
#[derive(Clone)]
pub struct Proposer {
    tx: mpsc::UnboundedSender<Pending>,
    /// Shared counters.
    pub stats: Arc<ProposerStats>,
}

impl Proposer {
    /// Starts the proposer task.
    pub fn start(
        raft: Raft,
        clock: Clock,
        link: Arc<LeaderLink>,
        write_timeout: Duration,
    ) -> Proposer {
        let (tx, rx) = mpsc::unbounded_channel();
        let stats = Arc::new(ProposerStats::default());
        let open = Arc::new(Mutex::new(VecDeque::new()));
        tokio::spawn(watchdog(Arc::downgrade(&open)));
        tokio::spawn(run(
            rx,
            Ctx {
                raft,
                clock,
                stats: stats.clone(),
                link,
                write_timeout,
                open,
            },
        ));
        Proposer { tx, stats }
    }

    /// Queues one of the node's own writes; the receiver yields its reply once the entry is
    /// applied.
    pub fn submit(&self, cmd: Command) -> oneshot::Receiver<Reply> {
        self.submit_as(None, cmd)
    }

    /// Queues a client's write, sent by ACL user `user` (already checked on this node; the
    /// leader checks it again if it is forwarded).
    pub fn submit_as(&self, user: Option<Arc<str>>, cmd: Command) -> oneshot::Receiver<Reply> {
        self.queue(user, cmd, false)
    }

    /// Queues a write a follower forwarded to this node (its ACL user already checked
    /// here). If this node is no longer the leader when the write's batch is formed, the
    /// write is refused with [`NOT_LEADER`] rather than forwarded again: a second hop could
    /// deliver it after the follower has given up on it (and, say, cancelled a waiter it
    /// queued), or after a later write of the same connection that went straight to the new
    /// leader. A refused write was not proposed, so the client may simply retry.
    pub fn submit_forwarded(&self, cmd: Command) -> oneshot::Receiver<Reply> {
        self.queue(None, cmd, true)
    }

    fn queue(
        &self,
        user: Option<Arc<str>>,
        cmd: Command,
        forwarded: bool,
    ) -> oneshot::Receiver<Reply> {
        let (reply, rx) = oneshot::channel();
        // If the proposer has stopped, the dropped sender reports the failure to the caller.
        let _ = self.tx.send(Pending {
            cmd,
            user,
            reply,
            forwarded,
        });
        rx
    }
}

/// The ACL user of each queued command, as the Forward frame carries them.
fn forwarded_users(batch: &[Pending]) -> Vec<Option<String>> {
    batch
        .iter()
        .map(|p| p.user.as_deref().map(String::from))
        .collect()
}

fn drain(rx: &mut mpsc::UnboundedReceiver<Pending>, batch: &mut Vec<Pending>) {
    while batch.len() < MAX_BATCH {
        match rx.try_recv() {
            Ok(p) => batch.push(p),
            Err(_) => break,
        }
    }
}

/// What the proposer task needs.
struct Ctx {
    raft: Raft,
    clock: Clock,
    stats: Arc<ProposerStats>,
    link: Arc<LeaderLink>,
    write_timeout: Duration,
    /// Batches proposed here and not yet answered, oldest first, for [`watchdog`].
    open: Arc<Mutex<VecDeque<(Instant, Answer)>>>,
}

/// The clients of one proposed batch and its in-flight slot, until the batch is answered:
/// by its responder when openraft completes it, or by [`watchdog`] at its deadline,
/// whichever takes it first.
type Answer = Arc<Mutex<Option<(Vec<oneshot::Sender<Reply>>, OwnedSemaphorePermit)>>>;

/// How often [`watchdog`] looks for batches past their deadline.
const WATCHDOG_TICK: Duration = Duration::from_millis(100);

/// Fails the clients of every batch that openraft has not answered by its deadline, and
/// frees its slot, so that a leader that lost its quorum keeps answering (with the write
/// timeout error). One task per proposer that wakes every [`WATCHDOG_TICK`], not a task
/// per batch: a batch answered in time costs it nothing. Ends with the proposer.
async fn watchdog(open: std::sync::Weak<Mutex<VecDeque<(Instant, Answer)>>>) {
    let mut tick = tokio::time::interval(WATCHDOG_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(open) = open.upgrade() else {
            return;
        };
        let now = Instant::now();
        let mut late = Vec::new();
        if let Ok(mut open) = open.lock() {
            while let Some((deadline, answer)) = open.front() {
                let answered = answer.lock().map_or(true, |a| a.is_none());
                if !answered && *deadline > now {
                    break;
                }
                if !answered {
                    late.push(answer.clone());
                }
                open.pop_front();
            }
        }
        for answer in late {
            if let Some((senders, permit)) = take(&answer) {
                drop(permit);
                fail_all(senders, super::errors::write_timeout());
            }
        }
    }
}

/// Takes a batch's clients and slot, if nobody has answered it yet.
fn take(answer: &Answer) -> Option<(Vec<oneshot::Sender<Reply>>, OwnedSemaphorePermit)> {
    answer.lock().ok()?.take()
}

async fn run(mut rx: mpsc::UnboundedReceiver<Pending>, ctx: Ctx) {
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        drain(&mut rx, &mut batch);
        let Ok(permit) = slots.clone().acquire_owned().await else {
            break;
        };
        // Commands that arrived while we waited for a slot join this batch.
        drain(&mut rx, &mut batch);
        // Decided once: a batch forwarded without its users would skip the leader's check.
        let local = ctx.link.leader() == Leader::Me;
        if !local {
            // Writes forwarded to this node are never forwarded again.
            let (refused, rest): (Vec<_>, Vec<_>) = batch.into_iter().partition(|p| p.forwarded);
            for p in refused {
                let _ = p.reply.send(Reply::err(NOT_LEADER));
            }
            batch = rest;
            if batch.is_empty() {
                continue;
            }
        }
        let users = if local {
            Vec::new()
        } else {
            forwarded_users(&batch)
        };
        let (cmds, senders): (Vec<_>, Vec<_>) = batch.into_iter().map(|p| (p.cmd, p.reply)).unzip();
        if local {
            propose_local(&ctx, cmds, senders, permit).await;
            continue;
        }
        // Forward in order: the next batch waits for this one, so that a connection's
        // pipelined writes reach the leader in the order they were sent.
        let deadline = Instant::now() + ctx.write_timeout;
        match ctx.link.forward(true, &cmds, &users, deadline).await {
            Ok(replies) => deliver(senders, replies),
            Err(ForwardError::BecameLeader) => propose_local(&ctx, cmds, senders, permit).await,
            Err(ForwardError::Failed(reply)) => fail_all(senders, reply),
        }
    }
}

/// Proposes one batch on this node (the leader): resolves absolute times, stamps the
/// leader's clock, and hands the entry to openraft in queue order.
async fn propose_local(
    ctx: &Ctx,
    mut cmds: Vec<Command>,
    senders: Vec<oneshot::Sender<Reply>>,
    permit: OwnedSemaphorePermit,
) {
    let unix_now = crate::cmd::expiry::unix_now_ms();
    for cmd in &mut cmds {
        cmd.resolve_absolute_time(unix_now);
    }
    let ts = ctx.clock.now_ms();
    ctx.stats.batches.fetch_add(1, Ordering::Relaxed);
    ctx.stats
        .commands
        .fetch_add(cmds.len() as u64, Ordering::Relaxed);
    ctx.stats.last_proposal_ms.store(ts, Ordering::Relaxed);
    let n = cmds.len();
    let answer: Answer = Arc::new(Mutex::new(Some((senders, permit))));
    if let Ok(mut open) = ctx.open.lock() {
        open.push_back((Instant::now() + ctx.write_timeout, answer.clone()));
    }
    // Runs where openraft completes the write (inside the state machine's apply, for an
    // applied one), and hands each reply to its connection there.
    let responder = Deliver::new(move |outcome: Option<ClientWriteResult<TypeConfig>>| {
        let Some((senders, permit)) = take(&answer) else {
            return; // the watchdog answered first
        };
        drop(permit);
        match outcome {
            Some(Ok(resp)) if resp.data.0.len() == n => deliver(senders, resp.data.0),
            Some(Ok(_)) => fail_all(senders, Reply::err("ERR internal: reply count mismatch")),
            Some(Err(e)) => fail_all(senders, super::errors::client_write_error(&e)),
            None => fail_all(
                senders,
                Reply::err("TRYAGAIN write outcome unknown: raft dropped the request"),
            ),
        }
    });
    let batch = Batch {
        ts,
        boot: ctx.clock.boot,
        cmds,
    };
    // On an error the responder was dropped with the request and has told the clients.
    if let Err(fatal) = ctx.raft.client_write_ff(batch, Some(responder)).await {
        tracing::error!(error = %fatal, "raft stopped; failing queued writes");
    }
}

fn deliver(senders: Vec<oneshot::Sender<Reply>>, replies: Vec<Reply>) {
    for (tx, reply) in senders.into_iter().zip(replies) {
        let _ = tx.send(reply);
    }
}

fn fail_all(senders: Vec<oneshot::Sender<Reply>>, reply: Reply) {
    for tx in senders {
        let _ = tx.send(reply.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_batch(
        open: &Arc<Mutex<VecDeque<(Instant, Answer)>>>,
        slots: &Arc<Semaphore>,
        deadline: Instant,
    ) -> (Answer, oneshot::Receiver<Reply>) {
        let (tx, rx) = oneshot::channel();
        let permit = slots.clone().try_acquire_owned().expect("a free slot");
        let answer: Answer = Arc::new(Mutex::new(Some((vec![tx], permit))));
        open.lock().unwrap().push_back((deadline, answer.clone()));
        (answer, rx)
    }

    /// A batch nobody answers gets the write-timeout error once its deadline has passed,
    /// and its slot is freed; a batch answered in time is answered once, by its responder.
    #[tokio::test]
    async fn the_watchdog_fails_only_batches_left_unanswered_past_their_deadline() {
        let open = Arc::new(Mutex::new(VecDeque::new()));
        let slots = Arc::new(Semaphore::new(2));
        tokio::spawn(watchdog(Arc::downgrade(&open)));
        let now = Instant::now();
        let (answered, mut answered_rx) = open_batch(&open, &slots, now);
        let (_late, late_rx) = open_batch(&open, &slots, now + Duration::from_millis(150));
        assert_eq!(slots.available_permits(), 0);
        // The responder of the first takes it before the watchdog's first look.
        let (senders, permit) = take(&answered).expect("not answered yet");
        drop(permit);
        deliver(senders, vec![Reply::ok()]);
        let started = Instant::now();
        let reply = tokio::time::timeout(Duration::from_secs(2), late_rx)
            .await
            .expect("the watchdog answers within its tick")
            .expect("answered, not dropped");
        assert_eq!(reply, super::super::errors::write_timeout());
        assert!(
            started.elapsed() >= Duration::from_millis(100),
            "not before its deadline"
        );
        assert_eq!(
            answered_rx.try_recv().unwrap(),
            Reply::ok(),
            "answered once"
        );
        assert_eq!(slots.available_permits(), 2, "both slots are free");
        tokio::time::sleep(WATCHDOG_TICK * 2).await;
        assert!(open.lock().unwrap().is_empty(), "both left the queue");
    }

    /// A responder that openraft drops unanswered tells its clients the outcome is unknown.
    #[test]
    fn a_dropped_responder_reports_an_unknown_outcome() {
        let (tx, rx) = std::sync::mpsc::channel();
        let responder = Deliver::new(move |outcome: Option<ClientWriteResult<TypeConfig>>| {
            tx.send(outcome.is_none()).unwrap();
        });
        drop(responder);
        assert!(rx.recv().unwrap(), "told None once");
        assert!(rx.try_recv().is_err());
    }
}
