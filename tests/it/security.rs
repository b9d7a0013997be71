//! The client side of issue 15: TLS on the client port (the real `redis-cli --tls` and a
//! rustls client; `tls-auth-clients` yes, optional and no; TLS only with `--port 0`; SIGHUP
//! reloads), protected mode seen from a real non-loopback address, the idle timeout, and
//! slow subscribers closed at their output buffer limit.

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::netns::Netns;
use crate::common::tls::TestPki;
use crate::common::tls_conn::{client_config, TlsConn};
use crate::common::*;

/// A PKI in a fresh temporary directory.
fn pki() -> (tempfile::TempDir, TestPki) {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = TestPki::new(dir.path());
    (dir, pki)
}

/// A server with a TLS port (`auth`: `--tls-auth-clients`; "no" gives no CA), plus its
/// plain port unless `plain` is false. Returns the server and its TLS port.
fn tls_server(pki: &TestPki, auth: &str, plain: bool) -> (Server, u16) {
    let port = free_port().to_string();
    let (cert, key, ca) = (pki.arg("node.crt"), pki.arg("node.key"), pki.arg("ca.crt"));
    let mut args = vec!["--tls-port", &port, "--tls-cert-file", &cert];
    args.extend(["--tls-key-file", &key, "--tls-auth-clients", auth]);
    if auth != "no" {
        args.extend(["--tls-ca-cert-file", &ca]);
    }
    let server = Server::start_bound("127.0.0.1", plain, &args);
    (server, port.parse().expect("port"))
}

