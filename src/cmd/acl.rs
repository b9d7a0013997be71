//! `ACL SETUSER|DELUSER|GETUSER|LIST|USERS|WHOAMI|CAT|LOG|DRYRUN|GENPASS|LOAD|SAVE|HELP`,
//! and what the permission check needs from the command table: each command's categories,
//! the keys and channels a command line names ([`subject`]), and the same for a replicated
//! command forwarded by a follower ([`check_forwarded`]).
//!
//! SETUSER, DELUSER and LOAD change the replicated users ([`crate::state::acl`]), so they
//! are log entries: [`AclSetUser`], [`AclDelUser`] and [`AclLoad`]. Passwords are hashed
//! when the command is parsed, so that a plain-text password never reaches the log. The
//! other subcommands read this node's applied users in the session.
//!
//! Categories follow Redis's for the commands Palisade has; Palisade's own commands (LOCK,
//! FENCEDSET, ...) are in `@palisade` as well as `@read` or `@write`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::eval::{self, Eval, EvalRo};
use super::registry::{lookup, table, wrong_arity, Replicated, Spec, NO_KEYS, PALISADE_GROUP};
use super::{Command, ConnCmd, Ctx, Request};
use crate::resp::args::{parse_i64, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::acl::{hash_password, Access, Catalog, Denied, RuleError, Subject, User};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] =
    &[
        Spec::new("acl", -2, &["noscript", "loading", "stale"], NO_KEYS, parse).docs(
            "Subcommands that manage and inspect ACL users",
            "6.0.0",
            "server",
        ),
    ];

/// Every category `ACL CAT` lists: Redis 7's, then Palisade's own.
pub const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
    PALISADE_GROUP,
];

/// The subcommands of container commands (`+config|get` names one of these).
const SUBCOMMANDS: &[(&str, &[&str])] = &[
    (
        "acl",
        &[
            "cat", "deluser", "dryrun", "genpass", "getuser", "help", "list", "load", "log",
            "save", "setuser", "users", "whoami",
        ],
    ),
    (
        "client",
        &[
            "getname", "help", "id", "info", "list", "setinfo", "setname",
        ],
    ),
    (
        "command",
        &["count", "docs", "getkeys", "help", "info", "list"],
    ),
    ("config", &["get", "help", "resetstat", "rewrite", "set"]),
    (
        "latency",
        &["doctor", "help", "histogram", "latest", "reset"],
    ),
    ("memory", &["help", "purge", "usage"]),
    (
        "object",
        &["encoding", "freq", "help", "idletime", "refcount"],
    ),
    (
        "pubsub",
        &[
            "channels",
            "help",
            "numpat",
            "numsub",
            "shardchannels",
            "shardnumsub",
        ],
    ),
    ("script", &["exists", "flush", "help", "load"]),
    ("slowlog", &["get", "help", "len", "reset"]),
];

/// The command table as the rule parser sees it.
pub struct TableCatalog;

impl Catalog for TableCatalog {
    fn has_command(&self, name: &str) -> bool {
        lookup(name).is_some()
    }

    fn subcommands(&self, name: &str) -> Option<&'static [&'static str]> {
        subcommands(name)
    }

    fn has_category(&self, name: &str) -> bool {
        CATEGORIES.contains(&name)
    }
}

fn subcommands(name: &str) -> Option<&'static [&'static str]> {
    SUBCOMMANDS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| *s)
}

/// The categories of a command, or of its subcommand (`sub`, lower-case) for containers.
pub fn categories(spec: &Spec, sub: Option<&str>) -> Vec<&'static str> {
    let flag = |f: &str| spec.flags.contains(&f);
    let mut c = Vec::new();
    let mut add = |cat: &'static str| {
        if !c.contains(&cat) {
            c.push(cat);
        }
    };
    match spec.group {
        "string" => add("string"),
        "list" => add("list"),
        "hash" => add("hash"),
        "generic" => add("keyspace"),
        "connection" => add("connection"),
        "transactions" => add("transaction"),
        "scripting" => add("scripting"),
        "pubsub" => add("pubsub"),
        PALISADE_GROUP => add(PALISADE_GROUP),
        _ => {}
    }
    if flag("write") {
        add("write");
    }
    if flag("readonly") {
        add("read");
    }
    if flag("pubsub") {
        add("pubsub");
    }
    if flag("blocking") {
        add("blocking");
    }
    if dangerous(spec.name, sub) || flag("admin") {
        for cat in ["admin", "dangerous"] {
            add(cat);
        }
    }
    if matches!(spec.name, "keys" | "info" | "swapdb") {
        add("dangerous");
    }
    add(if flag("fast") { "fast" } else { "slow" });
    c
}

