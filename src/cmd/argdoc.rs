//! A command's arguments as `COMMAND DOCS` reports them (and as `redis-cli` turns them into
//! its hints and `HELP` lines), declared on the command's table row ([`super::registry::Spec::args`])
//! in a one-line notation:
//!
//! - `name` is an argument of type `string`; `name:type` gives another type (`key`,
//!   `integer`, `double`, `pattern`, `unix-time`), and a name with a colon gives its type
//!   (`ip:port:string`);
//! - a word in capitals (`NX`) is a pure token, named by its lower-case form;
//! - `TOKEN=arg` is an argument that follows a token (`PX=milliseconds:integer`);
//! - `(a|b|c)` is one of several, `{a b c}` a block of arguments that go together;
//! - `group@` before an element names it (`condition@(NX|XX)`; otherwise a one-of or a block
//!   is named after its first member);
//! - after an element, `?` makes it optional, `*` repeatable, and `+` says the token repeats
//!   with it (`GET=pattern?*+`).
//!
//! For example, SET's row declares
//! `key:key value condition@(NX|XX)? GET? expiration@(EX=seconds:integer|...|KEEPTTL)?`.

use crate::resp::Reply;

/// One argument of a command, as COMMAND DOCS describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    /// Its name (for a pure token, the token in lower case unless named otherwise).
    pub name: String,
    /// Redis's argument type: `key`, `string`, `integer`, `double`, `pattern`, `unix-time`,
    /// `pure-token`, `oneof` or `block`.
    pub kind: String,
    /// The token that comes before it, if any.
    pub token: Option<String>,
    /// May be left out.
    pub optional: bool,
    /// May be repeated.
    pub multiple: bool,
    /// Repeated together with its token.
    pub multiple_token: bool,
    /// The members of a one-of or a block.
    pub children: Vec<Arg>,
}

const TYPES: &[&str] = &["key", "string", "integer", "double", "pattern", "unix-time"];

/// Parses the notation of a row's arguments (see the module docs).
pub fn parse(text: &str) -> Result<Vec<Arg>, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        at: 0,
    };
    let args = p.sequence(None)?;
    p.skip_spaces();
    if p.at != p.s.len() {
        return Err(format!("unexpected '{}' at {}", p.s[p.at] as char, p.at));
    }
    Ok(args)
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.at += 1;
        }
    }

    fn word(&mut self) -> String {
        let start = self.at;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'/'))
        {
            self.at += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.at]).into_owned()
    }

    /// Elements separated by spaces, up to `close` (or the end).
    fn sequence(&mut self, close: Option<u8>) -> Result<Vec<Arg>, String> {
        let mut out = Vec::new();
        loop {
            self.skip_spaces();
            match self.peek() {
                None if close.is_none() => return Ok(out),
                None => return Err("unclosed group".into()),
                Some(c) if Some(c) == close => {
                    self.at += 1;
                    return Ok(out);
                }
                Some(_) => out.push(self.element()?),
            }
        }
    }

    fn element(&mut self) -> Result<Arg, String> {
        let mut arg = self.base()?;
        loop {
            match self.peek() {
                Some(b'?') => arg.optional = true,
                Some(b'*') => arg.multiple = true,
                Some(b'+') => arg.multiple_token = true,
                _ => return Ok(arg),
            }
            self.at += 1;
        }
    }

    fn base(&mut self) -> Result<Arg, String> {
        let mut arg = match self.peek() {
            Some(b'(') => {
                self.at += 1;
                let mut members = vec![self.element()?];
                loop {
                    self.skip_spaces();
                    match self.peek() {
                        Some(b'|') => {
                            self.at += 1;
                            self.skip_spaces();
                            members.push(self.element()?);
                        }
                        Some(b')') => {
                            self.at += 1;
                            break;
                        }
                        _ => return Err(format!("expected '|' or ')' at {}", self.at)),
                    }
                }
                group("oneof", members)
            }
            Some(b'{') => {
                self.at += 1;
                let members = self.sequence(Some(b'}'))?;
                if members.is_empty() {
                    return Err("an empty block".into());
                }
                group("block", members)
            }
            _ => {
                let word = self.word();
                if word.is_empty() {
                    return Err(format!("expected an argument at {}", self.at));
                }
                match self.peek() {
                    Some(b'@') => {
                        self.at += 1;
                        let mut named = self.base()?;
                        named.name = word;
                        return Ok(named);
                    }
                    Some(b'=') => {
                        self.at += 1;
                        let mut inner = self.base()?;
                        inner.token = Some(word);
                        return Ok(inner);
                    }
                    Some(b':') => {
                        // The last `:` gives the type: `ip:port:string` is named `ip:port`.
                        let mut name = word;
                        let mut kind = String::new();
                        while self.peek() == Some(b':') {
                            self.at += 1;
                            if !kind.is_empty() {
                                name = format!("{name}:{kind}");
                            }
                            kind = self.word();
                        }
                        if !TYPES.contains(&kind.as_str()) {
                            return Err(format!("unknown type '{kind}'"));
                        }
                        leaf(name, &kind)
                    }
                    _ if is_token(&word) => Arg {
                        token: Some(word.clone()),
                        ..leaf(word.to_ascii_lowercase(), "pure-token")
                    },
                    _ => leaf(word, "string"),
                }
            }
        };
        arg.optional = false;
        Ok(arg)
    }
}