/// Runs `redis-cli --tls` against `port`, trusting the PKI's CA and presenting `<stem>.crt`
/// if given. Returns stdout and stderr together.
fn redis_cli_tls(pki: &TestPki, port: u16, stem: Option<&str>, args: &[&str]) -> String {
    let mut cmd = Command::new("redis-cli");
    cmd.args([
        "--tls",
        "--cacert",
        &pki.arg("ca.crt"),
        "-p",
        &port.to_string(),
    ]);
    if let Some(stem) = stem {
        cmd.args(["--cert", &pki.arg(&format!("{stem}.crt"))]);
        cmd.args(["--key", &pki.arg(&format!("{stem}.key"))]);
    }
    let out = cmd.args(args).output().unwrap_or_else(|e| {
        panic!("run redis-cli ({e}); install redis-tools (the test command does)")
    });
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// True if a rustls client presenting `stem` (None: nothing) gets PONG over TLS.
fn tls_ping(pki: &TestPki, port: u16, stem: Option<&str>) -> bool {
    TlsConn::connect(port, client_config(pki, stem))
        .and_then(|mut c| c.cmd("PING", 2))
        .is_ok_and(|r| r == b"+PONG\r\n")
}

#[test]
fn tls_serves_redis_cli_and_the_same_sessions_as_the_plain_port() {
    let (_dir, pki) = pki();
    let (server, port) = tls_server(&pki, "yes", true);
    let out = redis_cli_tls(&pki, port, Some("client"), &["PING"]);
    assert_eq!(
        out.trim(),
        "PONG",
        "redis-cli --tls with a client certificate"
    );
    let out = redis_cli_tls(&pki, port, Some("client"), &["SET", "tls:k", "over tls"]);
    assert_eq!(out.trim(), "OK");
    let mut plain = server.conn();
    assert_reply(
        &plain.c("GET tls:k"),
        &bulk_bytes(b"over tls"),
        "plain sees TLS write",
    );
    // Under `tls-auth-clients yes` a client without a certificate, or with one another CA
    // signed, is refused.
    let out = redis_cli_tls(&pki, port, None, &["PING"]);
    assert!(!out.contains("PONG"), "no certificate, yet: {out}");
    assert!(!tls_ping(&pki, port, None), "rustls without a certificate");
    assert!(
        !tls_ping(&pki, port, Some("stranger")),
        "a stranger's certificate"
    );
    // RESP3, pub/sub and blocking over TLS, fed from the plain port.
    let cfg = client_config(&pki, Some("client"));
    let mut sub = TlsConn::connect(port, cfg.clone()).expect("connect");
    let hello = sub.cmd("HELLO 3", 3).expect("HELLO 3");
    assert!(hello.starts_with(b"%7\r\n"), "{}", show(&hello));
    let r = sub.cmd("SUBSCRIBE tls:ch", 3).expect("SUBSCRIBE");
    assert_reply(
        &r,
        b">3\r\n$9\r\nsubscribe\r\n$6\r\ntls:ch\r\n:1\r\n",
        "subscribed",
    );
    assert_reply(&plain.c("PUBLISH tls:ch hi"), b":1\r\n", "one receiver");
    let msg = sub.read_reply(3).expect("message");
    assert_reply(
        &msg,
        b">3\r\n$7\r\nmessage\r\n$6\r\ntls:ch\r\n$2\r\nhi\r\n",
        "pushed",
    );
    let mut blocked = TlsConn::connect(port, cfg).expect("connect");
    blocked.send("BLPOP tls:q 0").expect("send BLPOP");
    wait_blocked(&mut plain, 1);
    assert_reply(&plain.c("RPUSH tls:q x"), b":1\r\n", "push");
    let r = blocked.read_reply(2).expect("BLPOP reply");
    assert_reply(&r, b"*2\r\n$5\r\ntls:q\r\n$1\r\nx\r\n", "unblocked");
    // CONFIG GET reports the TLS settings under Redis's names.
    let r = plain.c("CONFIG GET tls-auth-clients");
    assert_reply(
        &r,
        b"*2\r\n$16\r\ntls-auth-clients\r\n$3\r\nyes\r\n",
        "auth",
    );
    let r = plain.c("CONFIG GET tls-port");
    let want = bulk_bytes(port.to_string().as_bytes());
    assert!(r.ends_with(&want), "{}", show(&r));
    let r = plain.c("CONFIG GET tls-cert-file");
    assert!(r.ends_with(&bulk_bytes(pki.arg("node.crt").as_bytes())));
}

#[test]
fn tls_auth_clients_optional_and_no_accept_anonymous_clients() {
    let (_dir, pki) = pki();
    let (_optional, port) = tls_server(&pki, "optional", true);
    let out = redis_cli_tls(&pki, port, None, &["PING"]);
    assert_eq!(out.trim(), "PONG", "optional: no certificate");
    assert!(
        tls_ping(&pki, port, Some("client")),
        "optional: a good certificate"
    );
    assert!(
        !tls_ping(&pki, port, Some("stranger")),
        "optional: a bad one is refused"
    );
    let (_no, port) = tls_server(&pki, "no", true);
    let out = redis_cli_tls(&pki, port, None, &["PING"]);
    assert_eq!(out.trim(), "PONG", "no: no certificate");
}

#[test]
fn port_zero_serves_tls_only() {
    let (_dir, pki) = pki();
    let (server, port) = tls_server(&pki, "optional", false);
    assert!(
        Conn::try_connect(server.port()).is_err(),
        "the plain port listens"
    );
    let out = redis_cli_tls(&pki, port, None, &["CONFIG", "GET", "port"]);
    assert_eq!(out.trim(), "port\n0");
    let out = redis_cli_tls(&pki, port, None, &["INFO", "server"]);
    assert!(out.contains(&format!("tcp_port:{port}")), "{out}");
}

#[test]
fn sighup_reloads_the_certificate_and_keeps_live_connections() {
    let (_dir, pki) = pki();
    let (server, port) = tls_server(&pki, "optional", true);
    let cert = |name: &str| {
        rustls::pki_types::pem::PemObject::from_pem_file(pki.path(name))
            .map(|c: rustls::pki_types::CertificateDer| c.to_vec())
            .expect("read a certificate")
    };
    let first = cert("node.crt");
    let mut old = TlsConn::connect(port, client_config(&pki, None)).expect("connect");
    assert_eq!(old.server_cert(), first);
    let log_count = |text: &str| {
        let log = std::fs::read_to_string(server.log_path()).unwrap_or_default();
        log.matches(text).count()
    };
    // A renewed certificate: new handshakes get it, the old connection goes on.
    pki.issue_node("node", "node 1, renewed");
    let second = cert("node.crt");
    signal(server.pid(), "HUP");
    wait_for(Duration::from_secs(10), "the reload", || {
        (log_count("TLS certificates reloaded") == 1).then_some(())
    });
    let new = TlsConn::connect(port, client_config(&pki, None)).expect("connect");
    assert_eq!(new.server_cert(), second);
    assert_ne!(first, second);
    assert_reply(&old.cmd("PING", 2).expect("old"), b"+PONG\r\n", "old conn");
    // A bad key file: the reload fails, is logged, and the renewed certificate stays.
    pki.write("node.key", "-----BEGIN PRIVATE KEY-----\nnot base64\n");
    signal(server.pid(), "HUP");
    wait_for(Duration::from_secs(10), "the failed reload", || {
        (log_count("TLS reload failed") == 1).then_some(())
    });
    let after = TlsConn::connect(port, client_config(&pki, None)).expect("connect");
    assert_eq!(after.server_cert(), second);
    assert_reply(&old.cmd("PING", 2).expect("old"), b"+PONG\r\n", "old conn");
    let mut plain = server.conn();
    assert_reply(&plain.c("PING"), b"+PONG\r\n", "the server lives");
}

// ---------------------------------------------------------------------------------------
// Protected mode
// ---------------------------------------------------------------------------------------

/// What a client in namespace `node` gets from `host:port`: what the server says first
/// (protected mode's refusal comes unasked, so nothing unread makes the server's close a
/// reset), or else its reply to a PING; read until the server closes or 2 s pass quiet.
/// Returns the bytes, and whether it closed.
fn ping_from(net: &Netns, node: u64, host: std::net::IpAddr, port: u16) -> (Vec<u8>, bool) {
    const CLIENT: &str = r#"
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1)
data, closed = b"", False
try:
    data = s.recv(65536)
    closed = not data
except socket.timeout:
    s.sendall(b"*1\r\n$4\r\nPING\r\n")
s.settimeout(2)
try:
    while not closed:
        chunk = s.recv(65536)
        closed = not chunk
        data += chunk
except socket.timeout:
    pass
except ConnectionResetError:
    closed = True
sys.stdout.write(("closed " if closed else "open ") + data.hex())
"#;
    let out = net
        .command(node, "python3")
        .args(["-c", CLIENT, &host.to_string(), &port.to_string()])
        .output()
        .expect("run python3 in the namespace");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the namespace client failed: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (state, hex) = text.split_once(' ').unwrap_or((text.as_str(), ""));
    (unhex(hex), state == "closed")
}

