//! The script's budget and how Lua work is counted against it.
//!
//! One [`Meter`] per run counts units: Lua VM instructions (a count hook), `redis.call`
//! charges ([`super::cost`]) and, under [`CostModel::Library`], the work of library functions
//! and of the instructions whose work grows with their operands (under the older models that
//! work is counted only against [`UNCHARGED_CEILING`], and the count hook runs every
//! [`CHECK_EVERY`] instructions as it always did):
//!
//! - a call hook charges the C functions of Lua's libraries (and the Rust libraries) by their
//!   arguments **before** they run, by the rules of [`Rule`], so `string.rep('x', 1e12)` is
//!   refused before it allocates, plus [`CALL_UNITS`] per call;
//! - every byte the Lua state allocates is charged ([`LIBRARY_BYTES_PER_UNIT`] bytes a unit);
//! - the count hook runs at every instruction and charges `..`, `<`, `<=` and moves of all
//!   the values up to the top by their operands (`vm`);
//! - the pattern functions are Rust ([`super::strlib`]) and charge their matcher's steps.
//!
//! Every charge depends only on the arguments, the results and the allocation sizes Lua asks
//! for, which are the same on every replica for a given build.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::rc::Rc;

use mlua::ffi;
use mlua::{Function, Lua, Table};

use super::cost::CostModel;

/// Instructions between two budget checks.
pub const CHECK_EVERY: u32 = 1000;
/// Bytes of library work (input, output or allocation) that count as one unit.
pub const LIBRARY_BYTES_PER_UNIT: u64 = 16;
/// What a call of a library function written in Rust costs on top of its work (crossing into
/// Rust and back costs about as much as a few hundred VM instructions).
pub const RUST_CALL_UNITS: u64 = 100;
/// What one value costs that a Rust library encodes or decodes (each is a few mlua calls).
pub const VALUE_UNITS: u64 = 40;
/// What one function call costs on top of its instructions (the call hook's own work).
pub const CALL_UNITS: u64 = 10;
/// An allocation this large (a string, a table's parts, a grown stack) switches the hook to
/// every instruction: below it, no instruction's operands can cost much.
pub const BIG: usize = 64 * 1024;
/// The hook's events.
const MASK: c_int = ffi::LUA_MASKCOUNT | ffi::LUA_MASKCALL;
/// Pattern-matching steps that count as one unit.
pub const STEPS_PER_UNIT: u64 = 1;
/// Under the models written before library charges, library work is not charged to the
/// budget (so old entries replay with the results they had), but it may not pass this many
/// units in one run (50 times the default budget: far more than any script that finished in
/// reasonable time did). A committed entry that would run for ever aborts instead.
pub const UNCHARGED_CEILING: u64 = 1_000_000_000;

/// The message a budget abort raises inside Lua (the reply is built from the meter's flag).
pub const ABORT: &str = "script exceeded its instruction budget";

/// Counts one run's units.
pub struct Meter {
    used: Cell<u64>,
    budget: u64,
    aborted: Cell<bool>,
    library: bool,
    /// Bytes allocated by the Lua state and not yet charged.
    allocated: Cell<u64>,
    /// Library work under the older models (counted against [`UNCHARGED_CEILING`] only).
    uncharged: Cell<u64>,
    /// Whether the script itself runs (setting the state up is not charged as library work).
    started: Cell<bool>,
    /// Whether the script has data as large as [`BIG`] (then the hook runs at every
    /// instruction, see [`vm`]).
    big: Cell<bool>,
    /// The thread the script runs on.
    main: Cell<*mut ffi::lua_State>,
}

impl Meter {
    /// A meter with `budget` units, charging library work if `model` says so.
    pub fn new(budget: u64, model: CostModel) -> Self {
        Meter {
            used: Cell::new(0),
            budget,
            aborted: Cell::new(false),
            library: model == CostModel::Library,
            allocated: Cell::new(0),
            uncharged: Cell::new(0),
            started: Cell::new(false),
            big: Cell::new(false),
            main: Cell::new(std::ptr::null_mut()),
        }
    }

    /// Charges `n` units; true once the budget is exhausted (and from then on).
    pub fn charge(&self, n: u64) -> bool {
        self.used.set(self.used.get().saturating_add(n));
        if self.used.get() > self.budget {
            self.aborted.set(true);
        }
        self.aborted.get()
    }