fn is_token(word: &str) -> bool {
    word.bytes().any(|c| c.is_ascii_uppercase()) && !word.bytes().any(|c| c.is_ascii_lowercase())
}

fn leaf(name: String, kind: &str) -> Arg {
    Arg {
        name,
        kind: kind.into(),
        token: None,
        optional: false,
        multiple: false,
        multiple_token: false,
        children: Vec::new(),
    }
}

fn group(kind: &str, children: Vec<Arg>) -> Arg {
    Arg {
        children,
        ..leaf(String::new(), kind)
    }
    .named_after_first()
}

impl Arg {
    fn named_after_first(mut self) -> Arg {
        self.name = self.children[0].name.clone();
        self
    }
}

/// The hint redis-cli shows for these arguments (its rendering of COMMAND DOCS).
pub fn hint(args: &[Arg]) -> String {
    join(args, " ")
}

fn join(args: &[Arg], sep: &str) -> String {
    args.iter().map(one_hint).collect::<Vec<_>>().join(sep)
}

fn one_hint(a: &Arg) -> String {
    let repeat = match a.kind.as_str() {
        "oneof" => join(&a.children, "|"),
        "block" => join(&a.children, " "),
        "pure-token" => String::new(),
        _ => a.name.clone(),
    };
    let mut token = match &a.token {
        Some(t) if t.is_empty() => "\"\"".to_string(),
        Some(t) => t.clone(),
        None => String::new(),
    };
    if !token.is_empty() && a.kind != "pure-token" {
        token.push(' ');
    }
    let mut out = String::new();
    if a.optional {
        out.push('[');
    }
    out.push_str(&token);
    out.push_str(&repeat);
    if a.multiple {
        out.push_str(" [");
        if a.multiple_token {
            out.push_str(&token);
        }
        out.push_str(&repeat);
        out.push_str(" ...]");
    }
    if a.optional {
        out.push(']');
    }
    out
}

/// The COMMAND DOCS `arguments` array.
pub fn reply(args: &[Arg]) -> Reply {
    Reply::Array(args.iter().map(arg_reply).collect())
}

fn arg_reply(a: &Arg) -> Reply {
    let mut map = vec![
        (Reply::text("name"), Reply::text(&a.name)),
        (Reply::text("type"), Reply::text(&a.kind)),
    ];
    if let Some(t) = &a.token {
        map.push((Reply::text("token"), Reply::text(t)));
    }
    let flags: Vec<Reply> = [
        (a.optional, "optional"),
        (a.multiple, "multiple"),
        (a.multiple_token, "multiple_token"),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, f)| Reply::Simple((*f).into()))
    .collect();
    if !flags.is_empty() {
        map.push((Reply::text("flags"), Reply::Set(flags)));
    }
    if !a.children.is_empty() {
        map.push((Reply::text("arguments"), reply(&a.children)));
    }
    Reply::Map(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notation_gives_redis_cli_hints() {
        let cases = [
            ("key:key", "key"),
            ("key:key*", "key [key ...]"),
            (
                "key:key value condition@(NX|XX)? GET? expiration@(EX=seconds:integer|PX=milliseconds:integer|KEEPTTL)?",
                "key value [NX|XX] [GET] [EX seconds|PX milliseconds|KEEPTTL]",
            ),
            ("BY=pattern? {LIMIT=offset:integer count:integer}? GET=pattern?*+", "[BY pattern] [LIMIT offset count] [GET pattern [GET pattern ...]]"),
            ("numkeys:integer key:key* (LEFT|RIGHT) COUNT=count:integer?", "numkeys key [key ...] LEFT|RIGHT [COUNT count]"),
            ("(FROMMEMBER=member|FROMLONLAT={longitude:double latitude:double})", "FROMMEMBER member|FROMLONLAT longitude latitude"),
            ("data@{field value}*", "field value [field value ...]"),
            // CLIENT KILL's names with a colon or a slash.
            ("(ip:port:string|ADDR=ip:port:string?|SKIPME=yes/no?)", "ip:port|[ADDR ip:port]|[SKIPME yes/no]"),
        ];
        for (notation, want) in cases {
            let args = parse(notation).unwrap_or_else(|e| panic!("{notation}: {e}"));
            assert_eq!(hint(&args), want, "{notation}");
        }
    }

    #[test]
    fn tokens_types_and_names_are_kept() {
        let args = parse("condition@(NX|XX)? PX=milliseconds:integer").unwrap();
        assert_eq!(args[0].name, "condition");
        assert_eq!(args[0].kind, "oneof");
        assert!(args[0].optional);
        assert_eq!(args[0].children[1].token.as_deref(), Some("XX"));
        assert_eq!(args[0].children[1].name, "xx");
        assert_eq!(args[0].children[1].kind, "pure-token");
        assert_eq!(args[1].name, "milliseconds");
        assert_eq!(args[1].kind, "integer");
        assert_eq!(args[1].token.as_deref(), Some("PX"));
        assert!(!args[1].optional);
    }

    #[test]
    fn bad_notation_is_an_error() {
        for bad in [
            "(a|b",
            "{}",
            "a:nosuchtype",
            "ip:port",
            "a )",
            "[a]",
            "(a b)",
        ] {
            assert!(parse(bad).is_err(), "{bad} parsed");
        }
    }
}