#[test]
fn protected_mode_refuses_other_hosts_with_redis_text() {
    // A real non-loopback client: a network namespace whose address reaches the root
    // namespace over a veth link. Needs root and iproute2; without them this fails.
    let mut net = Netns::create();
    net.add_node(1);
    let bridge = net.bridge();
    let server = Server::start_bound("0.0.0.0", true, &[]);
    let redis = RedisServer::start_with(&["--bind", "0.0.0.0", "--protected-mode", "yes"]);
    let (ours, closed) = ping_from(&net, 1, bridge, server.port());
    let (theirs, redis_closed) = ping_from(&net, 1, bridge, redis.port());
    assert!(theirs.starts_with(b"-DENIED "), "redis: {}", show(&theirs));
    assert_reply(&ours, &theirs, "protected mode's refusal");
    assert!(closed && redis_closed, "the connection stays open");
    // Loopback clients are not affected.
    let mut local = server.conn();
    assert_reply(&local.c("PING"), b"+PONG\r\n", "loopback");
    let info = info_text(&local.c("INFO stats"), 2);
    assert_eq!(
        info_field(&info, "rejected_connections").as_deref(),
        Some("1")
    );
    // Off: served. On again with a password: asked to authenticate instead.
    assert_reply(&local.c("CONFIG SET protected-mode no"), b"+OK\r\n", "off");
    let (r, _) = ping_from(&net, 1, bridge, server.port());
    assert_reply(&r, b"+PONG\r\n", "protected mode off");
    let set = local.c("CONFIG SET protected-mode yes requirepass pw");
    assert_reply(&set, b"+OK\r\n", "on, with a password");
    let (r, _) = ping_from(&net, 1, bridge, server.port());
    assert_reply(
        &r,
        &err_bytes("NOAUTH Authentication required."),
        "password set",
    );
}