    /// Charges library work (and the allocations not yet charged): to the budget, or under
    /// the older models to [`UNCHARGED_CEILING`] only. True once exhausted.
    pub fn charge_library(&self, n: u64) -> bool {
        let bytes = self.allocated.replace(0);
        let n = n.saturating_add(bytes / LIBRARY_BYTES_PER_UNIT);
        if self.library {
            self.charge(n);
        } else {
            self.uncharged.set(self.uncharged.get().saturating_add(n));
            if self.uncharged.get() > UNCHARGED_CEILING {
                self.exhaust();
            }
        }
        self.aborted.get()
    }

    /// Starts charging library work and allocations: the script itself is about to run.
    pub fn start(&self) {
        self.allocated.set(0);
        self.started.set(true);
    }

    /// Marks the script's inputs as large (see [`BIG`]).
    pub fn mark_big(&self) {
        self.big.set(true);
    }

    /// Ends the run as if the budget ran out.
    pub fn exhaust(&self) {
        self.aborted.set(true);
    }

    /// Whether the budget ran out.
    pub fn aborted(&self) -> bool {
        self.aborted.get()
    }

    /// Units used so far.
    pub fn used(&self) -> u64 {
        self.used.get()
    }

    /// The units library work may still take: what is left of the budget, or of the
    /// ceiling under the older models.
    pub fn library_left(&self) -> u64 {
        if self.library {
            self.budget.saturating_sub(self.used.get())
        } else {
            UNCHARGED_CEILING.saturating_sub(self.uncharged.get())
        }
    }

    /// The steps a pattern match may take now.
    pub fn step_limit(&self) -> u64 {
        self.library_left().saturating_mul(STEPS_PER_UNIT)
    }

    /// Charges `steps` matcher steps.
    pub fn charge_steps(&self, steps: u64) -> bool {
        self.charge_library(steps / STEPS_PER_UNIT)
    }
}

thread_local! {
    /// Values the running Rust library call encoded or decoded (see [`tick`]).
    static VALUES: Cell<u64> = const { Cell::new(0) };
}

/// Counts `n` values encoded or decoded by the running Rust library call.
pub fn tick(n: u64) {
    VALUES.with(|v| v.set(v.get().saturating_add(n)));
}

/// The values counted since the last call, as units (and resets the count).
pub fn take_values() -> u64 {
    VALUES.with(|v| v.replace(0)).saturating_mul(VALUE_UNITS)
}

/// The run's meter, for Rust library functions (None outside a run).
pub fn of(lua: &Lua) -> Option<Rc<Meter>> {
    lua.app_data_ref::<Rc<Meter>>().map(|m| Rc::clone(&m))
}

/// How a library C function is charged before it runs (by its arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Rule {
    /// `string.rep(s, n)`: (len(s) + 1) * n bytes.
    Rep = 1,
    /// The length of the first argument (upper, lower, reverse, loadstring, decoders).
    FirstString,
    /// `string.sub(s, i, j)`: the bytes of the result.
    Sub,
    /// `string.byte(s, i, j)`: one unit per value returned.
    Byte,
    /// One unit per argument (`string.char`).
    PerArgument,
    /// Every string argument's bytes plus one unit per argument (`string.format`,
    /// `redis.log`, `struct.unpack`).
    AllStrings,
    /// `table.concat(t, sep, i, j)`: one unit per element plus its bytes and the separators.
    Concat,
    /// `table.insert(t, pos, v)`: the elements it shifts.
    Insert,
    /// `table.remove(t, pos)`: the elements it shifts.
    Remove,
    /// `table.sort(t)`: n*log2(n) comparisons, each by the size of the strings compared.
    Sort,
    /// `unpack(t, i, j)`: one unit per value returned.
    Unpack,
    /// `table.maxn(t)`: one unit per key.
    Keys,
}

const RULES: [Rule; 12] = [
    Rule::Rep,
    Rule::FirstString,
    Rule::Sub,
    Rule::Byte,
    Rule::PerArgument,
    Rule::AllStrings,
    Rule::Concat,
    Rule::Insert,
    Rule::Remove,
    Rule::Sort,
    Rule::Unpack,
    Rule::Keys,
];

/// Where the call hook finds the functions it charges.
const RULES_KEY: &str = "palisade.rules";

