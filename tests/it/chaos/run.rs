//! One chaos run from start to verdict: start the cluster (with a clock fault on one node),
//! start the client processes, apply the fault schedule and the client pauses, heal, read
//! the final state (after a full-cluster kill -9 and restart, if asked), run the checkers,
//! and write history, schedule, verdict and timeline into the run's directory.

use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::agree::{self, DigestSummary};
use super::check::{
    self, CounterSummary, Finding, HoldSummary, LockSummary, QueueSummary, TokenSummary,
};
use super::client::{ClientSpec, Workload, COUNTER_KEY};
use super::history::{read_jsonl, unix_us, write_jsonl, Op, Outcome};
use super::linear;
use super::nemesis::{self, admin, Applied, Kind, Target};
use super::plot;
use super::watch::{pause_clients, sample_leaders};
use crate::common::cluster::Cluster;
use crate::common::netns::Netns;
use crate::common::{words, ChildGuard};

/// What a run does.
#[derive(Serialize, Clone, Debug)]
pub struct RunSpec {
    /// Name of the run (and of its output directory).
    pub name: String,
    /// Seed of the fault schedule, clock fault and client choices.
    pub seed: u64,
    /// Cluster size at the start.
    pub nodes: u64,
    /// How long clients run, seconds.
    pub duration_s: u64,
    /// One entry per client process.
    pub clients: Vec<Workload>,
    /// Node and network faults to schedule.
    pub faults: Vec<Kind>,
    /// SIGSTOP random client processes now and then.
    pub client_pauses: bool,
    /// Chance (per mille) that a counter client pauses itself between read and write.
    pub self_pause_per_mille: u32,
    /// Start one node with a clock offset and a clock running fast or slow.
    pub clock_fault: bool,
    /// kill -9 every node at the end, restart, and check durability.
    pub full_crash: bool,
    /// Lease TTL used by clients, ms.
    pub ttl_ms: u64,
    /// Run each node in its own network namespace and cut links with blackhole routes
    /// (`CHAOS_NET=netns`, soaks only), instead of the peer-transport fault hook.
    pub netns: bool,
    /// Where the outputs go.
    pub out_dir: PathBuf,
}

/// Operation counts.
#[derive(Serialize, Clone, Debug, Default)]
pub struct OpCounts {
    /// Every recorded operation.
    pub total: usize,
    /// Completed with success.
    pub ok: usize,
    /// Refused (e.g. -FENCED).
    pub fail: usize,
    /// Outcome unknown.
    pub unknown: usize,
    /// By command.
    pub by_command: BTreeMap<String, usize>,
}

/// The verdict of a run.
#[derive(Serialize, Clone, Debug, Default)]
pub struct Report {
    /// Run name.
    pub name: String,
    /// Seed.
    pub seed: u64,
    /// Nodes at the start.
    pub nodes: u64,
    /// Client run time, s.
    pub duration_s: u64,
    /// The clock fault, if any.
    pub clock_fault: Option<String>,
    /// Operations.
    pub ops: OpCounts,
    /// Faults applied, by kind.
    pub faults: BTreeMap<String, usize>,
    /// How often (samples, every 250 ms) each node was seen as the leader: shows that the
    /// node with the clock fault led too.
    pub leader_samples: BTreeMap<u64, usize>,
    /// Counter workload.
    pub counter: Option<CounterSummary>,
    /// Lock workload.
    pub locks: Option<LockSummary>,
    /// Lock workload: RLOCK and SEMACQUIRE beside LOCK.
    pub holds: Option<HoldSummary>,
    /// Queue workload (RPUSH and BLPOP).
    pub queue: Option<QueueSummary>,
    /// Tokens given by every workload's grants (one token, one grant).
    pub tokens: TokenSummary,
    /// The RAFT.DIGEST comparisons (after healing, and after the full-cluster restart).
    pub digests: Vec<DigestSummary>,
    /// Register keys checked and keys the search gave up on.
    pub register_keys: usize,
    /// Register keys whose check ran out of budget.
    pub register_inconclusive: Vec<String>,
    /// Acknowledged durability writes checked after the full crash.
    pub durable_writes_checked: usize,
    /// Safety violations.
    pub findings: Vec<Finding>,
    /// Liveness problems (no leader after healing, no progress at all).
    pub liveness: Vec<String>,
}