/// The admin commands (or subcommands) Redis puts in `@admin` and `@dangerous`.
fn dangerous(name: &str, sub: Option<&str>) -> bool {
    match name {
        "config" | "shutdown" | "slowlog" | "latency" => true,
        "acl" => !matches!(sub, Some("whoami" | "cat" | "genpass" | "help")),
        "client" => matches!(sub, Some("list")),
        _ => false,
    }
}

/// Which access a command needs to its keys: Redis's key-spec flags, reduced to whether the
/// value is read (`ACCESS`) and whether the key changes (`INSERT`, `UPDATE`, `DELETE`).
fn key_access(spec: &Spec) -> Access {
    let write = spec.flags.contains(&"write");
    let read = match spec.name {
        // Changes without reading the value.
        "set" | "setnx" | "setex" | "psetex" | "del" | "unlink" | "expire" | "pexpire"
        | "expireat" | "pexpireat" | "persist" | "lpush" | "rpush" | "lpushx" | "rpushx"
        | "hset" | "hmset" | "hsetnx" | "hdel" | "fencedset" => false,
        // Metadata only.
        "exists" | "type" | "watch" => false,
        _ => true,
    };
    Access { read, write }
}

/// The keys a command line names, from the table's key positions (EVAL's from `numkeys`).
fn keys<'a>(spec: &Spec, argv: &'a [Bytes]) -> Vec<&'a [u8]> {
    if spec.name.starts_with("eval") {
        let n = argv.get(2).and_then(|n| parse_i64(n)).unwrap_or(0).max(0) as usize;
        return argv.iter().skip(3).take(n).map(|k| k.as_ref()).collect();
    }
    if spec.first_key <= 0 {
        return Vec::new();
    }
    let argc = argv.len() as i32;
    let last = if spec.last_key < 0 {
        argc + spec.last_key
    } else {
        spec.last_key.min(argc - 1)
    };
    let step = spec.step.max(1) as usize;
    (spec.first_key..=last)
        .step_by(step)
        .filter_map(|i| argv.get(i as usize).map(|k| k.as_ref()))
        .collect()
}

/// The channels a command line names, and whether they are patterns.
fn channels<'a>(name: &str, argv: &'a [Bytes]) -> Vec<(&'a [u8], bool)> {
    match name {
        "subscribe" => argv[1..].iter().map(|c| (c.as_ref(), false)).collect(),
        "psubscribe" => argv[1..].iter().map(|c| (c.as_ref(), true)).collect(),
        "publish" => argv
            .get(1)
            .map(|c| (c.as_ref(), false))
            .into_iter()
            .collect(),
        _ => Vec::new(),
    }
}

/// The first argument of a command line, lower-case (a subcommand or a first argument).
pub fn first_arg(argv: &[Bytes]) -> Option<String> {
    argv.get(1)
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
}

/// What the permission check sees of a command line (`sub` from [`first_arg`]).
pub fn subject<'a>(spec: &'a Spec, sub: Option<&'a str>, argv: &'a [Bytes]) -> Subject<'a> {
    let access = key_access(spec);
    let container_sub = sub.filter(|_| subcommands(spec.name).is_some());
    Subject {
        name: spec.name,
        sub,
        categories: categories(spec, container_sub),
        keys: keys(spec, argv).into_iter().map(|k| (k, access)).collect(),
        channels: channels(spec.name, argv),
    }
}

/// Checks a command line against a user.
pub fn check(user: &User, spec: &Spec, argv: &[Bytes]) -> Result<(), Denied> {
    let sub = first_arg(argv);
    user.check(&subject(spec, sub.as_deref(), argv))
}

