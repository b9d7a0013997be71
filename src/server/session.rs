//! One client connection: read requests, execute them in order, write replies in order.
//!
//! Pipelined requests are parsed together. Consecutive writes are submitted together (so they
//! can share a log entry) and consecutive reads likewise; a read never overtakes an earlier
//! write of the same connection, and connection commands see every earlier reply encoded.
//!
//! Submodules hold the session's other modes: [`pubsub`] (subscribed connections receive
//! the messages the local state machine applies), [`txn`] (MULTI queueing, WATCH) and
//! [`blocking`] (BLPOP and EXEC, which wait for replies inline). [`stats`] counts what INFO
//! reports about commands, errors and traffic.

mod acl;
mod blocked;
mod blocking;
mod conn;
mod ctx;
mod hangup;
mod lockwait;
mod lost;
use lockwait::Queued;
mod pubsub;
pub mod stats;
mod txn;
mod wait;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::stream::ClientStream;
use bytes::{Bytes, BytesMut};
use tokio::io::AsyncWriteExt;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use tracing::Instrument;

use super::errors::write_timeout;
use super::Shared;
use crate::cmd::object::{self, KeyQuery, Question};
use crate::cmd::{self, Command, Request};
use crate::resp::{parse_request, Args, Protocol, Reply};

/// Flush replies to the socket once this much is buffered.
const OUT_FLUSH: usize = 64 * 1024;

/// Per-connection state.
pub struct Session {
    id: u64,
    proto: Protocol,
    /// The ACL user the connection is authenticated as (None: not authenticated).
    user: Option<Arc<str>>,
    name: Option<Bytes>,
    shared: Arc<Shared>,
    out: BytesMut,
    slots: Vec<Slot>,
    quit: bool,
    pubsub: pubsub::PubSub,
    txn: txn::Txn,
    stop: watch::Receiver<bool>,
    /// This connection's command and error counts, merged into the server's once per batch.
    counts: stats::Local,
    /// How the command being handled is counted ([`Session::handle`] sets it).
    outcome: stats::Outcome,
    /// The client's `ip:port` (SLOWLOG entries).
    peer: String,
    /// The last read or write (the idle timeout counts from it, as Redis's
    /// `lastinteraction`).
    last_io: Instant,
    /// A write left bytes in the TLS layer that a flush must push out.
    unflushed: bool,
    /// CLIENT KILL's switch for this connection.
    killed: Arc<super::clients::Killed>,
    /// CLIENT REPLY OFF.
    reply_off: bool,
    /// CLIENT REPLY SKIP: how many more commands get no reply (the SKIP and the next one).
    reply_skip: u8,
    /// The command just run was a (un)subscription: its confirmations are pushed even under
    /// CLIENT REPLY OFF or SKIP, as Redis pushes them (its `CLIENT_PUSHING`).
    pushing: bool,
    /// MONITOR: the node's command lines, while this connection monitors.
    monitor: Option<super::monitor::Feed>,
    /// Bytes the client sent while a blocking command waited (`session::hangup`): parsed
    /// after what was already buffered.
    early_input: BytesMut,
}

enum Slot {
    /// A reply that is awaited but not sent (CLIENT REPLY OFF or SKIP).
    Silent(Box<Slot>),
    Ready(Reply),
    Write(oneshot::Receiver<Reply>, Instant, Option<Timed>),
    Read(oneshot::Receiver<Reply>, Instant, Option<Timed>),
    /// A PUBLISH (or, `true`, an SPUBLISH): its reply becomes the number of local
    /// receivers of the channel.
    Publish(
        oneshot::Receiver<Reply>,
        Instant,
        (Bytes, bool),
        Option<Timed>,
    ),
}

/// A command the slow log may record once its reply is ready.
struct Timed {
    started: std::time::Instant,
    argv: Vec<Bytes>,
}

/// The time since the Unix epoch (0 if the clock is before it).
fn unix_now() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// Commands refused while queueing, which dooms the transaction as in Redis: those flagged
/// `no_multi` (SHUTDOWN), and those declaring [`cmd::Own::NotInMulti`] (OBJECT, MEMORY).
fn refused_inside_multi(spec: &cmd::Spec) -> bool {
    spec.flags.contains(&"no_multi") || spec.has(cmd::Own::NotInMulti)
}

