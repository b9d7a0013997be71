//! A session's ACL side: the permission check of every command (top level and inside
//! MULTI), AUTH and HELLO AUTH, the ACL subcommands answered from this node's users, and
//! the ACL writes, which wait until this node has applied them (so that an AUTH right after
//! a SETUSER on a follower sees the new user).

use std::sync::Arc;

use super::{await_write, Session};
use crate::cmd::acl::log::{Context, Reason, Refusal};
use crate::cmd::acl::{self, AclCmd, EvalAs};
use crate::cmd::{Command, Spec};
use crate::resp::Reply;
use crate::state::acl::{Denied, DEFAULT_USER};
use bytes::Bytes;

/// What the session does with a command after the ACL check.
pub(super) enum Verdict {
    /// Run it.
    Run,
    /// Refuse it with this reply.
    Refuse(Reply),
    /// The connection's user was deleted: close the connection, as Redis does.
    Close,
}

impl Session {
    /// Checks a resolved command against the connection's user. Commands allowed before
    /// authentication (AUTH, HELLO, ...) are never checked, as in Redis.
    pub(super) fn check_acl(&mut self, spec: &Spec, argv: &[Bytes]) -> Verdict {
        let Some(name) = self.user.clone() else {
            return Verdict::Run;
        };
        if spec.no_auth() {
            return Verdict::Run;
        }
        let users = self.shared.users();
        let Some(user) = users.get_ref(&name) else {
            return Verdict::Close;
        };
        if acl::unrestricted(user) {
            return Verdict::Run;
        }
        let sub = acl::first_arg(argv);
        let subject = acl::subject(spec, sub.as_deref(), argv);
        let denied = match user.check(&subject) {
            Ok(()) => return Verdict::Run,
            Err(d) => d,
        };
        let full = acl::full_name(spec, argv);
        let (reason, object) = match denied {
            Denied::Command => (Reason::Command, full.clone()),
            Denied::Key(i) => (Reason::Key, lossy(subject.keys[i].0)),
            Denied::Channel(i) => (Reason::Channel, lossy(subject.channels[i].0)),
        };
        let context = if self.txn.active() {
            Context::Multi
        } else {
            Context::TopLevel
        };
        self.log_refusal(reason, context, object, &name);
        Verdict::Refuse(acl::noperm(denied, &full))
    }

    fn log_refusal(&self, reason: Reason, context: Context, object: String, username: &str) {
        self.shared.acl_log.add(Refusal {
            reason,
            context,
            object,
            username: username.to_string(),
            client_info: self.shared.clients.line(self.id),
        });
    }

    /// A replicated command as this connection sends it: scripts run as its user.
    pub(super) fn as_user(&self, cmd: Command) -> Command {
        match &self.user {
            Some(u) => EvalAs::wrap(u, cmd),
            None => cmd,
        }
    }

    /// Authenticates as `user` (default: `default`), or answers WRONGPASS and logs it.
    pub(super) fn login(&mut self, user: Option<&[u8]>, pass: &[u8], cmd: &str) -> Reply {
        let name = user.map_or_else(|| DEFAULT_USER.to_string(), lossy);
        if self.shared.authenticate(&name, pass) {
            self.user = Some(Arc::from(name.as_str()));
            self.shared
                .clients
                .update(self.id, |c| c.user.clone_from(&name));
            return Reply::ok();
        }
        self.log_refusal(Reason::Auth, Context::TopLevel, cmd.to_string(), &name);
        Reply::err(acl::WRONGPASS)
    }

    /// The ACL subcommands that read this node's users (everything but LOAD).
    pub(super) fn acl_local(&mut self, c: AclCmd) -> Reply {
        let shared = &self.shared;
        let bulks = |v: Vec<String>| Reply::Array(v.into_iter().map(Reply::bulk).collect());
        match c {
            AclCmd::GetUser(name) => shared
                .user(&name)
                .map_or(Reply::Nil, |u| acl::getuser_reply(&u)),
            AclCmd::List => {
                let users = shared.users().names();
                let lines = users
                    .iter()
                    .filter_map(|n| shared.user(n).map(|u| u.describe(n)));
                bulks(lines.collect())
            }
            AclCmd::Users => bulks(shared.users().names()),
            AclCmd::WhoAmI => match &self.user {
                Some(u) => Reply::bulk(u.to_string()),
                None => Reply::Nil,
            },
            AclCmd::Cat(None) => bulks(acl::CATEGORIES.iter().map(|c| c.to_string()).collect()),
            AclCmd::Cat(Some(cat)) => match acl::category_commands(&cat) {
                Some(names) => bulks(names),
                None => Reply::err(format!("ERR Unknown category '{cat}'")),
            },
            AclCmd::Log(count) => shared.acl_log.reply(count.unwrap_or(10)),
            AclCmd::LogReset => {
                shared.acl_log.reset();
                Reply::ok()
            }
            AclCmd::DryRun(name, argv) => acl::dryrun(shared.user(&name), &name, argv),
            AclCmd::GenPass(bits) => acl::genpass(bits),
            AclCmd::Save => shared.save_aclfile(),
            AclCmd::Load => Reply::err("ERR ACL LOAD is not allowed inside a transaction"),
        }
    }

    /// An ACL subcommand outside MULTI: LOAD goes through the log, the rest is local.
    pub(super) async fn acl_cmd(&mut self, c: AclCmd) -> Reply {
        match c {
            AclCmd::Load => match self.shared.read_aclfile() {
                Ok(load) => self.acl_write(Command::AclLoad(load)).await,
                Err(e) => e,
            },
            other => self.acl_local(other),
        }
    }

    /// Proposes an ACL change and, once it succeeded, waits (up to the write deadline) until
    /// this node has applied a change to its users: on a follower the leader answers first.
    pub(super) async fn acl_write(&mut self, c: Command) -> Reply {
        let mut view = self.shared.acl.clone();
        let before = view.borrow_and_update().generation();
        let rx = self.shared.proposer.submit_as(self.user.clone(), c);
        let deadline = self.write_deadline();
        let reply = await_write(rx, deadline).await;
        if reply.is_error() || matches!(reply, Reply::Int(0)) {
            return reply;
        }
        let applied = view.wait_for(|u| u.generation() > before);
        // Past the deadline the reply stands: the change is committed, only not yet here.
        let _ = tokio::time::timeout_at(deadline, applied).await;
        reply
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