/// Registers `f` to be charged by `rule` before every call.
pub fn register(lua: &Lua, f: &Function, rule: Rule) -> mlua::Result<()> {
    let rules: Table = match lua.named_registry_value::<Option<Table>>(RULES_KEY)? {
        Some(t) => t,
        None => {
            let t = lua.create_table()?;
            lua.set_named_registry_value(RULES_KEY, &t)?;
            t
        }
    };
    rules.raw_set(f.clone(), rule as i32)
}

/// The allocator in front of mlua's: counts the bytes every allocation adds.
struct Counting {
    inner: ffi::lua_Alloc,
    inner_ud: *mut c_void,
    meter: Rc<Meter>,
}

unsafe extern "C" fn counting_alloc(
    ud: *mut c_void,
    ptr: *mut c_void,
    osize: usize,
    nsize: usize,
) -> *mut c_void {
    // SAFETY: `ud` is the `Counting` that `Installed` keeps alive while it is installed.
    let c = &*(ud as *const Counting);
    let old = if ptr.is_null() { 0 } else { osize };
    if nsize > old && c.meter.started.get() {
        let m = &c.meter.allocated;
        m.set(m.get().saturating_add((nsize - old) as u64));
    }
    if nsize >= BIG && c.meter.library && !c.meter.big.get() {
        c.meter.big.set(true);
        // Only field writes: safe from inside an allocation. Other threads switch at their
        // next hook event.
        let main = c.meter.main.get();
        if !main.is_null() {
            ffi::lua_sethook(main, Some(hook), MASK, 1);
        }
    }
    (c.inner)(c.inner_ud, ptr, osize, nsize)
}

/// The meter's hook and allocator, installed on a Lua state; dropping it restores mlua's
/// allocator (mlua frees its own allocator state when the Lua state closes).
pub struct Installed {
    /// Keeps the state (and so `state`) alive.
    _lua: Lua,
    state: *mut ffi::lua_State,
    counting: Box<Counting>,
}

impl Installed {
    /// Removes the hook (once the script returned: mlua's own calls that follow, such as
    /// cleaning up scoped callbacks, must not be charged or aborted).
    pub fn stop(&self) {
        // SAFETY: `state` is the main thread of the state `_lua` keeps alive; removing the
        // hook cannot raise.
        unsafe {
            ffi::lua_sethook(self.state, None, 0, 0);
        }
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        self.stop();
        // SAFETY: puts back the allocator that was there before `install` (neither call can
        // raise), before the box the counting allocator reads is freed.
        unsafe {
            ffi::lua_setallocf(self.state, self.counting.inner, self.counting.inner_ud);
        }
    }
}

/// Installs the count hook (and, under [`CostModel::Library`], the call hook and the
/// allocation count) for `meter` on `lua`, and makes the meter the run's.
pub fn install(lua: &Lua, meter: &Rc<Meter>) -> mlua::Result<Installed> {
    lua.set_app_data(Rc::clone(meter));
    let mut counting = Box::new(Counting {
        inner: counting_alloc,
        inner_ud: std::ptr::null_mut(),
        meter: Rc::clone(meter),
    });
    let every = if meter.library && meter.big.get() {
        1
    } else {
        CHECK_EVERY as c_int
    };
    let ud = &mut *counting as *mut Counting as *mut c_void;
    let slot = &mut counting.inner as *mut ffi::lua_Alloc;
    let slot_ud = &mut counting.inner_ud as *mut *mut c_void;
    let mut main: *mut ffi::lua_State = std::ptr::null_mut();
    let main_slot = &mut main as *mut *mut ffi::lua_State;
    // SAFETY: reads the current allocator into the box before putting the counting one in
    // front of it; the box outlives the installation (`Installed` restores it on drop).
    unsafe {
        lua.exec_raw::<()>((), |state| {
            let mut inner_ud = std::ptr::null_mut();
            let inner = ffi::lua_getallocf(state, &mut inner_ud);
            *slot = inner;
            *slot_ud = inner_ud;
            *main_slot = state;
            ffi::lua_setallocf(state, counting_alloc, ud);
            ffi::lua_sethook(state, Some(hook), MASK, every);
        })?;
    }
    meter.main.set(main);
    Ok(Installed {
        _lua: lua.clone(),
        state: main,
        counting,
    })
}

