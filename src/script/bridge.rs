//! `redis.call` / `redis.pcall`: a script's commands go through the same dispatch table,
//! parsers and apply functions as a client's, against the keyspace of the entry being
//! applied (or read, for EVAL_RO), at the entry's cluster time.

use bytes::Bytes;
use mlua::{Lua, MultiValue, Value};

use super::convert::{fmt_g17, reply_to_lua};
use super::cost::{self, CostModel, BASE};
use crate::cmd::keys::SCAN_STEP_MAX;
use crate::cmd::{self, Command, ConnCmd, Ctx, Request, Spec};
use crate::resp::args::parse_i64;
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// The keyspace a script runs against.
pub enum Access<'a> {
    /// EVAL/EVALSHA inside apply: writes allowed.
    Write(&'a mut Keyspace),
    /// EVAL_RO/EVALSHA_RO on the read path.
    Read(&'a Keyspace),
}

impl Access<'_> {
    /// The keyspace, read-only.
    pub fn ks(&self) -> &Keyspace {
        match self {
            Access::Write(ks) => ks,
            Access::Read(ks) => ks,
        }
    }
}

fn err(text: &str) -> Reply {
    Reply::err(format!("ERR {text}"))
}

/// Turns the Lua arguments of `redis.call` into a command line, as Redis does: strings as
/// they are, numbers with `%.17g`, anything else an error.
pub fn argv(args: &MultiValue) -> Result<Vec<Bytes>, Reply> {
    if args.is_empty() {
        return Err(err(
            "Please specify at least one argument for this redis lib call",
        ));
    }
    args.iter()
        .map(|v| match v {
            Value::String(s) => Ok(Bytes::copy_from_slice(&s.as_bytes())),
            Value::Number(n) => Ok(Bytes::from(fmt_g17(*n))),
            Value::Integer(n) => Ok(Bytes::from(n.to_string())),
            _ => Err(err(
                "Lua redis lib command arguments must be strings or integers",
            )),
        })
        .collect()
}

/// Executes one command line for a script. Returns the reply (an error reply is what
/// `redis.call` raises and `redis.pcall` returns).
pub fn execute(
    access: &mut Access<'_>,
    argv: Vec<Bytes>,
    now: u64,
    user: Option<&crate::state::acl::User>,
) -> Reply {
    let name = String::from_utf8_lossy(&argv[0]).to_lowercase();
    let Some(spec) = cmd::lookup(&name) else {
        return err("Unknown Redis command called from script");
    };
    if cmd::resolve(&argv).is_err() {
        return err("Wrong number of args calling Redis command from script");
    }
    // EXPIRETIME and PEXPIRETIME answer in Unix time, which only the serving node's wall
    // clock knows (the log carries cluster time): inside apply, replicas would disagree.
    if spec.flags.contains(&"noscript") || spec.has(cmd::Own::NodeClock) {
        return not_allowed();
    }
    // With the caller's permissions, decided from the replicated users: the same on every
    // replica.
    if let Some(u) = user {
        if let Err(denied) = cmd::acl::check(u, spec, &argv) {
            return cmd::acl::script_denied(denied);
        }
    }
    // Redis refuses by the table's `write` flag, before the command parses its arguments:
    // a BITFIELD of GETs (served as a read) is still a write command to a read-only script.
    if spec.flags.contains(&"write") && matches!(access, Access::Read(_)) {
        return read_only_script();
    }
    match (spec.parse)(&mut Args::new(argv)) {
        Err(reply) => reply,
        Ok(Request::Data(Command::Sort(s))) => {
            let ks = access.ks();
            Command::Sort(s.for_script(ks, now)).query(ks, now)
        }
        Ok(Request::Data(c)) if c.is_read() => c.query(access.ks(), now),
        Ok(Request::Data(c)) => match access {
            Access::Read(_) => read_only_script(),
            Access::Write(ks) => {
                let revision = ks.bump_revision();
                c.apply(ks, Ctx { now, revision })
            }
        },
        Ok(Request::Conn(c)) => match c {
            ConnCmd::Ping(None) => Reply::Simple("PONG".into()),
            ConnCmd::Ping(Some(m)) | ConnCmd::Echo(m) => Reply::Bulk(m),
            ConnCmd::Select(0) => Reply::ok(),
            ConnCmd::Select(_) => err("DB index is out of range"),
            ConnCmd::Command(reply) => reply,
            // Connection state and node-local facts (INFO, CLIENT) differ between replicas.
            _ => not_allowed(),
        },
        Ok(Request::Admin(_)) => not_allowed(),
    }
}

