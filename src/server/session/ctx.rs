//! The session as a [`ConnCtx`]: what a connection command changes of the session and
//! reads of the node (`Shared`), and the connection commands that wait or change the
//! session's mode, which the session runs itself ([`Session::dispatch_conn`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::conn::{execute, ConnCtx};
use super::{Session, Slot, Timed};
use crate::cmd::client::{ClientCmd, ReplyMode};
use crate::cmd::config::ConfigCmd;
use crate::cmd::debug::DebugCmd;
use crate::cmd::object::{KeyQuery, Question};
use crate::cmd::{self, ConnCmd};
use crate::resp::{Protocol, Reply};
use crate::server::stream::ClientStream;
impl Session {
    /// Executes a connection command: the ones that wait or change the session's mode here,
    /// the rest through [`execute`].
    pub(super) async fn dispatch_conn(
        &mut self,
        c: ConnCmd,
        timed: Option<Timed>,
        raw: Option<Vec<Bytes>>,
        stream: &mut ClientStream,
    ) -> std::io::Result<()> {
        let c = match c {
            ConnCmd::Sub(sub) => {
                self.finish_slots(stream).await?;
                self.subscribe(sub);
                return Ok(());
            }
            ConnCmd::Monitor => {
                // Redis ignores a second MONITOR without a reply.
                if self.monitor.is_none() {
                    self.finish_slots(stream).await?;
                    self.monitor = Some(self.shared.clients.monitors.watch());
                    self.slots.push(Slot::Ready(Reply::ok()));
                }
                return Ok(());
            }
            ConnCmd::Shutdown => {
                // No reply: the connection closes, and the node stops in order.
                self.finish_slots(stream).await?;
                tracing::warn!("SHUTDOWN requested by a client");
                self.shared.shutdown.notify_one();
                self.quit = true;
                return Ok(());
            }
            c => c,
        };
        self.finish_slots(stream).await?;
        let shared = self.shared.clone();
        // The slow log records the ones that ran here.
        let (reply, timed) = match c {
            ConnCmd::Txn(t) => (self.txn_cmd(t).await, None),
            ConnCmd::Acl(c) => (self.acl_cmd(c).await, None),
            ConnCmd::KeyInfo(q) => (self.key_info(q).await, timed),
            ConnCmd::Save(cmd::save::SaveCmd::Save) => {
                (crate::server::save::save(&shared).await, timed)
            }
            ConnCmd::Debug(d @ (DebugCmd::Sleep(_) | DebugCmd::Object(_)))
                if self.debug_allowed() =>
            {
                (self.debug_waiting(d).await, timed)
            }
            ConnCmd::Cluster(c) => {
                let topology = crate::server::cluster::topology(&shared).await;
                (topology.reply(c), timed)
            }
            ConnCmd::Wait(w) => {
                let raw = raw.unwrap_or_default();
                (crate::server::replicas::wait(&shared, w, raw).await, timed)
            }
            c => (execute(self, c), timed),
        };
        self.record(timed);
        self.slots.push(Slot::Ready(reply));
        Ok(())
    }

    /// (P|S)(UN)SUBSCRIBE: its confirmations are pushed even under CLIENT REPLY OFF.
    fn subscribe(&mut self, sub: cmd::subscribe::SubCmd) {
        let events = || {
            self.shared
                .state
                .read()
                .ok()
                .map(|st| st.events.subscribe())
        };
        let replies = self.pubsub.apply(sub, events);
        self.shared
            .clients
            .set_subscriptions(self.id, self.pubsub.subscriptions());
        self.slots.extend(replies.into_iter().map(Slot::Ready));
        self.pushing = true;
    }

    /// DEBUG SLEEP and DEBUG OBJECT outside MULTI.
    async fn debug_waiting(&self, d: DebugCmd) -> Reply {
        match d {
            DebugCmd::Sleep(secs) => {
                tokio::time::sleep(Duration::from_secs_f64(secs.min(86_400.0))).await;
                Reply::ok()
            }
            DebugCmd::Object(key) => {
                self.key_info(KeyQuery {
                    key,
                    question: Question::Debug,
                })
                .await
            }
            DebugCmd::Reply(r) => r,
            // DIGEST is answered without waiting, by `execute`.
            _ => Reply::err("ERR internal: misrouted command"),
        }
    }
}

impl ConnCtx for Session {
    fn id(&self) -> u64 {
        self.id
    }