/// The meter of the running state, found through its allocator.
unsafe fn meter_of<'a>(state: *mut ffi::lua_State) -> Option<&'a Meter> {
    let mut ud = std::ptr::null_mut();
    let f = ffi::lua_getallocf(state, &mut ud);
    if !std::ptr::fn_addr_eq(f, counting_alloc as ffi::lua_Alloc) || ud.is_null() {
        return None;
    }
    Some(&(*(ud as *const Counting)).meter)
}

/// The count and call hook: charges, and raises once the budget is exhausted.
unsafe extern "C-unwind" fn hook(state: *mut ffi::lua_State, ar: *mut ffi::lua_Debug) {
    let Some(meter) = meter_of(state) else {
        return;
    };
    let count = ffi::lua_gethookcount(state).max(1);
    // Under the library model, once the script holds large data (and always in coroutines,
    // whose first event is the call of their body), the hook runs at every instruction, so
    // that instructions whose work grows with their operands are seen and charged.
    if meter.library && count != 1 && (meter.big.get() || state != meter.main.get()) {
        ffi::lua_sethook(state, Some(hook), MASK, 1);
    }
    let aborted = match (*ar).event {
        ffi::LUA_HOOKCOUNT => {
            let count = count as u64;
            meter.charge(count);
            let operands = if count == 1 && meter.library && meter.started.get() {
                vm::operand_units(state)
            } else {
                0
            };
            meter.charge_library(operands)
        }
        ffi::LUA_HOOKCALL => {
            let units = call_units(state, ar, meter);
            meter.charge_library(units)
        }
        ffi::LUA_HOOKTAILCALL => meter.charge_library(CALL_UNITS),
        _ => meter.aborted(),
    };
    if aborted {
        ffi::lua_pushlstring_(state, ABORT.as_ptr() as *const _, ABORT.len());
        ffi::lua_error(state);
    }
}

/// What the instruction about to run costs beyond one unit, read from Lua 5.1.5's own
/// structures (`lstate.h`, `lobject.h`, `lopcodes.h` of the vendored Lua, x86-64 and
/// aarch64 layouts): the public hook API does not show an instruction's operands.
///
/// - `a .. b .. c` (`OP_CONCAT`) copies its operands (and when the result already exists,
///   compares it without allocating): 1 unit per 16 bytes of its string operands;
/// - `a < b`, `a <= b` (`OP_LT`, `OP_LE`) on two strings compare up to the shorter one with
///   `strcoll`, which restarts at every NUL byte: 1 unit per 16 bytes plus 4 per NUL byte;
/// - `...`, and calls, returns and table constructors over "every value up to the top"
///   (`f(...)`, `return ...`, `{...}`) move each value: 1 unit per 2 values.
mod vm {
    use mlua::ffi;

    const OFF_BASE: usize = 24;
    const OFF_CI: usize = 40;
    const OFF_SAVEDPC: usize = 48;
    const OFF_CI_FUNC: usize = 8;
    const OFF_LCL_P: usize = 32;
    const OFF_PROTO_K: usize = 16;
    const TVALUE: usize = 16;
    const OFF_TT: usize = 8;
    const OFF_TS_LEN: usize = 16;
    const TSTRING: usize = 24;
    const OP_CONCAT: u32 = 21;
    const OP_LT: u32 = 24;
    const OP_LE: u32 = 25;
    const BITRK: u32 = 1 << 8;
    const OFF_TOP: usize = 16;
    const OP_CALL: u32 = 28;
    const OP_TAILCALL: u32 = 29;
    const OP_RETURN: u32 = 30;
    const OP_SETLIST: u32 = 34;
    const OP_VARARG: u32 = 37;
    /// Values moved by one instruction that count as one unit.
    const VALUES_PER_UNIT: u64 = 2;

