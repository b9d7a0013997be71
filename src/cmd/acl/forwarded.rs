//! The leader's check of forwarded commands: a follower forwards replicated commands, not
//! command lines, so the leader checks what each command does (the commands it can come
//! from, its keys and channels, which each log type declares in its own file with
//! [`crate::cmd::Replicated::forwarded`]) against the user the follower names. Each key needs
//! the access its row's key spec asks for ([`keyspec::layout`]), as on the command line.

use super::check::{access, categories, noperm};
use crate::cmd::acl::{EvalBounded, EvalMetered};
use crate::cmd::keyspec;
use crate::cmd::registry::lookup;
use crate::cmd::Command;
use crate::resp::Reply;
use crate::state::acl::{Denied, Subject, User};

/// Checks a command that a follower forwarded on behalf of `user` (the leader's check, so
/// that forwarding is no way around ACLs). The command passes if the user may run one of
/// the commands it can come from, on its keys and channels: a command that one of the
/// user's allowed commands can produce grants nothing new. A transaction passes if each
/// command in it does; a script must run as the same user.
pub fn check_forwarded(user: &User, name: &str, cmd: &Command) -> Result<(), Reply> {
    if let Command::Exec(exec) = cmd {
        for c in &exec.cmds {
            check_forwarded(user, name, c)?;
        }
    }
    if let Command::EvalAs(e)
    | Command::EvalMetered(EvalMetered(e))
    | Command::EvalBounded(EvalBounded(e)) = cmd
    {
        if e.user != name {
            return Err(Reply::err(
                "NOPERM a forwarded script must run as the connection's user",
            ));
        }
    }
    let Some((names, keys, channels)) = cmd.forwarded() else {
        return Err(Reply::err(
            "NOPERM this command is the server's own and cannot be forwarded for a user",
        ));
    };
    let mut last = Denied::Command;
    for full in names {
        // `cmd|sub` for a container's subcommand.
        let (cmd_name, sub) = match full.split_once('|') {
            Some((c, s)) => (c, Some(s)),
            None => (*full, None),
        };
        let Some(spec) = lookup(cmd_name) else {
            continue;
        };
        // Each key's access, as the command line's check finds it: from the row's key
        // specs in order, or from the type where they cannot place the keys (SORT's).
        let flags = cmd
            .key_flags()
            .unwrap_or_else(|| keyspec::layout(spec, keys.len()));
        let subject = Subject {
            name: spec.name,
            sub,
            categories: categories(spec, sub),
            keys: keys
                .iter()
                .zip(flags.into_iter().chain(std::iter::repeat(keyspec::KeyFlags::NONE)))
                .map(|(k, f)| (*k, access(f)))
                .collect(),
            channels: channels.iter().map(|c| (*c, false)).collect(),
        };
        match user.check(&subject) {
            Ok(()) => return Ok(()),
            // A command the user may run, on a key or channel it may not: that is the reason.
            Err(d) if last == Denied::Command => last = d,
            Err(_) => {}
        }
    }
    Err(noperm(last, names.first().copied().unwrap_or("")))
}
