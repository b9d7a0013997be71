//! Scripts run against an in-memory keyspace: the bridge, error propagation, determinism
//! and the budget.

use bytes::Bytes;

use super::*;
use crate::state::{Event, Keyspace};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn eval_at(
    ks: &mut Keyspace,
    body: &str,
    keys: &[&str],
    args: &[&str],
    now: u64,
    budget: u64,
) -> Reply {
    let keys: Vec<Bytes> = keys.iter().map(|k| b(k)).collect();
    let args: Vec<Bytes> = args.iter().map(|a| b(a)).collect();
    ks.bump_revision();
    let inv = Invocation {
        sha: "0000",
        body: body.as_bytes(),
        keys: &keys,
        args: &args,
        now,
        budget,
        user: None,
        cost: cost::CostModel::Fixed,
    };
    run(Access::Write(ks), &inv)
}

fn eval(ks: &mut Keyspace, body: &str, keys: &[&str], args: &[&str]) -> Reply {
    eval_at(ks, body, keys, args, 1000, 1_000_000)
}

fn cmd(ks: &mut Keyspace, line: &str, now: u64) -> Reply {
    crate::cmd::run_line(ks, line, now)
}

#[test]
fn nil_bulk_is_false_and_status_is_ok_table() {
    let mut ks = Keyspace::default();
    let r = eval(
        &mut ks,
        "local v = redis.call('get', KEYS[1]) local s = redis.call('set', KEYS[1], 'x') \
         return {v == false, s.ok, type(s)}",
        &["k"],
        &[],
    );
    assert_eq!(
        r,
        Reply::Array(vec![Reply::Int(1), Reply::bulk("OK"), Reply::bulk("table")])
    );
}

#[test]
fn integral_numbers_are_passed_as_integers() {
    let mut ks = Keyspace::default();
    eval(
        &mut ks,
        "redis.call('set', KEYS[1], 0) redis.call('set', KEYS[2], 2.5)",
        &["a", "b"],
        &[],
    );
    assert_eq!(cmd(&mut ks, "GET a", 1000), Reply::bulk("0"));
    assert_eq!(cmd(&mut ks, "GET b", 1000), Reply::bulk("2.5"));
    let r = eval(
        &mut ks,
        "return redis.call('pexpire', KEYS[1], ARGV[1] + 100)",
        &["a"],
        &["900"],
    );
    assert_eq!(r, Reply::Int(1));
    assert_eq!(cmd(&mut ks, "PTTL a", 1000), Reply::Int(1000));
}

#[test]
fn call_raises_and_pcall_returns_error_tables() {
    let mut ks = Keyspace::default();
    cmd(&mut ks, "SET s abc", 0);
    assert_eq!(
        eval(
            &mut ks,
            "redis.call('set', 'before', '1')\nreturn redis.call('incr', 's')",
            &[],
            &[]
        ),
        Reply::err("ERR value is not an integer or out of range script: 0000, on @user_script:2.")
    );
    // An ordinary error keeps the writes made before it, as in Redis.
    assert_eq!(cmd(&mut ks, "GET before", 0), Reply::bulk("1"));
    assert_eq!(
        eval(
            &mut ks,
            "local e = redis.pcall('incr', 's') return {type(e), e.err}",
            &[],
            &[]
        ),
        Reply::Array(vec![
            Reply::bulk("table"),
            Reply::bulk("ERR value is not an integer or out of range")
        ])
    );
    assert_eq!(
        eval(&mut ks, "return redis.pcall('incr', 's')", &[], &[]),
        Reply::err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        eval(
            &mut ks,
            "local ok, e = pcall(redis.call, 'nosuch') return e.err",
            &[],
            &[]
        ),
        Reply::bulk("ERR Unknown Redis command called from script")
    );
    assert_eq!(
        eval(&mut ks, "error({err='E2 bad'})", &[], &[]),
        Reply::err("E2 bad script: 0000, on @user_script:1.")
    );
    assert_eq!(
        eval(&mut ks, "return redis.error_reply('My Error')", &[], &[]),
        Reply::err("My Error")
    );
}

#[test]
fn command_names_are_case_insensitive_and_dynamic() {
    let mut ks = Keyspace::default();
    eval(
        &mut ks,
        "redis.call('SET', 'a', '1') redis.call('sEt', 'b', '2')",
        &[],
        &[],
    );
    let r = eval(
        &mut ks,
        "return redis.call(ARGV[1], KEYS[1], ARGV[2])",
        &["ch"],
        &["PUBLISH", "m"],
    );
    assert_eq!(r, Reply::Int(0));
    let events = ks.take_events();
    assert!(events.contains(&Event::Publish {
        channel: b("ch"),
        message: b("m")
    }));
    assert_eq!(cmd(&mut ks, "GET b", 0), Reply::bulk("2"));
}

