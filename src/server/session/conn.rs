//! Connection commands (PING, HELLO, AUTH, SELECT, RESET, CLIENT, LOCKNOTIFY, INFO, CONFIG,
//! ...): [`execute`] runs them against a [`ConnCtx`], the narrow view of what such a command
//! may read or change of its connection (protocol, name, user, modes, reply mode) and, through
//! [`ConnCtx::node`] and [`ConnCtx::clients`], of the node (its settings, INFO, the client
//! registry). The session implements it over its `Shared` (`session::ctx`); the unit tests,
//! over a fake.

use std::sync::Arc;

use bytes::Bytes;

use crate::cmd::client::{ClientCmd, ReplyMode};
use crate::cmd::connection::{invalid_client_name, valid_client_name, Hello};
use crate::cmd::ConnCmd;
use crate::resp::{Protocol, Reply};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd;

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
