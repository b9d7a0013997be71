//! The wait of a blocked client, one loop for `LOCK ... WAIT` (`session::lockwait`) and the
//! blocking pops (`session::blocking`): it ends when the waiter's outcome arrives, the wait
//! runs out, CLIENT UNBLOCK or CLIENT KILL picks the client, the client hangs up, or the
//! server stops. Each caller decides what each end means for its waiter ([`Wake`]).

use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::hangup::HangupWatch;
use super::Session;
use crate::resp::Reply;
use crate::server::clients::{Blocked, Clients, UnblockWait};
use crate::server::stream::ClientStream;

/// Why a blocked client stopped waiting.
#[derive(Debug, PartialEq)]
pub(super) enum Wake<O> {
    /// Its outcome arrived (`Err`: the registry dropped the waiter unanswered).
    Answer(Result<O, oneshot::error::RecvError>),
    /// Its wait ran out.
    Timeout,
    /// CLIENT UNBLOCK: true for `ERROR`, false for `TIMEOUT`.
    Unblocked(bool),
    /// CLIENT KILL, or the client hung up: its connection closes unanswered.
    Gone,
    /// The server is shutting down.
    Shutdown,
}

/// When a wait of `ms` milliseconds started now runs out (0: never).
pub(super) fn wait_until(ms: u64) -> Option<Instant> {
    (ms > 0).then(|| Instant::now() + Duration::from_millis(ms))
}

/// What a client woken by CLIENT UNBLOCK gets: its timeout reply, or Redis's error.
pub(super) fn unblock_reply(error: bool) -> Reply {
    if error {
        Reply::err("UNBLOCKED client unblocked via CLIENT UNBLOCK")
    } else {
        Reply::NilArray
    }
}

impl Session {
    /// Blocks until `outcome` arrives or the wait ends otherwise (see [`Wake`]). The client
    /// shows as blocked (CLIENT LIST `flags=b`, INFO blocked_clients) until the returned
    /// guard drops, so the caller keeps it while it settles the wait. Bytes the client sent
    /// meanwhile are kept for the session to parse next.
    pub(super) async fn block_on<'c, O>(
        &mut self,
        clients: &'c Clients,
        outcome: &mut oneshot::Receiver<O>,
        until: Option<Instant>,
        stream: &mut ClientStream,
    ) -> (Wake<O>, Blocked<'c>) {
        let switches = self.killed.clone();
        // Armed before the client is marked blocked, so no CLIENT UNBLOCK is missed.
        let mut unblock = UnblockWait::arm(switches.clone());
        let blocked = clients.block(self.id);
        let mut watch = HangupWatch::new(self.shared.limits().max_query_buffer);
        let timeout = async {
            match until {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        let wake = tokio::select! {
            o = outcome => Wake::Answer(o),
            error = unblock.wait() => Wake::Unblocked(error),
            _ = timeout => Wake::Timeout,
            _ = switches.notify.notified() => Wake::Gone,
            _ = self.stop.changed() => Wake::Shutdown,
            // A client that hangs up while it waits, even after sending more commands.
            () = watch.hung_up(stream) => Wake::Gone,
        };
        self.early_input
            .extend_from_slice(&watch.into_early_input());
        (wake, blocked)
    }
}
