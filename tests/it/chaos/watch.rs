//! What runs beside the fault schedule during a chaos run: the client pauser (SIGSTOP of
//! random clients, SIGCONT of clients that stopped themselves) and the leader sampler.

use std::collections::{BTreeMap, HashMap};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::history::unix_us;
use super::nemesis::{call_addr, Applied, Kind};
use super::run::RunSpec;
use crate::common::{proc_state, signal};

/// SIGSTOPs random clients now and then, and SIGCONTs clients that stopped themselves,
/// after a pause long enough for their lease to expire (2-4 TTLs).
pub fn pause_clients(
    spec: &RunSpec,
    pids: &[(u32, u32)],
    start_us: u64,
    stop: &AtomicBool,
    applied: &Mutex<Vec<Applied>>,
) {
    let mut rng = StdRng::seed_from_u64(spec.seed ^ 0xC11E);
    // pid -> (client, start µs, resume at, paused itself)
    let mut paused: HashMap<u32, (u32, u64, Instant, bool)> = HashMap::new();
    let mut next_pause = Instant::now() + Duration::from_millis(rng.gen_range(1_000..3_000));
    let ttl = spec.ttl_ms;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        for (client, pid) in pids {
            if !paused.contains_key(pid) && proc_state(*pid) == Some('T') {
                let resume = now + Duration::from_millis(rng.gen_range(2 * ttl..4 * ttl));
                paused.insert(*pid, (*client, unix_us() - start_us, resume, true));
            }
        }
        if spec.client_pauses && now >= next_pause {
            let (client, pid) = pids[rng.gen_range(0..pids.len())];
            if !paused.contains_key(&pid) && proc_state(pid).is_some_and(|s| s != 'Z') {
                signal(pid, "STOP");
                let resume = now + Duration::from_millis(rng.gen_range(ttl..3 * ttl));
                paused.insert(pid, (client, unix_us() - start_us, resume, false));
            }
            next_pause = now + Duration::from_millis(rng.gen_range(1_000..3_000));
        }
        let due: Vec<u32> = paused
            .iter()
            .filter(|(_, p)| p.2 <= now)
            .map(|(pid, _)| *pid)
            .collect();
        for pid in due {
            resume(pid, &mut paused, start_us, applied);
        }
        thread::sleep(Duration::from_millis(10));
    }
    let all: Vec<u32> = paused.keys().copied().collect();
    for pid in all {
        resume(pid, &mut paused, start_us, applied);
    }
}

fn resume(
    pid: u32,
    paused: &mut HashMap<u32, (u32, u64, Instant, bool)>,
    start_us: u64,
    applied: &Mutex<Vec<Applied>>,
) {
    if let Some((client, since, _, itself)) = paused.remove(&pid) {
        let _ = Command::new("sh")
            .args(["-c", "kill -s CONT \"$1\"", "sh", &pid.to_string()])
            .status();
        applied.lock().expect("faults").push(Applied {
            kind: Kind::PauseClient,
            start_us: since,
            end_us: unix_us() - start_us,
            detail: if itself {
                format!("client {client} stopped itself between read and write; SIGCONT")
            } else {
                format!("SIGSTOP client {client}")
            },
        });
    }
}

/// Every 250 ms, asks the current members which of them is the leader (by RAFT.INFO).
pub fn sample_leaders(ports_file: &std::path::Path, stop: &AtomicBool) -> BTreeMap<u64, usize> {
    let mut seen = BTreeMap::new();
    while !stop.load(Ordering::Relaxed) {
        let ports = std::fs::read_to_string(ports_file).unwrap_or_default();
        for addr in ports.lines().filter_map(|l| l.trim().parse().ok()) {
            let Some(info) = call_addr(addr, &["RAFT.INFO"], Duration::from_millis(500)) else {
                continue;
            };
            let field = |name: &str| {
                info.split("\r\n")
                    .find_map(|l| l.strip_prefix(name).map(str::to_string))
            };
            if field("role:").as_deref() == Some("leader") {
                if let Some(id) = field("node_id:").and_then(|v| v.parse().ok()) {
                    *seen.entry(id).or_default() += 1;
                }
                break;
            }
        }
        thread::sleep(Duration::from_millis(250));
    }
    seen
}
