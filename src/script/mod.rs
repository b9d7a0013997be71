//! Sandboxed Lua 5.1 scripting (EVAL and friends), run inside apply on every replica.
//!
//! - [`sandbox`]: the Lua state: libraries, `redis` table, global protection, PRNG.
//! - [`bridge`]: `redis.call`/`redis.pcall` over the command table and the keyspace.
//! - [`convert`]: reply <-> Lua conversions exactly as Redis's `script_lua.c`.
//!
//! - [`meter`]: the budget: instructions, library calls, allocations ([`strlib`] and
//!   [`pattern`] are Lua's pattern functions with a step count).
//!
//! Determinism: a script sees the entry's cluster time, KEYS results are sorted, the PRNG
//! restarts from a fixed state, tables keyed by objects cannot be iterated, and a budget of
//! Lua instructions (plus a charge per `redis.call` for the work it does in Rust, see
//! [`cost`], and per library call for its work, see [`meter`]) is counted identically on
//! every replica. A script that exceeds it is
//! aborted and all its writes are rolled back (the keyspace journal), so it either
//! completes or leaves no trace. An ordinary error keeps the writes made before it, as in
//! Redis.

pub mod bitlib;
pub mod bridge;
pub mod cjson;
pub mod cmsgpack;
pub mod convert;
pub mod cost;
pub mod meter;
pub mod pattern;
pub mod sandbox;
pub mod strlib;
pub mod structlib;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use bytes::Bytes;
use mlua::chunk::ChunkMode;
use mlua::{Function, Lua, MultiValue, Value};

pub use crate::state::scripts::sha1_hex;
pub use bridge::Access;

use crate::resp::Reply;

/// The chunk name Redis gives scripts (error messages read `user_script:LINE: ...`).
const CHUNK: &str = "@user_script";

/// One script invocation.
pub struct Invocation<'a> {
    /// SHA1 hex of the body (named in error messages).
    pub sha: &'a str,
    /// The Lua source.
    pub body: &'a [u8],
    /// KEYS.
    pub keys: &'a [Bytes],
    /// ARGV.
    pub args: &'a [Bytes],
    /// Cluster time of the entry.
    pub now: u64,
    /// Instruction budget.
    pub budget: u64,
    /// The user whose permissions every `redis.call` is checked against (None: unchecked,
    /// for entries written before ACLs).
    pub user: Option<&'a crate::state::acl::User>,
    /// How `redis.call`s are charged (the log entry decides: see [`cost`]).
    pub cost: cost::CostModel,
}

/// Per-run state shared by the hook and the callbacks.
struct RunState {
    meter: Rc<meter::Meter>,
    resp3: Cell<bool>,
    /// The error message and script line captured by the message handler.
    failure: RefCell<Option<(String, Option<usize>)>>,
}

impl RunState {
    fn new(budget: u64, model: cost::CostModel) -> Self {
        RunState {
            meter: Rc::new(meter::Meter::new(budget, model)),
            resp3: Cell::new(false),
            failure: RefCell::new(None),
        }
    }

    /// Charges `n` instructions (and the allocations not yet charged); true once the budget
    /// is exhausted (and from then on).
    fn charge(&self, n: u64) -> bool {
        self.meter.charge(n);
        self.meter.charge_library(0)
    }

    fn aborted(&self) -> bool {
        self.meter.aborted()
    }
}

fn abort_error() -> mlua::Error {
    mlua::Error::runtime(meter::ABORT)
}

/// Runs a script. With write access, a budget abort rolls every change back.
pub fn run(mut access: Access<'_>, inv: &Invocation<'_>) -> Reply {
    if let Access::Write(ks) = &mut access {
        ks.begin_undo();
    }
    let st = Rc::new(RunState::new(inv.budget, inv.cost));
    let outcome = execute(&mut access, inv, &st);
    let aborted = st.aborted();
    if let Access::Write(ks) = &mut access {
        if aborted {
            ks.rollback_undo();
        } else {
            ks.commit_undo();
        }
    }
    if aborted {
        return Reply::err(format!(
            "ERR Script exceeded the instruction budget of {} and was aborted; none of its writes were applied script: {}",
            inv.budget, inv.sha
        ));
    }
    match outcome {
        Ok(reply) => reply,
        Err(e) => Reply::err(format!("ERR internal scripting error: {e}")),
    }
}

