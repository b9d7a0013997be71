//! BZPOPMIN/BZPOPMAX/BZMPOP: the same wait as BLPOP's (`blocking.rs`), for sorted sets: pop
//! now if possible; otherwise wait for one of the keys to be touched on this node (ZADD,
//! a store), then try again, until the timeout (a null array).

use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use super::super::stream::ClientStream;
use super::{await_write, Session};
use crate::cmd::bzpop::BZPop;
use crate::cmd::Command;
use crate::resp::Reply;
use crate::state::Event;

impl Session {
    /// Runs a blocking sorted-set pop until it pops, times out or the client leaves.
    pub(super) async fn blocking_zpop(&mut self, pop: BZPop, stream: &mut ClientStream) -> Reply {
        let until =
            (pop.timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(pop.timeout_ms));
        // Subscribe before the first attempt, so a write applied after it is never missed.
        let Some(mut events) = self
            .shared
            .state
            .read()
            .ok()
            .map(|st| st.events.subscribe())
        else {
            return Reply::err("ERR internal: state lock poisoned");
        };
        let mut watch_peer = true;
        let shared = self.shared.clone();
        let mut blocked = None;
        loop {
            let rx = self
                .shared
                .proposer
                .submit_as(self.user.clone(), Command::BZPop(pop.clone()));
            let reply = await_write(rx, self.write_deadline()).await;
            if !matches!(reply, Reply::NilArray) {
                return reply;
            }
            blocked.get_or_insert_with(|| shared.clients.block(self.id));
            loop {
                let timeout = async {
                    match until {
                        Some(t) => tokio::time::sleep_until(t).await,
                        None => std::future::pending().await,
                    }
                };
                let mut probe = [0u8; 1];
                tokio::select! {
                    ev = events.recv() => match ev {
                        Ok(Event::Touched(k)) if pop.keys().contains(&k) => break,
                        Ok(_) => {}
                        Err(RecvError::Lagged(_)) => break,
                        Err(RecvError::Closed) => return Reply::err("ERR server is shutting down"),
                    },
                    _ = timeout => return Reply::NilArray,
                    _ = self.stop.changed() => return Reply::err("ERR server is shutting down"),
                    r = stream.peek(&mut probe), if watch_peer => match r {
                        Ok(0) | Err(_) => return Reply::NilArray,
                        Ok(_) => watch_peer = false,
                    },
                }
            }
        }
    }
}
