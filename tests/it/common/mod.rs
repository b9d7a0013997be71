//! Shared helpers for the integration tests: process guards for Palisade and for a real
//! `redis-server`, free ports, and a raw RESP connection that returns reply bytes exactly.
//!
//! Everything here is deliberately low level. Tests compare raw reply bytes, so the
//! connection never interprets a reply beyond finding where it ends (with redis-protocol's
//! RESP2 or RESP3 decoder, chosen by the protocol negotiated on the connection).

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tempfile::TempDir;

pub mod cluster;
pub mod events;
pub mod netns;
pub mod peer;
pub mod tls;
pub mod tls_conn;

/// How long one reply may take before a test fails instead of hanging.
pub const IO_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a freshly spawned server may take to answer PING.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------
// Ports
// ---------------------------------------------------------------------------------------

/// Ports already handed out by this test process, so two tests never get the same one.
static USED_PORTS: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// Returns `n` distinct free TCP ports on 127.0.0.1. All listeners are held until every
/// port is chosen, so the OS cannot hand the same port out twice within one call.
pub fn free_ports(n: usize) -> Vec<u16> {
    let mut used = USED_PORTS.lock().unwrap_or_else(|e| e.into_inner());
    let mut held = Vec::new();
    let mut ports = Vec::new();
    while ports.len() < n {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let p = l.local_addr().expect("local_addr").port();
        if used.insert(p) {
            ports.push(p);
        }
        held.push(l);
    }
    ports
}

/// One free port.
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

// ---------------------------------------------------------------------------------------
// Byte helpers
// ---------------------------------------------------------------------------------------

/// Printable form of raw reply bytes, for failure messages (`+OK\r\n` stays readable).
pub fn show(bytes: &[u8]) -> String {
    format!("\"{}\"", bytes.escape_ascii())
}

/// Encodes one command as a RESP multibulk of byte-string arguments.
pub fn encode<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// `VERB first numkeys keys... args...` (EVAL, EVALSHA and their _RO forms).
pub fn eval_argv(verb: &str, first: &str, keys: &[&str], args: &[&str]) -> Vec<Vec<u8>> {
    let mut v = vec![verb.as_bytes().to_vec(), first.as_bytes().to_vec()];
    v.push(keys.len().to_string().into_bytes());
    v.extend(keys.iter().map(|k| k.as_bytes().to_vec()));
    v.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    v
}

/// Splits a command written as one line on ASCII whitespace (no quoting).
pub fn words(line: &str) -> Vec<Vec<u8>> {
    line.split_ascii_whitespace()
        .map(|w| w.as_bytes().to_vec())
        .collect()
}

/// The null reply of a protocol version: `$-1\r\n` in RESP2, `_\r\n` in RESP3.
pub fn nil(proto: u8) -> &'static [u8] {
    if proto == 3 {
        b"_\r\n"
    } else {
        b"$-1\r\n"
    }
}

/// `:<n>\r\n`
pub fn int_bytes(n: i64) -> Vec<u8> {
    format!(":{n}\r\n").into_bytes()
}

