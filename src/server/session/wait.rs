//! Between requests: wait for input, for a subscriber's next message, for its pending
//! output to drain, for the idle timeout, or for the server to stop.
//!
//! A subscriber's messages are queued in the session's own output buffer and written as
//! the socket takes them, so the node's event queue is drained at once however slowly the
//! client reads, and the buffer's length is the honest measure of what is pending for it
//! (Redis's output buffer). That length is checked against the pubsub class of
//! `client-output-buffer-limit` each time messages are queued.

use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::Instant;

use super::pubsub::OverLimit;
use super::Session;
use crate::server::stream::ClientStream;
use crate::state::Event;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What one step of socket I/O did.
enum Io {
    Read(usize),
    Wrote(usize),
    Flushed,
}

/// One cancel-safe step: write pending output if there is any, else flush what a partial
/// write left in the TLS layer, else read. Input is not read while output is pending: a
/// client that does not read what it is sent gets nothing done until it does.
async fn io_step(
    stream: &mut ClientStream,
    buf: &mut BytesMut,
    out: &[u8],
    unflushed: bool,
) -> std::io::Result<Io> {
    if !out.is_empty() {
        return stream.write(out).await.map(Io::Wrote);
    }
    if unflushed {
        stream.flush().await?;
        return Ok(Io::Flushed);
    }
    stream.read_buf(buf).await.map(Io::Read)
}

/// A monitor's next line; pending forever when not monitoring.
async fn next_line(feed: &mut Option<crate::server::monitor::Feed>) -> Result<bytes::Bytes, u64> {
    match feed {
        Some(f) => f.next().await,
        None => std::future::pending().await,
    }
}

impl Session {
    /// Queues a MONITOR line; false if the monitor fell so far behind that lines were lost.
    fn deliver_line(&mut self, line: Result<bytes::Bytes, u64>) -> bool {
        match line {
            Ok(line) => {
                self.out.extend_from_slice(&line);
                self.shared.stats.note_output(self.out.len());
                true
            }
            Err(lost) => {
                tracing::warn!(
                    lost,
                    "closing a monitor that fell behind the node's commands"
                );
                false
            }
        }
    }

    /// Waits for the next thing to do. Returns false when the connection is to close
    /// (the client left, was idle too long or passed its output limit, or the server stops).
    pub(super) async fn wait(
        &mut self,
        stream: &mut ClientStream,
        buf: &mut BytesMut,
        stop: &mut watch::Receiver<bool>,
    ) -> std::io::Result<bool> {
        let shared = self.shared.clone();
        let killed = self.killed.clone();
        if killed.is_set() {
            return Ok(false);
        }
        // Armed before the timeout is read, so a CONFIG SET timeout in between is not missed.
        let changed = shared.settings.live.timeout_changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let idle = self.idle_limit();
        let idle_at = self.last_io + idle.unwrap_or(Duration::from_secs(86_400));
        tokio::select! {
            io = io_step(stream, buf, &self.out, self.unflushed) => {
                let traffic = &shared.stats.traffic;
                match io? {
                    Io::Read(0) | Io::Wrote(0) => return Ok(false),
                    Io::Read(n) => {
                        traffic.input.fetch_add(n as u64, Ordering::Relaxed);
                        self.last_io = Instant::now();
                    }
                    Io::Wrote(n) => {
                        traffic.output.fetch_add(n as u64, Ordering::Relaxed);
                        self.out.advance(n);
                        self.unflushed = true;
                        self.last_io = Instant::now();
                    }
                    Io::Flushed => self.unflushed = false,
                }
            }
            event = self.pubsub.next_event() => return Ok(self.deliver(event)),
            line = next_line(&mut self.monitor) => return Ok(self.deliver_line(line)),
            _ = tokio::time::sleep_until(idle_at), if idle.is_some() => {
                if idle.is_some_and(|limit| self.last_io.elapsed() >= limit) {
                    tracing::info!(idle_secs = self.last_io.elapsed().as_secs(), "closing idle client (timeout)");
                    return Ok(false);
                }
            }
            _ = &mut changed => {}
            _ = killed.notify.notified() => return Ok(false),
            _ = stop.changed() => return Ok(false),
        }
        Ok(true)
    }

    /// How long this client may stay idle now (None: forever). Subscribers are exempt, as
    /// in Redis; blocked clients never get here while they wait.
    fn idle_limit(&self) -> Option<std::time::Duration> {
        if self.pubsub.active() || self.monitor.is_some() {
            return None;
        }
        self.shared.idle_timeout()
    }

    /// Queues the messages `event` makes for this subscriber; false if it must be closed:
    /// it passed its output limit, or fell so far behind that messages were lost to it.
    fn deliver(&mut self, event: Result<Arc<Event>, u64>) -> bool {
        let stats = &self.shared.stats;
        let event = match event {
            Ok(e) => e,
            Err(lost) => {
                tracing::warn!(
                    lost,
                    "closing a subscriber that fell behind the node's event queue"
                );
                stats
                    .output_limit_disconnections
                    .fetch_add(1, Ordering::Relaxed);
                return false;
            }
        };
        for msg in self.pubsub.messages(&event) {
            msg.encode(self.proto, &mut self.out);
        }
        let pending = self.out.len();
        stats.note_output(pending);
        let limit = self.shared.pubsub_output_limit();
        let Some(over) = self.pubsub.over_limit(pending, limit, Instant::now()) else {
            return true;
        };
        let which = match over {
            OverLimit::Hard => "hard",
            OverLimit::Soft => "soft",
        };
        tracing::warn!(
            pending,
            limit = which,
            hard = limit.hard,
            soft = limit.soft,
            soft_secs = limit.soft_secs,
            "client closed for overcoming of output buffer limits (pubsub class)"
        );
        stats
            .output_limit_disconnections
            .fetch_add(1, Ordering::Relaxed);
        false
    }
}
