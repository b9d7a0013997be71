//! The replicated log's vocabulary: the entry payload ([`Batch`]), its reply, and openraft's
//! type configuration with the aliases built on it. Both `raft` (the consensus glue) and
//! `store` (the log and the state machine) use them; `raft` uses `store`, and `store` uses
//! this module, not `raft`, so the two do not import each other (docs/architecture.md).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::cmd::Command;
use crate::resp::Reply;

/// One log entry's payload: commands that arrived together, from any connections, and the
/// proposing leader's monotonic timestamp (ms). Apply never reads a clock; it uses `ts`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// Leader monotonic time in ms at proposal.
    pub ts: u64,
    /// Random id of the proposing leader process (its monotonic clock's origin).
    pub boot: u64,
    /// The commands, applied in order.
    pub cmds: Vec<Command>,
}

/// openraft logs entries with `Display`; a batch shows its size and stamp, not its contents.
impl fmt::Display for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "batch(cmds={}, ts={})", self.cmds.len(), self.ts)
    }
}

/// The replies of one batch, in command order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchReply(pub Vec<Reply>);

/// Palisade's openraft type configuration, written out rather than declared with
/// `declare_raft_types!` because that macro cannot name a generic responder. Everything but
/// `D`, `R` and the responder is what the macro would fill in: `u64` terms, the "advanced"
/// leader id (term, node id), `openraft::Entry`, tokio.
#[derive(Debug, Clone, Copy, Default, Eq, PartialEq, Ord, PartialOrd)]
pub struct TypeConfig {}

impl openraft::RaftTypeConfig for TypeConfig {
    type D = Batch;
    type R = BatchReply;
    type NodeId = u64;
    type Node = openraft::BasicNode;
    type Term = u64;
    type LeaderId = openraft::impls::leader_id_adv::LeaderId<u64, u64>;
    type Vote = openraft::impls::Vote<Self::LeaderId>;
    type Payload = openraft::EntryPayload<Batch, u64, openraft::BasicNode>;
    type Entry =
        openraft::Entry<<Self::LeaderId as openraft::vote::RaftLeaderId>::Committed, Self::Payload>;
    type AsyncRuntime = openraft::impls::TokioRuntime;
    type Responder<T>
        = Deliver<T>
    where
        T: openraft::OptionalSend + 'static;
    type Batch<T>
        = openraft::impls::InlineBatch<T>
    where
        T: openraft::OptionalSend + 'static;
    type ErrorSource = openraft::impls::BoxedErrorSource;
}

/// What becomes of a proposed write, told once: `Some(outcome)` when openraft completes it
/// (applied, or refused), `None` when openraft drops it unanswered.
pub type DeliverFn<T> = Box<dyn FnOnce(Option<T>) + Send>;

/// The responder of a client write: a function that openraft runs on the task that
/// completes the write, so that a batch's replies reach their connections from the
/// state machine's apply itself, with no task in between waiting on a channel (issue 25,
/// "a Responder that answers a batch's clients without a spawned task"). It must be quick
/// and must not block: it runs inside apply.
pub struct Deliver<T>(Option<DeliverFn<T>>);

impl<T> Deliver<T> {
    /// A responder that runs `f` with the outcome.
    pub fn new(f: impl FnOnce(Option<T>) + Send + 'static) -> Self {
        Deliver(Some(Box::new(f)))
    }
}

impl<T> fmt::Debug for Deliver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Deliver")
    }
}

impl<C, T> openraft::raft::responder::Responder<C, T> for Deliver<T>
where
    C: openraft::RaftTypeConfig,
    T: openraft::OptionalSend + 'static,
{
    fn on_complete(mut self, outcome: T) {
        if let Some(f) = self.0.take() {
            f(Some(outcome));
        }
    }
}

/// Dropped unanswered (openraft stopped, or lost the request): the function hears `None`.
impl<T> Drop for Deliver<T> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f(None);
        }
    }
}

/// Node id.
pub type NodeId = u64;
/// A node's address record in the membership.
pub type Node = openraft::BasicNode;
/// A log entry.
pub type Entry = openraft::alias::EntryOf<TypeConfig>;
/// A log id.
pub type LogId = openraft::alias::LogIdOf<TypeConfig>;
/// A vote.
pub type Vote = openraft::alias::VoteOf<TypeConfig>;
/// The membership as of a log id.
pub type StoredMembership = openraft::alias::StoredMembershipOf<TypeConfig>;
/// A snapshot's metadata.
pub type SnapshotMeta = openraft::alias::SnapshotMetaOf<TypeConfig>;

/// A log id from a term, the leader's node id and an index.
pub fn log_id(term: u64, node_id: NodeId, index: u64) -> LogId {
    openraft::LogId::new(
        openraft::impls::leader_id_adv::LeaderId { term, node_id },
        index,
    )
}
/// A snapshot: its metadata and the encoded image (see `store::snapshot`).
pub type Snapshot = openraft::alias::SnapshotOf<TypeConfig, Vec<u8>>;
