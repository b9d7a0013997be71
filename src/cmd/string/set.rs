//! `SET key value [NX|XX|IFEQ v|IFNE v|IFDEQ d|IFDNE d] [GET] [EX s|PX ms|EXAT ts|PXAT ts-ms|KEEPTTL]`,
//! and the older `SETNX key value`, `SETEX key seconds value`, `PSETEX key ms value` forms.
//! The conditions of Redis 8.4 and Valkey are applied by [`crate::cmd::cond::SetIf`].

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::cond::{parse_set_cond, Cond, SetIf};
use crate::cmd::keyspec::{KeyFlags, KeyRef};
use crate::cmd::registry::flags::{WRITE, WRITE_GROW_FAST};
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Ctx, Expiry, Request};
use crate::resp::args::syntax_error;
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("set", -3, WRITE, ONE_KEY, parse)
        .key_specs("RW,access,update,variable_flags@i1/r0,1,0")
        .getkeys(set_keys)
        .args("key:key value condition@(NX|XX|IFEQ=ifeq-value|IFNE=ifne-value|IFDEQ=ifeq-digest|IFDNE=ifne-digest)? GET? expiration@(EX=seconds:integer|PX=milliseconds:integer|EXAT=unix-time-seconds:unix-time|PXAT=unix-time-milliseconds:unix-time|KEEPTTL)?").docs(
        "Store a string at a key, with optional expiry and conditions",
        "1.0.0",
        "string",
    ),
    Spec::new("setnx", 3, WRITE_GROW_FAST, ONE_KEY, parse_setnx)
        .key_specs("OW,insert@i1/r0,1,0")
        .args("key:key value").docs(
        "Store a string only if the key is absent",
        "1.0.0",
        "string",
    ),
    Spec::new("setex", 4, WRITE, ONE_KEY, parse_setex)
        .key_specs("OW,update@i1/r0,1,0")
        .args("key:key seconds:integer value").docs(
        "Store a string with a time to live in seconds",
        "2.0.0",
        "string",
    ),
    Spec::new("psetex", 4, WRITE, ONE_KEY, parse_setex)
        .key_specs("OW,update@i1/r0,1,0")
        .args("key:key milliseconds:integer value").docs(
        "Store a string with a time to live in milliseconds",
        "2.6.0",
        "string",
    ),
];

/// What happens to the key's TTL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TtlMode {
    /// Clear any TTL (plain SET).
    Clear,
    /// Keep the existing TTL (KEEPTTL).
    Keep,
    /// Set a new one.
    Set(Expiry),
}

/// Which reply shape the form uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SetForm {
    /// SET: +OK, or nil when NX/XX aborts.
    Set,
    /// SETNX: :1 or :0.
    SetNx,
}

/// A parsed SET.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Set {
    /// The key.
    pub key: Bytes,
    /// The value.
    pub value: Bytes,
    /// NX: only if absent.
    pub nx: bool,
    /// XX: only if present.
    pub xx: bool,
    /// GET: reply with the old value.
    pub get: bool,
    /// TTL handling.
    pub ttl: TtlMode,
    /// Reply shape.
    pub form: SetForm,
}

/// SET's key and its flags (Redis's `setGetKeys`): with GET it also reads the old value.
fn set_keys(argv: &[Bytes]) -> Vec<KeyRef> {
    let get = argv.iter().skip(3).any(|a| is(a, "get"));
    vec![KeyRef::arg(1, set_flags(get))]
}

fn set_flags(get: bool) -> KeyFlags {
    if get {
        KeyFlags::RW.with(KeyFlags::ACCESS).with(KeyFlags::UPDATE)
    } else {
        KeyFlags::OW.with(KeyFlags::UPDATE)
    }
}

fn is(opt: &[u8], word: &str) -> bool {
    opt.eq_ignore_ascii_case(word.as_bytes())
}

/// Parses `SET key value [options]` with Redis's option-conflict rules.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let value = args.arg()?;
    let mut set = Set {
        key,
        value,
        nx: false,
        xx: false,
        get: false,
        ttl: TtlMode::Clear,
        form: SetForm::Set,
    };
    let mut unit: Option<(&str, Bytes)> = None;
    let mut cond = None;
    while args.remaining() > 0 {
        let opt = args.arg()?;
        let has_next = args.remaining() > 0;
        let timed = unit.is_some();
        if is(&opt, "NX") && !set.xx && cond.is_none() {
            set.nx = true;
        } else if is(&opt, "XX") && !set.nx && cond.is_none() {
            set.xx = true;
        } else if Cond::is_word(&opt) && !set.nx && !set.xx && cond.is_none() {
            cond = Some(parse_set_cond(&opt, args)?);
        } else if is(&opt, "GET") {
            set.get = true;
        } else if is(&opt, "KEEPTTL") && !timed {
            set.ttl = TtlMode::Keep;
        } else if set.ttl != TtlMode::Keep
            && has_next
            && ["EX", "PX", "EXAT", "PXAT"].iter().any(|w| is(&opt, w))
        {
            let word = ["EX", "PX", "EXAT", "PXAT"]
                .into_iter()
                .find(|w| is(&opt, w))
                .unwrap_or("EX");
            if matches!(&unit, Some((u, _)) if *u != word) {
                return Err(syntax_error());
            }
            unit = Some((word, args.arg()?));
        } else {
            return Err(syntax_error());
        }
    }
    if let Some((word, raw)) = unit {
        set.ttl = TtlMode::Set(Expiry::parse(word, &raw, "set")?);
    }
    Ok(Request::Data(match cond {
        Some(cond) => Command::SetIf(SetIf { set, cond }),
        None => Command::Set(set),
    }))
}