#[test]
fn scripts_see_entry_time_and_sorted_keys() {
    let mut ks = Keyspace::default();
    cmd(&mut ks, "SET z 1", 0);
    cmd(&mut ks, "SET a 1 PX 100", 0);
    cmd(&mut ks, "SET m 1", 0);
    let at = |ks: &mut Keyspace, now| {
        eval_at(
            ks,
            "return redis.call('keys', '*')",
            &[],
            &[],
            now,
            1_000_000,
        )
    };
    assert_eq!(
        at(&mut ks, 50),
        Reply::Array(vec![Reply::bulk("a"), Reply::bulk("m"), Reply::bulk("z")])
    );
    assert_eq!(
        at(&mut ks, 100),
        Reply::Array(vec![Reply::bulk("m"), Reply::bulk("z")])
    );
}

#[test]
fn budget_abort_leaves_no_trace() {
    let mut ks = Keyspace::default();
    cmd(&mut ks, "SET keep v", 0);
    cmd(&mut ks, "LPUSH l a", 0);
    let before = ks.revision();
    let r = eval_at(
        &mut ks,
        "redis.call('set', 'new', '1') redis.call('del', 'keep') redis.call('lpush', 'l', 'b') \
         redis.call('publish', 'c', 'm') while true do end",
        &[],
        &[],
        0,
        100_000,
    );
    assert!(
        matches!(&r, Reply::Error(e) if e.contains("instruction budget")),
        "{r:?}"
    );
    assert_eq!(cmd(&mut ks, "GET keep", 0), Reply::bulk("v"));
    assert_eq!(cmd(&mut ks, "EXISTS new", 0), Reply::Int(0));
    assert_eq!(cmd(&mut ks, "LLEN l", 0), Reply::Int(1));
    // The EVAL itself used one revision (the test's bump), the reads above three more.
    assert_eq!(ks.revision(), before + 4);
    assert!(!ks
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::Publish { .. })));
}

#[test]
fn budget_abort_cannot_be_caught() {
    let mut ks = Keyspace::default();
    for body in [
        "while true do pcall(function() while true do end end) end",
        "while true do xpcall(function() while true do end end, function() return 1 end) end",
        "while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
        "while true do redis.pcall('get', 'x') end",
    ] {
        let r = eval_at(&mut ks, body, &[], &[], 0, 100_000);
        assert!(
            matches!(&r, Reply::Error(e) if e.contains("instruction budget")),
            "{body}: {r:?}"
        );
    }
}

#[test]
fn sandbox_blocks_globals_and_unsafe_libraries() {
    let mut ks = Keyspace::default();
    assert_eq!(
        eval(&mut ks, "x = 1", &[], &[]),
        Reply::err("ERR user_script:1: Attempt to modify a readonly table script: 0000, on @user_script:1.")
    );
    for name in [
        "os", "io", "debug", "print", "dofile", "loadfile", "package", "require",
    ] {
        let r = eval(&mut ks, &format!("return {name}"), &[], &[]);
        assert_eq!(
            r,
            Reply::err(format!(
                "ERR user_script:1: Script attempted to access nonexistent global variable '{name}' script: 0000, on @user_script:1."
            ))
        );
    }
    // Addresses never reach a script: they differ between replicas.
    assert_eq!(
        eval(
            &mut ks,
            "return {tostring({}), tostring(true), tostring(1.5)}",
            &[],
            &[]
        ),
        Reply::Array(vec![
            Reply::bulk("table: 0x00000000"),
            Reply::bulk("true"),
            Reply::bulk("1.5")
        ])
    );
    assert_eq!(
        eval(
            &mut ks,
            "local f, e = loadstring(string.dump(function() end)) return {f == nil, e}",
            &[],
            &[]
        ),
        Reply::Array(vec![
            Reply::Int(1),
            Reply::bulk("loading bytecode is not allowed")
        ])
    );
    assert_eq!(
        eval(&mut ks, "return loadstring('return 1 + 1')()", &[], &[]),
        Reply::Int(2)
    );
    // Bytecode is refused: only source text is loaded.
    let r = eval(&mut ks, "\x1bLua\x51\x00", &[], &[]);
    assert!(
        matches!(&r, Reply::Error(e) if e.starts_with("ERR Error compiling script")),
        "{r:?}"
    );
}

#[test]
fn random_is_deterministic_and_matches_redis() {
    let mut ks = Keyspace::default();
    let body = "return tostring(math.random()) .. ' ' .. math.random(100)";
    let first = eval(&mut ks, body, &[], &[]);
    assert_eq!(first, Reply::bulk("0.39646477363839 85"));
    assert_eq!(eval(&mut ks, body, &[], &[]), first);
}

#[test]
fn read_only_scripts_reject_writes() {
    let mut ks = Keyspace::default();
    let inv = Invocation {
        sha: "0000",
        body: b"return redis.pcall('set', 'k', 'v')",
        keys: &[],
        args: &[],
        now: 0,
        budget: 1000,
        user: None,
        cost: cost::CostModel::Fixed,
    };
    assert_eq!(
        run(Access::Read(&ks), &inv),
        Reply::err("ERR Write commands are not allowed from read-only scripts.")
    );
    assert_eq!(cmd(&mut ks, "EXISTS k", 0), Reply::Int(0));
}

