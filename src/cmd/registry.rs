//! The command registry: what each command file declares, and the one list that joins them.
//!
//! A command file declares two things next to its parser and its apply/query code:
//!
//! - `pub static COMMANDS: &[Spec]`, one [`Spec`] row per command name it serves (name, arity,
//!   flags, key positions, parser, and with [`Spec::docs`] its summary, `since` version and
//!   group). The rows are the dispatch table and what `COMMAND`, `COMMAND INFO`,
//!   `COMMAND LIST` and `COMMAND DOCS` report.
//! - an `impl Replicated` for each type it stores in the log.
//!
//! The list is the [`commands!`] invocation in `cmd/mod.rs`: one line per command file, which
//! names the file and gives each of its log types a variant of [`super::Command`] and a
//! **tag**. The tag is the number written in front of the command in log entries and
//! snapshots. It is explicit, so the order of the list is free to change, and a tag is never
//! changed or reused once released (the first 36 are the variant positions of the enum that
//! postcard encoded before tags existed, so old data reads unchanged).
//! `tests/fixtures/commands.golden` pins the bytes of every command.

use std::collections::HashMap;
use std::sync::LazyLock;

use bytes::Bytes;

use super::{Ctx, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// One row of the command table (also what COMMAND INFO and COMMAND DOCS report).
pub struct Spec {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis arity: positive means exactly, negative means at least.
    pub arity: i32,
    /// Redis command flags.
    pub flags: &'static [&'static str],
    /// First key position (0: none).
    pub first_key: i32,
    /// Last key position (-1: the last argument).
    pub last_key: i32,
    /// Step between keys.
    pub step: i32,
    /// The parser.
    pub parse: fn(&mut Args) -> Result<Request, Reply>,
    /// COMMAND DOCS `summary`: one line, in our own words.
    pub summary: &'static str,
    /// COMMAND DOCS `since`: the Redis version that introduced the command, or
    /// [`PALISADE_SINCE`] for Palisade's own.
    pub since: &'static str,
    /// COMMAND DOCS `group`: Redis's group name, or [`PALISADE_GROUP`] for Palisade's own.
    pub group: &'static str,
    /// A container's subcommand rows ([`Spec::subcommands`]), each named lower-case
    /// without the container (`get` for `CONFIG GET`): what ACL rules such as `+config|get`
    /// may name, what commandstats count per subcommand, and what `COMMAND INFO` and
    /// `COMMAND DOCS` report as `config|get`. Empty for other commands.
    pub subcommands: &'static [Spec],
    /// The ACL categories Redis files the command under in place of its group's (without
    /// `@`; [`Spec::categories`]); `None`: its group's (none for a container). Its flags add
    /// theirs either way.
    pub categories: Option<&'static [&'static str]>,
    /// Palisade's own facts about the command, which Redis's flags do not say (COMMAND does
    /// not report them).
    pub own: &'static [Own],
    /// COMMAND DOCS `arguments` (and redis-cli's hints), in the notation of
    /// [`super::argdoc`]; empty when not declared.
    pub args: &'static str,
    /// COMMAND INFO's key specs, in the notation of [`super::keyspec`]; empty when the
    /// command has no keys. They find the keys the ACL check tests and COMMAND GETKEYS
    /// reports ([`super::keyspec::keys`]).
    pub key_specs: &'static str,
    /// The row's own way to find its keys where the specs cannot (Redis's `getkeys_proc`):
    /// `variable_flags` specs, or an unknown (`?`) spec.
    pub getkeys: Option<super::keyspec::GetKeys>,
    /// The channels the command publishes or subscribes to, for the ACL check.
    pub channels: Option<super::keyspec::Channels>,
}