/// True for a user that may run anything (the built-in `default`): its commands need no check.
pub fn unrestricted(user: &User) -> bool {
    user.all_commands
        && user.rules.is_empty()
        && user.channels.iter().any(|c| c.as_ref() == b"*")
        && user
            .keys
            .iter()
            .any(|k| k.read && k.write && k.pattern.as_ref() == b"*")
}

/// The name Redis gives a command in NOPERM texts: `acl|log` for a subcommand.
pub fn full_name(spec: &Spec, argv: &[Bytes]) -> String {
    match (subcommands(spec.name), first_arg(argv)) {
        (Some(subs), Some(sub)) if subs.contains(&sub.as_str()) => {
            format!("{}|{sub}", spec.name)
        }
        _ => spec.name.to_string(),
    }
}

/// Redis's reply to a command the user may not run.
pub fn noperm(denied: Denied, name: &str) -> Reply {
    Reply::err(match denied {
        Denied::Command => {
            format!("NOPERM this user has no permissions to run the '{name}' command")
        }
        Denied::Key(_) => {
            "NOPERM this user has no permissions to access one of the keys used as arguments".into()
        }
        Denied::Channel(_) => {
            "NOPERM this user has no permissions to access one of the channels used as arguments"
                .into()
        }
    })
}

/// Redis's script error for a `redis.call` the user may not run.
pub fn script_denied(denied: Denied) -> Reply {
    Reply::err(match denied {
        Denied::Command => {
            "ERR The user executing the script can't run this command or subcommand"
        }
        Denied::Key(_) => "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments",
        Denied::Channel(_) => {
            "ERR The user executing the script can't publish to the channel mentioned in the command"
        }
    })
}

/// The error for an unauthenticated command.
pub const NOAUTH: &str = "NOAUTH Authentication required.";
/// The error for a bad user name or password.
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
/// ACL LOAD and ACL SAVE without `--aclfile`.
pub const NO_ACLFILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

/// ACL subcommands answered by the session from this node's applied users.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AclCmd {
    /// ACL GETUSER name.
    GetUser(String),
    /// ACL LIST.
    List,
    /// ACL USERS.
    Users,
    /// ACL WHOAMI.
    WhoAmI,
    /// ACL CAT [category].
    Cat(Option<String>),
    /// ACL LOG [count]; `None` count: the default 10.
    Log(Option<usize>),
    /// ACL LOG RESET.
    LogReset,
    /// ACL DRYRUN user command [arg ...].
    DryRun(String, Vec<Bytes>),
    /// ACL GENPASS [bits].
    GenPass(usize),
    /// ACL LOAD: read `--aclfile` and replace every user through the log.
    Load,
    /// ACL SAVE: write the users to `--aclfile`.
    Save,
}

/// `ACL SETUSER name rule ...`, as stored in the log (passwords already hashed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclSetUser {
    /// The user.
    pub name: String,
    /// The rules, in order.
    pub rules: Vec<Bytes>,
}

/// `ACL DELUSER name ...`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclDelUser {
    /// The users.
    pub names: Vec<String>,
}

/// `ACL LOAD`: every user of the file, which replace the current ones.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclLoad {
    /// The users, by name.
    pub users: Vec<(String, User)>,
}

/// EVAL-family command run with the permissions of `user` (the connection's user), so
/// that every replica checks the script's `redis.call`s against the same replicated user.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvalAs {
    /// The user the script runs as.
    pub user: String,
    /// EVAL_RO / EVALSHA_RO (the read path) rather than EVAL / EVALSHA.
    pub read_only: bool,
    /// The script and its arguments.
    pub eval: Eval,
}

const HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Print this help.",
];

fn user_name(raw: &Bytes) -> Result<String, Reply> {
    if raw.iter().any(|&c| c == b' ' || c == 0) {
        return Err(Reply::err(
            "ERR Usernames can't contain spaces or null characters",
        ));
    }
    Ok(String::from_utf8_lossy(raw).into_owned())
}

/// Replaces `>pass` and `<pass` by `#hash` and `!hash`: the log never holds a password.
fn hash_rule(rule: Bytes) -> Bytes {
    match rule.first() {
        Some(b'>') => Bytes::from(format!("#{}", hash_password(&rule[1..]))),
        Some(b'<') => Bytes::from(format!("!{}", hash_password(&rule[1..]))),
        _ => rule,
    }
}