/// `$<len>\r\n<data>\r\n`
pub fn bulk_bytes(data: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

/// `-<text>\r\n`
pub fn err_bytes(text: &str) -> Vec<u8> {
    format!("-{text}\r\n").into_bytes()
}

/// Parses an integer reply `:<n>\r\n`; panics with the raw bytes otherwise.
#[track_caller]
pub fn as_int(reply: &[u8]) -> i64 {
    try_int(reply).unwrap_or_else(|| panic!("expected an integer reply, got {}", show(reply)))
}

/// Parses an integer reply `:<n>\r\n`, or returns None.
pub fn try_int(reply: &[u8]) -> Option<i64> {
    let body = reply.strip_prefix(b":")?.strip_suffix(b"\r\n")?;
    std::str::from_utf8(body).ok()?.parse().ok()
}

/// Parses a bulk-string reply; `None` for a RESP2 or RESP3 null. Panics on anything else.
#[track_caller]
pub fn as_bulk(reply: &[u8]) -> Option<Vec<u8>> {
    if reply == b"$-1\r\n" || reply == b"_\r\n" {
        return None;
    }
    let parsed = (|| {
        let rest = reply.strip_prefix(b"$")?;
        let nl = rest.windows(2).position(|w| w == b"\r\n")?;
        let len: usize = std::str::from_utf8(&rest[..nl]).ok()?.parse().ok()?;
        let data = rest.get(nl + 2..nl + 2 + len)?;
        (rest.len() == nl + 2 + len + 2).then(|| data.to_vec())
    })();
    match parsed {
        Some(d) => Some(d),
        None => panic!("expected a bulk string or null reply, got {}", show(reply)),
    }
}

/// Runs `transcript` against a fresh redis-server and a fresh Palisade node in protocol
/// `proto`, and checks that every step's reply bytes are the same (`what` names the steps).
pub fn compare_with_redis(what: &str, proto: u8, transcript: fn(u16, u8) -> Vec<Vec<u8>>) {
    let redis = RedisServer::start();
    let pal = Server::start();
    let want = transcript(redis.port(), proto);
    let got = transcript(pal.port(), proto);
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_reply(g, w, &format!("RESP{proto} {what} step {i}"));
    }
    assert_eq!(want.len(), got.len(), "RESP{proto} {what}: number of steps");
}

/// Asserts that a reply equals the expected bytes, printing both readably on failure.
#[track_caller]
pub fn assert_reply(got: &[u8], want: &[u8], what: &str) {
    assert!(
        got == want,
        "{what}:\n  expected {}\n       got {}",
        show(want),
        show(got)
    );
}

/// Milliseconds since the Unix epoch, from this machine's clock (the servers run here too).
pub fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

/// Sleeps until the wall clock is early in a second (ms part < 100), so that an absolute
/// time in whole seconds (EXAT, EXPIREAT) `now_s + 100` leaves a TTL that rounds to 100.
pub fn align_to_second_start() {
    loop {
        let ms = unix_ms() % 1000;
        if ms < 100 {
            return;
        }
        thread::sleep(Duration::from_millis((1000 - ms as u64) + 5));
    }
}

/// Deterministic pseudo-random bytes (xorshift), so garbage inputs are reproducible.
pub fn pseudo_random_bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Raw connection
// ---------------------------------------------------------------------------------------

/// What a read ended with when it did not produce a complete reply.
#[derive(Debug)]
pub enum ReadFailure {
    /// The peer closed the connection; holds the bytes of any incomplete reply.
    Closed(Vec<u8>),
    /// Nothing complete arrived within the timeout; holds what did arrive.
    Timeout(Vec<u8>),
    /// The bytes are not valid RESP for the negotiated protocol.
    Malformed(Vec<u8>, String),
}

/// A raw client connection. Sends commands as RESP multibulks and returns each reply's
/// exact bytes. Tracks the protocol (2 or 3) negotiated by HELLO and RESET so it can find
/// where a reply ends with the right decoder; the decoders are strict, so a RESP3-only
/// frame (such as `_\r\n`) on a RESP2 connection is reported as malformed.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    proto: u8,
    port: u16,
}

impl Conn {
    /// Connects to 127.0.0.1:`port`; panics if it cannot.
    pub fn connect(port: u16) -> Conn {
        Self::try_connect(port).unwrap_or_else(|e| panic!("connect to 127.0.0.1:{port}: {e}"))
    }

    /// Connects to 127.0.0.1:`port`.
    pub fn try_connect(port: u16) -> io::Result<Conn> {
        Self::try_connect_addr(local(port))
    }

    /// Connects to `addr`.
    pub fn try_connect_addr(addr: SocketAddr) -> io::Result<Conn> {
        let port = addr.port();
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        Ok(Conn {
            stream,
            buf: Vec::new(),
            proto: 2,
            port,
        })
    }

    /// The protocol version this connection currently decodes replies with.
    pub fn proto(&self) -> u8 {
        self.proto
    }