    fn proto(&self) -> Protocol {
        self.proto
    }

    fn set_proto(&mut self, proto: Protocol) {
        if proto == Protocol::Resp2 {
            // Pushes are RESP3's: back in RESP2 the lease watch ends.
            self.lock_notify(false);
        }
        self.proto = proto;
        let resp = if proto == Protocol::Resp3 { 3 } else { 2 };
        self.shared.clients.update(self.id, |c| c.resp = resp);
    }

    fn name(&self) -> Option<Bytes> {
        self.name.clone()
    }

    fn set_name(&mut self, name: Bytes) {
        let text = String::from_utf8_lossy(&name).into_owned();
        self.name = (!name.is_empty()).then_some(name);
        self.shared.clients.update(self.id, |c| c.name = text);
    }

    fn user(&self) -> Option<Arc<str>> {
        self.user.clone()
    }

    fn login(&mut self, user: Option<&[u8]>, pass: &[u8], cmd: &str) -> Reply {
        Session::login(self, user, pass, cmd)
    }

    fn default_nopass(&self) -> bool {
        self.shared
            .user(crate::state::acl::DEFAULT_USER)
            .is_some_and(|u| u.nopass)
    }

    fn subscribed(&self) -> bool {
        self.pubsub.active()
    }

    fn lock_notify(&mut self, on: bool) {
        let shared = self.shared.clone();
        self.pubsub.lock_notify(on, || {
            shared.state.read().ok().map(|st| st.events.subscribe())
        });
    }

    fn reset_modes(&mut self) {
        self.monitor = None;
        self.txn.reset();
        self.pubsub.clear();
        self.shared
            .clients
            .set_subscriptions(self.id, self.pubsub.subscriptions());
        self.user = self.shared.initial_user();
        self.shared.clients.update(self.id, |c| {
            c.user = crate::state::acl::DEFAULT_USER.into();
        });
    }

    fn reply_mode(&mut self, mode: ReplyMode) {
        match mode {
            ReplyMode::On => {
                self.reply_off = false;
                self.reply_skip = 0;
            }
            ReplyMode::Off => self.reply_off = true,
            // This command and the next.
            ReplyMode::Skip => self.reply_skip = 2,
        }
    }

    fn quit(&mut self) {
        self.quit = true;
    }

    fn clients(&mut self, c: ClientCmd) -> Reply {
        let clients = &self.shared.clients;
        match c {
            ClientCmd::SetInfo { lib_name, value } => {
                let v = String::from_utf8_lossy(&value).into_owned();
                clients.update(self.id, |c| {
                    if lib_name {
                        c.lib_name = v
                    } else {
                        c.lib_ver = v
                    }
                });
                Reply::ok()
            }
            ClientCmd::Info => Reply::Verbatim(clients.line(self.id) + "\n"),
            ClientCmd::List => Reply::Verbatim(clients.list()),
            ClientCmd::Kill(f, old_form) => {
                if let Some(user) = &f.user {
                    if self.shared.acl.borrow().get(user).is_none() {
                        return Reply::err(format!("ERR No such user '{user}'"));
                    }
                }
                let n = clients.kill(&f, self.id);
                match (old_form, n) {
                    (true, 0) => Reply::err("ERR No such client"),
                    (true, _) => Reply::ok(),
                    (false, n) => Reply::Int(n as i64),
                }
            }
            ClientCmd::Pause { ms, all } => {
                // A timeout past what the clock can hold pauses for a year.
                let until = Instant::now()
                    .checked_add(Duration::from_millis(ms))
                    .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 86_400));
                clients.pause(until.into_std(), all);
                Reply::ok()
            }
            ClientCmd::Unblock(id, error) => Reply::Int(i64::from(clients.unblock(id, error))),
            ClientCmd::Unpause => {
                clients.unpause();
                Reply::ok()
            }
            // Answered by `client` from the connection itself.
            ClientCmd::SetName(_) | ClientCmd::GetName | ClientCmd::Id | ClientCmd::Reply(_) => {
                Reply::err("ERR internal: misrouted command")
            }
        }
    }

    fn node(&mut self, c: ConnCmd) -> Reply {
        let shared = &self.shared;
        match c {
            ConnCmd::Role => crate::server::replicas::role(shared),
            // Inside EXEC: from what is known, without asking the other members.
            ConnCmd::Cluster(c) => crate::server::cluster::topology_now(shared).reply(c),
            // Inside EXEC: the count now, without blocking, as Redis answers.
            ConnCmd::Wait(_) => crate::server::replicas::acked_now(shared),
            ConnCmd::Info(sections) => {
                Reply::Verbatim(crate::cmd::info::render(&sections, &shared.info()))
            }
            ConnCmd::Config(c) => self.config_cmd(c),
            ConnCmd::Time => crate::cmd::time::reply(super::unix_now()),
            ConnCmd::LastSave => Reply::Int(shared.saves.last_save.load(Ordering::Relaxed)),
            // SAVE is refused inside MULTI (`no_multi`) and handled in `handle` otherwise.
            ConnCmd::Save(cmd::save::SaveCmd::Save) => {
                Reply::err("ERR Command not allowed inside a transaction")
            }
            ConnCmd::Save(c) => crate::server::save::background(shared, c),
            ConnCmd::Debug(d) => self.debug(d),
            ConnCmd::Slowlog(c) => shared.slowlog.run(c),
            ConnCmd::PubSub(c) => self.pubsub_info(c),
            // Inside EXEC (handled in `handle` otherwise).
            ConnCmd::Monitor => Reply::err(cmd::monitor::IN_MULTI),
            ConnCmd::Acl(c) => self.acl_local(c),
            // Never queued (`refused_inside_multi`); handled in `handle` otherwise.
            ConnCmd::Shutdown | ConnCmd::KeyInfo(_) => {
                Reply::err("ERR Command not allowed inside a transaction")
            }
            // Handled in `handle` (they need to await or change the session's mode), or
            // by `execute`.
            _ => Reply::err("ERR internal: misrouted command"),
        }
    }
}