impl Report {
    /// Multi-line summary for the console and verdict.txt.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "chaos run {} seed={} nodes={} duration={}s\n  ops: {} total, {} ok, {} refused, {} unknown {:?}\n  faults: {:?}\n",
            self.name, self.seed, self.nodes, self.duration_s, self.ops.total, self.ops.ok,
            self.ops.fail, self.ops.unknown, self.ops.by_command, self.faults
        );
        if let Some(c) = &self.clock_fault {
            s += &format!("  clock fault: {c}\n");
        }
        s += &format!("  leader samples by node: {:?}\n", self.leader_samples);
        if let Some(c) = &self.counter {
            s += &format!("  counter: {c:?}\n");
        }
        if let Some(l) = &self.locks {
            s += &format!("  locks: {l:?}\n");
        }
        if let Some(h) = &self.holds {
            s += &format!("  holds: {h:?}\n");
        }
        if let Some(q) = &self.queue {
            s += &format!("  queue: {q:?}\n");
        }
        s += &format!("  tokens: {:?}\n", self.tokens);
        for d in &self.digests {
            let digests: std::collections::BTreeSet<&str> =
                d.digests.values().map(|h| &h[..12]).collect();
            s += &format!(
                "  digest {}: {} nodes at applied index {} (after {} rounds): {digests:?}\n",
                d.phase,
                d.digests.len(),
                d.applied_index,
                d.rounds
            );
        }
        s += &format!(
            "  register: {} keys checked, inconclusive {:?}\n  durability: {} acknowledged writes checked after full-cluster kill -9\n",
            self.register_keys, self.register_inconclusive, self.durable_writes_checked
        );
        s += &format!(
            "  verdict: {} violation(s), {} liveness problem(s)\n",
            self.findings.len(),
            self.liveness.len()
        );
        // The first few windows; verdict.json has them all.
        for f in self.findings.iter().take(5) {
            s += &f.describe();
        }
        if self.findings.len() > 5 {
            s += &format!(
                "  ... and {} more in verdict.json\n",
                self.findings.len() - 5
            );
        }
        for l in &self.liveness {
            s += &format!("  liveness: {l}\n");
        }
        s
    }
}

/// Flags every node gets in a chaos run.
const NODE_FLAGS: [&str; 8] = [
    "--enable-fault-injection",
    // Every kill -9 is a power cut: writes not yet synced are lost with the process, so a
    // restarted node's log ends at its last synced point (and its state machine may be
    // behind it).
    "--test-lose-unsynced-writes",
    "--write-timeout-ms",
    "2000",
    "--snapshot-every",
    "200",
    // openraft's decisions about votes, snapshots, purges and truncations, for diagnosis.
    "--log-level",
    "info,openraft=warn,openraft::engine=info,openraft::core::sm=info,openraft::storage=info",
];
/// `--snapshot-every` above.
const SNAPSHOT_EVERY: u64 = 200;