/// Commands a monitoring client may not run (Redis: a replica's read, write or
/// may-replicate command).
fn touches_keyspace(spec: &cmd::Spec) -> bool {
    spec.flags
        .iter()
        .any(|f| matches!(*f, "write" | "readonly"))
        || spec.has(cmd::Own::MayReplicate)
}

fn reply_is_wrongtype(r: &Reply) -> bool {
    matches!(r, Reply::Error(e) if e.starts_with("WRONGTYPE"))
}

/// Waits for one of the node's own writes, until the write deadline.
pub(crate) async fn await_write_for(rx: oneshot::Receiver<Reply>, shared: &Shared) -> Reply {
    let deadline = Instant::now() + Duration::from_millis(shared.config.write_timeout_ms);
    await_write(rx, deadline).await
}

/// Waits for a write's reply until its deadline.
async fn await_write(rx: oneshot::Receiver<Reply>, deadline: Instant) -> Reply {
    match tokio::time::timeout_at(deadline, rx).await {
        Ok(Ok(r)) => r,
        Ok(Err(_)) => Reply::err("TRYAGAIN write outcome unknown: the proposer stopped"),
        Err(_) => write_timeout(),
    }
}

/// Waits for a read's reply until its deadline.
async fn await_read(rx: oneshot::Receiver<Reply>, deadline: Instant) -> Reply {
    match tokio::time::timeout_at(deadline, rx).await {
        Ok(Ok(r)) => r,
        Ok(Err(_)) => Reply::err("TRYAGAIN read failed: the reader stopped"),
        Err(_) => Reply::err("TIMEOUT read did not complete before the deadline"),
    }
}

/// Serves one connection until it closes, errs or the server stops.
pub async fn serve(
    shared: Arc<Shared>,
    stream: ClientStream,
    id: u64,
    mut stop: watch::Receiver<bool>,
) {
    let peer = stream
        .tcp()
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let span = tracing::info_span!("conn", conn_id = id, peer = %peer);
    let peer_field = peer.clone();
    async move {
        let user = shared.initial_user();
        let shared_killed = shared.clients.killed(id);
        let mut s = Session {
            id,
            proto: Protocol::Resp2,
            user,
            name: None,
            shared,
            out: BytesMut::new(),
            slots: Vec::new(),
            quit: false,
            pubsub: pubsub::PubSub::default(),
            txn: txn::Txn::default(),
            stop: stop.clone(),
            counts: stats::Local::default(),
            outcome: stats::Outcome::Called,
            peer: peer_field,
            last_io: Instant::now(),
            unflushed: false,
            killed: shared_killed,
            reply_off: false,
            reply_skip: 0,
            pushing: false,
            monitor: None,
            early_input: BytesMut::new(),
        };
        let mut stream = stream;
        if let Err(e) = s.run(&mut stream, &mut stop).await {
            tracing::debug!(error = %e, "connection closed with error");
        }
    }
    .instrument(span)
    .await
}

impl Session {
    async fn run(
        &mut self,
        stream: &mut ClientStream,
        stop: &mut watch::Receiver<bool>,
    ) -> std::io::Result<()> {
        let mut buf = BytesMut::with_capacity(16 * 1024);
        loop {
            // Read each time: CONFIG SET may have changed them.
            let limits = self.shared.limits();
            let mut requests = Vec::new();
            let mut fatal = None;
            let mut capped = false;
            // Before authentication, one request at a time: an AUTH lifts the tighter limits
            // for the very next request, as in Redis, which parses after executing.
            let authed = self.user.is_some();
            let most = if authed { 1024 } else { 1 };
            loop {
                match parse_request(&mut buf, &limits, authed) {
                    Ok(Some(argv)) if argv.is_empty() => continue,
                    Ok(Some(argv)) => requests.push(argv),
                    Ok(None) => break,
                    Err(e) => {
                        fatal = Some(e);
                        break;
                    }
                }
                if requests.len() >= most {
                    capped = true;
                    break;
                }
            }
            if !requests.is_empty() {
                // CLIENT LIST's cmd/idle fields: one registry update per batch, not per command.
                if let Some(last) = requests.last() {
                    let cmd = String::from_utf8_lossy(&last[0]).to_lowercase();
                    self.shared.clients.update(self.id, |c| {
                        c.last = std::time::Instant::now();
                        c.cmd = cmd;
                    });
                }
                for argv in requests {
                    self.handle(argv, stream).await?;
                    if self.quit {
                        break;
                    }
                }
                // What the client sent while a command blocked comes after what was buffered.
                if !self.early_input.is_empty() {
                    buf.extend_from_slice(&self.early_input);
                    self.early_input = BytesMut::new();
                    capped = true;
                }
                self.finish_slots(stream).await?;
                self.flush(stream).await?;
                if self.quit || self.killed.is_set() {
                    return Ok(());
                }
            }
            if let Some(e) = fatal {
                tracing::debug!(error = %e, "protocol error");
                // Redis answers malformed input, and closes without a word at the query
                // buffer limit.
                if let Some(text) = e.reply_text() {
                    self.counts.error(&text);
                    self.counts.merge_into(&self.shared.stats.calls);
                    Reply::err(text).encode(self.proto, &mut self.out);
                    self.flush(stream).await?;
                }
                return Ok(());
            }
            if capped {
                continue;
            }
            if !self.wait(stream, &mut buf, stop).await? {
                return Ok(());
            }
        }
    }