/// A fact about a command that Redis's flags do not carry, declared on its row with
/// [`Spec::own`] and read by the server and the script bridge (instead of name lists).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Own {
    /// Refused while a transaction is queueing (which dooms it), though Redis allows it:
    /// OBJECT and MEMORY read a key outside EXEC's single replicated unit.
    NotInMulti,
    /// Neither a read nor a write, but it may replicate (PUBLISH, EVAL): refused to a
    /// monitoring client, as Redis refuses a replica's `may_replicate` commands.
    MayReplicate,
    /// The reply depends on this node's wall clock: refused from scripts, whose replies must
    /// be the same on every replica.
    NodeClock,
    /// Walks the whole keyspace without naming keys (KEYS, FLUSHALL): a script is charged
    /// for every stored key.
    WalksKeyspace,
    /// Keeps its raw arguments, to forward them to the leader (RAFT.*, WAIT).
    ForwardsArgv,
}

/// The `since` of Palisade's own commands: the release that introduced them.
pub const PALISADE_SINCE: &str = "0.1.0";
/// The `group` of Palisade's own commands (LOCK, FENCEDSET, RAFT.*, ...).
pub const PALISADE_GROUP: &str = "palisade";

/// Key positions `(first, last, step)` of a command without keys.
pub const NO_KEYS: (i32, i32, i32) = (0, 0, 0);
/// Key positions of a command whose only key is its first argument.
pub const ONE_KEY: (i32, i32, i32) = (1, 1, 1);
/// Key positions of a command whose arguments are all keys.
pub const ALL_KEYS: (i32, i32, i32) = (1, -1, 1);

impl Spec {
    /// A table row without its docs (add them with [`Spec::docs`] or [`Spec::palisade`]);
    /// `keys` is `(first, last, step)` as COMMAND INFO reports them.
    pub const fn new(
        name: &'static str,
        arity: i32,
        flags: &'static [&'static str],
        keys: (i32, i32, i32),
        parse: fn(&mut Args) -> Result<Request, Reply>,
    ) -> Spec {
        Spec {
            name,
            arity,
            flags,
            first_key: keys.0,
            last_key: keys.1,
            step: keys.2,
            parse,
            summary: "",
            since: "",
            group: "",
            subcommands: &[],
            categories: None,
            own: &[],
            args: "",
            key_specs: "",
            getkeys: None,
            channels: None,
        }
    }

    /// The row with its COMMAND DOCS fields, for a Redis command: `since` and `group` as
    /// Redis reports them (a test compares them with redis-server).
    pub const fn docs(
        self,
        summary: &'static str,
        since: &'static str,
        group: &'static str,
    ) -> Spec {
        Spec {
            summary,
            since,
            group,
            ..self
        }
    }

    /// The row of a container command, with its subcommands' rows: each a [`Spec`] named
    /// without the container (`get`), with Redis's arity for the whole line (`config|get`
    /// is -3), flags, key positions and key specs counted from the container's name, docs
    /// and arguments. Its parser is the container's (the container's row dispatches).
    pub const fn subcommands(self, subcommands: &'static [Spec]) -> Spec {
        Spec {
            subcommands,
            ..self
        }
    }

    /// The row with the ACL categories (without `@`) Redis files it under in place of its
    /// group's, when they differ: SORT is `&["set", "sortedset", "list", "dangerous"]`, not
    /// `keyspace`; `&[]` for none (PUBSUB HELP). Its flags add theirs (`write`, `read`,
    /// `admin`, `fast`...) as for any row.
    pub const fn categories(self, categories: &'static [&'static str]) -> Spec {
        Spec {
            categories: Some(categories),
            ..self
        }
    }

    /// The row with its arguments, in the notation of [`super::argdoc`].
    pub const fn args(self, args: &'static str) -> Spec {
        Spec { args, ..self }
    }

    /// The row with its key specs, in the notation of [`super::keyspec`].
    pub const fn key_specs(self, key_specs: &'static str) -> Spec {
        Spec { key_specs, ..self }
    }

    /// The row with its own way to find its keys ([`super::keyspec::GetKeys`]), for
    /// `variable_flags` or unknown (`?`) key specs.
    pub const fn getkeys(self, getkeys: super::keyspec::GetKeys) -> Spec {
        Spec {
            getkeys: Some(getkeys),
            ..self
        }
    }

    /// The row with the channels it publishes or subscribes to.
    pub const fn channels(self, channels: super::keyspec::Channels) -> Spec {
        Spec {
            channels: Some(channels),
            ..self
        }
    }

    /// The row with Palisade's own facts about the command ([`Own`]).
    pub const fn own(self, own: &'static [Own]) -> Spec {
        Spec { own, ..self }
    }

    /// True if the row declares `fact` ([`Spec::own`]).
    pub fn has(&self, fact: Own) -> bool {
        self.own.contains(&fact)
    }

    /// The row with its COMMAND DOCS fields, for one of Palisade's own commands.
    pub const fn palisade(self, summary: &'static str) -> Spec {
        self.docs(summary, PALISADE_SINCE, PALISADE_GROUP)
    }

    /// True for commands allowed before authentication.
    pub fn no_auth(&self) -> bool {
        self.flags.contains(&"no_auth")
    }
}