#[test]
fn connection_commands_are_refused_except_ping_and_echo() {
    let mut ks = Keyspace::default();
    assert_eq!(
        eval(
            &mut ks,
            "return {redis.call('ping'), redis.call('echo', 'x')}",
            &[],
            &[]
        ),
        Reply::Array(vec![Reply::Simple("PONG".into()), Reply::bulk("x")])
    );
    for c in [
        "'client', 'id'",
        "'subscribe', 'c'",
        "'multi'",
        "'eval', 'return 1', 0",
        "'blpop', 'l', 0",
        "'info'",
    ] {
        assert_eq!(
            eval(&mut ks, &format!("return redis.pcall({c})"), &[], &[]),
            Reply::err("ERR This Redis command is not allowed from script"),
            "{c}"
        );
    }
}

#[test]
#[ignore]
fn bench_fresh_state() {
    let mut ks = Keyspace::default();
    let time = |what: &str, f: &mut dyn FnMut()| {
        let t = std::time::Instant::now();
        for _ in 0..500 {
            f();
        }
        eprintln!("{what}: {:?}", t.elapsed() / 500);
    };
    time("script", &mut || {
        eval(&mut ks, "return redis.call('get', KEYS[1])", &["k"], &[]);
    });
    time("bare", &mut || {
        let _ = mlua::Lua::new_with(
            mlua::StdLib::TABLE | mlua::StdLib::STRING | mlua::StdLib::MATH,
            mlua::LuaOptions::default(),
        )
        .unwrap();
    });
    time("new_state", &mut || {
        let _ = sandbox::new_state(&[], &[]).unwrap();
    });
    let lua = sandbox::new_state(&[], &[]).unwrap();
    time("create_function", &mut || {
        let _ = lua.create_function(|_, ()| Ok(())).unwrap();
    });
    time("compile prelude-sized", &mut || {
        let _ = lua
            .load("local a = 1 local function f(x) return x end for i = 1, 3 do a = a + f(i) end")
            .into_function()
            .unwrap();
    });
}

/// `redis.call` and `redis.pcall` run with the caller's permissions: a denied command or key
/// raises (or returns) Redis's script error, and an allowed one runs.
#[test]
fn calls_are_checked_against_the_callers_user() {
    let mut ks = Keyspace::default();
    let mut user = crate::state::acl::User::new();
    for r in ["on", "~lock:*", "+get", "+set"] {
        user.apply_rule(r.as_bytes(), &crate::cmd::acl::TableCatalog)
            .unwrap();
    }
    let mut run_as = |body: &str| {
        let inv = Invocation {
            sha: "0000",
            body: body.as_bytes(),
            keys: &[],
            args: &[],
            now: 0,
            budget: 100_000,
            user: Some(&user),
            cost: cost::CostModel::Metered,
        };
        run(Access::Write(&mut ks), &inv)
    };
    assert_eq!(
        run_as("return redis.call('set', 'lock:1', 'v')"),
        Reply::ok()
    );
    assert_eq!(
        run_as("return redis.pcall('get', 'other')"),
        Reply::err("ERR The user executing the script can't access at least one of the keys mentioned in the command arguments")
    );
    assert_eq!(
        run_as("return redis.pcall('del', 'lock:1')"),
        Reply::err("ERR The user executing the script can't run this command or subcommand")
    );
    assert_eq!(
        run_as("return redis.call('del', 'lock:1')"),
        Reply::err("ERR The user executing the script can't run this command or subcommand script: 0000, on @user_script:1.")
    );
}

/// `redis.acl_check_cmd` answers for the script's user without running anything: commands,
/// keys, unknown commands; with no user (entries before ACLs) everything is allowed.
#[test]
fn acl_check_cmd_answers_for_the_scripts_user() {
    let mut ks = Keyspace::default();
    let mut user = crate::state::acl::User::new();
    for r in ["on", "~lock:*", "+get"] {
        user.apply_rule(r.as_bytes(), &crate::cmd::acl::TableCatalog)
            .unwrap();
    }
    let body = "return {redis.acl_check_cmd('get', 'lock:1'), \
                redis.acl_check_cmd('get', 'other') == false, \
                redis.acl_check_cmd('set', 'lock:1', 'v') == false}";
    for (who, want) in [(Some(&user), Reply::Int(1)), (None, Reply::Int(1))] {
        let inv = Invocation {
            sha: "0000",
            body: body.as_bytes(),
            keys: &[],
            args: &[],
            now: 0,
            budget: 100_000,
            user: who,
            cost: cost::CostModel::Metered,
        };
        let r = run(Access::Write(&mut ks), &inv);
        let expected = if who.is_some() {
            Reply::Array(vec![want.clone(), Reply::Int(1), Reply::Int(1)])
        } else {
            // Unchecked: the two `== false` comparisons are false, a nil reply each.
            Reply::Array(vec![want, Reply::Nil, Reply::Nil])
        };
        assert_eq!(r, expected, "user {:?}", who.is_some());
    }
    assert_eq!(
        eval(&mut ks, "return redis.acl_check_cmd('nosuch')", &[], &[]),
        Reply::err(
            "ERR Invalid command passed to redis.acl_check_cmd() script: 0000, on @user_script:1."
        )
    );
    assert_eq!(ks.stored_len(), 0, "acl_check_cmd runs nothing");
}