/// `redis.acl_check_cmd(command, arg...)`, as Redis 7.0's
/// `luaRedisAclCheckCmdPermissionsCommand`: whether the user running the script may run that
/// command line (command, keys and channels), as `(boolean, false)`; an unknown command (or
/// an unknown subcommand of a container) gives `(error table, true)`, which the Lua side
/// raises. The arguments become a command line as `redis.call`'s do, with its errors. As
/// in Redis 7.0 the argument count is not checked (`acl_check_cmd('get')` is true): the
/// keys are those the line names.
pub fn acl_check_cmd(
    lua: &Lua,
    args: &MultiValue,
    user: Option<&crate::state::acl::User>,
) -> mlua::Result<(Value, bool)> {
    let verdict = argv(args).and_then(|argv| {
        let name = String::from_utf8_lossy(&argv[0]).to_lowercase();
        let spec = cmd::lookup(&name)
            .filter(|spec| cmd::acl::known_subcommand(spec, &argv))
            .ok_or_else(|| err("Invalid command passed to redis.acl_check_cmd()"))?;
        Ok(user.is_none_or(|u| cmd::acl::check(u, spec, &argv).is_ok()))
    });
    match verdict {
        Ok(allowed) => Ok((Value::Boolean(allowed), false)),
        Err(reply) => to_lua(lua, &reply, false),
    }
}

fn read_only_script() -> Reply {
    err("Write commands are not allowed from read-only scripts.")
}

fn not_allowed() -> Reply {
    err("This Redis command is not allowed from script")
}

/// Converts an executed reply for Lua: `(value, failed)`, where `failed` marks an error
/// reply (the Lua side of `redis.call` raises it).
pub fn to_lua(lua: &Lua, reply: &Reply, resp3: bool) -> mlua::Result<(Value, bool)> {
    Ok((reply_to_lua(lua, reply, resp3)?, reply.is_error()))
}

/// What a call costs before it runs (the keyspace part of [`cost`]'s rules).
pub fn cost_before(model: CostModel, ks: &Keyspace, argv: &[Bytes], now: u64) -> u64 {
    if model == CostModel::Fixed {
        return cost::BASE;
    }
    let args: u64 = argv.iter().map(|a| a.len() as u64).sum();
    let mut units = BASE + args / cost::BYTES_PER_UNIT;
    let name = argv
        .first()
        .map(|n| String::from_utf8_lossy(n).to_ascii_lowercase())
        .unwrap_or_default();
    let Some(spec) = cmd::lookup(&name) else {
        return units;
    };
    units = units.saturating_add(keyspace_walk(spec, ks, argv));
    if !spec.flags.contains(&"fast") {
        for key in named_keys(spec, argv) {
            if let Some(entry) = ks.get(key, now) {
                units = units.saturating_add(cost::value_units(&entry.value));
            }
        }
    }
    units
}

/// The keys a command walks without naming them.
fn keyspace_walk(spec: &Spec, ks: &Keyspace, argv: &[Bytes]) -> u64 {
    let stored = ks.stored_len() as u64;
    match spec.name {
        _ if spec.has(cmd::Own::WalksKeyspace) => stored,
        "scan" => {
            let count = argv
                .windows(2)
                .skip(2)
                .find(|w| w[0].eq_ignore_ascii_case(b"count"))
                .and_then(|w| parse_i64(&w[1]))
                .map_or(10, |n| n.max(1) as u64);
            count.min(SCAN_STEP_MAX).min(stored)
        }
        _ => 0,
    }
}

/// The keys a command line names, by its table row (`(first, last, step)`).
fn named_keys<'a>(spec: &Spec, argv: &'a [Bytes]) -> impl Iterator<Item = &'a Bytes> {
    let argc = argv.len() as i64;
    let first = i64::from(spec.first_key);
    let last = match spec.last_key {
        l if l < 0 => argc + i64::from(l),
        l => i64::from(l).min(argc - 1),
    };
    let step = spec.step.max(1) as usize;
    // A command without keys has `first` 0: an empty range.
    let first = first.max(1);
    (first..=last)
        .step_by(step)
        .filter_map(move |i| argv.get(i as usize))
}