/// The Redis flag sets most commands share.
pub mod flags {
    /// A write that can grow memory.
    pub const WRITE: &[&str] = &["write", "denyoom"];
    /// A fast write that can grow memory.
    pub const WRITE_GROW_FAST: &[&str] = &["write", "denyoom", "fast"];
    /// A fast write that cannot grow memory.
    pub const WRITE_FAST: &[&str] = &["write", "fast"];
    /// A fast read.
    pub const READ_FAST: &[&str] = &["readonly", "fast"];
    /// A read that may take a while (whole collections, key scans).
    pub const READ: &[&str] = &["readonly"];
    /// A connection command.
    pub const CONN: &[&str] = &["fast", "loading", "stale"];
    /// A connection command allowed before authentication.
    pub const CONN_NO_AUTH: &[&str] = &[
        "noscript",
        "loading",
        "stale",
        "fast",
        "no_auth",
        "allow_busy",
    ];
    /// A blocking pop.
    pub const BLOCKING: &[&str] = &["write", "noscript", "blocking"];
    /// A subscription change.
    pub const PUBSUB: &[&str] = &["pubsub", "noscript", "loading", "stale"];
    /// A transaction command.
    pub const TXN: &[&str] = &["noscript", "loading", "stale", "fast", "allow_busy"];
    /// A script invocation.
    pub const SCRIPTING: &[&str] = &[
        "noscript",
        "skip_monitor",
        "no_mandatory_keys",
        "stale",
        "movablekeys",
    ];
    /// A read-only script invocation.
    pub const SCRIPTING_RO: &[&str] = &[
        "readonly",
        "noscript",
        "skip_monitor",
        "no_mandatory_keys",
        "stale",
        "movablekeys",
    ];
}

