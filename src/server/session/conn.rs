//! Connection commands (PING, HELLO, AUTH, SELECT, RESET, CLIENT, LOCKNOTIFY, INFO, CONFIG,
//! ...): [`execute`] runs them against a [`ConnCtx`], the narrow view of what such a command
//! may read or change of its connection (protocol, name, user, modes, reply mode) and, through
//! [`ConnCtx::node`] and [`ConnCtx::clients`], of the node (its settings, INFO, the client
//! registry). The session implements it over its `Shared`; the unit tests, over a fake.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::{Session, Slot, Timed};
use crate::cmd::client::{ClientCmd, ReplyMode};
use crate::cmd::config::ConfigCmd;
use crate::cmd::connection::{invalid_client_name, valid_client_name, Hello};
use crate::cmd::object::{KeyQuery, Question};
use crate::cmd::{self, ConnCmd};
use crate::resp::{Protocol, Reply};
use crate::server::stream::ClientStream;

/// What a connection command may read or change.
pub(super) trait ConnCtx {
    /// The connection's id (CLIENT ID).
    fn id(&self) -> u64;
    /// The protocol its replies are encoded in.
    fn proto(&self) -> Protocol;
    /// Switches protocol (HELLO, RESET); back in RESP2, pushed lease notices end.
    fn set_proto(&mut self, proto: Protocol);
    /// Its CLIENT SETNAME name.
    fn name(&self) -> Option<Bytes>;
    /// Names it (an empty name clears it).
    fn set_name(&mut self, name: Bytes);
    /// The user it is authenticated as (None: not authenticated).
    fn user(&self) -> Option<Arc<str>>;
    /// Authenticates as `user` (default: `default`), or answers WRONGPASS for `cmd`.
    fn login(&mut self, user: Option<&[u8]>, pass: &[u8], cmd: &str) -> Reply;
    /// True if the `default` user needs no password.
    fn default_nopass(&self) -> bool;
    /// True while it has (P|S)SUBSCRIBE subscriptions.
    fn subscribed(&self) -> bool;
    /// LOCKNOTIFY ON|OFF: lost leases pushed to it or not.
    fn lock_notify(&mut self, on: bool);
    /// RESET: leaves MONITOR, MULTI and every subscription, and is back to the user a new
    /// connection starts as.
    fn reset_modes(&mut self);
    /// CLIENT REPLY.
    fn reply_mode(&mut self, mode: ReplyMode);
    /// QUIT: the connection closes once the reply is written.
    fn quit(&mut self);
    /// The CLIENT subcommands about the node's client registry (SETINFO, INFO, LIST, KILL,
    /// PAUSE, UNPAUSE, UNBLOCK).
    fn clients(&mut self, c: ClientCmd) -> Reply;
    /// The commands answered from the node's state (ROLE, CLUSTER, WAIT, INFO, CONFIG, TIME,
    /// LASTSAVE, SAVE, DEBUG, SLOWLOG, PUBSUB, ACL) and the ones that never run here.
    fn node(&mut self, c: ConnCmd) -> Reply;
}

/// What LOCKNOTIFY ON answers a RESP2 connection.
pub(super) const LOCKNOTIFY_RESP2: &str = "ERR LOCKNOTIFY needs RESP3 (HELLO 3); RESP2 clients can subscribe to __keyspace@0__:<key> for lock_expired and lock_released";

/// Executes a connection command.
pub(super) fn execute(ctx: &mut impl ConnCtx, c: ConnCmd) -> Reply {
    match c {
        ConnCmd::Ping(msg) if ctx.subscribed() && ctx.proto() == Protocol::Resp2 => {
            Reply::Array(vec![
                Reply::text("pong"),
                Reply::Bulk(msg.unwrap_or_default()),
            ])
        }
        ConnCmd::Ping(None) => Reply::Simple("PONG".into()),
        ConnCmd::Ping(Some(m)) | ConnCmd::Echo(m) => Reply::Bulk(m),
        ConnCmd::Hello(h) => hello(ctx, h),
        ConnCmd::Auth { user, pass } => {
            if user.is_none() && ctx.default_nopass() {
                return Reply::err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
            }
            ctx.login(user.as_deref(), &pass, "AUTH")
        }
        ConnCmd::Select(0) => Reply::ok(),
        ConnCmd::Select(_) => Reply::err("ERR DB index is out of range"),
        ConnCmd::Quit => {
            ctx.quit();
            Reply::ok()
        }
        ConnCmd::Reset => {
            ctx.reset_modes();
            ctx.set_proto(Protocol::Resp2);
            ctx.set_name(Bytes::new());
            Reply::Simple("RESET".into())
        }
        ConnCmd::Client(c) => client(ctx, c),
        ConnCmd::Command(reply) => reply,
        ConnCmd::LockNotify(true) if ctx.proto() != Protocol::Resp3 => Reply::err(LOCKNOTIFY_RESP2),
        ConnCmd::LockNotify(on) => {
            ctx.lock_notify(on);
            Reply::ok()
        }
        other => ctx.node(other),
    }
}