    /// The server port this connection goes to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Writes raw bytes; panics on error.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream
            .write_all(bytes)
            .unwrap_or_else(|e| panic!("write to server: {e}"));
    }

    /// Writes raw bytes, returning the error (a server may close a connection mid-write).
    pub fn try_send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Sends one command as a multibulk without reading the reply.
    pub fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        self.send_raw(&encode(args));
    }

    /// Sends a command and returns its reply's exact bytes.
    #[track_caller]
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        self.send(args);
        let switch = proto_switch(args);
        self.read_reply_switching(switch)
    }

    /// `cmd` with the command written as one whitespace-separated line.
    #[track_caller]
    pub fn c(&mut self, line: &str) -> Vec<u8> {
        self.cmd(&words(line))
    }

    /// Reads exactly one complete reply; panics (with what arrived) if it cannot.
    #[track_caller]
    pub fn read_reply(&mut self) -> Vec<u8> {
        match self.try_read_reply() {
            Ok(r) => r,
            Err(ReadFailure::Closed(b)) => {
                panic!("server closed the connection; partial reply {}", show(&b))
            }
            Err(ReadFailure::Timeout(b)) => panic!(
                "no complete reply within {IO_TIMEOUT:?}; partial reply {}",
                show(&b)
            ),
            Err(ReadFailure::Malformed(b, e)) => panic!(
                "malformed RESP{} reply {}: {e}",
                self.proto,
                show(&b[..b.len().min(400)])
            ),
        }
    }

    /// Reads one reply, decoding it as RESP`switch` if the command just sent changes the
    /// protocol (HELLO n, RESET); a failed HELLO keeps the old protocol.
    #[track_caller]
    fn read_reply_switching(&mut self, switch: Option<u8>) -> Vec<u8> {
        let old = self.proto;
        if let Some(p) = switch {
            self.proto = p;
        }
        let reply = self.read_reply();
        if switch.is_some() && reply.first() == Some(&b'-') {
            self.proto = old;
        }
        reply
    }

    /// Reads one complete reply, or says why there is none.
    pub fn try_read_reply(&mut self) -> Result<Vec<u8>, ReadFailure> {
        loop {
            match frame_len(&self.buf, self.proto) {
                Ok(Some(n)) => return Ok(self.buf.drain(..n).collect()),
                Ok(None) => {}
                Err(e) => return Err(ReadFailure::Malformed(self.buf.clone(), e)),
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(ReadFailure::Closed(std::mem::take(&mut self.buf))),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if is_timeout(&e) => {
                    return Err(ReadFailure::Timeout(std::mem::take(&mut self.buf)))
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(ReadFailure::Closed(std::mem::take(&mut self.buf))),
            }
        }
    }

    /// Sends many commands in one go (a writer thread, so neither side can block on full
    /// socket buffers) and returns every reply in order.
    #[track_caller]
    pub fn pipeline(&mut self, cmds: &[Vec<Vec<u8>>]) -> Vec<Vec<u8>> {
        let mut data = Vec::new();
        for c in cmds {
            data.extend_from_slice(&encode(c));
        }
        let mut writer = self.stream.try_clone().expect("clone stream");
        let handle = thread::spawn(move || writer.write_all(&data));
        let replies = cmds
            .iter()
            .map(|c| self.read_reply_switching(proto_switch(c)))
            .collect();
        handle
            .join()
            .expect("writer thread")
            .expect("pipeline write");
        replies
    }

    /// Reads until the server closes the connection or `quiet` passes without any byte
    /// arriving. Returns everything read and whether the connection was closed.
    pub fn read_until_close(&mut self, quiet: Duration) -> (Vec<u8>, bool) {
        self.stream
            .set_read_timeout(Some(quiet))
            .expect("set timeout");
        let mut out = std::mem::take(&mut self.buf);
        let closed = loop {
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => break true,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e) if is_timeout(&e) => break false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break true, // reset by peer counts as closed
            }
        };
        self.stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("set timeout");
        (out, closed)
    }

    /// A second handle on the socket (e.g. for a writer thread that streams commands).
    pub fn stream_clone(&self) -> TcpStream {
        self.stream.try_clone().expect("clone stream")
    }

    /// Closes the write half (the server sees EOF), keeping the read half open.
    pub fn shutdown_write(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// The protocol a command switches the connection to, if it is HELLO 2|3 or RESET.
fn proto_switch<A: AsRef<[u8]>>(args: &[A]) -> Option<u8> {
    let name = args.first()?.as_ref();
    if name.eq_ignore_ascii_case(b"RESET") {
        return Some(2);
    }
    if name.eq_ignore_ascii_case(b"HELLO") {
        return match args.get(1).map(|a| a.as_ref()) {
            Some(b"2") => Some(2),
            Some(b"3") => Some(3),
            _ => None,
        };
    }
    None
}

/// Length of the complete frame at the start of `buf`, `None` if incomplete.
fn frame_len(buf: &[u8], proto: u8) -> Result<Option<usize>, String> {
    if buf.is_empty() {
        return Ok(None);
    }
    if proto == 3 {
        redis_protocol::resp3::decode::complete::decode_range(buf)
            .map(|o| o.map(|(_, n)| n))
            .map_err(|e| e.to_string())
    } else {
        redis_protocol::resp2::decode::decode_range(buf)
            .map(|o| o.map(|(_, n)| n))
            .map_err(|e| e.to_string())
    }
}

/// Decodes a complete RESP3 reply into an owned frame, for shape checks.
#[track_caller]
pub fn decode3(reply: &[u8]) -> redis_protocol::resp3::types::OwnedFrame {
    match redis_protocol::resp3::decode::complete::decode(reply) {
        Ok(Some((f, n))) if n == reply.len() => f,
        other => panic!("not one RESP3 frame: {} ({other:?})", show(reply)),
    }
}

/// Decodes a complete RESP2 reply into an owned frame, for shape checks.
#[track_caller]
pub fn decode2(reply: &[u8]) -> redis_protocol::resp2::types::OwnedFrame {
    match redis_protocol::resp2::decode::decode(reply) {
        Ok(Some((f, n))) if n == reply.len() => f,
        other => panic!("not one RESP2 frame: {} ({other:?})", show(reply)),
    }
}

// ---------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------

/// Spawns `cmd` with stdout and stderr appended to `log`.
fn spawn_logged(mut cmd: Command, log: &Path) -> Child {
    let out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("open log");
    let err = out.try_clone().expect("clone log handle");
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"))
}

/// 127.0.0.1:`port`.
pub fn local(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// Waits until the server at `addr` answers PING (or says it needs AUTH first).
fn wait_ready(child: &mut Child, addr: SocketAddr, what: &str, log: &Path) {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "{what} exited during startup ({status}); log:\n{}",
                tail(log, 60)
            );
        }
        if let Ok(mut c) = Conn::try_connect_addr(addr) {
            c.stream.set_read_timeout(Some(Duration::from_secs(2))).ok();
            if c.try_send_raw(b"*1\r\n$4\r\nPING\r\n").is_ok() {
                if let Ok(r) = c.try_read_reply() {
                    if r == b"+PONG\r\n" || r.starts_with(b"-NOAUTH") {
                        return;
                    }
                }
            }
        }
        if Instant::now() > deadline {
            panic!(
                "{what} not ready on {addr} after {READY_TIMEOUT:?}; log:\n{}",
                tail(log, 60)
            );
        }
        thread::sleep(Duration::from_millis(25));
    }
}