/// Runs `spec` and returns its verdict (also written to its directory).
pub fn run(spec: &RunSpec) -> Report {
    let _ = std::fs::remove_dir_all(&spec.out_dir);
    std::fs::create_dir_all(&spec.out_dir).expect("create run dir");
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let (node_extra, clock_fault) = clock_fault(spec, &mut rng);
    let net = spec.netns.then(Netns::create);
    let mut cluster = Cluster::start_in(spec.nodes, &NODE_FLAGS, node_extra, net);
    let mut target = Target {
        cluster: &mut cluster,
        members: (1..=spec.nodes).collect(),
        snapshot_every: SNAPSHOT_EVERY,
    };
    let ports_file = spec.out_dir.join("ports");
    write_ports(&target, &ports_file);
    let start_us = unix_us();
    let end_us = start_us + spec.duration_s * 1_000_000;
    let mut clients = spawn_clients(spec, &ports_file, start_us, end_us);
    let pids: Vec<(u32, u32)> = clients.iter().map(|(id, c)| (*id, c.0.id())).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let applied = Arc::new(Mutex::new(Vec::<Applied>::new()));
    let sampler = {
        let (stop, ports_file) = (stop.clone(), ports_file.clone());
        thread::spawn(move || sample_leaders(&ports_file, &stop))
    };
    let pauser = {
        let (stop, applied, spec2) = (stop.clone(), applied.clone(), spec.clone());
        thread::spawn(move || pause_clients(&spec2, &pids, start_us, &stop, &applied))
    };

    let plan = nemesis::schedule(spec.seed, spec.duration_s * 1000, &spec.faults);
    let mut broken = None;
    for p in &plan {
        let at = start_us + p.at_ms * 1000;
        let now = unix_us();
        if at > now {
            thread::sleep(Duration::from_micros(at - now));
        }
        let s = unix_us() - start_us;
        // A node that cannot start again (the harness panics waiting for it) ends the fault
        // schedule; the run still checks and reports what happened up to then.
        let detail = match catch_unwind(AssertUnwindSafe(|| target.apply(p))) {
            Ok(d) => d,
            Err(e) => {
                let first = panic_line(&e);
                broken = Some(format!("{:?} fault failed: {first}", p.kind));
                format!("FAILED: {first}")
            }
        };
        eprintln!("[chaos {}] {:?}: {detail}", spec.name, p.kind);
        if p.kind == Kind::Replace {
            write_ports(&target, &ports_file);
        }
        applied.lock().expect("faults").push(Applied {
            kind: p.kind,
            start_us: s,
            end_us: unix_us() - start_us,
            detail,
        });
        if broken.is_some() {
            break;
        }
    }
    let now = unix_us();
    if end_us > now {
        thread::sleep(Duration::from_micros(end_us - now));
    }
    target.heal();
    stop.store(true, Ordering::Relaxed);
    let _ = pauser.join();
    let leader_samples = sampler.join().unwrap_or_default();
    wait_clients(&mut clients);

    let mut report = Report {
        name: spec.name.clone(),
        seed: spec.seed,
        nodes: spec.nodes,
        duration_s: spec.duration_s,
        clock_fault,
        leader_samples,
        liveness: broken.into_iter().collect(),
        ..Default::default()
    };
    let members = target.members.clone();
    let ops = merge_histories(spec);
    let fin = catch_unwind(AssertUnwindSafe(|| {
        final_phase(spec, &mut target, &members, &ops, &mut report)
    }));
    let final_value = fin.unwrap_or_else(|e| {
        report
            .liveness
            .push(format!("final phase failed: {}", panic_line(&e)));
        None
    });
    let faults = applied.lock().expect("faults").clone();
    check_all(spec, &ops, final_value, &mut report);
    for f in &faults {
        *report.faults.entry(format!("{:?}", f.kind)).or_default() += 1;
    }
    let last = ops
        .iter()
        .map(|o| o.ret)
        .chain(faults.iter().map(|f| f.end_us))
        .max();
    write_outputs(spec, &plan, &faults, &ops, &report, last.unwrap_or(1));
    for id in cluster.nodes.keys() {
        let _ = std::fs::copy(
            cluster.log(*id),
            spec.out_dir.join(format!("node-{id}.log")),
        );
    }
    report
}

/// The first line of a panic's message.
fn panic_line(e: &Box<dyn std::any::Any + Send>) -> String {
    let msg = e
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| e.downcast_ref::<&str>().copied())
        .unwrap_or("panic");
    msg.lines().next().unwrap_or("").to_string()
}

/// Picks the node, offset and rate of the clock fault (from the seed).
fn clock_fault(spec: &RunSpec, rng: &mut StdRng) -> (BTreeMap<u64, Vec<String>>, Option<String>) {
    let mut extra = BTreeMap::new();
    if !spec.clock_fault {
        return (extra, None);
    }
    let node = rng.gen_range(1..=spec.nodes);
    let offset_ms: i64 = rng.gen_range(1_000..3_600_000);
    let rate_ppm: i64 = rng.gen_range(10_000..50_000) * if rng.gen_bool(0.5) { 1 } else { -1 };
    extra.insert(
        node,
        vec![
            "--test-clock-offset-ms".to_string(),
            offset_ms.to_string(),
            "--test-clock-rate-ppm".to_string(),
            rate_ppm.to_string(),
        ],
    );
    let text = format!("node {node}: clock offset +{offset_ms} ms, rate {rate_ppm:+} ppm");
    (extra, Some(text))
}

fn write_ports(target: &Target, path: &std::path::Path) {
    let ports: Vec<String> = target
        .members
        .iter()
        .map(|id| target.cluster.addr(*id).to_string())
        .collect();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, ports.join("\n")).expect("write ports");
    std::fs::rename(&tmp, path).expect("rename ports");
}

fn spawn_clients(
    spec: &RunSpec,
    ports_file: &std::path::Path,
    start_us: u64,
    end_us: u64,
) -> Vec<(u32, ChildGuard)> {
    let exe = std::env::current_exe().expect("current exe");
    let lock_queue_ids: Vec<u32> = (0..spec.clients.len() as u32)
        .filter(|i| spec.clients[*i as usize] == Workload::LockQueue)
        .collect();
    spec.clients
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let id = i as u32;
            let cs = ClientSpec {
                id,
                workload: *w,
                seed: spec.seed,
                ports_file: ports_file.to_path_buf(),
                out: spec.out_dir.join(format!("client-{id}.jsonl")),
                start_us,
                end_us,
                ttl_ms: spec.ttl_ms,
                work_ms: 10,
                self_pause_per_mille: spec.self_pause_per_mille,
                reply_timeout_ms: 4_000,
                lock_queue_ids: lock_queue_ids.clone(),
            };
            let log = std::fs::File::create(spec.out_dir.join(format!("client-{id}.log")))
                .expect("client log");
            let child = Command::new(&exe)
                .args([
                    "chaos::client_process",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(
                    "CHAOS_CLIENT_SPEC",
                    serde_json::to_string(&cs).expect("spec json"),
                )
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("clone log"))
                .stderr(log)
                .spawn()
                .expect("spawn client process");
            (id, ChildGuard(child))
        })
        .collect()
}