/// What a forwarded command touches: the command names it may have come from (`cmd|sub` for
/// a container's subcommand), its keys, and its channels ([`Replicated::forwarded`]).
pub type Touches<'a> = (&'static [&'static str], Vec<&'a [u8]>, Vec<&'a [u8]>);

/// One key, for [`Touches`].
pub fn one(k: &Bytes) -> Vec<&[u8]> {
    vec![k.as_ref()]
}

/// Several keys, for [`Touches`].
pub fn many(ks: &[Bytes]) -> Vec<&[u8]> {
    ks.iter().map(|k| k.as_ref()).collect()
}

/// No keys or no channels, for [`Touches`].
pub fn none<'a>() -> Vec<&'a [u8]> {
    Vec::new()
}

/// What a type carried in the log does. Every type inside a [`super::Command`] variant
/// implements it, in its own command file.
pub trait Replicated {
    /// True if the command never changes state: it is answered by [`Replicated::query`] on
    /// the read path instead of going through the log.
    fn is_read(&self) -> bool;

    /// The command names this may have come from, its keys and its channels: what the
    /// leader checks a command forwarded by a follower against (`cmd/acl/forwarded.rs`).
    /// `None` for the node's own entries (expiry, ticks, queue purges), which no client can
    /// send. Required: a new log type that forgets it does not compile.
    fn forwarded(&self) -> Option<Touches<'_>>;

    /// The key-spec flags of each key [`Replicated::forwarded`] names, for a type whose
    /// keys the row's specs cannot place in order ([`super::keyspec::layout`]): SORT's,
    /// found by its row's own function. None (the default): laid out by the row's specs.
    fn key_flags(&self) -> Option<Vec<super::keyspec::KeyFlags>> {
        None
    }

    /// Applies the command as the next write, at `ctx`. A read reaching here (it should
    /// not) is answered at the entry's time.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        self.query(ks, ctx.now)
    }

    /// Answers the command as a read at cluster time `now`.
    fn query(&self, _ks: &Keyspace, _now: u64) -> Reply {
        Reply::err("ERR internal: write command routed as a read")
    }

    /// Replaces absolute Unix times (EXAT, PXAT, EXPIREAT, PEXPIREAT) with relative TTLs.
    /// Called on the leader when the command is proposed (docs/time-and-leases.md,
    /// "Absolute expiry times").
    fn resolve_absolute_time(&mut self, _unix_now_ms: i64) {}

    /// True if applying it runs a script, whose time only its instruction budget bounds
    /// (which `SCRIPT BUDGET` can raise): the state machine then applies its entry on the
    /// blocking pool rather than on a worker thread (`store::state_machine`).
    fn runs_script(&self) -> bool {
        false
    }
}

/// Declares the registry: `module: [tag => Variant(Type), ...],` per command file, in the
/// order `COMMAND` lists the files' commands. It generates the [`super::Command`] enum, its
/// postcard encoding by tag (an unknown tag is a decode error), its dispatch to
/// [`Replicated`], and the command table from each module's `COMMANDS`.
macro_rules! commands {
    ($(
        $module:ident : [ $( $tag:literal => $variant:ident ( $ty:ident ) ),* $(,)? ]
    ),* $(,)?) => {
        /// A replicated command, as stored in log entries and snapshots: the variant's tag,
        /// then its fields (see `cmd/registry.rs`).
        #[derive(Clone, Debug, PartialEq, Eq)]
        #[allow(missing_docs)]
        pub enum Command {
            $( $( $variant($module::$ty), )* )*
        }

        impl Command {
            /// Every variant's tag and name.
            pub const TAGS: &'static [(u32, &'static str)] =
                &[$( $( ($tag, stringify!($variant)), )* )*];

            /// The stable tag this command is stored with.
            pub fn tag(&self) -> u32 {
                match self {
                    $( $( Command::$variant(_) => $tag, )* )*
                }
            }

            fn behaviour(&self) -> &dyn $crate::cmd::registry::Replicated {
                match self {
                    $( $( Command::$variant(c) => c, )* )*
                }
            }

            fn behaviour_mut(&mut self) -> &mut dyn $crate::cmd::registry::Replicated {
                match self {
                    $( $( Command::$variant(c) => c, )* )*
                }
            }
        }

        impl serde::Serialize for Command {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $( $( Command::$variant(c) => {
                        s.serialize_newtype_variant("Command", $tag, stringify!($variant), c)
                    } )* )*
                }
            }
        }

        impl<'de> serde::Deserialize<'de> for Command {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct Tagged;
                impl<'de> serde::de::Visitor<'de> for Tagged {
                    type Value = Command;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a command tag and its fields")
                    }
                    fn visit_enum<A: serde::de::EnumAccess<'de>>(
                        self,
                        data: A,
                    ) -> Result<Command, A::Error> {
                        use serde::de::VariantAccess;
                        let (tag, fields): (u32, A::Variant) = data.variant()?;
                        // A repeated tag is a compile error, not a silent shadow.
                        #[deny(unreachable_patterns)]
                        match tag {
                            $( $( $tag => fields.newtype_variant().map(Command::$variant), )* )*
                            // postcard drops an error's text, so the log says what it was:
                            // an entry written by a newer release, or corrupt data.
                            _ => {
                                tracing::error!(tag, "unknown command tag in stored or sent data");
                                Err(serde::de::Error::custom(format_args!(
                                    "unknown command tag {tag}"
                                )))
                            }
                        }
                    }
                }
                const NAMES: &[&str] = &[$( $( stringify!($variant), )* )*];
                d.deserialize_enum("Command", NAMES, Tagged)
            }
        }

        /// Every command file's table rows, in list order.
        fn modules() -> Vec<&'static [$crate::cmd::registry::Spec]> {
            vec![$( $module::COMMANDS, )*]
        }
    };
}
pub(crate) use commands;