/// Parses ACL.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let raw = args.arg()?;
    let sub = String::from_utf8_lossy(&raw).to_lowercase();
    let n = args.remaining();
    let arity = || wrong_arity(&format!("acl|{sub}"));
    let cmd = match (sub.as_str(), n) {
        ("setuser", 1..) => {
            let name = user_name(&args.arg()?)?;
            let rules = args.rest().into_iter().map(hash_rule).collect();
            return Ok(Request::Write(Command::AclSetUser(AclSetUser {
                name,
                rules,
            })));
        }
        ("deluser", 1..) => {
            let names = args.rest();
            let names = names.iter().map(|n| String::from_utf8_lossy(n).into_owned());
            return Ok(Request::Write(Command::AclDelUser(AclDelUser {
                names: names.collect(),
            })));
        }
        ("getuser", 1) => AclCmd::GetUser(String::from_utf8_lossy(&args.arg()?).into_owned()),
        ("list", 0) => AclCmd::List,
        ("users", 0) => AclCmd::Users,
        ("whoami", 0) => AclCmd::WhoAmI,
        ("load", 0) => AclCmd::Load,
        ("save", 0) => AclCmd::Save,
        ("cat", 0) => AclCmd::Cat(None),
        ("cat", 1) => AclCmd::Cat(Some(
            String::from_utf8_lossy(&args.arg()?).to_lowercase(),
        )),
        ("log", 0) => AclCmd::Log(None),
        ("log", 1) => {
            let a = args.arg()?;
            if a.eq_ignore_ascii_case(b"reset") {
                AclCmd::LogReset
            } else {
                match parse_i64(&a) {
                    Some(c) if c >= 0 => AclCmd::Log(Some(c as usize)),
                    _ => return Err(Reply::err(NOT_INTEGER)),
                }
            }
        }
        ("dryrun", 2..) => {
            let user = String::from_utf8_lossy(&args.arg()?).into_owned();
            AclCmd::DryRun(user, args.rest())
        }
        ("genpass", 0) => AclCmd::GenPass(256),
        ("genpass", 1) => match parse_i64(&args.arg()?) {
            Some(b) if (1..=4096).contains(&b) => AclCmd::GenPass(b as usize),
            Some(_) => return Err(Reply::err("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096")),
            None => return Err(Reply::err(NOT_INTEGER)),
        },
        ("help", 0) => {
            let lines = HELP.iter().map(|l| Reply::Simple((*l).into())).collect();
            return Ok(Request::Conn(ConnCmd::Command(Reply::Array(lines))));
        }
        (
            "setuser" | "deluser" | "getuser" | "list" | "users" | "whoami" | "load" | "save"
            | "cat" | "log" | "dryrun" | "genpass" | "help",
            _,
        ) => return Err(arity()),
        _ => {
            return Err(Reply::err(format!(
                "ERR unknown subcommand '{}'. Try ACL HELP.",
                String::from_utf8_lossy(&raw)
            )))
        }
    };
    Ok(Request::Conn(ConnCmd::Acl(cmd)))
}

/// Redis's text for a refused SETUSER rule.
pub fn rule_error(rule: &[u8], e: RuleError) -> Reply {
    Reply::err(format!(
        "ERR Error in ACL SETUSER modifier '{}': {e}",
        String::from_utf8_lossy(rule)
    ))
}

impl Replicated for AclSetUser {
    fn is_read(&self) -> bool {
        false
    }

    fn apply(&self, ks: &mut Keyspace, _ctx: Ctx) -> Reply {
        match ks
            .users_mut()
            .set_user(&self.name, &self.rules, &TableCatalog)
        {
            Ok(()) => Reply::ok(),
            Err((rule, e)) => rule_error(&rule, e),
        }
    }
}

impl Replicated for AclDelUser {
    fn is_read(&self) -> bool {
        false
    }

    fn apply(&self, ks: &mut Keyspace, _ctx: Ctx) -> Reply {
        if self
            .names
            .iter()
            .any(|n| n == crate::state::acl::DEFAULT_USER)
        {
            return Reply::err("ERR The 'default' user cannot be removed");
        }
        Reply::Int(ks.users_mut().delete(&self.names) as i64)
    }
}