/// Waits until the log at `log` contains `line` (panics if the process exits first or
/// after [`READY_TIMEOUT`]).
pub fn wait_for_log(child: &mut Child, log: &Path, line: &str) {
    let deadline = Instant::now() + READY_TIMEOUT;
    while !std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains(line)
    {
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "exited ({status}) before logging {line:?}; log:\n{}",
                tail(log, 60)
            );
        }
        assert!(
            Instant::now() < deadline,
            "no {line:?} in the log after {READY_TIMEOUT:?}; log:\n{}",
            tail(log, 60)
        );
        thread::sleep(Duration::from_millis(25));
    }
}

/// The last `n` lines of a log file.
pub fn tail(path: &Path, n: usize) -> String {
    let mut s = String::new();
    if let Ok(mut f) = File::open(path) {
        let mut bytes = Vec::new();
        let _ = f.read_to_end(&mut bytes);
        s = String::from_utf8_lossy(&bytes).into_owned();
    }
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Sends SIGSTOP or SIGCONT (or any signal name `kill` knows) to a process, with the
/// shell's builtin `kill` (present even where procps is not installed).
pub fn signal(pid: u32, sig: &str) {
    let st = Command::new("sh")
        .args(["-c", "kill -s \"$1\" \"$2\"", "sh", sig, &pid.to_string()])
        .status()
        .expect("run sh -c kill");
    assert!(st.success(), "kill -s {sig} {pid} failed");
}

/// The scheduler state letter of a process (`T` = stopped), from /proc.
pub fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The state follows the parenthesised command name.
    let after = &stat[stat.rfind(')')? + 1..];
    after.trim_start().chars().next()
}