#[test]
fn double_results_are_doubles() {
    let mut ks = Keyspace::default();
    assert_eq!(
        eval(&mut ks, "return {1, {double=2.5}}", &[], &[]),
        Reply::Array(vec![Reply::Int(1), Reply::Double(2.5)])
    );
}

#[test]
fn wall_clock_commands_are_refused() {
    let mut ks = Keyspace::default();
    cmd(&mut ks, "SET k v PX 5000", 1000);
    for name in ["EXPIRETIME", "PEXPIRETIME"] {
        let r = eval(
            &mut ks,
            &format!("return redis.pcall('{name}', 'k')"),
            &[],
            &[],
        );
        assert_eq!(
            r,
            Reply::err("ERR This Redis command is not allowed from script"),
            "{name}"
        );
    }
    let r = eval(&mut ks, "return redis.call('PTTL', 'k')", &[], &[]);
    assert_eq!(r, Reply::Int(5000));
}

/// The Rust decoders and encoders of cjson and cmsgpack recurse; at their nesting limits they
/// must stay inside a tokio worker's 2 MiB stack, where apply runs scripts.
#[test]
fn library_nesting_limits_fit_a_worker_stack() {
    let run = || {
        let mut ks = Keyspace::default();
        let r = eval(
            &mut ks,
            "local deep = string.rep('[', 1000) .. string.rep(']', 1000) \
             local t = cjson.decode(deep) \
             local s = cjson.encode(t) \
             local ok, e = pcall(cjson.decode, '[' .. deep .. ']') \
             local m = cmsgpack.unpack(string.rep('\\145', 999) .. '\\1') \
             local ok2, e2 = pcall(cmsgpack.unpack, string.rep('\\145', 5000) .. '\\1') \
             return {#s, tostring(ok), tostring(ok2), type(m)}",
            &[],
            &[],
        );
        assert_eq!(
            r,
            Reply::Array(vec![
                Reply::Int(2000),
                Reply::bulk("false"),
                Reply::bulk("false"),
                Reply::bulk("table"),
            ])
        );
    };
    std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(run)
        .expect("thread")
        .join()
        .expect("no stack overflow");
}

#[test]
fn globals_and_library_tables_are_read_only() {
    let mut ks = Keyspace::default();
    for body in [
        "x = 1",
        "KEYS = 1",
        "redis.call = 1",
        "string.x = 1",
        "_G.x = 1",
    ] {
        let r = eval(&mut ks, body, &[], &[]);
        let Reply::Error(e) = r else {
            panic!("{body}: {r:?}")
        };
        assert!(
            e.starts_with("ERR user_script:1: Attempt to modify a readonly table"),
            "{body}: {e}"
        );
    }
    for body in ["rawset(_G, 'x', 1)", "setmetatable(string, {})"] {
        let r = eval(&mut ks, body, &[], &[]);
        assert_eq!(
            r,
            Reply::Error(
                "ERR Attempt to modify a readonly table script: 0000, on @user_script:1.".into()
            ),
            "{body}"
        );
    }
    let r = eval(
        &mut ks,
        "local n = 0 for _ in pairs(string) do n = n + 1 end \
         return {n, rawget(_G, 'redis') ~= nil, ('a'):upper(), ARGV[1]}",
        &[],
        &["v"],
    );
    assert_eq!(
        r,
        Reply::Array(vec![
            Reply::Int(15),
            Reply::Int(1),
            Reply::bulk("A"),
            Reply::bulk("v")
        ])
    );
}

// What `redis.call`s cost (cost.rs, bridge::cost_before).
use cost::{after, CostModel, BASE};

/// How long a script that must be stopped may take before the test calls it a hang. The
/// budget stops these in well under a second; the bound is loose so that a loaded CI machine
/// does not fail them, and a real hang (minutes, before the library charges) still does.
const NO_HANG: std::time::Duration = std::time::Duration::from_secs(30);

use crate::cmd::test_argv as argv_of;

fn cost_keyspace(keys: usize) -> Keyspace {
    let mut ks = Keyspace::default();
    for i in 0..keys {
        crate::cmd::run_line(&mut ks, &format!("SET key:{i} v"), 1);
    }
    crate::cmd::run_line(
        &mut ks,
        &format!("RPUSH big {}", vec!["x"; 500].join(" ")),
        1,
    );
    ks
}

#[test]
fn the_fixed_model_charges_the_base_only() {
    let ks = cost_keyspace(1000);
    assert_eq!(
        bridge::cost_before(CostModel::Fixed, &ks, &argv_of("KEYS *"), 1),
        BASE
    );
    let big = Reply::Array(vec![Reply::bulk("x"); 1000]);
    assert_eq!(after(CostModel::Fixed, &big), 0);
}