impl Replicated for AclLoad {
    fn is_read(&self) -> bool {
        false
    }

    fn apply(&self, ks: &mut Keyspace, _ctx: Ctx) -> Reply {
        ks.users_mut()
            .replace_all(self.users.iter().cloned().collect());
        Reply::ok()
    }
}

impl EvalAs {
    /// The EVAL-family command this one runs as `user`.
    pub fn wrap(user: &str, cmd: Command) -> Command {
        match cmd {
            Command::Eval(eval) => Command::EvalAs(EvalAs {
                user: user.to_string(),
                read_only: false,
                eval,
            }),
            Command::EvalRo(EvalRo(eval)) => Command::EvalAs(EvalAs {
                user: user.to_string(),
                read_only: true,
                eval,
            }),
            other => other,
        }
    }
}

impl Replicated for EvalAs {
    fn is_read(&self) -> bool {
        self.read_only
    }

    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        // A copy: the script may not change users (ACL is `noscript`), but it borrows the
        // keyspace mutably.
        match ks.users().get(&self.user) {
            Some(u) if self.read_only => eval::run_ro(&self.eval, ks, ctx.now, Some(&u)),
            Some(u) => eval::run(&self.eval, ks, ctx, Some(&u)),
            None => gone(&self.user),
        }
    }

    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        match ks.users().get_ref(&self.user) {
            Some(u) => eval::run_ro(&self.eval, ks, now, Some(u)),
            None => gone(&self.user),
        }
    }
}

fn gone(user: &str) -> Reply {
    Reply::err(format!(
        "NOPERM the user '{user}' executing the script no longer exists"
    ))
}