/// Copies the files of directory `from` (recursively) into `to`, which is created.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy");
    for entry in std::fs::read_dir(from).expect("read the directory to copy") {
        let entry = entry.expect("directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a file");
        }
    }
}

/// A running Palisade server on free ports with its own temporary data directory.
/// Dropping it kills the process (SIGKILL) and removes the directory.
pub struct Server {
    child: Option<Child>,
    port: u16,
    peer_port: u16,
    root: TempDir,
    extra: Vec<String>,
    /// `--bind`.
    bind: String,
    /// False: `--port 0` (TLS only; readiness is read from the log).
    plain: bool,
}

impl Server {
    /// Starts a server bound to `bind`, with a plain client port unless `plain` is false
    /// (`--port 0`: the flags in `extra` must give a `--tls-port`).
    pub fn start_bound(bind: &str, plain: bool, extra: &[&str]) -> Server {
        let mut s = Self::prepare(extra);
        s.bind = bind.to_string();
        s.plain = plain;
        s.spawn();
        s
    }

    /// Starts a server with default limits.
    pub fn start() -> Server {
        Self::start_with(&[])
    }

    /// Starts a server with extra command-line flags (e.g. `--proto-max-bulk-len 1024`).
    pub fn start_with(extra: &[&str]) -> Server {
        let mut s = Self::prepare(extra);
        s.spawn();
        s
    }

    /// Starts a server on a copy of the data directory `fixture` (left unchanged).
    pub fn start_on_copy_of(fixture: &Path, extra: &[&str]) -> Server {
        let s = Self::prepare(extra);
        copy_dir(fixture, &s.data_dir());
        s.started()
    }

    /// Like [`Server::start_on_copy_of`], but expects the server to refuse the directory:
    /// returns what it logged before it exited.
    pub fn refused_copy_of(fixture: &Path) -> String {
        let s = Self::prepare(&[]);
        copy_dir(fixture, &s.data_dir());
        let status = Command::new(env!("CARGO_BIN_EXE_palisade"))
            .args(["--bind", "127.0.0.1", "--port", &s.port.to_string()])
            .args(["--peer-port", &s.peer_port.to_string(), "--dir"])
            .arg(s.data_dir())
            .output()
            .expect("run palisade");
        assert!(!status.status.success(), "palisade accepted the directory");
        String::from_utf8_lossy(&status.stderr).into_owned()
            + &String::from_utf8_lossy(&status.stdout)
    }

    fn started(mut self) -> Server {
        self.spawn();
        self
    }