    /// The bytes of the string in `tv`, if it holds one.
    unsafe fn string(tv: *const u8) -> Option<&'static [u8]> {
        if *(tv.add(OFF_TT) as *const i32) != ffi::LUA_TSTRING {
            return None;
        }
        let ts = *(tv as *const *const u8);
        let len = *(ts.add(OFF_TS_LEN) as *const usize);
        Some(std::slice::from_raw_parts(ts.add(TSTRING), len))
    }

    /// Register or constant `x` of the running Lua function.
    unsafe fn rk(l: *const u8, base: *const u8, x: u32) -> *const u8 {
        if x & BITRK == 0 {
            return base.add(x as usize * TVALUE);
        }
        let ci = *(l.add(OFF_CI) as *const *const u8);
        let func = *(ci.add(OFF_CI_FUNC) as *const *const u8);
        let closure = *(func as *const *const u8);
        let proto = *(closure.add(OFF_LCL_P) as *const *const u8);
        let k = *(proto.add(OFF_PROTO_K) as *const *const u8);
        k.add((x & !BITRK) as usize * TVALUE)
    }

    /// Called from the count hook, inside the running Lua function, before the instruction.
    pub unsafe fn operand_units(state: *mut ffi::lua_State) -> u64 {
        let l = state as *const u8;
        let pc = *(l.add(OFF_SAVEDPC) as *const *const u32);
        let i = *pc.sub(1);
        let base = *(l.add(OFF_BASE) as *const *const u8);
        let (b, c) = ((i >> 23) & 0x1ff, (i >> 14) & 0x1ff);
        match i & 0x3f {
            OP_CONCAT => {
                let bytes: usize = (b..=c)
                    .filter_map(|r| string(base.add(r as usize * super::TVALUE_SIZE)))
                    .map(|s| s.len())
                    .sum();
                bytes as u64 / super::LIBRARY_BYTES_PER_UNIT
            }
            // `...` copies every vararg (its count bounded above by the frame's size).
            OP_VARARG if b == 0 => {
                let ci = *(l.add(OFF_CI) as *const *const u8);
                let func = *(ci.add(OFF_CI_FUNC) as *const *const u8);
                let n = (base as usize).saturating_sub(func as usize) / TVALUE;
                n as u64 / VALUES_PER_UNIT
            }
            // A call, return or table constructor taking "all values up to the top" moves
            // each of them.
            OP_CALL | OP_TAILCALL | OP_RETURN | OP_SETLIST if b == 0 => {
                let a = ((i >> 6) & 0xff) as usize;
                let top = *(l.add(OFF_TOP) as *const *const u8) as usize;
                let ra = base.add(a * TVALUE) as usize;
                (top.saturating_sub(ra) / TVALUE) as u64 / VALUES_PER_UNIT
            }
            OP_LT | OP_LE => match (string(rk(l, base, b)), string(rk(l, base, c))) {
                (Some(x), Some(y)) => {
                    let shorter = if x.len() <= y.len() { x } else { y };
                    let nuls = shorter.iter().filter(|&&c| c == 0).count() as u64;
                    shorter.len() as u64 / super::LIBRARY_BYTES_PER_UNIT + 4 * nuls
                }
                _ => 0,
            },
            _ => 0,
        }
    }
}

const TVALUE_SIZE: usize = 16;

/// The charge of the function being called, if it is a registered one. Its arguments are
/// the stack (the call hook runs in the callee's frame).
unsafe fn call_units(state: *mut ffi::lua_State, ar: *mut ffi::lua_Debug, meter: &Meter) -> u64 {
    if !meter.started.get() {
        return 0;
    }
    let units = CALL_UNITS;
    let top = ffi::lua_gettop(state);
    ffi::lua_getinfo(state, c"f".as_ptr(), ar);
    ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, c"palisade.rules".as_ptr());
    let mut rule = 0;
    if ffi::lua_type(state, -1) == ffi::LUA_TTABLE {
        ffi::lua_pushvalue(state, -2);
        ffi::lua_rawget(state, -2);
        rule = ffi::lua_tonumber(state, -1) as i32;
    }
    ffi::lua_settop(state, top);
    match RULES.iter().find(|r| **r as i32 == rule) {
        Some(r) => units.saturating_add(rule_units(state, *r, top, meter)),
        None => units,
    }
}

/// Bytes as units.
fn bytes(n: u64) -> u64 {
    n / LIBRARY_BYTES_PER_UNIT
}

/// The length of argument `i` if it is a string (numbers are not converted: the hook must not
/// change the arguments).
unsafe fn slen(state: *mut ffi::lua_State, i: c_int) -> u64 {
    if ffi::lua_type(state, i) == ffi::LUA_TSTRING {
        ffi::lua_objlen(state, i) as u64
    } else {
        0
    }
}

/// Argument `i` as Lua's `luaL_optinteger` reads it (`def` when absent or nil), truncated.
unsafe fn opt_int(state: *mut ffi::lua_State, i: c_int, def: i64) -> i64 {
    if ffi::lua_type(state, i) <= ffi::LUA_TNIL {
        def
    } else {
        ffi::lua_tonumber(state, i) as i64
    }
}