/// The command names a replicated command may have come from, its keys, and its channels:
/// what the leader checks a forwarded command against. `None` for the node's own commands
/// (expiry, ticks, queue purges), which no client can send.
type Touches<'a> = (&'static [&'static str], Vec<&'a [u8]>, Vec<&'a [u8]>);

fn one(k: &Bytes) -> Vec<&[u8]> {
    vec![k.as_ref()]
}

fn many(ks: &[Bytes]) -> Vec<&[u8]> {
    ks.iter().map(|k| k.as_ref()).collect()
}

fn forwarded_subject(cmd: &Command) -> Option<Touches<'_>> {
    use Command as C;
    let none = Vec::new;
    Some(match cmd {
        C::Get(c) => (&["get"], one(&c.key), none()),
        C::GetDel(c) => (&["getdel"], one(&c.key), none()),
        C::Set(c) => (&["set", "setnx", "setex", "psetex"], one(&c.key), none()),
        C::Del(c) => (&["del", "unlink"], many(&c.keys), none()),
        C::Exists(c) => (&["exists"], many(&c.keys), none()),
        C::Expire(c) => (
            &["expire", "pexpire", "expireat", "pexpireat"],
            one(&c.key),
            none(),
        ),
        C::Persist(c) => (&["persist"], one(&c.key), none()),
        C::Ttl(c) => (&["ttl", "pttl"], one(&c.key), none()),
        C::Type(c) => (&["type"], one(&c.key), none()),
        C::IncrBy(c) => (&["incr", "incrby", "decr", "decrby"], one(&c.key), none()),
        C::Keys(_) => (&["keys"], none(), none()),
        C::Scan(_) => (&["scan"], none(), none()),
        C::DbSize(_) => (&["dbsize"], none(), none()),
        C::Lock(c) => (&["lock"], one(&c.key), none()),
        C::Acquire(c) => (&["lock"], one(&c.key), none()),
        C::Unlock(c) => (&["unlock"], one(&c.key), none()),
        C::Renew(c) => (&["renew"], one(&c.key), none()),
        C::LockInfo(c) => (&["lockinfo"], one(&c.key), none()),
        C::FencedSet(c) => (&["fencedset"], one(&c.key), none()),
        C::FencedGet(c) => (&["fencedget"], one(&c.key), none()),
        C::FenceCheck(c) => (&["fencecheck"], one(&c.key), none()),
        C::LockCancel(c) => (&["lock"], one(&c.key), none()),
        C::LockReleaseToken(c) => (&["unlock"], one(&c.key), none()),
        C::HSet(c) => (&["hset", "hmset", "hsetnx"], one(&c.key), none()),
        C::HDel(c) => (&["hdel"], one(&c.key), none()),
        C::HIncrBy(c) => (&["hincrby"], one(&c.key), none()),
        C::HRead(c) => (
            &[
                "hget", "hmget", "hexists", "hlen", "hgetall", "hkeys", "hvals",
            ],
            one(&c.key),
            none(),
        ),
        C::Push(c) => (&["lpush", "rpush", "lpushx", "rpushx"], one(&c.key), none()),
        C::Pop(c) => (&["lpop", "rpop"], one(&c.key), none()),
        C::LRead(c) => (&["llen", "lrange", "lindex"], one(&c.key), none()),
        C::BPop(c) => (&["blpop", "brpop"], many(&c.keys), none()),
        C::Publish(c) => (&["publish"], none(), vec![c.channel.as_ref()]),
        C::Versions(c) => (&["watch"], many(&c.keys), none()),
        C::Exec(_) => (&["exec"], none(), none()),
        C::Eval(c) => (&["eval", "evalsha"], many(&c.keys), none()),
        C::EvalRo(c) => (&["eval_ro", "evalsha_ro"], many(&c.0.keys), none()),
        C::EvalAs(c) if c.read_only => (&["eval_ro", "evalsha_ro"], many(&c.eval.keys), none()),
        C::EvalAs(c) => (&["eval", "evalsha"], many(&c.eval.keys), none()),
        C::Script(_) => (&["script"], none(), none()),
        C::AclSetUser(_) | C::AclDelUser(_) | C::AclLoad(_) => (&["acl"], none(), none()),
        C::Evict(_) | C::Tick(_) | C::LockPurge(_) => return None,
    })
}

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
    if let Command::EvalAs(e) = cmd {
        if e.user != name {
            return Err(Reply::err(
                "NOPERM a forwarded script must run as the connection's user",
            ));
        }
    }
    let Some((names, keys, channels)) = forwarded_subject(cmd) else {
        return Err(Reply::err(
            "NOPERM this command is the server's own and cannot be forwarded for a user",
        ));
    };
    let mut last = Denied::Command;
    for cmd_name in names {
        let Some(spec) = lookup(cmd_name) else {
            continue;
        };
        let access = key_access(spec);
        let subject = Subject {
            name: spec.name,
            // Containers arrive without their subcommand: SCRIPT and ACL need the whole command.
            sub: None,
            categories: categories(spec, None),
            keys: keys.iter().map(|k| (*k, access)).collect(),
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

/// ACL CAT category: the commands in it, in table order; None for an unknown category.
pub fn category_commands(cat: &str) -> Option<Vec<&'static str>> {
    if !CATEGORIES.contains(&cat) {
        return None;
    }
    let mut out = Vec::new();
    for spec in table() {
        if categories(spec, None).contains(&cat) {
            out.push(spec.name);
        }
        if let Some(subs) = subcommands(spec.name) {
            for sub in subs {
                if categories(spec, Some(sub)).contains(&cat) && !out.contains(&spec.name) {
                    out.push(spec.name);
                }
            }
        }
    }
    Some(out)
}

/// ACL GETUSER's reply (a map: RESP3 shows it as one, RESP2 as a flat array).
pub fn getuser_reply(user: &User) -> Reply {
    let texts = |v: Vec<String>| Reply::Array(v.into_iter().map(Reply::bulk).collect());
    Reply::Map(vec![
        (
            Reply::bulk("flags"),
            Reply::Set(user.flags().into_iter().map(Reply::text).collect()),
        ),
        (Reply::bulk("passwords"), texts(user.passwords.clone())),
        (Reply::bulk("commands"), Reply::bulk(user.command_rules())),
        (Reply::bulk("keys"), Reply::bulk(user.key_rules().join(" "))),
        (
            Reply::bulk("channels"),
            Reply::bulk(user.channel_rules().join(" ")),
        ),
        (Reply::bulk("selectors"), Reply::Array(Vec::new())),
    ])
}

/// ACL DRYRUN's reply: OK, or why the user may not run the command line.
pub fn dryrun(user: Option<User>, name: &str, argv: Vec<Bytes>) -> Reply {
    let Some(user) = user else {
        return Reply::err(format!("ERR User '{name}' not found"));
    };
    let cmd = String::from_utf8_lossy(&argv[0]).to_lowercase();
    let Some(spec) = lookup(&cmd) else {
        return Reply::err(format!("ERR Command '{cmd}' not found"));
    };
    if let Err(e) = super::resolve(&argv) {
        return e;
    }
    let sub = first_arg(&argv);
    let s = subject(spec, sub.as_deref(), &argv);
    let text = match user.check(&s) {
        Ok(()) => return Reply::ok(),
        Err(Denied::Command) => format!(
            "This user has no permissions to run the '{}' command",
            full_name(spec, &argv)
        ),
        Err(Denied::Key(i)) => format!(
            "This user has no permissions to access the '{}' key",
            String::from_utf8_lossy(s.keys[i].0)
        ),
        Err(Denied::Channel(i)) => format!(
            "This user has no permissions to access the '{}' channel",
            String::from_utf8_lossy(s.channels[i].0)
        ),
    };
    Reply::bulk(text)
}

/// The command line as the slow log may keep it: passwords replaced by `(redacted)`, as
/// Redis does (AUTH's arguments, HELLO's AUTH pair, SETUSER's `>pass` and `<pass`).
pub fn redacted(argv: &[Bytes]) -> std::borrow::Cow<'_, [Bytes]> {
    let name = argv[0].to_ascii_lowercase();
    let secret = |i: usize, a: &Bytes| match name.as_slice() {
        b"auth" => i > 0,
        // The two words after AUTH.
        b"hello" => (1..=2).any(|back| i > back && argv[i - back].eq_ignore_ascii_case(b"auth")),
        b"acl" => i > 2 && matches!(a.first(), Some(b'>' | b'<')),
        _ => false,
    };
    if !argv.iter().enumerate().any(|(i, a)| secret(i, a)) {
        return std::borrow::Cow::Borrowed(argv);
    }
    let hidden = Bytes::from_static(b"(redacted)");
    let out = argv.iter().enumerate().map(|(i, a)| {
        if secret(i, a) {
            hidden.clone()
        } else {
            a.clone()
        }
    });
    std::borrow::Cow::Owned(out.collect())
}