// ---------------------------------------------------------------------------------------
// Idle timeout
// ---------------------------------------------------------------------------------------

/// Waits up to 10 s for the server to close `c`; panics if it does not.
#[track_caller]
fn assert_closed_soon(c: &mut Conn, what: &str) {
    let (_, closed) = c.read_until_close(Duration::from_secs(10));
    assert!(closed, "{what}: still open after 10 s");
}

#[test]
fn idle_clients_time_out_but_subscribers_and_blocked_clients_do_not() {
    let server = Server::start_with(&["--timeout", "1"]);
    let mut idle = server.conn();
    assert_reply(&idle.c("PING"), b"+PONG\r\n", "idle's first command");
    let mut sub = server.conn();
    assert_reply(
        &sub.c("SUBSCRIBE idle:ch"),
        b"*3\r\n$9\r\nsubscribe\r\n$7\r\nidle:ch\r\n:1\r\n",
        "subscribed",
    );
    let mut popper = server.conn();
    popper.send(&words("BLPOP idle:q 0"));
    let mut holder = server.conn();
    assert!(lock(&mut holder, "idle:lock", "a", 60_000).is_some());
    let mut waiter = server.conn();
    waiter.send(&words("LOCK idle:lock b PX 60000 WAIT 30000"));
    let started = Instant::now();
    assert_closed_soon(&mut idle, "an idle client");
    // Well past the timeout, the exempt ones are still served.
    thread::sleep(Duration::from_secs(3).saturating_sub(started.elapsed()));
    assert_reply(
        &sub.c("PING"),
        b"*2\r\n$4\r\npong\r\n$0\r\n\r\n",
        "a subscriber",
    );
    let mut fresh = server.conn();
    assert_reply(&fresh.c("RPUSH idle:q x"), b":1\r\n", "push");
    assert_reply(
        &popper.read_reply(),
        b"*2\r\n$6\r\nidle:q\r\n$1\r\nx\r\n",
        "a blocked BLPOP",
    );
    assert_reply(&fresh.c("UNLOCK idle:lock a"), b":1\r\n", "unlock");
    let token = waiter.read_reply();
    assert!(try_int(&token).is_some(), "LOCK WAIT: {}", show(&token));
    // CONFIG SET is live, also for a client already waiting with the old setting.
    assert_reply(&fresh.c("CONFIG SET timeout 0"), b"+OK\r\n", "timeout 0");
    let mut lasting = server.conn();
    assert_reply(&lasting.c("PING"), b"+PONG\r\n", "ping");
    thread::sleep(Duration::from_millis(2500));
    assert_reply(&lasting.c("PING"), b"+PONG\r\n", "timeout 0: never closed");
    let mut setter = server.conn();
    assert_reply(&setter.c("CONFIG SET timeout 1"), b"+OK\r\n", "timeout 1");
    assert_closed_soon(&mut lasting, "a client idle before CONFIG SET timeout");
    // (The setter has been idle as long by now: a fresh connection asks.)
    assert_reply(
        &server.conn().c("CONFIG GET timeout"),
        b"*2\r\n$7\r\ntimeout\r\n$1\r\n1\r\n",
        "CONFIG GET",
    );
}

