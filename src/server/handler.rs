//! The leader's side of forwarding: client work that followers send over the peer port.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::{admin, errors, replicas, Shared};
use crate::cmd::{Command, ConnCmd, Request};
use crate::raft::service::{BoxFuture, ClientHandler};
use crate::resp::Reply;

/// Runs client work that followers forward to this node.
pub(super) struct Handler {
    /// The server the work runs on.
    pub(super) shared: Arc<Shared>,
}

impl ClientHandler for Handler {
    fn forward(
        &self,
        write: bool,
        cmds: Vec<Command>,
        users: Vec<Option<String>>,
    ) -> BoxFuture<Vec<Reply>> {
        let shared = self.shared.clone();
        Box::pin(async move {
            if users.len() != cmds.len() {
                let bad = Reply::err("ERR internal: a forwarded batch without its users");
                return vec![bad; cmds.len()];
            }
            let deadline =
                tokio::time::Instant::now() + Duration::from_millis(shared.config.write_timeout_ms);
            // Each command is checked against its user here, on the leader, before it runs:
            // forwarding is no way around ACLs.
            let receivers: Vec<_> = cmds
                .into_iter()
                .zip(users)
                .map(
                    |(c, user)| match shared.check_forwarded(user.as_deref(), &c) {
                        Some(refused) => Err(refused),
                        None if write => Ok(shared.proposer.submit_forwarded(c)),
                        None => Ok(shared.reader.submit(c)),
                    },
                )
                .collect();
            let mut replies = Vec::with_capacity(receivers.len());
            for rx in receivers {
                let rx = match rx {
                    Ok(rx) => rx,
                    Err(refused) => {
                        replies.push(refused);
                        continue;
                    }
                };
                replies.push(match tokio::time::timeout_at(deadline, rx).await {
                    Ok(Ok(r)) => r,
                    Ok(Err(_)) => {
                        Reply::err("TRYAGAIN the leader stopped while serving a forwarded command")
                    }
                    Err(_) if write => errors::write_timeout(),
                    Err(_) => Reply::err("TIMEOUT read did not complete before the deadline"),
                });
            }
            replies
        })
    }

    fn admin(&self, argv: Vec<Bytes>) -> BoxFuture<Reply> {
        let shared = self.shared.clone();
        Box::pin(async move {
            // A follower forwards RAFT.* admin commands and WAIT (see `replicas`).
            match crate::cmd::parse(argv) {
                Ok(Request::Admin(cmd)) => admin::execute_local(&shared, cmd).await,
                Ok(Request::Conn(ConnCmd::Wait(w))) => replicas::wait_local(&shared, w).await,
                Ok(_) => Reply::err("ERR not an admin command"),
                Err(reply) => reply,
            }
        })
    }
}