/// ACL GENPASS: `bits` random bits as lower-case hex (rounded up to whole digits).
pub fn genpass(bits: usize) -> Reply {
    let digits = bits.div_ceil(4);
    let bytes: Vec<u8> = (0..digits.div_ceil(2)).map(|_| rand::random()).collect();
    let mut text = hex::encode(bytes);
    text.truncate(digits);
    Reply::bulk(text)
}

pub mod log;

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<Bytes> {
        line.split(' ')
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    fn user(rules: &str) -> User {
        let mut u = User::new();
        for r in rules.split(' ') {
            u.apply_rule(r.as_bytes(), &TableCatalog).unwrap();
        }
        u
    }

    #[test]
    fn categories_follow_redis() {
        let cats = |n: &str| categories(lookup(n).unwrap(), None);
        assert_eq!(cats("get"), vec!["string", "read", "fast"]);
        assert_eq!(cats("set"), vec!["string", "write", "slow"]);
        assert_eq!(cats("lock"), vec!["palisade", "write", "slow"]);
        assert!(cats("keys").contains(&"dangerous"));
        assert!(cats("config").contains(&"admin"));
        assert!(cats("blpop").contains(&"blocking"));
        let acl = lookup("acl").unwrap();
        assert!(!categories(acl, Some("whoami")).contains(&"admin"));
        assert!(categories(acl, Some("setuser")).contains(&"admin"));
        assert!(category_commands("palisade")
            .unwrap()
            .contains(&"fencedset"));
        assert!(category_commands("nosuch").is_none());
    }

    #[test]
    fn command_lines_are_checked_with_their_keys_and_channels() {
        let u = user("on ~lock:* &news -@all +@read +set +eval +publish +acl|whoami");
        let run = |line: &str| {
            let a = argv(line);
            check(
                &u,
                lookup(&a[0].to_ascii_lowercase().escape_ascii().to_string()).unwrap(),
                &a,
            )
        };
        assert_eq!(run("get lock:1"), Ok(()));
        assert_eq!(run("get other"), Err(Denied::Key(0)));
        assert_eq!(run("del lock:1"), Err(Denied::Command));
        assert_eq!(run("eval x 2 lock:1 other"), Err(Denied::Key(1)));
        assert_eq!(run("eval x 1 lock:1 other"), Ok(()));
        assert_eq!(run("publish news m"), Ok(()));
        assert_eq!(run("publish other m"), Err(Denied::Channel(0)));
        assert_eq!(run("acl whoami"), Ok(()));
        assert_eq!(run("acl list"), Err(Denied::Command));
        assert_eq!(
            full_name(lookup("acl").unwrap(), &argv("acl LIST")),
            "acl|list"
        );
        assert_eq!(
            dryrun(Some(u.clone()), "u", argv("get other")),
            Reply::bulk("This user has no permissions to access the 'other' key")
        );
        assert_eq!(
            dryrun(None, "x", argv("get k")),
            Reply::err("ERR User 'x' not found")
        );
    }

    #[test]
    fn forwarded_commands_are_checked_by_what_they_do() {
        let u = user("on ~lock:* -@all +@palisade +get");
        let parsed = |line: &str| match super::super::parse(argv(line)) {
            Ok(Request::Write(c) | Request::Read(c)) => c,
            other => panic!("{other:?}"),
        };
        assert!(check_forwarded(&u, "u", &parsed("LOCK lock:a o PX 100")).is_ok());
        assert!(check_forwarded(&u, "u", &parsed("LOCK other o PX 100")).is_err());
        assert!(check_forwarded(&u, "u", &parsed("SET lock:a v")).is_err());
        assert!(check_forwarded(&u, "u", &parsed("GET lock:a")).is_ok());
        let script = EvalAs::wrap("someone", parsed("EVAL x 0"));
        assert!(check_forwarded(&user("on allkeys allcommands"), "u", &script).is_err());
        let tick = Command::Tick(super::super::evict::Tick);
        assert!(check_forwarded(&u, "u", &tick).is_err());
    }

    #[test]
    fn the_slow_log_never_sees_a_password() {
        let shown = |line: &str| redacted(&argv(line)).join(&b' ');
        assert_eq!(shown("AUTH u p"), b"AUTH (redacted) (redacted)");
        assert_eq!(
            shown("HELLO 3 AUTH u p SETNAME n"),
            b"HELLO 3 AUTH (redacted) (redacted) SETNAME n"
        );
        assert_eq!(
            shown("ACL SETUSER u on >p <q ~k"),
            b"ACL SETUSER u on (redacted) (redacted) ~k"
        );
        assert_eq!(shown("GET k"), b"GET k");
    }

    #[test]
    fn setuser_hashes_passwords_before_the_log() {
        let Ok(Request::Write(Command::AclSetUser(s))) =
            super::super::parse(argv("ACL SETUSER a on >secret <old"))
        else {
            panic!()
        };
        assert_eq!(
            s.rules[1],
            Bytes::from(format!("#{}", hash_password(b"secret")))
        );
        assert!(!s.rules.iter().any(|r| r.windows(3).any(|w| w == b"old")));
        let mut ks = Keyspace::default();
        let ctx = Ctx {
            now: 0,
            revision: 1,
        };
        assert_eq!(
            Command::AclSetUser(AclSetUser {
                name: "a".into(),
                rules: vec![Bytes::from("on"), Bytes::from(">p")],
            })
            .apply(&mut ks, ctx),
            Reply::ok()
        );
        assert!(ks.users().get("a").unwrap().password_ok(b"p"));
        assert_eq!(
            super::super::run_line(&mut ks, "ACL DELUSER default", 0),
            Reply::err("ERR The 'default' user cannot be removed")
        );
        assert_eq!(
            super::super::run_line(&mut ks, "ACL DELUSER a b", 0),
            Reply::Int(1)
        );
        for (bits, len) in [(5, 2), (32, 8), (256, 64)] {
            let Reply::Bulk(b) = genpass(bits) else {
                panic!()
            };
            assert_eq!(b.len(), len, "{bits} bits");
        }
    }
}