impl Session {
    /// DEBUG without waiting (inside EXEC; `dispatch` runs SLEEP and OBJECT otherwise).
    fn debug(&self, d: DebugCmd) -> Reply {
        match d {
            _ if !self.debug_allowed() => Reply::err(cmd::debug::NOT_ALLOWED),
            DebugCmd::Reply(r) => r,
            d @ (DebugCmd::Digest | DebugCmd::DigestValue(_)) => {
                crate::server::admin::with_applied_state(&self.shared, |ks, _| {
                    cmd::debug::digest_reply(&d, ks).unwrap_or_else(Reply::ok)
                })
            }
            // Inside a transaction: no pause, and no read of a key.
            DebugCmd::Sleep(_) => Reply::ok(),
            DebugCmd::Object(_) => Reply::err("ERR Command not allowed inside a transaction"),
        }
    }

    fn config_cmd(&self, c: ConfigCmd) -> Reply {
        match c {
            ConfigCmd::Get(patterns) => self.shared.settings.get(&patterns),
            ConfigCmd::Set(pairs) => self.shared.settings.set(&pairs),
            ConfigCmd::ResetStat => {
                self.shared.reset_stats();
                Reply::ok()
            }
            ConfigCmd::Rewrite => self.shared.rewrite_config(),
        }
    }

    /// PUBSUB: this node's subscriptions.
    fn pubsub_info(&self, c: crate::cmd::pubsub::PubSubCmd) -> Reply {
        use crate::cmd::pubsub::{counts, PubSubCmd};
        let clients = &self.shared.clients;
        match c {
            PubSubCmd::Channels(pattern) => matching(clients.subscribed().0, pattern),
            PubSubCmd::NumSub(channels) => counts(channels, |ch| clients.subscribers(ch)),
            PubSubCmd::NumPat => Reply::Int(clients.subscribed().1.len() as i64),
            PubSubCmd::ShardChannels(pattern) => matching(clients.shard_subscribed(), pattern),
            PubSubCmd::ShardNumSub(channels) => {
                counts(channels, |ch| clients.shard_subscribers(ch))
            }
        }
    }
}

/// PUBSUB CHANNELS / SHARDCHANNELS: the channels that match `pattern` (all without one).
fn matching(channels: impl IntoIterator<Item = Bytes>, pattern: Option<Bytes>) -> Reply {
    Reply::Array(
        channels
            .into_iter()
            .filter(|ch| {
                pattern
                    .as_ref()
                    .is_none_or(|p| crate::state::pattern::matches(p, ch))
            })
            .map(Reply::Bulk)
            .collect(),
    )
}