fn execute(
    access: &mut Access<'_>,
    inv: &Invocation<'_>,
    st: &Rc<RunState>,
) -> mlua::Result<Reply> {
    let lua = sandbox::new_state(inv.keys, inv.args)?;
    let f = match lua
        .load(inv.body)
        .set_name(CHUNK)
        .set_mode(ChunkMode::Text)
        .into_function()
    {
        Ok(f) => f,
        Err(e) => return Ok(compile_error(&e)),
    };
    let g = lua.globals();
    let xpcall: Function = g.raw_get("xpcall")?;
    protect_catchers(&lua, st)?;
    install_setresp(&lua, st)?;
    // Inputs the allocator does not see (created before it is installed) may be large.
    let big = inv.body.len() >= meter::BIG
        || inv
            .keys
            .iter()
            .chain(inv.args)
            .any(|a| a.len() >= meter::BIG);
    if big {
        st.meter.mark_big();
    }
    let metered = meter::install(&lua, &st.meter)?;
    let handler_st = st.clone();
    let handler = lua.create_function(move |lua, err: Value| {
        let line = user_line(lua);
        let mut msg = error_message(&err);
        // Errors raised by Rust callbacks carry no position; Lua's C library functions
        // prefix the calling line (luaL_error), and Redis's messages show it.
        if let (Value::Error(_), Some(l)) = (&err, line) {
            msg = msg.replacen("ERR ", &format!("ERR user_script:{l}: "), 1);
        }
        *handler_st.failure.borrow_mut() = Some((msg, line));
        Ok(Value::Nil)
    })?;
    let now = inv.now;
    let user = inv.user;
    let model = inv.cost;
    let result = lua.scope(|scope| {
        let call_st = st.clone();
        let raw = scope.create_function_mut(move |lua, args: MultiValue| {
            let reply = match bridge::argv(&args) {
                Ok(argv) => {
                    if call_st.charge(bridge::cost_before(model, access.ks(), &argv, now)) {
                        return Err(abort_error());
                    }
                    bridge::execute(access, argv, now, user)
                }
                Err(e) => {
                    if call_st.charge(cost::BASE) {
                        return Err(abort_error());
                    }
                    e
                }
            };
            if call_st.charge(cost::after(model, &reply)) {
                return Err(abort_error());
            }
            bridge::to_lua(lua, &reply, call_st.resp3.get())
        })?;
        let acl_check = scope.create_function(move |lua, args: MultiValue| {
            bridge::acl_check_cmd(lua, &args, user)
        })?;
        sandbox::finish_state(&lua, raw, acl_check, model == cost::CostModel::Library)?;
        st.meter.start();
        let result = xpcall.call::<MultiValue>((f, handler));
        metered.stop();
        result
    })?;
    if st.aborted() {
        return Ok(Reply::Nil);
    }
    let mut values = result.into_iter();
    let ok = matches!(values.next(), Some(Value::Boolean(true)));
    let first = values.next().unwrap_or(Value::Nil);
    if ok {
        return Ok(convert::lua_to_reply(&first, st.resp3.get()));
    }
    // Memory errors skip the message handler; their value is the message.
    let failure = st.failure.borrow_mut().take();
    let (msg, line) = failure.unwrap_or_else(|| (error_message(&first), None));
    Ok(Reply::Error(match line {
        Some(line) => format!("{msg} script: {}, on {CHUNK}:{line}.", inv.sha),
        None => msg,
    }))
}

/// `ERR Error compiling script (new function): user_script:1: ...`, as Redis words it.
fn compile_error(e: &mlua::Error) -> Reply {
    let text = match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    };
    Reply::err(format!("ERR Error compiling script (new function): {text}"))
}

/// The message of a raised error, as Redis's error handler builds it: an error table's
/// `err` field as is, anything else prefixed with `ERR `.
fn error_message(err: &Value) -> String {
    match err {
        Value::Table(t) => match t.raw_get::<Value>("err") {
            Ok(Value::String(s)) => convert::error_text(&s.as_bytes()),
            _ => "ERR unknown error".into(),
        },
        Value::String(s) => format!("ERR {}", String::from_utf8_lossy(&s.as_bytes())),
        Value::Number(n) => format!("ERR {}", convert::fmt_g14(*n)),
        Value::Error(e) => format!("ERR {}", root_message(e)),
        Value::Nil => "ERR nil".into(),
        other => format!("ERR {}", other.type_name()),
    }
}

/// The innermost message of an mlua error (callbacks wrap their errors).
fn root_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => root_message(cause),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::MemoryError(m) => m.clone(),
        other => other.to_string(),
    }
}

/// The line of the innermost frame of the script itself (skipping C functions and the
/// prelude), which Redis names in error replies.
fn user_line(lua: &Lua) -> Option<usize> {
    (0..64).find_map(|level| {
        lua.inspect_stack(level, |d| {
            let src = d.source();
            (src.source.as_deref() == Some(CHUNK)).then(|| d.current_line())
        })
        .flatten()
        .flatten()
    })
}

/// Wraps `pcall`, `xpcall` and `coroutine.resume` so that a budget abort cannot be caught:
/// once the budget is exhausted, returning from any of them raises the abort again.
fn protect_catchers(lua: &Lua, st: &Rc<RunState>) -> mlua::Result<()> {
    let g = lua.globals();
    let co: mlua::Table = g.raw_get("coroutine")?;
    for (table, name) in [(&g, "pcall"), (&g, "xpcall"), (&co, "resume")] {
        let inner: Function = table.raw_get(name)?;
        let st = st.clone();
        let wrapped = lua.create_function(move |_, args: MultiValue| {
            let out = inner.call::<MultiValue>(args);
            if st.aborted() {
                return Err(abort_error());
            }
            out
        })?;
        // Their arguments are converted one by one into Rust and back.
        meter::register(lua, &wrapped, meter::Rule::PerArgument)?;
        table.raw_set(name, wrapped)?;
    }
    Ok(())
}

/// `redis.setresp(2|3)`: the protocol of replies converted for the script (and of its
/// result's booleans).
fn install_setresp(lua: &Lua, st: &Rc<RunState>) -> mlua::Result<()> {
    let st = st.clone();
    let f = lua.create_function(move |_, v: Value| {
        match v {
            Value::Number(n) if n == 2.0 || n == 3.0 => st.resp3.set(n == 3.0),
            Value::Integer(n) if n == 2 || n == 3 => st.resp3.set(n == 3),
            _ => return Err(mlua::Error::runtime("RESP version must be 2 or 3.")),
        }
        Ok(())
    })?;
    let redis: mlua::Table = lua.globals().raw_get("redis")?;
    redis.raw_set("setresp", f)
}

#[cfg(test)]
mod tests;