    fn prepare(extra: &[&str]) -> Server {
        let root = tempfile::Builder::new()
            .prefix("palisade-it-")
            .tempdir()
            .expect("tempdir");
        let ports = free_ports(2);
        Server {
            child: None,
            port: ports[0],
            peer_port: ports[1],
            root,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            bind: "127.0.0.1".into(),
            plain: true,
        }
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_palisade"));
        let port = if self.plain { self.port } else { 0 };
        cmd.arg("--bind")
            .arg(&self.bind)
            .arg("--port")
            .arg(port.to_string())
            .arg("--peer-port")
            .arg(self.peer_port.to_string())
            .arg("--dir")
            .arg(self.data_dir())
            .args(&self.extra);
        let log = self.log_path();
        let mut child = spawn_logged(cmd, &log);
        if self.plain {
            wait_ready(&mut child, local(self.port), "palisade", &log);
        } else {
            wait_for_log(&mut child, &log, "palisade ready to accept connections");
        }
        self.child = Some(child);
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The data directory passed as `--dir`.
    pub fn data_dir(&self) -> PathBuf {
        self.root.path().join("data")
    }

    /// The file that collects the server's stdout and stderr (across restarts).
    pub fn log_path(&self) -> PathBuf {
        self.root.path().join("server.log")
    }

    /// The process id of the running server.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("server not running").id()
    }

    /// A new connection to the server.
    pub fn conn(&self) -> Conn {
        Conn::connect(self.port)
    }

    /// SIGKILLs the server and reaps it. The data directory stays.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills the server if it runs, then starts it again on the same ports and directory.
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    /// Waits up to `timeout` for the process to exit by itself; returns its status, or
    /// None if it still runs.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut().expect("server not running");
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Panics (with the log) unless the process is still running and answers PING on a
    /// fresh connection.
    #[track_caller]
    pub fn assert_alive(&mut self) {
        let child = self.child.as_mut().expect("server not running");
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "palisade died ({status}); log:\n{}",
                tail(&self.log_path(), 60)
            );
        }
        let mut c = self.conn();
        assert_reply(&c.c("PING"), b"+PONG\r\n", "PING on a fresh connection");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!(
                "---- palisade log (last 40 lines) ----\n{}\n----",
                tail(&self.log_path(), 40)
            );
        }
        self.kill9();
    }
}

/// A real `redis-server` (Debian package) for differential tests, on a free port, with
/// persistence off and a temporary working directory. Dropping it kills the process.
pub struct RedisServer {
    child: Child,
    port: u16,
    _root: TempDir,
}

impl RedisServer {
    /// Starts `redis-server` with persistence off and only one database, which is what
    /// Palisade offers (so `SELECT 1` fails the same way on both).
    pub fn start() -> RedisServer {
        Self::start_with(&[])
    }