#[test]
fn metered_calls_pay_for_the_keys_values_and_replies_they_touch() {
    let ks = cost_keyspace(1000);
    let m = CostModel::Metered;
    // A fast command on a small value: the base only.
    assert_eq!(bridge::cost_before(m, &ks, &argv_of("GET key:1"), 1), BASE);
    // KEYS walks all 1001 stored keys.
    assert_eq!(
        bridge::cost_before(m, &ks, &argv_of("KEYS *"), 1),
        BASE + 1001
    );
    // SCAN walks up to COUNT (default 10), never more than is stored.
    assert_eq!(
        bridge::cost_before(m, &ks, &argv_of("SCAN 0"), 1),
        BASE + 10
    );
    assert_eq!(
        bridge::cost_before(m, &ks, &argv_of("SCAN 0 MATCH k* COUNT 300"), 1),
        BASE + 300
    );
    assert_eq!(
        bridge::cost_before(m, &ks, &argv_of("SCAN 0 count 5000"), 1),
        BASE + 1001
    );
    // LRANGE is not fast: it pays for the list's 500 elements; LLEN is fast.
    assert_eq!(
        bridge::cost_before(m, &ks, &argv_of("LRANGE big 0 -1"), 1),
        BASE + 500
    );
    assert_eq!(bridge::cost_before(m, &ks, &argv_of("LLEN big"), 1), BASE);
    // DEL pays for every value it names; a missing key costs nothing.
    assert_eq!(
        bridge::cost_before(m, &ks, &argv_of("DEL big nothing key:2"), 1),
        BASE + 500
    );
    // Arguments: one unit per 64 bytes.
    let long = format!("SET k {}", "v".repeat(640));
    assert_eq!(bridge::cost_before(m, &ks, &argv_of(&long), 1), BASE + 10);
    // Replies: one unit per element, one per 64 bytes.
    let reply = Reply::Array(vec![Reply::bulk("x".repeat(128)), Reply::Int(3)]);
    assert_eq!(after(m, &reply), 2 + 2);
    let map = Reply::Map(vec![(Reply::bulk("a"), Reply::bulk("b"))]);
    assert_eq!(after(m, &map), 2);
}

/// Each log entry keeps the model it was written under: an `EVAL` entry from before ACLs
/// (tag 31) and an `EvalAs` (tag 43) charge 100 per call, as they did when they were first
/// applied, and only the metered forms (tags 105 and 116) pay for the work; only the bounded
/// form (tag 116) pays for library work.
#[test]
fn the_log_entry_decides_the_model() {
    use crate::cmd::acl::{EvalAs, EvalBounded, EvalMetered};
    use crate::cmd::eval::{Eval, Source};
    use crate::cmd::{Command, Ctx};

    let eval = Eval {
        source: Source::Body(Bytes::from_static(
            b"for i = 1, 300 do redis.call('KEYS', '*') end return 'done'",
        )),
        keys: vec![],
        args: vec![],
    };
    let as_user = EvalAs {
        user: "default".into(),
        read_only: false,
        eval: eval.clone(),
    };
    let run = |cmd: Command| {
        let mut ks = cost_keyspace(500);
        ks.set_script_budget(100_000);
        let revision = ks.bump_revision();
        cmd.apply(&mut ks, Ctx { now: 1, revision })
    };
    // 300 calls at the fixed 100: 30,000 instructions, within the budget.
    assert_eq!(run(Command::Eval(eval)), Reply::bulk("done"));
    assert_eq!(run(Command::EvalAs(as_user.clone())), Reply::bulk("done"));
    // Metered, each call walks and returns 501 keys: the budget covers about 90.
    let metered = run(Command::EvalMetered(EvalMetered(as_user.clone())));
    assert!(
        matches!(&metered, Reply::Error(e) if e.starts_with("ERR Script exceeded the instruction budget of 100000 ")),
        "{metered:?}"
    );
    // Library work is charged only under the bounded form (tag 116).
    let upper = EvalAs {
        eval: Eval {
            source: Source::Body(Bytes::from_static(
                b"local s = string.rep('x', 100000) for i = 1, 50 do s:upper() end return 'done'",
            )),
            keys: vec![],
            args: vec![],
        },
        ..as_user
    };
    let metered = run(Command::EvalMetered(EvalMetered(upper.clone())));
    assert_eq!(metered, Reply::bulk("done"));
    let bounded = run(Command::EvalBounded(EvalBounded(upper)));
    assert!(
        matches!(&bounded, Reply::Error(e) if e.starts_with("ERR Script exceeded the instruction budget of 100000 ")),
        "{bounded:?}"
    );
}

#[test]
fn an_unknown_command_costs_its_arguments() {
    let ks = cost_keyspace(1);
    assert_eq!(
        bridge::cost_before(CostModel::Metered, &ks, &argv_of("NOSUCH a b"), 1),
        BASE
    );
}

/// Runs `body` under `model` with `budget`, timing it.
fn eval_model(body: &str, budget: u64, model: CostModel) -> (Reply, std::time::Duration) {
    let mut ks = Keyspace::default();
    ks.bump_revision();
    let inv = Invocation {
        sha: "0000",
        body: body.as_bytes(),
        keys: &[],
        args: &[],
        now: 0,
        budget,
        user: None,
        cost: model,
    };
    let started = std::time::Instant::now();
    let r = run(Access::Write(&mut ks), &inv);
    (r, started.elapsed())
}