fn wait_clients(clients: &mut [(u32, ChildGuard)]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for (_, c) in clients.iter_mut() {
        while Instant::now() < deadline {
            if let Ok(Some(_)) = c.0.try_wait() {
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A GET against any member, retried for up to `within`. Outer None: no answer.
fn read_key(target: &Target, key: &str, within: Duration) -> Option<Option<String>> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        for id in &target.members {
            if let Some(r) = admin(target.cluster, *id, &["GET", key], Duration::from_secs(3)) {
                if let Some(v) = parse_bulk(&r) {
                    return Some(v);
                }
            }
        }
        thread::sleep(Duration::from_millis(100));
    }
    None
}

/// Parses a bulk-string or nil reply (outer None: some other reply).
fn parse_bulk(r: &str) -> Option<Option<String>> {
    if r.starts_with("$-1") || r.starts_with('_') {
        return Some(None);
    }
    let rest = r.strip_prefix('$')?;
    let (_, body) = rest.split_once("\r\n")?;
    Some(Some(body.strip_suffix("\r\n")?.to_string()))
}

/// Waits for a leader among `members`; false after a minute without one.
fn leader_within(target: &Target, members: &[u64]) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if members
            .iter()
            .any(|id| target.cluster.info(*id, "role").as_deref() == Some("leader"))
        {
            return true;
        }
        thread::sleep(Duration::from_millis(100));
    }
    false
}

/// After the faults: checks liveness, reads the counter, and (if asked) crashes and
/// restarts the whole cluster and reads back every acknowledged durability write.
fn final_phase(
    spec: &RunSpec,
    target: &mut Target,
    members: &[u64],
    ops: &[Op],
    report: &mut Report,
) -> Option<i64> {
    if !leader_within(target, members) {
        report
            .liveness
            .push("no leader within 60 s after the faults were healed".into());
        return None;
    }
    let has_counter = spec
        .clients
        .iter()
        .any(|w| matches!(w, Workload::Counter(_)));
    let mut final_value = None;
    if has_counter {
        match read_key(target, COUNTER_KEY, Duration::from_secs(30)) {
            Some(v) => final_value = Some(v.and_then(|v| v.parse().ok()).unwrap_or(0)),
            None => report
                .liveness
                .push("could not read the counter after healing".into()),
        }
    }
    compare_digests(target, members, "after healing", report);
    if !spec.full_crash {
        return final_value;
    }
    for id in members {
        target.cluster.kill9(*id);
    }
    for id in members {
        target.cluster.restart(*id);
    }
    if !leader_within(target, members) {
        report
            .liveness
            .push("no leader within 60 s after the full-cluster restart".into());
        return final_value;
    }
    if has_counter {
        let after = read_key(target, COUNTER_KEY, Duration::from_secs(30))
            .map(|v| v.and_then(|v| v.parse::<i64>().ok()).unwrap_or(0));
        if after != final_value {
            report.findings.push(Finding {
                checker: "durability".into(),
                message: format!("counter read {final_value:?} before the full-cluster kill -9 and {after:?} after"),
                window: Vec::new(),
            });
        }
    }
    compare_digests(target, members, "after the full-cluster restart", report);
    let read = read_durable(target, ops);
    let (checked, findings) = check::check_durability(ops, &read);
    report.durable_writes_checked = checked;
    report.findings.extend(findings);
    final_value
}

/// How long the nodes may take to show one applied index after the faults.
const SETTLE: Duration = Duration::from_secs(30);

/// Compares RAFT.DIGEST on every member at one applied index (see `agree`).
fn compare_digests(target: &Target, members: &[u64], phase: &str, report: &mut Report) {
    match agree::check_digests(target, members, phase, SETTLE) {
        Ok((summary, findings)) => {
            report.digests.push(summary);
            report.findings.extend(findings);
        }
        Err(problem) => report.liveness.push(problem),
    }
}

