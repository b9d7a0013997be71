//! The scenario Palisade exists for (README, and docs/locks-and-fencing.md), with two real
//! client processes:
//!
//! 1. client A locks with PX 1000 and gets token tA;
//! 2. A is frozen with SIGSTOP for 2 s (a GC pause, a VM migration);
//! 3. the lease expires; client B locks, gets tB > tA, and writes with FENCEDSET;
//! 4. A is resumed with SIGCONT, still believes it holds the lock, writes with tA, and is
//!    rejected with `-FENCED token tA is lower than tB`. The resource keeps B's value.
//!
//! The clients are python3 scripts that speak RESP over the standard library's socket
//! module. Each prints `<label> <hex of the raw reply>` so the test sees exact bytes.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;

const CLIENT_PY: &str = r#"
import socket, sys

def enc(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out

def report(label, raw):
    sys.stdout.write("%s %s\n" % (label, raw.hex()))
    sys.stdout.flush()

# usage: client.py PORT OWNER LOCK_KEY PX RESOURCE VALUE GATE
# GATE=gate: after locking, wait for a line on stdin before writing.
port, owner, lock_key, px, resource, value, gate = sys.argv[1:8]
sock = socket.create_connection(("127.0.0.1", int(port)), timeout=30)
rd = sock.makefile("rb")

def cmd(*args):
    sock.sendall(enc(*args))
    line = rd.readline()
    if line[:1] == b"$" and int(line[1:-2]) >= 0:
        line += rd.read(int(line[1:-2]) + 2)
    return line

reply = cmd("LOCK", lock_key, owner, "PX", px)
report("lock", reply)
if not reply.startswith(b":"):
    sys.exit(2)
token = reply[1:-2].decode()
if gate == "gate":
    sys.stdin.readline()
# The client still believes it holds the lock: it writes with its token.
report("fencedset", cmd("FENCEDSET", resource, value, token))
"#;

/// Parses a `<label> <hex>` line from a client.
#[track_caller]
fn reply_line(line: &str, label: &str) -> Vec<u8> {
    let (l, hex) = line
        .split_once(' ')
        .unwrap_or_else(|| panic!("bad client line {line:?}"));
    assert_eq!(l, label, "client line {line:?}");
    unhex(hex)
}

fn python_client(script: &std::path::Path, port: u16, args: &[&str]) -> Command {
    let mut cmd = Command::new("python3");
    cmd.arg(script).arg(port.to_string()).args(args);
    cmd
}

#[test]
fn paused_client_is_fenced_off() {
    let srv = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("client.py");
    std::fs::write(&script, CLIENT_PY).expect("write client script");
    let mut obs = srv.conn();

    // Phase 1: A acquires the lock with a 1 s lease.
    let mut a = python_client(
        &script,
        srv.port(),
        &["A", "lock", "1000", "resource", "from-A", "gate"],
    );
    a.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut a = ChildGuard(a.spawn().unwrap_or_else(|e| {
        panic!("spawn python3 ({e}); the seed scenario needs python3 on PATH")
    }));
    let a_out = LineReader::new(a.0.stdout.take().unwrap());
    let a_lock = reply_line(
        &a_out.next_line(Duration::from_secs(20), "client A"),
        "lock",
    );
    let ta = token_or_nil(&a_lock, 2, "A's LOCK").expect("A must get the free lock");
    assert_reply(
        &obs.c(&format!("FENCECHECK lock {ta}")),
        b":1\r\n",
        "A is the holder",
    );

    // Phase 2: A freezes. The go-ahead it will read on resume is queued while it is stopped,
    // so it cannot act before SIGCONT.
    let a_pid = a.0.id();
    signal(a_pid, "STOP");
    wait_for(Duration::from_secs(5), "client A to be stopped", || {
        (proc_state(a_pid) == Some('T')).then_some(())
    });
    a.0.stdin
        .as_mut()
        .unwrap()
        .write_all(b"go\n")
        .expect("write to A's stdin");
    // Phase 3: A's lease expires while A is stopped; then B locks and writes.
    wait_for(Duration::from_secs(10), "A's lease to expire", || {
        (obs.c("LOCKINFO lock") == b"$-1\r\n").then_some(())
    });
    assert_eq!(proc_state(a_pid), Some('T'), "A must still be stopped");
    let b = python_client(
        &script,
        srv.port(),
        &["B", "lock", "10000", "resource", "from-B", "nogate"],
    )
    .stderr(Stdio::inherit())
    .output()
    .expect("run client B");
    let b_out = String::from_utf8(b.stdout).expect("B's output");
    let mut b_lines = b_out.lines();
    let b_lock = reply_line(b_lines.next().expect("B's lock line"), "lock");
    let tb = token_or_nil(&b_lock, 2, "B's LOCK").expect("B must get the expired lock");
    assert!(tb > ta, "B's token {tb} must be above A's {ta}");
    let b_set = reply_line(b_lines.next().expect("B's fencedset line"), "fencedset");
    assert_reply(&b_set, b"+OK\r\n", "B's FENCEDSET");
    assert!(b.status.success(), "client B failed: {:?}", b.status);
    assert_reply(
        &obs.c("GET resource"),
        b"$6\r\nfrom-B\r\n",
        "B's write landed",
    );

    // Phase 4: A resumes and writes with its old token: rejected.
    signal(a_pid, "CONT");
    let a_set = reply_line(
        &a_out.next_line(Duration::from_secs(20), "client A"),
        "fencedset",
    );
    assert_reply(&a_set, &fenced_err(ta, tb), "A's stale FENCEDSET");
    let status = a.0.wait().expect("wait for A");
    assert!(status.success(), "client A failed: {status:?}");

    // Phase 5: the resource holds B's value; B still holds the lock.
    assert_reply(
        &obs.c("GET resource"),
        b"$6\r\nfrom-B\r\n",
        "final value is B's",
    );
    assert_reply(
        &obs.c(&format!("FENCECHECK lock {tb}")),
        b":1\r\n",
        "B holds the lock",
    );
    assert_reply(
        &obs.c(&format!("FENCECHECK lock {ta}")),
        b":0\r\n",
        "A does not",
    );
}