fn is_budget_abort(r: &Reply) -> bool {
    matches!(r, Reply::Error(e) if e.starts_with("ERR Script exceeded the instruction budget"))
}

/// The default budget.
const DEFAULT_BUDGET: u64 = 20_000_000;

/// The script that used to hang every replica: Lua's C matcher backtracks about n^6 times.
/// Its steps are charged now, so it is aborted within the budget.
#[test]
fn backtracking_pattern_is_aborted_by_the_budget() {
    let body = "local s = string.rep('a', 100000) return s:find('.-.-.-.-.-.-b')";
    let (r, took) = eval_model(body, DEFAULT_BUDGET, CostModel::Library);
    assert!(is_budget_abort(&r), "{r:?}");
    assert!(took < NO_HANG, "took {took:?}");
    // gmatch, gsub and match run on the same matcher.
    for body in [
        "local s = string.rep('a', 100000) for x in s:gmatch('.-.-.-.-.-b') do end",
        "local s = string.rep('a', 100000) return (s:gsub('.-.-.-.-.-b', ''))",
        "local s = string.rep('a', 100000) return s:match('.-.-.-.-.-b')",
    ] {
        let (r, took) = eval_model(body, DEFAULT_BUDGET, CostModel::Library);
        assert!(is_budget_abort(&r), "{body}: {r:?}");
        assert!(took < NO_HANG, "{body}: took {took:?}");
    }
}

/// Entries written before library charges do not pay for library work (their results stay
/// what they were), but their matches are bounded by a fixed ceiling of steps.
#[test]
fn older_models_do_not_charge_library_work() {
    let body = "local s = string.rep('x', 1000000) for i = 1, 50 do s:upper() end return #s";
    let (r, _) = eval_model(body, 200_000, CostModel::Metered);
    assert_eq!(r, Reply::Int(1_000_000));
    let (r, _) = eval_model(body, 200_000, CostModel::Library);
    assert!(is_budget_abort(&r), "{r:?}");
    // An old entry that would never end is stopped at the ceiling.
    let (r, took) = eval_model("return #string.rep('', 1e15)", 200_000, CostModel::Metered);
    assert!(is_budget_abort(&r), "{r:?}");
    assert!(took < NO_HANG, "took {took:?}");
}

/// `string.rep` is charged by the size it would build before it builds it.
#[test]
fn huge_rep_is_refused_before_it_runs() {
    for body in [
        "return #string.rep('x', 1e12)",
        "return #string.rep('', 1e15)",
        "return #('abc'):rep(1e10, ',')",
    ] {
        let (r, took) = eval_model(body, DEFAULT_BUDGET, CostModel::Library);
        assert!(is_budget_abort(&r), "{body}: {r:?}");
        assert!(took < NO_HANG, "{body}: took {took:?}");
    }
    let (r, _) = eval_model(
        "return #string.rep('ab', 1000)",
        100_000,
        CostModel::Library,
    );
    assert_eq!(r, Reply::Int(2000));
}

/// A loop of cheap-looking library calls over a large string pays for the bytes each call
/// touches: what fits in the budget with small strings is aborted with large ones.
#[test]
fn library_loops_are_charged_by_their_work() {
    let small = "local s = string.rep('a', 100) local n = 0 \
                 for i = 1, 1000 do n = n + select(2, s:gsub('a', 'b')) end return n";
    let (r, _) = eval_model(small, 2_000_000, CostModel::Library);
    assert_eq!(r, Reply::Int(100_000));
    for body in [
        "local s = string.rep('a', 100000) for i = 1, 1000 do s:gsub('a', 'b') end",
        "local s = string.rep('a ', 50000) for i = 1, 1000 do for w in s:gmatch('%a+') do end end",
        "local s = string.rep('a', 100000) for i = 1, 1000 do s:find('b', 1, true) end",
        "local s = string.rep('a', 100000) for i = 1, 1000 do local _ = s:upper() end",
        "local s = string.rep('a', 100000) for i = 1, 1000 do local _ = s .. i end",
        "local s = string.rep('a', 100000) for i = 1, 1000 do local _ = s .. 'x' end",
        "local z = string.rep('\\0', 100000) for i = 1, 1000 do local _ = z < z end",
        "local a = string.rep('a', 100000) local b = a .. 'b' for i = 1, 1000 do local _ = a <= b end",
        "local function g() end local function f(...) for i = 1, 1000 do g(...) end end f(unpack({}, 1, 7000))",
        "local t = {} for i = 1, 10000 do t[i] = 'x' end for i = 1, 1000 do table.concat(t) end",
        "local t = {} for i = 1, 10000 do t[i] = i end for i = 1, 1000 do table.sort(t) end",
        "local t = {} for i = 1, 10000 do t[i] = i end for i = 1, 1000 do table.insert(t, 1, 0) table.remove(t, 1) end",
        "local s = cjson.encode(string.rep('a', 100000)) for i = 1, 1000 do cjson.decode(s) end",
        "local t = {} for i = 1, 1000 do t[i] = string.rep('a', 100) end for i = 1, 1000 do cjson.encode(t) end",
    ] {
        let (r, took) = eval_model(body, 2_000_000, CostModel::Library);
        assert!(is_budget_abort(&r), "{body}: {r:?}");
        assert!(took < NO_HANG, "{body}: took {took:?}");
    }
}