/// `posrelat` then clamping, as `string.sub`/`string.byte` do: the number of bytes in
/// `[i, j]` of a string of `len` bytes.
fn span(len: i64, i: i64, j: i64) -> u64 {
    let rel = |p: i64| if p < 0 { len + p + 1 } else { p };
    let start = rel(i).max(1);
    let end = rel(j).min(len);
    (end - start + 1).max(0) as u64
}

/// The length of a table argument (`#t`), 0 if not a table.
unsafe fn tlen(state: *mut ffi::lua_State, i: c_int) -> i64 {
    if ffi::lua_type(state, i) == ffi::LUA_TTABLE {
        ffi::lua_objlen(state, i) as i64
    } else {
        0
    }
}

/// The bytes of the strings `t[from..=to]` (table at index 1), stopping early once the sum
/// exceeds `cap` (the charge then exceeds what is left of the budget anyway).
unsafe fn element_bytes(state: *mut ffi::lua_State, from: i64, to: i64, cap: u64) -> u64 {
    let mut sum = 0u64;
    let (from, to) = (from.max(1), to.min(i32::MAX as i64));
    let mut k = from;
    while k <= to && sum <= cap {
        ffi::lua_rawgeti_(state, 1, k as c_int);
        sum = sum.saturating_add(slen(state, -1));
        ffi::lua_settop(state, -2);
        k += 1;
    }
    sum
}

unsafe fn rule_units(state: *mut ffi::lua_State, rule: Rule, nargs: c_int, meter: &Meter) -> u64 {
    let cap = meter.library_left().saturating_mul(LIBRARY_BYTES_PER_UNIT);
    match rule {
        Rule::Rep => {
            let n = opt_int(state, 2, 0).max(0) as u64;
            bytes((slen(state, 1) + 1).saturating_mul(n))
        }
        Rule::FirstString => bytes(slen(state, 1)),
        Rule::Sub => {
            let len = slen(state, 1) as i64;
            bytes(span(len, opt_int(state, 2, 1), opt_int(state, 3, -1)))
        }
        Rule::Byte => {
            let len = slen(state, 1) as i64;
            let i = opt_int(state, 2, 1);
            span(len, i, opt_int(state, 3, i))
        }
        Rule::PerArgument => nargs as u64,
        Rule::AllStrings => {
            let sum: u64 = (1..=nargs).map(|i| slen(state, i)).sum();
            bytes(sum) + nargs as u64
        }
        Rule::Concat => {
            let i = opt_int(state, 3, 1);
            let j = opt_int(state, 4, tlen(state, 1));
            let count = (j.saturating_sub(i).saturating_add(1)).max(0) as u64;
            let seps = slen(state, 2).saturating_mul(count);
            count
                .saturating_add(bytes(element_bytes(state, i, j, cap)))
                .saturating_add(bytes(seps))
        }
        Rule::Insert if nargs == 3 => {
            let e = tlen(state, 1) + 1;
            (e - opt_int(state, 2, e)).max(0) as u64
        }
        Rule::Insert => 0,
        Rule::Remove => {
            let e = tlen(state, 1);
            (e - opt_int(state, 2, e)).max(0) as u64
        }
        Rule::Sort => {
            let n = tlen(state, 1).max(0) as u64;
            let log = 64 - n.leading_zeros() as u64;
            let per = n.saturating_mul(log);
            let strings = element_bytes(state, 1, n as i64, cap);
            per.saturating_add(bytes(strings).saturating_mul(log))
        }
        Rule::Unpack => {
            let i = opt_int(state, 2, 1);
            let j = opt_int(state, 3, tlen(state, 1));
            (j.saturating_sub(i).saturating_add(1)).max(0) as u64
        }
        Rule::Keys => {
            if ffi::lua_type(state, 1) != ffi::LUA_TTABLE {
                return 0;
            }
            let mut n = 0u64;
            ffi::lua_pushnil(state);
            while n <= cap && ffi::lua_next(state, 1) != 0 {
                ffi::lua_settop(state, -2);
                n += 1;
            }
            ffi::lua_settop(state, nargs);
            n
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_follow_string_sub() {
        assert_eq!(span(10, 1, -1), 10);
        assert_eq!(span(10, -3, -1), 3);
        assert_eq!(span(10, 5, 2), 0);
        assert_eq!(span(10, 0, 100), 10);
        assert_eq!(span(0, 1, -1), 0);
    }
}
