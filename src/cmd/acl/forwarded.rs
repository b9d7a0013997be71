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
                .zip(
                    flags
                        .into_iter()
                        .chain(std::iter::repeat(keyspec::KeyFlags::NONE)),
                )
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

#[cfg(test)]
mod tests {

    use super::*;
    use crate::cmd::acl::check;
    use crate::cmd::Request;
    use crate::state::acl::Access;

    use crate::cmd::test_argv as argv;

    /// The keys a forwarded command names, with the access the leader asks of each under
    /// the command's own name.
    fn forwarded_access(name: &str, cmd: &Command) -> Vec<(Vec<u8>, Access)> {
        let (names, keys, _) = cmd.forwarded().expect("a client command");
        assert!(names.contains(&name), "{name} not in {names:?}");
        let spec = lookup(name).unwrap();
        let flags = cmd
            .key_flags()
            .unwrap_or_else(|| keyspec::layout(spec, keys.len()));
        assert_eq!(flags.len(), keys.len(), "{name}");
        keys.iter()
            .zip(flags)
            .map(|(k, f)| (k.to_vec(), access(f)))
            .collect()
    }

    /// The leader asks of each key of a forwarded command the access the command line's
    /// check asks (the row's key specs, or its own function), key by key and in order.
    #[test]
    fn the_leader_asks_each_key_what_the_command_line_asks() {
        let lines = [
            "LMOVE a b LEFT RIGHT",
            "BLMOVE a b LEFT RIGHT 0",
            "RPOPLPUSH a b",
            "SMOVE a b m",
            "COPY a b",
            "RENAME a b",
            "SET k v",
            "SET k v GET",
            "SETNX k v",
            "BITFIELD k GET u8 0",
            "BITFIELD k GET u8 0 SET u8 0 1",
            "BITFIELD_RO k GET u8 0",
            "ZUNIONSTORE d 2 a b",
            "ZINTERSTORE d 1 a",
            "ZDIFFSTORE d 2 a b",
            "SDIFFSTORE d a b",
            "SINTERSTORE d a b",
            "BITOP AND d a b",
            "ZRANGESTORE d s 0 -1",
            "GEOSEARCHSTORE d g FROMMEMBER m BYRADIUS 1 km",
            "GEORADIUS g 1 2 3 km STORE d",
            "SORT l STORE d",
            "SORT l BY w_* GET # STORE d",
            "SORT l",
            "MSET a 1 b 2",
            "DEL a b",
            "LMPOP 2 a b LEFT",
            "ZMPOP 1 a MIN",
            "INCR k",
            "GETDEL k",
            "EXPIRE k 10",
            "HSET h f v",
            "SADD s m",
            "LPUSH l a",
            "APPEND k v",
        ];
        for line in lines {
            let a = argv(line);
            let name = line.split(' ').next().unwrap().to_lowercase();
            let cmd = match crate::cmd::parse(a.clone()) {
                Ok(Request::Data(c)) => c,
                other => panic!("{line}: {other:?}"),
            };
            let spec = lookup(&name).unwrap();
            let mut want: Vec<(Vec<u8>, Access)> = check::keys(spec, &a)
                .into_iter()
                .map(|(k, acc)| (k.to_vec(), acc))
                .collect();
            // The order may differ (GEOSEARCHSTORE names its source first when forwarded).
            let mut got = forwarded_access(&name, &cmd);
            want.sort_by(|x, y| x.0.cmp(&y.0));
            got.sort_by(|x, y| x.0.cmp(&y.0));
            assert_eq!(got, want, "{line}");
        }
    }
}