fn hello(ctx: &mut impl ConnCtx, h: Hello) -> Reply {
    if let Some((user, pass)) = &h.auth {
        let reply = ctx.login(Some(user), pass, "HELLO");
        if reply.is_error() {
            return reply;
        }
    }
    if ctx.user().is_none() {
        return Reply::err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    if let Some(name) = &h.setname {
        if !valid_client_name(name) {
            return invalid_client_name();
        }
        ctx.set_name(name.clone());
    }
    if let Some(p) = h.proto {
        ctx.set_proto(if p == 3 {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        });
    }
    let proto = if ctx.proto() == Protocol::Resp3 { 3 } else { 2 };
    Reply::Map(vec![
        (Reply::text("server"), Reply::text("redis")),
        (Reply::text("version"), Reply::text("7.2.0")),
        (Reply::text("proto"), Reply::Int(proto)),
        (Reply::text("id"), Reply::Int(ctx.id() as i64)),
        (Reply::text("mode"), Reply::text("standalone")),
        (Reply::text("role"), Reply::text("master")),
        (Reply::text("modules"), Reply::Array(vec![])),
    ])
}

fn client(ctx: &mut impl ConnCtx, c: ClientCmd) -> Reply {
    match c {
        ClientCmd::SetName(n) => {
            ctx.set_name(n);
            Reply::ok()
        }
        ClientCmd::GetName => ctx.name().map_or(Reply::Nil, Reply::Bulk),
        ClientCmd::Id => Reply::Int(ctx.id() as i64),
        ClientCmd::Reply(mode) => {
            ctx.reply_mode(mode);
            Reply::ok()
        }
        other => ctx.clients(other),
    }
}

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
        match c {
            ConnCmd::Txn(t) => {
                self.finish_slots(stream).await?;
                let reply = self.txn_cmd(t).await;
                self.slots.push(Slot::Ready(reply));
            }
            ConnCmd::Sub(sub) => {
                self.finish_slots(stream).await?;
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
            ConnCmd::Monitor => {
                // Redis ignores a second MONITOR without a reply.
                if self.monitor.is_none() {
                    self.finish_slots(stream).await?;
                    self.monitor = Some(self.shared.clients.monitors.watch());
                    self.slots.push(Slot::Ready(Reply::ok()));
                }
            }
            ConnCmd::Acl(c) => {
                self.finish_slots(stream).await?;
                let reply = self.acl_cmd(c).await;
                self.slots.push(Slot::Ready(reply));
            }
            ConnCmd::KeyInfo(q) => {
                self.finish_slots(stream).await?;
                let reply = self.key_info(q).await;
                self.record(timed);
                self.slots.push(Slot::Ready(reply));
            }
            ConnCmd::Shutdown => {
                // No reply: the connection closes, and the node stops in order.
                self.finish_slots(stream).await?;
                tracing::warn!("SHUTDOWN requested by a client");
                self.shared.shutdown.notify_one();
                self.quit = true;
            }
            ConnCmd::Save(cmd::save::SaveCmd::Save) => {
                self.finish_slots(stream).await?;
                let reply = crate::server::save::save(&self.shared).await;
                self.record(timed);
                self.slots.push(Slot::Ready(reply));
            }
            ConnCmd::Debug(
                d @ (cmd::debug::DebugCmd::Sleep(_) | cmd::debug::DebugCmd::Object(_)),
            ) if self.debug_allowed() => {
                self.finish_slots(stream).await?;
                let reply = match d {
                    cmd::debug::DebugCmd::Sleep(secs) => {
                        tokio::time::sleep(Duration::from_secs_f64(secs.min(86_400.0))).await;
                        Reply::ok()
                    }
                    cmd::debug::DebugCmd::Object(key) => {
                        self.key_info(KeyQuery {
                            key,
                            question: Question::Debug,
                        })
                        .await
                    }
                    cmd::debug::DebugCmd::Reply(r) => r,
                    // DIGEST is answered without waiting, by `execute`.
                    _ => Reply::err("ERR internal: misrouted command"),
                };
                self.record(timed);
                self.slots.push(Slot::Ready(reply));
            }
            ConnCmd::Cluster(c) => {
                self.finish_slots(stream).await?;
                let reply = crate::server::cluster::topology(&self.shared)
                    .await
                    .reply(c);
                self.record(timed);
                self.slots.push(Slot::Ready(reply));
            }
            ConnCmd::Wait(w) => {
                self.finish_slots(stream).await?;
                let reply =
                    crate::server::replicas::wait(&self.shared, w, raw.unwrap_or_default()).await;
                self.record(timed);
                self.slots.push(Slot::Ready(reply));
            }
            c => {
                self.finish_slots(stream).await?;
                let reply = execute(self, c);
                self.record(timed);
                self.slots.push(Slot::Ready(reply));
            }
        }
        Ok(())
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
    fn debug(&self, d: cmd::debug::DebugCmd) -> Reply {
        use cmd::debug::DebugCmd;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection with no node behind it.
    struct Fake {
        proto: Protocol,
        name: Option<Bytes>,
        user: Option<Arc<str>>,
        subscribed: bool,
        notify: bool,
        reset: bool,
        quit: bool,
        node_calls: usize,
    }

    impl Default for Fake {
        fn default() -> Fake {
            Fake {
                proto: Protocol::Resp2,
                name: None,
                user: Some(Arc::from("alice")),
                subscribed: false,
                notify: false,
                reset: false,
                quit: false,
                node_calls: 0,
            }
        }
    }

    impl ConnCtx for Fake {
        fn id(&self) -> u64 {
            7
        }
        fn proto(&self) -> Protocol {
            self.proto
        }
        fn set_proto(&mut self, proto: Protocol) {
            if proto == Protocol::Resp2 {
                self.notify = false;
            }
            self.proto = proto;
        }
        fn name(&self) -> Option<Bytes> {
            self.name.clone()
        }
        fn set_name(&mut self, name: Bytes) {
            self.name = (!name.is_empty()).then_some(name);
        }
        fn user(&self) -> Option<Arc<str>> {
            self.user.clone()
        }
        fn login(&mut self, user: Option<&[u8]>, pass: &[u8], _cmd: &str) -> Reply {
            if pass != b"secret" {
                return Reply::err(cmd::acl::WRONGPASS);
            }
            let name = String::from_utf8_lossy(user.unwrap_or(b"default")).into_owned();
            self.user = Some(Arc::from(name.as_str()));
            Reply::ok()
        }
        fn default_nopass(&self) -> bool {
            false
        }
        fn subscribed(&self) -> bool {
            self.subscribed
        }
        fn lock_notify(&mut self, on: bool) {
            self.notify = on;
        }
        fn reset_modes(&mut self) {
            self.reset = true;
            self.subscribed = false;
            self.notify = false;
            self.user = None;
        }
        fn reply_mode(&mut self, _mode: ReplyMode) {}
        fn quit(&mut self) {
            self.quit = true;
        }
        fn clients(&mut self, _c: ClientCmd) -> Reply {
            self.node_calls += 1;
            Reply::ok()
        }
        fn node(&mut self, _c: ConnCmd) -> Reply {
            self.node_calls += 1;
            Reply::ok()
        }
    }

    fn bulk(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    #[test]
    fn ping_of_a_resp2_subscriber_is_an_array() {
        let mut f = Fake::default();
        assert_eq!(
            execute(&mut f, ConnCmd::Ping(None)),
            Reply::Simple("PONG".into())
        );
        f.subscribed = true;
        assert_eq!(
            execute(&mut f, ConnCmd::Ping(Some(bulk("hi")))),
            Reply::Array(vec![Reply::text("pong"), Reply::Bulk(bulk("hi"))])
        );
        assert_eq!(
            execute(&mut f, ConnCmd::Ping(None)),
            Reply::Array(vec![Reply::text("pong"), Reply::Bulk(Bytes::new())])
        );
        // In RESP3 a subscriber's PING is an ordinary one.
        f.proto = Protocol::Resp3;
        assert_eq!(
            execute(&mut f, ConnCmd::Ping(Some(bulk("hi")))),
            Reply::Bulk(bulk("hi"))
        );
    }

    #[test]
    fn select_knows_only_database_zero() {
        let mut f = Fake::default();
        assert_eq!(execute(&mut f, ConnCmd::Select(0)), Reply::ok());
        assert_eq!(
            execute(&mut f, ConnCmd::Select(1)),
            Reply::err("ERR DB index is out of range")
        );
        assert_eq!(f.node_calls, 0);
    }

    #[test]
    fn reset_clears_name_protocol_and_user() {
        let mut f = Fake {
            proto: Protocol::Resp3,
            name: Some(bulk("conn")),
            subscribed: true,
            notify: true,
            ..Fake::default()
        };
        assert_eq!(
            execute(&mut f, ConnCmd::Reset),
            Reply::Simple("RESET".into())
        );
        assert!(f.reset);
        assert_eq!(f.proto, Protocol::Resp2);
        assert_eq!(f.name, None);
        assert_eq!(f.user, None);
        assert!(!f.notify && !f.subscribed);
    }

    #[test]
    fn client_setname_and_getname() {
        let mut f = Fake::default();
        let get = |f: &mut Fake| execute(f, ConnCmd::Client(ClientCmd::GetName));
        assert_eq!(get(&mut f), Reply::Nil);
        let set = ConnCmd::Client(ClientCmd::SetName(bulk("worker-1")));
        assert_eq!(execute(&mut f, set), Reply::ok());
        assert_eq!(get(&mut f), Reply::Bulk(bulk("worker-1")));
        // An empty name clears it.
        let clear = ConnCmd::Client(ClientCmd::SetName(Bytes::new()));
        assert_eq!(execute(&mut f, clear), Reply::ok());
        assert_eq!(get(&mut f), Reply::Nil);
        assert_eq!(
            execute(&mut f, ConnCmd::Client(ClientCmd::Id)),
            Reply::Int(7)
        );
        assert_eq!(f.node_calls, 0);
    }

    #[test]
    fn locknotify_needs_resp3() {
        let mut f = Fake::default();
        assert_eq!(
            execute(&mut f, ConnCmd::LockNotify(true)),
            Reply::err(LOCKNOTIFY_RESP2)
        );
        assert!(!f.notify);
        // OFF is always fine.
        assert_eq!(execute(&mut f, ConnCmd::LockNotify(false)), Reply::ok());
        let hello = Hello {
            proto: Some(3),
            auth: None,
            setname: None,
        };
        assert!(matches!(
            execute(&mut f, ConnCmd::Hello(hello)),
            Reply::Map(_)
        ));
        assert_eq!(execute(&mut f, ConnCmd::LockNotify(true)), Reply::ok());
        assert!(f.notify);
        // Back to RESP2 (HELLO 2): the lease watch ends.
        let hello = Hello {
            proto: Some(2),
            auth: None,
            setname: None,
        };
        assert!(matches!(
            execute(&mut f, ConnCmd::Hello(hello)),
            Reply::Map(_)
        ));
        assert!(!f.notify);
    }

    #[test]
    fn hello_authenticates_before_it_switches() {
        let mut f = Fake {
            user: None,
            ..Fake::default()
        };
        let hello = |pass: &'static str| {
            ConnCmd::Hello(Hello {
                proto: Some(3),
                auth: Some((bulk("bob"), bulk(pass))),
                setname: Some(bulk("n")),
            })
        };
        assert_eq!(
            execute(&mut f, hello("wrong")),
            Reply::err(cmd::acl::WRONGPASS)
        );
        assert_eq!((f.proto, f.name.clone()), (Protocol::Resp2, None));
        assert!(matches!(execute(&mut f, hello("secret")), Reply::Map(_)));
        assert_eq!(f.proto, Protocol::Resp3);
        assert_eq!(f.name, Some(bulk("n")));
        assert_eq!(f.user.as_deref(), Some("bob"));
    }
}
