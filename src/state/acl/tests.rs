use super::*;

struct Table;
impl Catalog for Table {
    fn has_command(&self, name: &str) -> bool {
        ["get", "set", "config", "del", "publish"].contains(&name)
    }
    fn subcommands(&self, name: &str) -> Option<&'static [&'static str]> {
        (name == "config").then_some(&["get", "set"][..])
    }
    fn has_category(&self, name: &str) -> bool {
        ["read", "write", "all"].contains(&name)
    }
}

fn user(rules: &str) -> User {
    let mut u = User::new();
    for r in rules.split(' ') {
        u.apply_rule(r.as_bytes(), &Table).unwrap();
    }
    u
}

fn subject<'a>(name: &'a str, cats: &[&'static str], keys: &[&'a str]) -> Subject<'a> {
    let rw = Access {
        read: true,
        write: true,
    };
    Subject {
        name,
        sub: None,
        categories: cats.to_vec(),
        keys: keys.iter().map(|k| (k.as_bytes(), rw)).collect(),
        channels: Vec::new(),
    }
}

#[test]
fn rule_strings_are_redis_7s() {
    assert_eq!(
        User::default_user().describe("default"),
        "user default on nopass ~* &* +@all"
    );
    assert_eq!(User::new().describe("a"), "user a off resetchannels -@all");
    let u = user("on >p1 ~lock:* %R~r:* &ch* +get +@read -get +config|get");
    assert_eq!(
        u.describe("alice"),
        format!(
            // Redis 7.2 keeps the rules in order (7.0 regenerated them from a bitmap).
            "user alice on #{} ~lock:* %R~r:* resetchannels &ch* -@all +@read -get +config|get",
            hash_password(b"p1")
        )
    );
    assert_eq!(user("+@all -@write").command_rules(), "+@all -@write");
    assert_eq!(user("+config|get +config").command_rules(), "-@all +config");
    assert_eq!(user("+get -get").command_rules(), "-@all -get");
    assert_eq!(user("+get allcommands").command_rules(), "+@all");
    assert_eq!(user("%RW~d %R~b").key_rules(), vec!["~d", "%R~b"]);
    assert_eq!(user("reset").flags(), vec!["off", "sanitize-payload"]);
}

#[test]
fn bad_rules_are_refused_with_their_reason() {
    let mut u = User::new();
    let mut bad = |r: &str| u.apply_rule(r.as_bytes(), &Table).unwrap_err();
    assert_eq!(bad("foo"), RuleError::Syntax);
    assert_eq!(bad("+nosuch"), RuleError::Unknown);
    assert_eq!(bad("+@nosuch"), RuleError::Unknown);
    assert_eq!(bad("+config|nosuch"), RuleError::Unknown);
    assert_eq!(bad("-get|x"), RuleError::Unknown);
    assert_eq!(bad("#abc"), RuleError::BadHash);
    assert_eq!(bad("<nopw"), RuleError::NoSuchPassword);
    assert_eq!(bad("%X~a"), RuleError::Syntax);
    assert_eq!(bad("%~a"), RuleError::Syntax);
    let mut all = user("allkeys allchannels");
    assert_eq!(all.apply_rule(b"~a", &Table), Err(RuleError::AfterAllKeys));
    assert_eq!(
        all.apply_rule(b"&a", &Table),
        Err(RuleError::AfterAllChannels)
    );
    let mut users = Users::default();
    assert!(users
        .set_user("x", &[Bytes::from("on"), Bytes::from("bad")], &Table)
        .is_err());
    assert!(users.get("x").is_none(), "a failed SETUSER changes nothing");
}

#[test]
fn passwords_hash_and_compare() {
    let u = user("on >secret");
    assert!(u.password_ok(b"secret"));
    assert!(!u.password_ok(b"Secret"));
    assert!(!user("off >secret").password_ok(b"secret"));
    assert!(user("on nopass").password_ok(b"anything"));
    let mut u = user("on >a >b");
    u.apply_rule(b"<a", &Table).unwrap();
    assert!(!u.password_ok(b"a") && u.password_ok(b"b"));
    assert!(fixed_time_eq(b"abc", b"abc") && !fixed_time_eq(b"abc", b"abd"));
    assert!(!fixed_time_eq(b"abc", b"ab"));
}

#[test]
fn commands_keys_and_channels_are_checked() {
    let u = user("on ~lock:* %R~ro:* &news -@all +@read +set -get");
    assert_eq!(
        u.check(&subject("get", &["read"], &["lock:1"])),
        Err(Denied::Command)
    );
    assert_eq!(u.check(&subject("exists", &["read"], &["lock:1"])), Ok(()));
    assert_eq!(
        u.check(&subject("del", &["write"], &["lock:1"])),
        Err(Denied::Command)
    );
    assert_eq!(
        u.check(&subject("set", &["write"], &["other"])),
        Err(Denied::Key(0))
    );
    assert_eq!(
        u.check(&subject("set", &["write"], &["ro:1"])),
        Err(Denied::Key(0))
    );
    let mut read = subject("exists", &["read"], &["ro:1"]);
    read.keys[0].1 = Access {
        read: true,
        write: false,
    };
    assert_eq!(u.check(&read), Ok(()));
    let mut publish = subject("exists", &["read"], &[]);
    publish.channels = vec![(b"news", false), (b"other", false)];
    assert_eq!(u.check(&publish), Err(Denied::Channel(1)));
    publish.channels = vec![(b"n*", true)];
    assert_eq!(u.check(&publish), Err(Denied::Channel(0)));
    let sub = user("on allkeys +config|get");
    let mut c = subject("config", &[], &[]);
    c.sub = Some("GET");
    assert_eq!(sub.check(&c), Ok(()));
    c.sub = Some("set");
    assert_eq!(sub.check(&c), Err(Denied::Command));
}

#[test]
fn users_track_changes_and_keep_default() {
    let mut users = Users::default();
    assert_eq!(users.names(), vec!["default"]);
    users.set_user("bob", &[Bytes::from("on")], &Table).unwrap();
    assert_eq!(users.delete(&["default".into(), "bob".into()]), 1);
    let changes = users.take_changes();
    assert_eq!(changes, vec![("bob".to_string(), None)]);
    assert!(users.get("default").is_some());
    let file = "user default on >pw ~* &* +@all\n# comment\nuser bob on nopass ~k -@all +get\n";
    let parsed = parse_file(file, &Table).unwrap();
    assert!(parsed["default"].password_ok(b"pw"));
    assert_eq!(
        parsed["bob"].describe("bob"),
        "user bob on nopass ~k resetchannels -@all +get"
    );
    assert!(parse_file("usr x", &Table).is_err());
    assert!(parse_file("user x on bad", &Table).is_err());
}