/// Reads back every durability key written with an OK or unknown outcome.
fn read_durable(target: &Target, ops: &[Op]) -> HashMap<String, Option<String>> {
    let keys: Vec<&str> = ops
        .iter()
        .filter(|o| o.key.starts_with("dur:") && o.outcome == Outcome::Ok)
        .map(|o| o.key.as_str())
        .collect();
    let mut out = HashMap::new();
    for chunk in keys.chunks(500) {
        for attempt in 0..5 {
            let id = target.members[attempt % target.members.len()];
            let cmds: Vec<Vec<Vec<u8>>> =
                chunk.iter().map(|k| words(&format!("GET {k}"))).collect();
            let got = catch_unwind(AssertUnwindSafe(|| {
                let mut c = target.cluster.conn(id);
                c.pipeline(&cmds)
            }));
            let Ok(replies) = got else { continue };
            let parsed: Vec<Option<Option<String>>> = replies
                .iter()
                .map(|r| parse_bulk(&String::from_utf8_lossy(r)))
                .collect();
            if parsed.iter().all(Option::is_some) {
                for (k, v) in chunk.iter().zip(parsed) {
                    out.insert(k.to_string(), v.flatten());
                }
                break;
            }
            thread::sleep(Duration::from_millis(500));
        }
    }
    out
}

fn merge_histories(spec: &RunSpec) -> Vec<Op> {
    let mut ops: Vec<Op> = (0..spec.clients.len())
        .flat_map(|i| read_jsonl::<Op>(&spec.out_dir.join(format!("client-{i}.jsonl"))))
        .collect();
    ops.sort_by_key(|o| (o.inv, o.client));
    ops
}

fn check_all(spec: &RunSpec, ops: &[Op], final_value: Option<i64>, report: &mut Report) {
    let (tokens, f) = check::check_tokens(ops);
    report.tokens = tokens;
    report.findings.extend(f);
    let c = &mut report.ops;
    c.total = ops.len();
    for op in ops {
        match op.outcome {
            Outcome::Ok => c.ok += 1,
            Outcome::Fail => c.fail += 1,
            Outcome::Unknown => c.unknown += 1,
        }
        *c.by_command.entry(op.f.clone()).or_default() += 1;
    }
    if spec
        .clients
        .iter()
        .any(|w| matches!(w, Workload::Counter(_)))
    {
        let (sum, f) = check::check_counter(ops, COUNTER_KEY, final_value);
        if sum.acked == 0 {
            report
                .liveness
                .push("the counter was never incremented".into());
        }
        report.counter = Some(sum);
        report.findings.extend(f);
    }
    if spec.clients.contains(&Workload::Locks) {
        let slack = if spec.clock_fault { 0.06 } else { 0.01 };
        let (sum, f) = check::check_locks(ops, spec.ttl_ms, slack);
        report.locks = Some(sum);
        report.findings.extend(f);
        let limit = super::client::SEMAPHORE_LIMIT;
        let (sum, f) = check::check_holds(ops, spec.ttl_ms, slack, limit);
        report.holds = Some(sum);
        report.findings.extend(f);
    }
    if spec.clients.contains(&Workload::Queue) {
        let (sum, f) = check::check_queue(ops);
        if sum.popped == 0 {
            report
                .liveness
                .push("the queue workload never popped an item".into());
        }
        report.queue = Some(sum);
        report.findings.extend(f);
    }
    if spec.clients.contains(&Workload::Register) {
        let (keys, f, inconclusive) = linear::check_registers(ops, "reg:");
        report.register_keys = keys;
        report.register_inconclusive = inconclusive;
        report.findings.extend(f);
    }
}

fn write_outputs(
    spec: &RunSpec,
    plan: &[nemesis::Planned],
    faults: &[Applied],
    ops: &[Op],
    report: &Report,
    end_us: u64,
) {
    let dir = &spec.out_dir;
    write_jsonl(&dir.join("history.jsonl"), ops);
    write_jsonl(&dir.join("faults.jsonl"), faults);
    write_jsonl(&dir.join("schedule.jsonl"), plan);
    let spec_json = serde_json::to_string_pretty(spec).unwrap_or_default();
    std::fs::write(dir.join("run.json"), spec_json).expect("run.json");
    let verdict_json = serde_json::to_string_pretty(report).unwrap_or_default();
    std::fs::write(dir.join("verdict.json"), verdict_json).expect("verdict.json");
    std::fs::write(dir.join("verdict.txt"), report.summary()).expect("verdict.txt");
    plot::timeline(&dir.join("timeline.png"), ops, faults, end_us);
}