/// `SETNX key value`.
pub fn parse_setnx(args: &mut Args) -> Result<Request, Reply> {
    let (key, value) = (args.arg()?, args.arg()?);
    let set = Set {
        key,
        value,
        nx: true,
        xx: false,
        get: false,
        ttl: TtlMode::Clear,
        form: SetForm::SetNx,
    };
    Ok(Request::Data(Command::Set(set)))
}

/// `SETEX key seconds value` and `PSETEX key milliseconds value`.
pub fn parse_setex(args: &mut Args) -> Result<Request, Reply> {
    let word = if args.name() == "psetex" { "PX" } else { "EX" };
    let name = args.name().to_string();
    let key = args.arg()?;
    let raw = args.arg()?;
    let value = args.arg()?;
    let ttl = TtlMode::Set(Expiry::parse(word, &raw, &name)?);
    Ok(Request::Data(Command::Set(Set {
        key,
        value,
        nx: false,
        xx: false,
        get: false,
        ttl,
        form: SetForm::Set,
    })))
}

impl Replicated for Set {
    fn forwarded(&self) -> Option<Touches<'_>> {
        // SET ... GET reads the old value: only SET can say that (its row's flags).
        let names: &'static [&'static str] = if self.get {
            &["set"]
        } else {
            &["set", "setnx", "setex", "psetex"]
        };
        Some((names, one(&self.key), none()))
    }

    /// As the row's `set_keys` finds them: the old value is read only with GET.
    fn key_flags(&self) -> Option<Vec<KeyFlags>> {
        Some(vec![set_flags(self.get)])
    }

    fn is_read(&self) -> bool {
        false
    }

    fn resolve_absolute_time(&mut self, unix_now_ms: i64) {
        if let TtlMode::Set(e) = &mut self.ttl {
            e.resolve(unix_now_ms);
        }
    }

    /// Applies the SET at `ctx`.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let old = match ks.get_str(&self.key, ctx.now) {
            Ok(v) => v.cloned(),
            Err(e) if self.get => return e.into(),
            Err(_) => None,
        };
        let found = ks.get(&self.key, ctx.now).is_some();
        let old_reply = || old.clone().map_or(Reply::Nil, Reply::Bulk);
        // A key held by readers or semaphore permits has no value, but it is taken: NX (the
        // `SET key owner NX PX` lock) must not grant a writer beside them. Before RLOCK and
        // SEMACQUIRE no key had such holders, so old entries apply as they did.
        let held = found || ks.lock_holders(&self.key, ctx.now).is_some();
        if (self.nx && held) || (self.xx && !found) {
            return match (self.get, self.form) {
                (true, _) => old_reply(),
                (false, SetForm::SetNx) => Reply::Int(0),
                (false, SetForm::Set) => Reply::Nil,
            };
        }
        let expire_at = match self.ttl {
            TtlMode::Clear => None,
            TtlMode::Keep => ks.get(&self.key, ctx.now).and_then(|e| e.expire_at),
            TtlMode::Set(exp) => Some(exp.deadline(ctx.now)),
        };
        match expire_at {
            Some(at) if at <= ctx.now => {
                // Redis sets the key and expires it at once: its events say so.
                if !found {
                    ks.notify(crate::state::notify::NEW, "new", &self.key);
                }
                ks.remove(&self.key, ctx.now);
                ks.notify(crate::state::notify::STRING, "set", &self.key);
                ks.notify(crate::state::notify::GENERIC, "expire", &self.key);
                ks.notify(crate::state::notify::EXPIRED, "expired", &self.key);
            }
            _ => {
                ks.set_str(
                    self.key.clone(),
                    self.value.clone(),
                    expire_at,
                    ctx.revision,
                    ctx.now,
                );
                ks.notify(crate::state::notify::STRING, "set", &self.key);
                if matches!(self.ttl, TtlMode::Set(_)) {
                    ks.notify(crate::state::notify::GENERIC, "expire", &self.key);
                }
            }
        }
        match (self.get, self.form) {
            (true, _) => old_reply(),
            (false, SetForm::SetNx) => Reply::Int(1),
            (false, SetForm::Set) => Reply::ok(),
        }
    }
}