/// The command table, in the order COMMAND lists it.
pub fn table() -> &'static [&'static Spec] {
    static TABLE: LazyLock<Vec<&'static Spec>> =
        LazyLock::new(|| super::modules().into_iter().flatten().collect());
    &TABLE
}

static BY_NAME: LazyLock<HashMap<&'static str, &'static Spec>> =
    LazyLock::new(|| table().iter().map(|s| (s.name, *s)).collect());

/// Looks up a command by lower-case name.
pub fn lookup(name: &str) -> Option<&'static Spec> {
    BY_NAME.get(name).copied()
}

/// The row of a container's subcommand `sub` (lower-case), if `spec` has one by that name.
pub fn sub_spec(spec: &Spec, sub: &str) -> Option<&'static Spec> {
    spec.subcommands.iter().find(|s| s.name == sub)
}

/// The row a command line runs under: its subcommand's for a container given a known
/// subcommand (the first argument, any case), else the command's own.
pub fn line_spec<'a>(spec: &'a Spec, argv: &[Bytes]) -> &'a Spec {
    argv.get(1)
        .and_then(|a| sub_spec(spec, &String::from_utf8_lossy(a).to_ascii_lowercase()))
        .unwrap_or(spec)
}

static SUB_NAMES: LazyLock<HashMap<&'static str, Vec<&'static str>>> = LazyLock::new(|| {
    table()
        .iter()
        .filter(|s| !s.subcommands.is_empty())
        .map(|s| (s.name, s.subcommands.iter().map(|c| c.name).collect()))
        .collect()
});

/// The names of a container's subcommands (`None` for a command without them, or unknown).
pub fn subcommand_names(name: &str) -> Option<&'static [&'static str]> {
    SUB_NAMES.get(name).map(Vec::as_slice)
}

/// Redis's unknown-command error, with the first arguments quoted as Redis quotes them.
pub fn unknown_command(argv: &[Bytes]) -> Reply {
    let mut args = String::new();
    for a in argv.iter().skip(1) {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        let text = String::from_utf8_lossy(a);
        let cut: String = text.chars().take(room).collect();
        args.push_str(&format!("'{cut}' "));
    }
    let name: String = String::from_utf8_lossy(&argv[0])
        .chars()
        .take(128)
        .collect();
    Reply::err(format!(
        "ERR unknown command '{name}', with args beginning with: {args}"
    ))
}

/// Redis's wrong-arity error.
pub fn wrong_arity(name: &str) -> Reply {
    Reply::err(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// Parses one request (`argv` is non-empty).
pub fn parse(argv: Vec<Bytes>) -> Result<Request, Reply> {
    let spec = resolve(&argv)?;
    (spec.parse)(&mut Args::new(argv))
}

/// Looks the command up and checks its arity, as Redis does before anything else (even
/// before authentication): unknown commands and wrong arity are reported first.
pub fn resolve(argv: &[Bytes]) -> Result<&'static Spec, Reply> {
    let name = String::from_utf8_lossy(&argv[0]).to_lowercase();
    let Some(spec) = lookup(&name) else {
        return Err(unknown_command(argv));
    };
    let argc = argv.len() as i32;
    if (spec.arity > 0 && argc != spec.arity) || argc < -spec.arity {
        return Err(wrong_arity(spec.name));
    }
    Ok(spec)
}

#[cfg(test)]
mod tests;