/// A script's Lua memory is capped ([`sandbox::MEMORY_LIMIT`]).
#[test]
fn memory_cap_fails_the_script() {
    let (r, _) = eval_model(
        "local s = 'x' for i = 1, 40 do s = s .. s end return #s",
        u64::MAX / 2,
        CostModel::Library,
    );
    assert!(
        matches!(&r, Reply::Error(e) if e.contains("not enough memory")),
        "{r:?}"
    );
    let (r, _) = eval_model(
        "local t = {} for i = 1, 1e8 do t[i] = i end return #t",
        u64::MAX / 2,
        CostModel::Metered,
    );
    assert!(
        matches!(&r, Reply::Error(e) if e.contains("not enough memory")),
        "{r:?}"
    );
}

/// Tables keyed by tables, functions or coroutines are laid out by address: iterating them
/// is refused (the order would differ between replicas); other keys iterate as before.
#[test]
fn iterating_tables_keyed_by_objects_is_refused() {
    for body in [
        "local t = {a = 1} t[{}] = 2 for k in pairs(t) do end",
        "local t = {a = 1, b = 2, c = 3} t[tostring] = 2 return next(t)",
        "local t = {} t[coroutine.create(function() end)] = 1 return next(t)",
        "local t = {a = 1} t[{}] = 2 table.foreach(t, function() end)",
    ] {
        let (r, _) = eval_model(body, DEFAULT_BUDGET, CostModel::Library);
        assert!(
            matches!(&r, Reply::Error(e) if e.contains("cannot iterate a table keyed by")),
            "{body}: {r:?}"
        );
    }
    let (r, _) = eval_model(
        "local t = {} t[{}] = 1 return cmsgpack.pack(t)",
        DEFAULT_BUDGET,
        CostModel::Library,
    );
    assert!(
        matches!(&r, Reply::Error(e) if e.contains("cannot pack a table keyed by")),
        "{r:?}"
    );
    let (r, _) = eval_model(
        "local t = {b = 2, a = 1, [3] = 3} local n = 0 for k, v in pairs(t) do n = n + 1 end \
         table.foreach(t, function() n = n + 1 end) return n",
        DEFAULT_BUDGET,
        CostModel::Library,
    );
    assert_eq!(r, Reply::Int(6));
    // Log entries written before the rule run as they ran.
    let (r, _) = eval_model(
        "local t = {} t[{}] = 1 local n = 0 for k in pairs(t) do n = n + 1 end return n",
        DEFAULT_BUDGET,
        CostModel::Metered,
    );
    assert_eq!(r, Reply::Int(1));
}

/// The Rust pattern functions give Lua 5.1's results (the differential test against
/// redis-server covers the error texts).
#[test]
fn pattern_functions_match_lua() {
    let cases: &[(&str, Reply)] = &[
        ("return {string.find('hello world', 'o w')}", ints(&[5, 7])),
        ("return {string.find('hello', 'l', 1, true)}", ints(&[3, 3])),
        ("return {string.find('a.b', '.', 2, true)}", ints(&[2, 2])),
        ("return {string.find('abc', 'b', -1)}", Reply::Array(vec![])),
        (
            "return {('key:42'):match('^(%a+):(%d+)$')}",
            bulks(&["key", "42"]),
        ),
        ("return {string.match('hello', '()ll()')}", ints(&[3, 5])),
        (
            "return {string.gsub('hello world', 'o', '0')}",
            mixed("hell0 w0rld", 2),
        ),
        (
            "return {string.gsub('abc', '%w', '%0%0')}",
            mixed("aabbcc", 3),
        ),
        ("return {string.gsub('abc', '', '-')}", mixed("-a-b-c-", 4)),
        (
            "return {string.gsub('hello world', '(%w+)', '<%1>', 1)}",
            mixed("<hello> world", 1),
        ),
        (
            "return {string.gsub('$x $y', '%$(%w+)', {x = 'X'})}",
            mixed("X $y", 2),
        ),
        (
            "return {string.gsub('a b', '%w', function(c) return c:upper() end)}",
            mixed("A B", 2),
        ),
        (
            "return {string.gsub('THE (quick) fox', '%f[%a]%a+', 'w')}",
            mixed("w (w) w", 3),
        ),
        (
            "return {string.gsub('f(a(b)c)d', '%b()', '')}",
            mixed("fd", 1),
        ),
        (
            "local t = {} for k, v in string.gmatch('a=1, b=2', '(%w+)=(%w+)') do \
             t[#t + 1] = k .. v end return t",
            bulks(&["a1", "b2"]),
        ),
        (
            "local t = {} for w in ('one two'):gmatch('%a+') do t[#t + 1] = w end return t",
            bulks(&["one", "two"]),
        ),
    ];
    for (body, want) in cases {
        let (r, _) = eval_model(body, DEFAULT_BUDGET, CostModel::Library);
        assert_eq!(&r, want, "{body}");
    }
}