    /// Starts `redis-server` with extra arguments (e.g. `--requirepass x`).
    pub fn start_with(extra: &[&str]) -> RedisServer {
        let root = tempfile::Builder::new()
            .prefix("redis-it-")
            .tempdir()
            .expect("tempdir");
        let port = free_port();
        let mut cmd = Command::new("redis-server");
        cmd.arg("--port")
            .arg(port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--databases", "1"])
            .arg("--dir")
            .arg(root.path())
            .args(extra);
        let log = root.path().join("redis.log");
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("open log");
        let err = out.try_clone().expect("clone log handle");
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::NotFound => panic!(
                "redis-server is not on PATH. The differential tests need the real Redis 7: \
                 install it with `apt-get install -y redis-server` (the test command does this)."
            ),
            Err(e) => panic!("spawn redis-server: {e}"),
        };
        wait_ready(&mut child, local(port), "redis-server", &log);
        RedisServer {
            child,
            port,
            _root: root,
        }
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A new connection.
    pub fn conn(&self) -> Conn {
        Conn::connect(self.port)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `f` every 10 ms until it returns Some, or panics after `timeout`.
#[track_caller]
pub fn wait_for<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until at least `n` clients of the server that `c` is connected to wait inside a
/// blocking command (BLPOP, BRPOP, LOCK ... WAIT): CLIENT LIST shows them with `flags=b`, as
/// Redis does. A test that pushes or unlocks after this knows the waiter is really waiting.
#[track_caller]
pub fn wait_blocked(c: &mut Conn, n: usize) {
    wait_for(
        Duration::from_secs(10),
        &format!("{n} blocked client(s)"),
        || {
            let list = String::from_utf8_lossy(&c.c("CLIENT LIST")).into_owned();
            (list.matches(" flags=b ").count() >= n).then_some(())
        },
    );
}

// ---------------------------------------------------------------------------------------
// Lock helpers (parse Palisade's lock replies strictly)
// ---------------------------------------------------------------------------------------

/// `LOCK key owner PX ms`: Some(token) or None for nil; panics on any other reply.
#[track_caller]
pub fn lock(c: &mut Conn, key: &str, owner: &str, px: u64) -> Option<i64> {
    let px = px.to_string();
    let r = c.cmd(&["LOCK", key, owner, "PX", px.as_str()]);
    token_or_nil(&r, c.proto(), "LOCK")
}

/// `RENEW key owner PX ms`: Some(token) or None for nil.
#[track_caller]
pub fn renew(c: &mut Conn, key: &str, owner: &str, px: u64) -> Option<i64> {
    let px = px.to_string();
    let r = c.cmd(&["RENEW", key, owner, "PX", px.as_str()]);
    token_or_nil(&r, c.proto(), "RENEW")
}

/// Interprets a LOCK/RENEW reply: an integer token, or the protocol's nil.
#[track_caller]
pub fn token_or_nil(reply: &[u8], proto: u8, what: &str) -> Option<i64> {
    if reply == nil(proto) {
        return None;
    }
    match try_int(reply) {
        Some(t) => Some(t),
        None => panic!(
            "{what}: expected an integer token or {}, got {}",
            show(nil(proto)),
            show(reply)
        ),
    }
}

/// The exact `-FENCED` error for a token lower than the fence.
pub fn fenced_err(token: i64, highest: i64) -> Vec<u8> {
    err_bytes(&format!("FENCED token {token} is lower than {highest}"))
}

/// Splits a byte string made of complete back-to-back frames into the frames' bytes.
#[track_caller]
pub fn split_frames(mut bytes: &[u8], proto: u8) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        match frame_len(bytes, proto) {
            Ok(Some(n)) => {
                out.push(bytes[..n].to_vec());
                bytes = &bytes[n..];
            }
            other => panic!(
                "not complete RESP{proto} frames at {} ({other:?})",
                show(bytes)
            ),
        }
    }
    out
}

/// Kills (SIGKILL) and reaps a child process when dropped, so a failing test leaves no
/// client processes behind, stopped or not.
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads a child's stdout line by line on a thread, so tests can wait with a timeout.
pub struct LineReader {
    rx: std::sync::mpsc::Receiver<String>,
}

impl LineReader {
    /// Takes ownership of a child's piped stdout.
    pub fn new(out: std::process::ChildStdout) -> LineReader {
        let (tx, rx) = std::sync::mpsc::channel();
        thread::spawn(move || {
            use std::io::BufRead;
            for line in io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        LineReader { rx }
    }

    /// The next line, or a panic naming `what` after `timeout`.
    #[track_caller]
    pub fn next_line(&self, timeout: Duration, what: &str) -> String {
        self.rx
            .recv_timeout(timeout)
            .unwrap_or_else(|e| panic!("no line from {what} within {timeout:?}: {e}"))
    }
}

/// Decodes lowercase hex (as printed by the python clients) into bytes.
#[track_caller]
pub fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex string {s:?}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or_else(|_| panic!("bad hex {s:?}")))
        .collect()
}

/// The last purged log index and the state machine's persisted last-applied index in a
/// stopped node's data directory.
pub fn purged_and_applied(dir: &Path) -> (Option<u64>, Option<u64>) {
    let (purged, applied, _) = purged_applied_and_last(dir);
    (purged, applied)
}

/// [`purged_and_applied`], and the index of the last entry in the log on disk.
pub fn purged_applied_and_last(dir: &Path) -> (Option<u64>, Option<u64>, Option<u64>) {
    use palisade::raft::LogId;
    use palisade::store::schema::{get_meta, open_db, AppliedMeta, K_APPLIED, K_PURGED};
    let db = open_db(dir).expect("open the node's RocksDB");
    let purged: Option<LogId> = get_meta::<Option<LogId>>(&db, K_PURGED)
        .expect("read last_purged")
        .flatten();
    let applied: Option<AppliedMeta> = get_meta(&db, K_APPLIED).expect("read applied");
    let log = palisade::store::schema::cf(&db, palisade::store::schema::CF_LOG).expect("log CF");
    let last = db
        .iterator_cf(log, rocksdb::IteratorMode::End)
        .next()
        .map(|item| {
            let (_, v) = item.expect("read the last log entry");
            let e: palisade::raft::Entry =
                palisade::store::schema::dec(&v).expect("decode the last log entry");
            e.log_id.index
        });
    (
        purged.map(|l| l.index),
        applied.and_then(|a| a.last_applied).map(|l| l.index),
        last,
    )
}

/// The text of an INFO reply: a bulk string in RESP2, a `txt` verbatim string in RESP3
/// (as Redis 7 sends it).
#[track_caller]
pub fn info_text(reply: &[u8], proto: u8) -> String {
    let body = if proto == 3 {
        assert!(
            reply.starts_with(b"="),
            "RESP3 INFO must be a verbatim string: {}",
            show(reply)
        );
        let nl = reply.windows(2).position(|w| w == b"\r\n").unwrap();
        let body = &reply[nl + 2..reply.len() - 2];
        assert!(
            body.starts_with(b"txt:"),
            "verbatim format must be txt: {}",
            show(reply)
        );
        body[4..].to_vec()
    } else {
        as_bulk(reply).expect("INFO is not nil")
    };
    String::from_utf8(body).expect("INFO is UTF-8")
}

/// `field:value` lines of an INFO text.
pub fn info_field(text: &str, field: &str) -> Option<String> {
    text.split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
}

/// One command of a COMMAND DOCS reply: its name and its string-valued fields (`summary`,
/// `since`, `group`, ...; Redis's arrays such as `arguments` are left out).
pub type CommandDocs = (String, BTreeMap<String, String>);

/// The entries of a COMMAND DOCS reply, in reply order. The reply must have Redis 7's shape:
/// in RESP3 a map of name to map, every name and field a bulk string (redis-cli asserts
/// that); in RESP2 the same, flattened into arrays of alternating keys and values.
#[track_caller]
pub fn command_docs(reply: &[u8], proto: u8) -> Vec<CommandDocs> {
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).expect("COMMAND DOCS text is UTF-8");
    if proto == 3 {
        use redis_protocol::resp3::types::OwnedFrame as F;
        let F::Map { data, .. } = decode3(reply) else {
            panic!("RESP3 COMMAND DOCS is not a map: {}", show(reply));
        };
        data.into_iter()
            .map(|(name, fields)| {
                let (F::BlobString { data: name, .. }, F::Map { data: fields, .. }) =
                    (name, fields)
                else {
                    panic!("not a name and a map in COMMAND DOCS: {}", show(reply));
                };
                let fields = fields.into_iter().filter_map(|kv| match kv {
                    (F::BlobString { data: k, .. }, F::BlobString { data: v, .. }) => {
                        Some((text(&k), text(&v)))
                    }
                    _ => None,
                });
                (text(&name), fields.collect())
            })
            .collect()
    } else {
        use redis_protocol::resp2::types::OwnedFrame as F;
        let F::Array(items) = decode2(reply) else {
            panic!("RESP2 COMMAND DOCS is not an array: {}", show(reply));
        };
        assert!(
            items.len() % 2 == 0,
            "odd COMMAND DOCS array: {}",
            show(reply)
        );
        items
            .chunks(2)
            .map(|pair| {
                let [F::BulkString(name), F::Array(fields)] = pair else {
                    panic!("not a name and an array in COMMAND DOCS: {}", show(reply));
                };
                let fields = fields.chunks(2).filter_map(|kv| match kv {
                    [F::BulkString(k), F::BulkString(v)] => Some((text(k), text(v))),
                    _ => None,
                });
                (text(name), fields.collect())
            })
            .collect()
    }
}