    /// Writes out the encoded replies, counting the bytes.
    async fn flush(&mut self, stream: &mut ClientStream) -> std::io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        stream.write_all(&self.out).await?;
        // TLS keeps the last records until flushed; for plain TCP this is a no-op.
        stream.flush().await?;
        self.unflushed = false;
        self.last_io = Instant::now();
        let n = self.out.len() as u64;
        self.shared
            .stats
            .traffic
            .output
            .fetch_add(n, Ordering::Relaxed);
        self.out.clear();
        Ok(())
    }

    /// Executes one request, queueing its reply slots in order, and registers it for the
    /// command statistics, which count it once its replies are finished.
    async fn handle(&mut self, argv: Vec<Bytes>, stream: &mut ClientStream) -> std::io::Result<()> {
        let start = std::time::Instant::now();
        let spec = cmd::lookup(&String::from_utf8_lossy(&argv[0]).to_lowercase());
        let name = match spec {
            Some(spec) => stats::stat_name(spec.name, &argv),
            None => String::new(),
        };
        self.outcome = if name.is_empty() {
            stats::Outcome::Uncounted
        } else {
            stats::Outcome::Called
        };
        self.wait_if_paused(&argv).await;
        // One atomic load while nobody monitors.
        let watched = self.shared.clients.monitors.active().then(|| argv.clone());
        self.dispatch(argv, stream).await?;
        if let (Some(spec), Some(argv)) = (spec, watched) {
            self.feed_monitors(spec, &argv);
        }
        // CLIENT REPLY OFF/SKIP: the command runs, its reply is not sent (unless it is a
        // pushed subscription confirmation).
        let silent = (self.reply_off || self.reply_skip > 0) && !self.pushing;
        self.pushing = false;
        self.reply_skip = self.reply_skip.saturating_sub(1);
        if silent {
            if let Some(last) = self.slots.pop() {
                self.slots.push(Slot::Silent(Box::new(last)));
            }
        }
        self.counts
            .begin(name, self.outcome, start, self.slots.len());
        Ok(())
    }

    /// Shows a command that ran to the node's monitors (not one refused before it ran, nor
    /// one queued in MULTI, nor an admin command), as Redis does after running it.
    fn feed_monitors(&self, spec: &cmd::Spec, argv: &[Bytes]) {
        if self.outcome != stats::Outcome::Called || !cmd::monitor::shown(spec, argv) {
            return;
        }
        self.feed_line(argv);
    }

    /// Sends a command line that ran to the node's monitors, its passwords redacted.
    fn feed_line(&self, argv: &[Bytes]) {
        let argv = cmd::acl::redacted(argv);
        let line = cmd::monitor::line(unix_now(), &self.peer, &argv);
        self.shared.clients.monitors.feed(line);
    }

    /// Executes one request (see [`Session::handle`]).
    async fn dispatch(
        &mut self,
        argv: Vec<Bytes>,
        stream: &mut ClientStream,
    ) -> std::io::Result<()> {
        let name = String::from_utf8_lossy(&argv[0]).to_lowercase();
        let Some(resolved) = self.admit(&argv) else {
            self.quit = true;
            return Ok(());
        };
        if resolved.is_err() {
            self.reject();
        }
        if let (Some(_), Ok(spec)) = (&self.monitor, &resolved) {
            if touches_keyspace(spec) {
                self.reject();
                self.slots
                    .push(Slot::Ready(Reply::err(cmd::monitor::NO_KEYSPACE)));
                return Ok(());
            }
        }
        if self.txn.active() && !blocking::runs_inside_multi(&name) {
            let reply = match &resolved {
                Ok(spec) if refused_inside_multi(spec) => {
                    self.txn.dirty = true;
                    Reply::err("ERR Command not allowed inside a transaction")
                }
                _ => {
                    if resolved.is_ok() {
                        // Counted when EXEC runs it.
                        self.outcome = stats::Outcome::Uncounted;
                    }
                    self.queue(resolved, argv)
                }
            };
            self.slots.push(Slot::Ready(reply));
            return Ok(());
        }
        if self.pubsub.active()
            && self.proto == Protocol::Resp2
            && !pubsub::allowed_when_subscribed(&name)
        {
            self.reject();
            let reply = resolved.and_then(|_| Err(pubsub::not_allowed(&name)));
            self.slots.push(Slot::Ready(reply.unwrap_or_else(|e| e)));
            return Ok(());
        }
        // Admin commands keep their raw arguments, to forward them to the leader.
        let raw = match &resolved {
            Ok(spec) if spec.has(cmd::Own::ForwardsArgv) => Some(argv.clone()),
            _ => None,
        };
        let timed = self.timed(&argv);
        let parsed = resolved.and_then(|spec| (spec.parse)(&mut Args::new(argv)));
        if let Ok(Request::Data(c)) = &parsed {
            self.pubsub.lost.before(c);
        }
        match parsed {
            Err(reply) => self.slots.push(Slot::Ready(reply)),
            Ok(Request::Data(c)) if c.is_read() => self.dispatch_read(c, timed, stream).await?,
            Ok(Request::Data(c)) => self.dispatch_write(c, timed, stream).await?,
            Ok(Request::Conn(c)) => self.dispatch_conn(c, timed, raw, stream).await?,
            Ok(Request::Admin(c)) => {
                self.finish_slots(stream).await?;
                let reply = super::admin::execute(&self.shared, c, raw.unwrap_or_default()).await;
                self.slots.push(Slot::Ready(reply));
            }
        }
        Ok(())
    }

    /// Resolves a request's command and checks that the connection may run it: an error
    /// reply if not, None if the connection is to close (its user was deleted).
    fn admit(&mut self, argv: &[Bytes]) -> Option<Result<&'static cmd::Spec, Reply>> {
        Some(match cmd::resolve(argv) {
            Ok(spec) if self.user.is_none() && !spec.no_auth() => Err(Reply::err(cmd::acl::NOAUTH)),
            Ok(spec) => match self.check_acl(spec, argv) {
                acl::Verdict::Run => Ok(spec),
                acl::Verdict::Refuse(reply) => {
                    // Redis refuses it before queueing: the transaction is doomed.
                    self.txn.dirty |= self.txn.active();
                    Err(reply)
                }
                acl::Verdict::Close => return None,
            },
            other => other,
        })
    }

    /// Submits a read, after the replies of earlier writes (a read never overtakes them).
    async fn dispatch_read(
        &mut self,
        c: Command,
        timed: Option<Timed>,
        stream: &mut ClientStream,
    ) -> std::io::Result<()> {
        if self
            .slots
            .iter()
            .any(|s| !matches!(s, Slot::Read(..) | Slot::Ready(_)))
        {
            self.finish_slots(stream).await?;
        }
        let rx = self
            .shared
            .reader
            .submit_as(self.user.clone(), self.as_user(c));
        self.slots
            .push(Slot::Read(rx, self.write_deadline(), timed));
        Ok(())
    }

    /// Executes a write: a lock wait, a blocking pop, an ACL change, or a write whose reply
    /// is awaited with the next batch.
    async fn dispatch_write(
        &mut self,
        c: Command,
        timed: Option<Timed>,
        stream: &mut ClientStream,
    ) -> std::io::Result<()> {
        match c {
            // LOCK, RLOCK, SEMACQUIRE and MLOCK with WAIT: the session waits in the queue.
            c if Queued::waits(&c) => {
                self.finish_slots(stream).await?;
                let started = std::time::Instant::now();
                let reply = match Queued::take(c, &self.shared) {
                    Some(lock) => self.lock_wait(lock, stream).await,
                    None => Reply::err("ERR internal: not a lock wait"),
                };
                if let Some(m) = &self.shared.metrics {
                    m.lock_waited(started, &reply);
                }
                self.slots.push(Slot::Ready(reply));
            }
            c if blocking::wait_spec(&c).is_some() => {
                self.finish_slots(stream).await?;
                let reply = self.blocking_pop(c, stream).await;
                self.slots.push(Slot::Ready(reply));
            }
            c @ (Command::AclSetUser(_) | Command::AclDelUser(_) | Command::AclLoad(_)) => {
                self.finish_slots(stream).await?;
                let reply = self.acl_write(c).await;
                self.slots.push(Slot::Ready(reply));
            }
            c => {
                let c = self.as_user(self.shared.default_lock_delay(c));
                if self.slots.iter().any(|s| matches!(s, Slot::Read(..))) {
                    self.finish_slots(stream).await?;
                }
                let channel = match &c {
                    Command::Publish(p) => Some((p.channel.clone(), false)),
                    Command::SPublish(p) => Some((p.channel.clone(), true)),
                    _ => None,
                };
                let rx = self.shared.proposer.submit_as(self.user.clone(), c);
                self.slots.push(match channel {
                    Some(ch) => Slot::Publish(rx, self.write_deadline(), ch, timed),
                    None => Slot::Write(rx, self.write_deadline(), timed),
                });
            }
        }
        Ok(())
    }

    /// Counts the command being handled as rejected (a known command refused before it ran).
    fn reject(&mut self) {
        if self.outcome == stats::Outcome::Called {
            self.outcome = stats::Outcome::Rejected;
        }
    }

    /// Waits for every queued reply and encodes them in order.
    async fn finish_slots(&mut self, stream: &mut ClientStream) -> std::io::Result<()> {
        self.counts.close_done();
        for slot in std::mem::take(&mut self.slots) {
            let (slot, silent) = match slot {
                Slot::Silent(inner) => (*inner, true),
                s => (s, false),
            };
            let (reply, timed) = match slot {
                Slot::Silent(_) => (Reply::ok(), None),
                Slot::Ready(r) => (r, None),
                Slot::Write(rx, deadline, t) => (await_write(rx, deadline).await, t),
                Slot::Read(rx, deadline, t) => (await_read(rx, deadline).await, t),
                Slot::Publish(rx, deadline, (channel, shard), t) => {
                    let reply = await_write(rx, deadline).await;
                    (self.publish_count(reply, &channel, shard), t)
                }
            };
            self.counts.reply(&reply);
            self.record(timed);
            if silent {
                continue;
            }
            reply.encode(self.proto, &mut self.out);
            if self.out.len() >= OUT_FLUSH {
                self.flush(stream).await?;
            }
        }
        self.counts.merge_into(&self.shared.stats.calls);
        Ok(())
    }

    /// (S)PUBLISH's reply: the number of receivers on this node (apply cannot know them).
    fn publish_count(&self, reply: Reply, channel: &[u8], shard: bool) -> Reply {
        let clients = &self.shared.clients;
        match reply {
            Reply::Int(_) if shard => Reply::Int(clients.shard_subscribers(channel)),
            Reply::Int(_) => Reply::Int(clients.receivers(channel)),
            other => other,
        }
    }

    /// The start of a command the slow log may record (None while it is off).
    fn timed(&self, argv: &[Bytes]) -> Option<Timed> {
        let live = &self.shared.settings.live;
        (live.slowlog_slower_than.load(Ordering::Relaxed) >= 0).then(|| Timed {
            started: std::time::Instant::now(),
            argv: cmd::acl::redacted(argv).into_owned(),
        })
    }

    /// Records a finished command in the slow log if it took long enough.
    fn record(&self, timed: Option<Timed>) {
        let Some(t) = timed else { return };
        let live = &self.shared.settings.live;
        let slower_than = live.slowlog_slower_than.load(Ordering::Relaxed);
        let micros = t.started.elapsed().as_micros() as u64;
        if slower_than < 0 || micros < slower_than as u64 {
            return;
        }
        let entry = cmd::slowlog::Entry {
            id: 0,
            unix_secs: unix_now().as_secs() as i64,
            micros,
            argv: cmd::slowlog::shorten(&t.argv),
            addr: self.peer.clone(),
            name: self.name.clone().unwrap_or_default(),
        };
        let max_len = live.slowlog_max_len.load(Ordering::Relaxed);
        self.shared.slowlog.push(entry, max_len);
    }

    /// One read through the read path (as a client's read: linearizable, forwarded). It
    /// serves OBJECT and MEMORY, whose key was checked against the user: the reads they
    /// make of it are the node's own (a user may run OBJECT on a key without GET).
    async fn read(&self, argv: Vec<Bytes>) -> Reply {
        match cmd::parse(argv) {
            Ok(Request::Data(c)) if c.is_read() => {
                let rx = self.shared.reader.submit(c);
                await_read(rx, self.write_deadline()).await
            }
            _ => Reply::err("ERR internal: not a read"),
        }
    }

    /// OBJECT and MEMORY USAGE: reads the key's type, then its value, and answers as Redis
    /// would for that value (nil for a missing key). A key that changes type between the
    /// two reads is read again.
    async fn key_info(&self, q: KeyQuery) -> Reply {
        let mut value = None;
        for _ in 0..3 {
            let kind = match self
                .read(vec![Bytes::from_static(b"TYPE"), q.key.clone()])
                .await
            {
                Reply::Simple(kind) => kind,
                other => return other,
            };
            let Some(argv) = object::value_read(&kind, &q.key) else {
                break;
            };
            let reply = self.read(argv).await;
            if reply.is_error() && !reply_is_wrongtype(&reply) {
                return reply;
            }
            value = object::Value::from_reply(&kind, reply);
            if value.is_some() {
                break;
            }
        }
        let Some(v) = value else {
            return match q.question {
                Question::Debug => Reply::err("ERR no such key"),
                _ => Reply::Nil,
            };
        };
        let number = |name: &str| self.shared.settings.value(name).parse().unwrap_or(0);
        let t = object::Thresholds {
            hash_entries: number("hash-max-listpack-entries"),
            hash_value: number("hash-max-listpack-value"),
            list_size: number("list-max-listpack-size"),
            zset_entries: number("zset-max-listpack-entries"),
            zset_value: number("zset-max-listpack-value"),
        };
        match q.question {
            Question::Encoding => Reply::text(v.encoding(&t)),
            Question::Freq => Reply::err(object::NOT_LFU),
            Question::IdleTime => Reply::Int(0),
            Question::RefCount => Reply::Int(v.refcount()),
            Question::Memory => Reply::Int(v.memory_usage(&q.key, &t)),
            Question::Debug => {
                let len = match &v {
                    object::Value::Str(s) => s.len(),
                    object::Value::Hash(pairs) => {
                        pairs.iter().map(|(f, v)| f.len() + v.len() + 2).sum()
                    }
                    object::Value::List(items) | object::Value::Set(items) => {
                        items.iter().map(|i| i.len() + 1).sum()
                    }
                    object::Value::ZSet(pairs) => {
                        pairs.iter().map(|(m, s)| m.len() + s.len() + 2).sum()
                    }
                };
                cmd::debug::object_line(v.encoding(&t), len + 1)
            }
        }
    }

    /// Waits while a CLIENT PAUSE holds this command back: every command under `ALL`, the
    /// ones that may change data (writes, scripts, PUBLISH) under `WRITE`, as in Redis.
    async fn wait_if_paused(&self, argv: &[Bytes]) {
        let clients = &self.shared.clients;
        let Some(spec) = cmd::lookup(&String::from_utf8_lossy(&argv[0]).to_lowercase()) else {
            return;
        };
        let write = spec.flags.contains(&"write")
            || matches!(
                spec.name,
                "eval"
                    | "evalsha"
                    | "publish"
                    | "spublish"
                    | "exec"
                    | "lock"
                    | "unlock"
                    | "renew"
                    | "rlock"
                    | "semacquire"
            );
        loop {
            let changed = clients.pause_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let Some(until) = clients.paused_until(write) else {
                return;
            };
            tokio::select! {
                _ = tokio::time::sleep_until(until.into()) => {}
                _ = &mut changed => {}
            }
        }
    }

    /// True if `enable-debug-command` lets this connection run DEBUG (`local`: from a
    /// loopback address only).
    fn debug_allowed(&self) -> bool {
        use crate::config::DebugCommand;
        match self.shared.config.enable_debug_command {
            DebugCommand::Yes => true,
            DebugCommand::No => false,
            DebugCommand::Local => self
                .peer
                .parse::<std::net::SocketAddr>()
                .is_ok_and(|a| a.ip().is_loopback()),
        }
    }
}
