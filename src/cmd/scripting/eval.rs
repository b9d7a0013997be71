//! `EVAL script numkeys [key ...] [arg ...]`, `EVALSHA sha1 numkeys ...`, and the read-only
//! `EVAL_RO` / `EVALSHA_RO`.
//!
//! EVAL and EVALSHA are replicated writes: the entry carries the body (EVAL) or the SHA1
//! (EVALSHA, resolved against the replicated script cache at apply, so NOSCRIPT is decided
//! identically everywhere). EVAL also caches its body, as Redis does. The read-only forms
//! run on the read path; since they cannot write, EVAL_RO does not add to the cache.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::{SCRIPTING, SCRIPTING_RO};
use crate::cmd::registry::{many, none, Own, Replicated, Spec, Touches, NO_KEYS};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::{Args, Reply};
pub use crate::script::cost::CostModel;
use crate::script::{self, Access, Invocation};
use crate::state::acl::User;
use crate::state::scripts::sha1_hex;
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("eval", -3, SCRIPTING, NO_KEYS, parse)
        .key_specs("RW,access,update@i2/n0,1,1")
        .args("script numkeys:integer key:key?* arg?*")
        .docs("Run a Lua script", "2.6.0", "scripting")
        .own(&[Own::MayReplicate]),
    Spec::new("evalsha", -3, SCRIPTING, NO_KEYS, parse)
        .key_specs("RW,access,update@i2/n0,1,1")
        .args("sha1 numkeys:integer key:key?* arg?*")
        .docs(
            "Run a cached Lua script given its SHA1 digest",
            "2.6.0",
            "scripting",
        )
        .own(&[Own::MayReplicate]),
    Spec::new("eval_ro", -3, SCRIPTING_RO, NO_KEYS, parse)
        .key_specs("RO,access@i2/n0,1,1")
        .args("script numkeys:integer key:key?* arg?*")
        .docs("Run a Lua script that may only read", "7.0.0", "scripting")
        .own(&[Own::MayReplicate]),
    Spec::new("evalsha_ro", -3, SCRIPTING_RO, NO_KEYS, parse)
        .key_specs("RO,access@i2/n0,1,1")
        .args("sha1 numkeys:integer key:key?* arg?*")
        .docs(
            "Run a cached read-only Lua script given its SHA1 digest",
            "7.0.0",
            "scripting",
        )
        .own(&[Own::MayReplicate]),
];

/// Redis's reply to EVALSHA of an unknown script (redsync relies on `NOSCRIPT `).
pub const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// Which script to run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Source {
    /// EVAL: the body itself.
    Body(Bytes),
    /// EVALSHA: a lower-case SHA1 hex.
    Sha(String),
}

/// A parsed EVAL-family command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Eval {
    /// The script.
    pub source: Source,
    /// KEYS.
    pub keys: Vec<Bytes>,
    /// ARGV.
    pub args: Vec<Bytes>,
}

/// EVAL_RO or EVALSHA_RO: the same fields as [`Eval`], run on the read path. (It is stored
/// as exactly those fields: a newtype adds nothing to the encoding.)
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvalRo(pub Eval);

