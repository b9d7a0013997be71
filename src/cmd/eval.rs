//! `EVAL script numkeys [key ...] [arg ...]`, `EVALSHA sha1 numkeys ...`, and the read-only
//! `EVAL_RO` / `EVALSHA_RO`.
//!
//! EVAL and EVALSHA are replicated writes: the entry carries the body (EVAL) or the SHA1
//! (EVALSHA, resolved against the replicated script cache at apply, so NOSCRIPT is decided
//! identically everywhere). EVAL also caches its body, as Redis does. The read-only forms
//! run on the read path; since they cannot write, EVAL_RO does not add to the cache.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::{Command, Ctx, Request};
use crate::resp::{Args, Reply};
use crate::script::{self, Access, Invocation};
use crate::state::Keyspace;

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
        Ok(Request::Read(Command::EvalRo(eval)))
    } else {
        Ok(Request::Write(Command::Eval(eval)))
    }
}

impl Eval {
    /// The body and its SHA1, or NOSCRIPT.
    fn resolve(&self, ks: &Keyspace) -> Result<(String, Bytes), Reply> {
        match &self.source {
            Source::Body(b) => Ok((script::sha1_hex(b), b.clone())),
            Source::Sha(sha) => ks
                .script(sha)
                .map(|b| (sha.clone(), b.clone()))
                .ok_or_else(|| Reply::err(NOSCRIPT)),
        }
    }

    /// Runs the script inside apply.
    pub fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let (sha, body) = match self.resolve(ks) {
            Ok(x) => x,
            Err(e) => return e,
        };
        if matches!(self.source, Source::Body(_)) {
            ks.cache_script(sha.clone(), body.clone());
        }
        let budget = ks.script_budget();
        let inv = Invocation {
            sha: &sha,
            body: &body,
            keys: &self.keys,
            args: &self.args,
            now: ctx.now,
            budget,
        };
        script::run(Access::Write(ks), &inv)
    }

    /// Runs the script read-only (EVAL_RO, EVALSHA_RO).
    pub fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        let (sha, body) = match self.resolve(ks) {
            Ok(x) => x,
            Err(e) => return e,
        };
        let inv = Invocation {
            sha: &sha,
            body: &body,
            keys: &self.keys,
            args: &self.args,
            now,
            budget: ks.script_budget(),
        };
        script::run(Access::Read(ks), &inv)
    }
}