// ---------------------------------------------------------------------------------------
// Slow subscribers
// ---------------------------------------------------------------------------------------

#[test]
fn a_slow_subscriber_is_closed_at_its_limit_and_a_fast_one_gets_everything() {
    const MESSAGE: usize = 64 * 1024;
    const BATCH: usize = 8;
    const BATCHES: usize = 64; // 32 MiB in all: far past the kernel's socket buffers
    const HARD: u64 = 8 << 20;
    let mut server = Server::start();
    let mut c = server.conn();
    let set = c.cmd(&[
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "pubsub 8mb 1mb 60",
    ]);
    assert_reply(&set, b"+OK\r\n", "set the pubsub limit");
    let limits = b"normal 0 0 0 slave 268435456 67108864 60 pubsub 8388608 1048576 60";
    assert_reply(
        &c.c("CONFIG GET client-output-buffer-limit"),
        &[
            b"*2\r\n$26\r\nclient-output-buffer-limit\r\n".as_slice(),
            &bulk_bytes(limits),
        ]
        .concat(),
        "CONFIG GET",
    );
    let subscribe = b"*3\r\n$9\r\nsubscribe\r\n$7\r\nslow:ch\r\n:1\r\n";
    let mut slow = server.conn();
    assert_reply(&slow.c("SUBSCRIBE slow:ch"), subscribe, "slow subscribed");
    let mut fast = server.conn();
    let r = fast.c("SUBSCRIBE slow:ch");
    assert_reply(&r, subscribe, "fast subscribed");
    // The fast subscriber's progress paces the publisher, so that it never has more than
    // two batches (1 MiB) pending however the machine schedules its reader.
    let read = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let progress = read.clone();
    let reader = thread::spawn(move || {
        let mut n = 0;
        while n < BATCH * BATCHES {
            let m = fast.read_reply();
            assert!(
                m.starts_with(b"*3\r\n$7\r\nmessage\r\n"),
                "{}",
                show(&m[..40])
            );
            n += 1;
            progress.store(n, std::sync::atomic::Ordering::Relaxed);
        }
        (n, fast)
    });
    let payload = pseudo_random_bytes(7, MESSAGE);
    let publish = vec![b"PUBLISH".to_vec(), b"slow:ch".to_vec(), payload];
    let mut receivers = Vec::new();
    for i in 0..BATCHES {
        let replies = c.pipeline(&vec![publish.clone(); BATCH]);
        receivers.extend(replies.into_iter().map(|r| as_int(&r)));
        wait_for(Duration::from_secs(30), "the fast subscriber", || {
            (read.load(std::sync::atomic::Ordering::Relaxed) + BATCH >= i * BATCH).then_some(())
        });
    }
    let (n, _fast) = reader.join().expect("fast reader");
    assert_eq!(n, BATCH * BATCHES, "the fast subscriber got every message");
    assert_eq!(receivers.first(), Some(&2), "both subscribed at first");
    assert_eq!(
        receivers.last(),
        Some(&1),
        "the slow one is gone by the end"
    );
    let (got, closed) = slow.read_until_close(Duration::from_secs(10));
    assert!(closed, "the slow subscriber is still connected");
    assert!(got.len() < BATCH * BATCHES * MESSAGE, "it got everything");
    let info = info_text(&c.c("INFO"), 2);
    let field = |f: &str| info_field(&info, f).and_then(|v| v.parse::<u64>().ok());
    assert_eq!(field("client_output_buffer_limit_disconnections"), Some(1));
    assert!(
        field("client_recent_max_output_buffer") > Some(HARD),
        "{info}"
    );
    assert_reply(
        &c.c("PUBSUB NUMSUB slow:ch"),
        b"*2\r\n$7\r\nslow:ch\r\n:1\r\n",
        "the fast one",
    );
    server.assert_alive();
}
