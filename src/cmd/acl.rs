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

use super::eval::{self, CostModel, Eval, EvalRo};
use super::registry::{lookup, wrong_arity, Replicated, Spec, NO_KEYS};
use super::{Command, ConnCmd, Ctx, Request};
use crate::cmd::registry::{many, none, Touches};
use crate::resp::args::{parse_i64, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::acl::{hash_password, Denied, RuleError, User};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] =
    &[
        Spec::new("acl", -2, &["noscript", "loading", "stale"], NO_KEYS, parse)
            .docs(
                "Subcommands that manage and inspect ACL users",
                "6.0.0",
                "server",
            )
            .subcommands(SUBCOMMANDS),
    ];

/// ACL's subcommands (`acl|name`): Redis's facts (`scripts/command-args.py
/// --subcommands acl`).
const SUBCOMMANDS: &[Spec] = &[
    Spec::new("cat", -2, &["noscript", "loading", "stale"], NO_KEYS, parse)
        .docs(
            "List the categories, or the commands in one",
            "6.0.0",
            "server",
        )
        .args("categoryname?"),
    Spec::new(
        "deluser",
        -3,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs(
        "Delete users and close their connections",
        "6.0.0",
        "server",
    )
    .args("username*"),
    Spec::new(
        "dryrun",
        -4,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs(
        "Tell whether a user could run a command line, without running it",
        "7.0.0",
        "server",
    )
    .args("username command arg?*"),
    Spec::new(
        "genpass",
        -2,
        &["noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs("Generate a random password", "6.0.0", "server")
    .args("bits:integer?"),
    Spec::new(
        "getuser",
        3,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs("Describe one user's rules", "6.0.0", "server")
    .args("username"),
    Spec::new("help", 2, &["loading", "stale"], NO_KEYS, parse).docs(
        "List the subcommands and what they take",
        "6.0.0",
        "server",
    ),
    Spec::new(
        "list",
        2,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs("List every user as a rule line", "6.0.0", "server"),
    Spec::new(
        "load",
        2,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs("Reload the users from the ACL file", "6.0.0", "server"),
    Spec::new(
        "log",
        -2,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs(
        "Read or reset the log of refused commands",
        "6.0.0",
        "server",
    )
    .args("operation@(count:integer|RESET)?"),
    Spec::new(
        "save",
        2,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs("Write the users to the ACL file", "6.0.0", "server"),
    Spec::new(
        "setuser",
        -3,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs("Create a user or change its rules", "6.0.0", "server")
    .args("username rule?*"),
    Spec::new(
        "users",
        2,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs("List the user names", "6.0.0", "server"),
    Spec::new(
        "whoami",
        2,
        &["noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs("Name this connection's user", "6.0.0", "server"),
];

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
            return Ok(Request::Data(Command::AclSetUser(AclSetUser {
                name,
                rules,
            })));
        }
        ("deluser", 1..) => {
            let names = args.rest();
            let names = names.iter().map(|n| String::from_utf8_lossy(n).into_owned());
            return Ok(Request::Data(Command::AclDelUser(AclDelUser {
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
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["acl|setuser"], none(), none()))
    }

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
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["acl|deluser"], none(), none()))
    }

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
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["acl|load"], none(), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    fn apply(&self, ks: &mut Keyspace, _ctx: Ctx) -> Reply {
        ks.users_mut()
            .replace_all(self.users.iter().cloned().collect());
        Reply::ok()
    }
}

/// [`EvalAs`] with every `redis.call` charged for its work ([`CostModel::Metered`], see
/// `script::cost`): what this build writes. Old `EvalAs` entries keep the fixed charge they
/// were written under, so replaying them gives the same results everywhere.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvalMetered(pub EvalAs);

/// [`EvalAs`] with every `redis.call` charged for its work and every library call for its
/// own ([`CostModel::Library`]: string, table, cjson, ... functions, allocations and
/// pattern-matching steps, see `script::meter`): what this build writes. `EvalMetered`
/// entries keep the charges they were written under.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvalBounded(pub EvalAs);

impl EvalAs {
    /// The EVAL-family command this one runs as `user` (library work charged).
    pub fn wrap(user: &str, cmd: Command) -> Command {
        let (read_only, eval) = match cmd {
            Command::Eval(eval) => (false, eval),
            Command::EvalRo(EvalRo(eval)) => (true, eval),
            other => return other,
        };
        Command::EvalBounded(EvalBounded(EvalAs {
            user: user.to_string(),
            read_only,
            eval,
        }))
    }

    fn apply_with(&self, ks: &mut Keyspace, ctx: Ctx, cost: CostModel) -> Reply {
        // A copy: the script may not change users (ACL is `noscript`), but it borrows the
        // keyspace mutably.
        match ks.users().get(&self.user) {
            Some(u) if self.read_only => eval::run_ro(&self.eval, ks, ctx.now, Some(&u), cost),
            Some(u) => eval::run(&self.eval, ks, ctx, Some(&u), cost),
            None => gone(&self.user),
        }
    }

    fn query_with(&self, ks: &Keyspace, now: u64, cost: CostModel) -> Reply {
        match ks.users().get_ref(&self.user) {
            Some(u) => eval::run_ro(&self.eval, ks, now, Some(u), cost),
            None => gone(&self.user),
        }
    }
}

impl Replicated for EvalAs {
    fn forwarded(&self) -> Option<Touches<'_>> {
        if self.read_only {
            Some((&["eval_ro", "evalsha_ro"], many(&self.eval.keys), none()))
        } else {
            Some((&["eval", "evalsha"], many(&self.eval.keys), none()))
        }
    }

    fn is_read(&self) -> bool {
        self.read_only
    }

    fn runs_script(&self) -> bool {
        true
    }

    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        self.apply_with(ks, ctx, CostModel::Fixed)
    }

    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        self.query_with(ks, now, CostModel::Fixed)
    }
}

impl Replicated for EvalMetered {
    fn forwarded(&self) -> Option<Touches<'_>> {
        if self.0.read_only {
            Some((&["eval_ro", "evalsha_ro"], many(&self.0.eval.keys), none()))
        } else {
            Some((&["eval", "evalsha"], many(&self.0.eval.keys), none()))
        }
    }

    fn is_read(&self) -> bool {
        self.0.read_only
    }

    fn runs_script(&self) -> bool {
        true
    }

    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        self.0.apply_with(ks, ctx, CostModel::Metered)
    }

    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        self.0.query_with(ks, now, CostModel::Metered)
    }
}

impl Replicated for EvalBounded {
    fn forwarded(&self) -> Option<Touches<'_>> {
        if self.0.read_only {
            Some((&["eval_ro", "evalsha_ro"], many(&self.0.eval.keys), none()))
        } else {
            Some((&["eval", "evalsha"], many(&self.0.eval.keys), none()))
        }
    }

    fn is_read(&self) -> bool {
        self.0.read_only
    }

    fn runs_script(&self) -> bool {
        true
    }

    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        self.0.apply_with(ks, ctx, CostModel::Library)
    }

    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        self.0.query_with(ks, now, CostModel::Library)
    }
}

fn gone(user: &str) -> Reply {
    Reply::err(format!(
        "NOPERM the user '{user}' executing the script no longer exists"
    ))
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

pub mod check;
pub mod forwarded;
pub mod log;

pub use check::{
    categories, category_commands, check, first_arg, full_name, known_subcommand, noperm,
    script_denied, subject, unrestricted, TableCatalog, CATEGORIES,
};
pub use forwarded::check_forwarded;

#[cfg(test)]
mod tests {
    use super::*;

    use crate::cmd::test_argv as argv;

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
        // A container is only @slow, as in Redis; its subcommands have their own.
        assert_eq!(cats("config"), vec!["slow"]);
        let config = lookup("config").unwrap();
        assert!(categories(config, Some("get")).contains(&"admin"));
        assert!(cats("blpop").contains(&"blocking"));
        let acl = lookup("acl").unwrap();
        assert!(!categories(acl, Some("whoami")).contains(&"admin"));
        assert!(categories(acl, Some("setuser")).contains(&"admin"));
        assert!(category_commands("palisade")
            .unwrap()
            .contains(&"fencedset".to_string()));
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
        let object = user("on ~lock:* +object");
        let obj = |line: &str| check(&object, lookup("object").unwrap(), &argv(line));
        assert_eq!(obj("object encoding lock:1"), Ok(()));
        assert_eq!(obj("object encoding other"), Err(Denied::Key(0)));
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
            Ok(Request::Data(c)) => c,
            other => panic!("{other:?}"),
        };
        assert!(check_forwarded(&u, "u", &parsed("LOCK lock:a o PX 100")).is_ok());
        assert!(check_forwarded(&u, "u", &parsed("LOCK other o PX 100")).is_err());
        assert!(check_forwarded(&u, "u", &parsed("SET lock:a v")).is_err());
        assert!(check_forwarded(&u, "u", &parsed("GET lock:a")).is_ok());
        let script = EvalAs::wrap("someone", parsed("EVAL x 0"));
        assert!(check_forwarded(&user("on allkeys allcommands"), "u", &script).is_err());
        let loader = user("on -@all +script|load");
        assert!(check_forwarded(&loader, "u", &parsed("SCRIPT LOAD x")).is_ok());
        assert_eq!(
            check_forwarded(&loader, "u", &parsed("SCRIPT FLUSH")),
            Err(Reply::err(
                "NOPERM this user has no permissions to run the 'script|flush' command"
            ))
        );
        // A BITFIELD of GETs is a BITFIELD_RO: either command allows it; a write needs BITFIELD.
        let ro = user("on ~b:* -@all +bitfield_ro");
        assert!(check_forwarded(&ro, "u", &parsed("BITFIELD b:1 GET u8 0")).is_ok());
        assert!(check_forwarded(&ro, "u", &parsed("BITFIELD b:1 SET u8 0 1")).is_err());
        assert!(
            check_forwarded(&user("on ~b:* +bitfield"), "u", &parsed("BITFIELD_RO b:1")).is_ok()
        );
        let reader = user("on %R~b:* +bitfield");
        assert!(check_forwarded(&reader, "u", &parsed("BITFIELD b:1 GET u8 0")).is_ok());
        assert!(check_forwarded(&reader, "u", &parsed("BITFIELD b:1 INCRBY u8 0 1")).is_err());
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
        let Ok(Request::Data(Command::AclSetUser(s))) =
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