/// Parses EVAL, EVALSHA, EVAL_RO and EVALSHA_RO.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let first = args.arg()?;
    let numkeys = args.next_i64()?;
    if numkeys < 0 {
        return Err(Reply::err("ERR Number of keys can't be negative"));
    }
    let rest = args.rest();
    if numkeys as u64 > rest.len() as u64 {
        return Err(Reply::err(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let (keys, argv) = rest.split_at(numkeys as usize);
    let source = if name.starts_with("evalsha") {
        Source::Sha(String::from_utf8_lossy(&first).to_ascii_lowercase())
    } else {
        Source::Body(first)
    };
    let eval = Eval {
        source,
        keys: keys.to_vec(),
        args: argv.to_vec(),
    };
    if name.ends_with("_ro") {
        Ok(Request::Data(Command::EvalRo(EvalRo(eval))))
    } else {
        Ok(Request::Data(Command::Eval(eval)))
    }
}

/// What a `#!lua` first line declares.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Shebang {
    /// The script had a shebang line.
    pub present: bool,
    /// `flags=no-writes`.
    pub no_writes: bool,
}

/// Parses a Redis 7 shebang (`#!lua [flags=no-writes,allow-stale,...]`) and returns the
/// body to compile: the shebang line becomes a comment, so line numbers stay the same.
pub fn shebang(body: &[u8]) -> Result<(Shebang, std::borrow::Cow<'_, [u8]>), Reply> {
    if !body.starts_with(b"#!") {
        return Ok((Shebang::default(), std::borrow::Cow::Borrowed(body)));
    }
    let end = body.iter().position(|&c| c == b'\n').unwrap_or(body.len());
    let line = String::from_utf8_lossy(&body[..end]).into_owned();
    let mut words = line.split_ascii_whitespace();
    let engine = words.next().unwrap_or("#!");
    if engine != "#!lua" {
        return Err(Reply::err(format!(
            "ERR Unexpected engine in script shebang: {engine}"
        )));
    }
    let mut sb = Shebang {
        present: true,
        no_writes: false,
    };
    for word in words {
        let Some(flags) = word.strip_prefix("flags=") else {
            return Err(Reply::err(format!(
                "ERR Unknown lua shebang option: {word}"
            )));
        };
        for flag in flags.split(',').filter(|f| !f.is_empty()) {
            match flag {
                "no-writes" => sb.no_writes = true,
                "allow-oom" | "allow-stale" | "no-cluster" | "allow-cross-slot-keys" => {}
                other => {
                    return Err(Reply::err(format!(
                        "ERR Unexpected flag in script shebang: {other}"
                    )))
                }
            }
        }
    }
    let mut text = body.to_vec();
    text[..2].copy_from_slice(b"--");
    Ok((sb, std::borrow::Cow::Owned(text)))
}

impl Eval {
    /// The body and its SHA1, or NOSCRIPT.
    fn resolve(&self, ks: &Keyspace) -> Result<(String, Bytes), Reply> {
        match &self.source {
            Source::Body(b) => Ok((sha1_hex(b), b.clone())),
            Source::Sha(sha) => ks
                .script(sha)
                .map(|b| (sha.clone(), b.clone()))
                .ok_or_else(|| Reply::err(NOSCRIPT)),
        }
    }
}

impl Replicated for Eval {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["eval", "evalsha"], many(&self.keys), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    fn runs_script(&self) -> bool {
        true
    }

    /// Runs the script inside apply (an entry written before ACLs: no permission checks,
    /// and the fixed charge per `redis.call` it was written under).
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        run(self, ks, ctx, None, CostModel::Fixed)
    }
}

/// The user whose calls need checking: none for one that may run anything (`default`).
fn checked(user: Option<&User>) -> Option<&User> {
    user.filter(|u| !crate::cmd::acl::unrestricted(u))
}

/// Runs EVAL or EVALSHA inside apply; `user` (if any) is checked on every `redis.call`, and
/// the calls are charged by `cost`.
pub fn run(
    eval: &Eval,
    ks: &mut Keyspace,
    ctx: Ctx,
    user: Option<&User>,
    cost: CostModel,
) -> Reply {
    let (sha, body) = match eval.resolve(ks) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let (flags, text) = match shebang(&body) {
        Ok(x) => x,
        Err(e) => return e,
    };
    if matches!(eval.source, Source::Body(_)) {
        ks.cache_script(sha.clone(), body.clone());
    }
    let budget = ks.script_budget();
    let inv = Invocation {
        sha: &sha,
        body: &text,
        keys: &eval.keys,
        args: &eval.args,
        now: ctx.now,
        budget,
        user: checked(user),
        cost,
    };
    if flags.no_writes {
        return script::run(Access::Read(ks), &inv);
    }
    script::run(Access::Write(ks), &inv)
}

impl Replicated for EvalRo {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["eval_ro", "evalsha_ro"], many(&self.0.keys), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    fn runs_script(&self) -> bool {
        true
    }

    /// Runs the script read-only (EVAL_RO, EVALSHA_RO), as written before metering.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        run_ro(&self.0, ks, now, None, CostModel::Fixed)
    }
}

/// Runs EVAL_RO or EVALSHA_RO; `user` (if any) is checked on every `redis.call`, and the
/// calls are charged by `cost`.
pub fn run_ro(eval: &Eval, ks: &Keyspace, now: u64, user: Option<&User>, cost: CostModel) -> Reply {
    let (sha, body) = match eval.resolve(ks) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let text = match shebang(&body) {
        Ok((sb, _)) if sb.present && !sb.no_writes => {
            return Reply::err("ERR Can not execute a script with write flag using *_ro command.")
        }
        Ok((_, text)) => text,
        Err(e) => return e,
    };
    let inv = Invocation {
        sha: &sha,
        body: &text,
        keys: &eval.keys,
        args: &eval.args,
        now,
        budget: ks.script_budget(),
        user: checked(user),
        cost,
    };
    script::run(Access::Read(ks), &inv)
}