fn ints(v: &[i64]) -> Reply {
    Reply::Array(v.iter().map(|n| Reply::Int(*n)).collect())
}

fn bulks(v: &[&str]) -> Reply {
    Reply::Array(v.iter().map(|s| Reply::bulk(s.to_string())).collect())
}

fn mixed(s: &str, n: i64) -> Reply {
    Reply::Array(vec![Reply::bulk(s.to_string()), Reply::Int(n)])
}

/// The lock libraries' scripts pass under the new model with the default budget (the same
/// scripts the integration tests run against a cluster).
#[test]
fn lock_library_scripts_fit_the_library_model() {
    let redsync_release =
        "if redis.call('get', 'lk') == 'tok' then return redis.call('del', 'lk') else return 0 end";
    let (r, _) = eval_model(redsync_release, DEFAULT_BUDGET, CostModel::Library);
    assert_eq!(r, Reply::Int(0));
    let redisson =
        "if (redis.call('exists', 'l') == 0) then redis.call('hincrby', 'l', 'id:1', 1); \
                    redis.call('pexpire', 'l', 30000); return nil; end; \
                    return redis.call('pttl', 'l');";
    let (r, _) = eval_model(redisson, DEFAULT_BUDGET, CostModel::Library);
    assert_eq!(r, Reply::Nil);
}

/// Times the worst scripts we know of under the default budget (the figures in
/// docs/scripting.md): `cargo test --release --lib measure_worst_scripts -- --ignored --nocapture`.
#[test]
#[ignore]
fn measure_worst_scripts() {
    let scripts = [
        "while true do end",
        "local s = string.rep('a', 100000) return s:find('.-.-.-.-.-.-b')",
        "local s = string.rep('a', 1000000) while true do s:gsub('a', 'b') end",
        "local s = string.rep('a', 1000000) while true do s:find('b', 1, true) end",
        "local t = {} for i = 1, 1e8 do t[i] = i end",
        "local s = string.rep('ab', 1000) while true do local _ = s:rep(1000) end",
        "local t = {} for i = 1, 100000 do t[i] = tostring(i) end while true do table.sort(t) end",
        "local t = {} for i = 1, 100000 do t[i] = 'x' .. i end while true do cjson.encode(t) end",
        "local t = {} for i = 1, 100000 do t[i] = i end while true do local x = {unpack(t, 1, 7000)} end",
        "local s = string.rep('x', 1000000) while true do for w in s:gmatch('x') do end end",
        "local i = 0 while true do i = i + 1 local _ = tostring(i) .. 'abcdefgh' end",
    ];
    for body in scripts {
        let (r, took) = eval_model(body, DEFAULT_BUDGET, CostModel::Library);
        let verdict = match &r {
            Reply::Error(e) => e.chars().take(60).collect::<String>(),
            other => format!("{other:?}"),
        };
        println!("{took:>12.3?}  {body}  -> {verdict}");
    }
    // Instructions whose work grows with their operands: charged by the hook.
    for body in [
        "local s = string.rep('a', 1e7) while true do local _ = s .. 'x' end",
        "local z = string.rep('\\0', 1e7) while true do local _ = z < z end",
        "local a = string.rep('a', 1e7) local b = a .. 'b' while true do local _ = a < b end",
        "local function f(...) while true do local t = {...} end end f(unpack({}, 1, 7000))",
        "local function g() end local function f(...) while true do g(...) end end f(unpack({}, 1, 7000))",
        "local s = string.rep('a', 1e6) while true do local _ = s < 'b' end",
    ] {
        let (r, took) = eval_model(body, DEFAULT_BUDGET, CostModel::Library);
        let verdict = match &r {
            Reply::Error(e) => e.chars().take(60).collect::<String>(),
            other => format!("{other:?}"),
        };
        println!("{took:>12.3?}  {body}  -> {verdict}");
    }
}

/// Large data the allocator did not see being made (an argument) and coroutines also get
/// the per-instruction charges: comparing a large argument with itself in a loop is aborted.
#[test]
fn large_arguments_and_coroutines_are_charged_per_instruction() {
    let mut ks = Keyspace::default();
    ks.bump_revision();
    let big = Bytes::from(vec![0u8; 1 << 20]);
    let args = [big];
    let inv = Invocation {
        sha: "0000",
        body: b"local z = ARGV[1] while true do local _ = z < z end",
        keys: &[],
        args: &args,
        now: 0,
        budget: DEFAULT_BUDGET,
        user: None,
        cost: CostModel::Library,
    };
    let started = std::time::Instant::now();
    let r = run(Access::Write(&mut ks), &inv);
    assert!(is_budget_abort(&r), "{r:?}");
    assert!(started.elapsed() < NO_HANG);
    let body = "local z local co = coroutine.wrap(function() coroutine.yield() \
                while true do local _ = z < z end end) co() z = ('\\0'):rep(1e6) co()";
    let (r, took) = eval_model(body, DEFAULT_BUDGET, CostModel::Library);
    assert!(is_budget_abort(&r), "{r:?}");
    assert!(took < NO_HANG, "took {took:?}");
}
