//! Protocol robustness (docs/architecture.md, "Errors"): malformed RESP gets
//! `-ERR Protocol error: ...` and the connection is closed; the server stays up for everyone else and loses nothing.
//! Also pipelining and inline commands.
//!
//! Where Redis defines the exact bytes (protocol errors, inline commands), the same input
//! goes to a real redis-server and the raw bytes received, up to the close, must match.

use std::thread;
use std::time::Duration;

use crate::common::*;

/// How long a connection must stay silent to count as "left open, nothing more to say".
const QUIET: Duration = Duration::from_millis(500);

/// Sends `input` on a fresh connection and returns (bytes until close or quiet, closed).
fn exchange(port: u16, input: &[u8]) -> (Vec<u8>, bool) {
    let mut c = Conn::connect(port);
    let _ = c.try_send_raw(input);
    c.read_until_close(QUIET)
}

/// Sends `input`, hangs up the write side, and waits (up to 5 s) for the server to close.
fn blast(port: u16, input: &[u8]) {
    let mut c = Conn::connect(port);
    let _ = c.try_send_raw(input);
    c.shutdown_write();
    let (_, closed) = c.read_until_close(Duration::from_secs(5));
    assert!(
        closed,
        "the server must close a connection whose client hung up"
    );
}

/// Raw inputs whose exact outcome (reply bytes, and whether the connection closes) is
/// Redis's. Defaults: proto-max-bulk-len 512 MiB on both servers.
const PROTOCOL_CASES: &[(&str, &[u8])] = &[
    ("non-numeric multibulk length", b"*abc\r\n"),
    (
        "multibulk length overflowing i64",
        b"*99999999999999999999999\r\n",
    ),
    ("multibulk length above INT_MAX", b"*2147483648\r\n"),
    ("negative bulk length", b"*1\r\n$-5\r\n"),
    ("null bulk inside a command", b"*1\r\n$-1\r\n"),
    ("non-numeric bulk length", b"*1\r\n$abc\r\n"),
    (
        "bulk length above proto-max-bulk-len",
        b"*2\r\n$3\r\nGET\r\n$536870913\r\n",
    ),
    ("missing '$' in a multibulk", b"*1\r\nPING\r\n"),
    (
        "simple string inside a multibulk",
        b"*2\r\n$3\r\nGET\r\n+k\r\n",
    ),
    ("error after a good command", b"*1\r\n$4\r\nPING\r\n*x\r\n"),
    ("unbalanced quotes in an inline command", b"SET k \"abc\r\n"),
    ("'+' before a multibulk length", b"*+1\r\n"),
    (
        "leading zero in a multibulk length",
        b"*01\r\n$4\r\nPING\r\n",
    ),
    ("space in a multibulk length", b"* 1\r\n"),
    ("leading zero in a bulk length", b"*1\r\n$04\r\nPING\r\n"),
    ("space in a bulk length", b"*1\r\n$ 4\r\nPING\r\n"),
    ("an empty line where a bulk was expected", b"*1\r\n\r\n"),
    ("a quote that does not end its word", b"ECHO \"\"x\r\n"),
    ("an escaped closing quote", b"ECHO \"a\\\"\r\n"),
    // Redis finds line ends with strchr: a NUL byte hides them, and it waits for more.
    ("NUL in an inline command", b"ECHO\x00a\r\nPING\r\n"),
    ("NUL in a multibulk length", b"*1\x00\r\n$4\r\nPING\r\n"),
    ("a header line cut after its CR", b"*1\r\n$4\r"),
    // Issue 14, item 8.
    ("'*' without a length", b"*\r\n"),
    ("'$' without a length", b"*1\r\n$\r\n"),
    ("bulk length above INT_MAX", b"*1\r\n$2147483648\r\n"),
    (
        "an integer where a bulk was expected",
        b"*2\r\n$4\r\nECHO\r\n:1\r\n",
    ),
    ("an unbalanced single quote", b"ECHO 'abc\r\n"),
];

#[test]
fn protocol_errors_match_redis() {
    let cases = PROTOCOL_CASES
        .iter()
        .map(|(name, input)| (*name, input.to_vec()));
    compare_with_redis("protocol", cases);
}

/// Inline commands, as typed into telnet or nc.
const INLINE_CASES: &[(&str, &[u8])] = &[
    ("PING", b"PING\r\n"),
    ("lowercase with LF only", b"ping\n"),
    ("with argument", b"ECHO hello\r\n"),
    ("extra spaces", b"  ECHO   hi  \r\n"),
    ("empty lines are ignored", b"\r\n\r\nPING\r\n"),
    ("set then get", b"SET inl v1\r\nGET inl\r\n"),
    (
        "inline then multibulk",
        b"PING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nmb\r\n",
    ),
    ("unknown inline command", b"hello world\r\n"),
    ("a '$' line is an inline command", b"$5\r\nworld\r\n"),
    (
        "empty and negative multibulks are skipped",
        b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n",
    ),
    // Redis's leniencies: a header ends at its CR whatever follows, and the two bytes after
    // a bulk's payload are skipped unread.
    (
        "a header CR followed by another byte",
        b"*1\rX$4\rXPING\r\n",
    ),
    (
        "bytes after a payload are not checked",
        b"*1\r\n$4\r\nPINGxx*2\r\n$4\r\nECHO\r\n$1\r\nz\r\n",
    ),
    // sdssplitargs ends words at space, tab, CR and LF; \v and \f only between words.
    ("vertical tab and form feed", b"\x0b\x0cECHO a\x0bb\x0c\r\n"),
    ("CR inside an inline line", b"PING\rPING\n"),
    ("quote inside a word", b"ECHO a\"b c\"\r\n"),
    ("bad hex escape", b"ECHO \"\\x4g\"\r\n"),
    (
        "CRLF inside an error text",
        b"*2\r\n$3\r\nFOO\r\n$3\r\na\r\nb\r\n",
    ),
];

/// Appended to inputs after which the connection stays open: QUIT makes both servers
/// answer +OK and close, so the exchange ends at once instead of after a quiet period.
const QUIT: &[u8] = b"*1\r\n$4\r\nQUIT\r\n";

#[test]
fn inline_commands_match_redis() {
    let cases = INLINE_CASES
        .iter()
        .map(|(name, input)| (*name, [*input, QUIT].concat()));
    compare_with_redis("inline", cases);
}

/// Sends each raw input to redis-server and to Palisade on fresh connections and asserts that
/// both answer the same bytes and agree on whether the connection was closed.
fn compare_with_redis<'a>(what: &str, cases: impl Iterator<Item = (&'a str, Vec<u8>)>) {
    let redis = RedisServer::start();
    let pal = Server::start();
    compare_on(redis.port(), pal.port(), what, cases);
}

/// [`compare_with_redis`] against servers already running.
fn compare_on<'a>(
    redis: u16,
    pal: u16,
    what: &str,
    cases: impl Iterator<Item = (&'a str, Vec<u8>)>,
) {
    let mut bad = Vec::new();
    let cut = |b: &[u8]| show(&b[..b.len().min(300)]);
    for (name, input) in cases {
        let want = exchange(redis, &input);
        let got = exchange(pal, &input);
        if want != got {
            bad.push(format!(
                "{name}: input {}\n    redis:    {} closed={}\n    palisade: {} closed={}",
                cut(&input),
                cut(&want.0),
                want.1,
                cut(&got.0),
                got.1
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{} {what} cases differ from redis-server:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// Before AUTH, a request may have at most 10 arguments of at most 16 KiB, as in Redis; the
/// limits lift from the request after a successful AUTH, even within one write.
#[test]
fn unauthenticated_limits_match_redis() {
    let redis = RedisServer::start_with(&["--requirepass", "pw"]);
    let pal = Server::start_with(&["--requirepass", "pw"]);
    let auth = encode(&["AUTH", "pw"]);
    let eleven = encode(&["EXISTS", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10"]);
    let big = vec![b'b'; 20_000];
    let echo_big = encode(&[&b"ECHO"[..], &big]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("11 arguments", b"*11\r\n".to_vec()),
        ("10 arguments", b"*10\r\n".to_vec()),
        (
            "a 16385-byte argument",
            b"*2\r\n$4\r\nECHO\r\n$16385\r\n".to_vec(),
        ),
        (
            "a 16384-byte argument",
            b"*2\r\n$4\r\nECHO\r\n$16384\r\n".to_vec(),
        ),
        (
            "11 arguments after AUTH",
            [&auth[..], &eleven, QUIT].concat(),
        ),
        (
            "a big argument after AUTH",
            [&auth[..], &echo_big, QUIT].concat(),
        ),
        (
            "11 arguments after a failed AUTH",
            [&encode(&["AUTH", "no"])[..], &eleven].concat(),
        ),
    ];
    compare_on(
        redis.port(),
        pal.port(),
        "unauthenticated",
        cases.into_iter(),
    );
}

/// Redis's inline parser handles quotes and escapes (sdssplitargs).
#[test]
fn quoted_inline_commands_match_redis() {
    let redis = RedisServer::start();
    let pal = Server::start();
    let input: &[u8] = b"SET q \"hello world\"\r\nGET q\r\nSET q 'single quoted'\r\nGET q\r\nECHO \"a\\x41\\n\"\r\nECHO \"\"\r\nQUIT\r\n";
    let want = exchange(redis.port(), input);
    let got = exchange(pal.port(), input);
    assert_eq!(
        (show(&got.0), got.1),
        (show(&want.0), want.1),
        "quoted inline commands (left: palisade, right: redis)"
    );
}

/// An inline line longer than 64 KiB without a newline is refused, as in Redis.
#[test]
fn too_big_inline_request_matches_redis() {
    let redis = RedisServer::start();
    let pal = Server::start();
    let input = vec![b'a'; 70 * 1024];
    let want = exchange(redis.port(), &input);
    let got = exchange(pal.port(), &input);
    assert_eq!(
        (show(&got.0), got.1),
        (show(&want.0), want.1),
        "left: palisade, right: redis"
    );
}

/// State that must survive every bad client, checked after each case.
struct Witness {
    token: i64,
}

impl Witness {
    fn plant(c: &mut Conn) -> Witness {
        assert_reply(&c.c("SET keep v"), b"+OK\r\n", "SET keep");
        let token = lock(c, "wlock", "w", 600_000).expect("LOCK wlock");
        assert_reply(
            &c.cmd(&["FENCEDSET", "fenced", "fv", &token.to_string()]),
            b"+OK\r\n",
            "FENCEDSET",
        );
        Witness { token }
    }

    #[track_caller]
    fn check(&self, srv: &mut Server, observer: &mut Conn, case: &str) {
        srv.assert_alive();
        assert_reply(
            &observer.c("PING"),
            b"+PONG\r\n",
            &format!("observer PING after {case}"),
        );
        let mut c = srv.conn();
        assert_reply(
            &c.c("GET keep"),
            b"$1\r\nv\r\n",
            &format!("GET keep after {case}"),
        );
        assert_reply(
            &c.c("GET fenced"),
            b"$2\r\nfv\r\n",
            &format!("GET fenced after {case}"),
        );
        assert_reply(
            &c.c("LOCK wlock w PX 600000"),
            &int_bytes(self.token),
            &format!("lock after {case}"),
        );
    }
}

/// Sends `input` and requires a `-ERR Protocol error: ...` reply followed by a close.
#[track_caller]
fn expect_protocol_error(port: u16, input: &[u8], case: &str) -> Vec<u8> {
    let mut c = Conn::connect(port);
    let _ = c.try_send_raw(input);
    let (out, closed) = c.read_until_close(Duration::from_secs(5));
    assert!(
        out.starts_with(b"-ERR Protocol error: ") && out.ends_with(b"\r\n"),
        "{case}: expected a -ERR Protocol error reply, got {}",
        show(&out)
    );
    assert!(
        closed,
        "{case}: the connection must be closed after a protocol error"
    );
    out
}

#[test]
fn bad_clients_do_not_hurt_the_server_or_its_data() {
    let mut srv = Server::start_with(&[
        "--proto-max-bulk-len",
        "1024",
        "--max-multibulk-len",
        "1000",
    ]);
    let mut observer = srv.conn();
    let w = Witness::plant(&mut observer);
    let port = srv.port();

    // Oversized bulk (limit 1024): refused; exactly at the limit: accepted.
    let out = expect_protocol_error(
        port,
        b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$1025\r\n",
        "bulk over the limit",
    );
    assert_reply(
        &out,
        b"-ERR Protocol error: invalid bulk length\r\n",
        "bulk over the limit",
    );
    w.check(&mut srv, &mut observer, "oversized bulk");
    let max = vec![b'x'; 1024];
    assert_reply(
        &observer.cmd(&[&b"SET"[..], b"big", &max]),
        b"+OK\r\n",
        "bulk at the limit",
    );
    assert_eq!(
        as_bulk(&observer.c("GET big")),
        Some(max),
        "the 1024-byte value"
    );

    // Negative bulk length.
    let out = expect_protocol_error(port, b"*2\r\n$3\r\nGET\r\n$-5\r\n", "negative bulk length");
    assert_reply(
        &out,
        b"-ERR Protocol error: invalid bulk length\r\n",
        "negative bulk length",
    );
    w.check(&mut srv, &mut observer, "negative bulk length");

    // Huge multibulk count (limit 1000), and absurd ones.
    for input in [
        &b"*1001\r\n"[..],
        b"*2147483648\r\n",
        b"*9223372036854775807\r\n",
    ] {
        let out = expect_protocol_error(port, input, "huge multibulk");
        assert_reply(
            &out,
            b"-ERR Protocol error: invalid multibulk length\r\n",
            &format!("multibulk {}", show(input)),
        );
        w.check(&mut srv, &mut observer, "huge multibulk");
    }
    // At the limit the command is parsed (and gets an ordinary error reply).
    let mut big_cmd = vec![b"EXISTS".to_vec()];
    big_cmd.extend((1..1000).map(|i| format!("k{i}").into_bytes()));
    assert_reply(&observer.cmd(&big_cmd), b":0\r\n", "multibulk at the limit");

    // Garbage: pseudo-random bytes after a '*', and raw binary junk (which Redis would
    // read as inline commands). The client then hangs up; replies are not checked, since
    // a server may reset a connection it closes with input still unread.
    for seed in 1..=20u64 {
        let mut junk = b"*".to_vec();
        junk.extend(pseudo_random_bytes(seed, 4096));
        junk.extend(b"\r\n");
        blast(port, &junk);
        blast(port, &pseudo_random_bytes(seed * 7919, 4096));
        w.check(&mut srv, &mut observer, &format!("garbage seed {seed}"));
    }
    expect_protocol_error(port, b"*\x01\xff\xfe\r\n", "binary multibulk length");
    expect_protocol_error(
        port,
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n:1\r\n",
        "integer inside a command",
    );

    // A half-written frame, then the client disconnects: nothing is applied.
    {
        let mut c = Conn::connect(port);
        c.send_raw(b"*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$5\r\nhel");
        drop(c);
    }
    {
        let mut c = Conn::connect(port);
        c.send_raw(b"*3\r\n$3\r\nSET\r\n$5\r\nhalf2\r\n$1000\r\n0123456789");
        c.shutdown_write();
        let (out, _) = c.read_until_close(Duration::from_secs(5));
        assert_reply(&out, b"", "no reply to an incomplete frame");
    }
    thread::sleep(Duration::from_millis(100));
    assert_reply(
        &observer.c("EXISTS half half2"),
        b":0\r\n",
        "half-written SETs were not applied",
    );
    w.check(&mut srv, &mut observer, "half-written frames");

    // A client that pipelines many commands and disconnects without reading replies.
    {
        let mut c = Conn::connect(port);
        let mut data = Vec::new();
        for i in 0..2000 {
            data.extend(encode(&["SET", &format!("gone:{i}"), "x"]));
            data.extend(encode(&["GET", "big"]));
        }
        let _ = c.try_send_raw(&data);
    }
    w.check(
        &mut srv,
        &mut observer,
        "a client that leaves without reading",
    );

    // Many bad clients at once.
    let threads: Vec<_> = (0..32u64)
        .map(|i| {
            thread::spawn(move || {
                let mut input = b"*1\r\n$".to_vec();
                input.extend(pseudo_random_bytes(1000 + i, 512).iter().map(|b| b | 0x80));
                input.extend(b"\r\n");
                exchange(port, &input)
            })
        })
        .collect();
    for t in threads {
        let (out, closed) = t.join().expect("bad client thread");
        assert!(
            out.starts_with(b"-ERR Protocol error: "),
            "concurrent garbage got {}",
            show(&out)
        );
        assert!(closed, "concurrent garbage connection left open");
    }
    w.check(&mut srv, &mut observer, "32 concurrent bad clients");
}

/// With default limits, lengths past the 512 MiB bulk limit and the 1,048,576 multibulk
/// limit are refused before any allocation.
#[test]
fn default_limits() {
    let mut srv = Server::start();
    let port = srv.port();
    let out = expect_protocol_error(port, b"*1048577\r\n", "multibulk above the default limit");
    assert_reply(
        &out,
        b"-ERR Protocol error: invalid multibulk length\r\n",
        "default multibulk limit",
    );
    let out = expect_protocol_error(
        port,
        b"*1\r\n$536870913\r\n",
        "bulk above the default limit",
    );
    assert_reply(
        &out,
        b"-ERR Protocol error: invalid bulk length\r\n",
        "default bulk limit",
    );
    // A declared 512 MiB bulk that never arrives costs nothing and is dropped on close.
    {
        let mut c = Conn::connect(port);
        c.send_raw(b"*2\r\n$4\r\nECHO\r\n$536870912\r\nabc");
    }
    srv.assert_alive();
}

/// A client whose query buffer passes --client-query-buffer-limit is disconnected.
#[test]
fn query_buffer_limit_disconnects() {
    let mut srv = Server::start_with(&[
        "--client-query-buffer-limit",
        "1048576",
        "--proto-max-bulk-len",
        "8388608",
    ]);
    let mut c = srv.conn();
    let mut data = b"*3\r\n$3\r\nSET\r\n$1\r\nq\r\n$4194304\r\n".to_vec();
    data.extend(vec![b'z'; 2 * 1024 * 1024]);
    let _ = c.try_send_raw(&data);
    let (out, closed) = c.read_until_close(Duration::from_secs(10));
    assert!(
        closed,
        "a client over the query buffer limit must be disconnected; got {}",
        show(&out)
    );
    // Redis closes such a client without a reply.
    assert!(
        out.is_empty(),
        "nothing may precede the close: {}",
        show(&out[..out.len().min(200)])
    );
    srv.assert_alive();
    assert_reply(
        &srv.conn().c("EXISTS q"),
        b":0\r\n",
        "the oversized SET was not applied",
    );
}

/// 100 commands in one write: replies arrive in order, each exactly right, with reads and
/// writes of the same keys interleaved (so reads must see the writes before them).
#[test]
fn pipelining_100_commands_in_one_write() {
    let srv = Server::start();
    for proto in [2u8, 3] {
        let mut c = srv.conn();
        if proto == 3 {
            assert!(c.c("HELLO 3").starts_with(b"%"));
        }
        let mut input = Vec::new();
        let mut want: Vec<Vec<u8>> = Vec::new();
        for i in 0..20 {
            let k = format!("p{proto}:{i}");
            input.extend(encode(&["GET", &k]));
            want.push(nil(proto).to_vec());
            input.extend(encode(&["SET", &k, &i.to_string()]));
            want.push(b"+OK\r\n".to_vec());
            input.extend(encode(&["INCR", &k]));
            want.push(int_bytes(i + 1));
            input.extend(encode(&["GET", &k]));
            want.push(bulk_bytes((i + 1).to_string().as_bytes()));
            input.extend(encode(&["DEL", &k, &k]));
            want.push(b":1\r\n".to_vec());
        }
        assert_eq!(want.len(), 100);
        c.send_raw(&input); // one write
        for (i, w) in want.iter().enumerate() {
            let r = c.read_reply();
            assert_reply(&r, w, &format!("RESP{proto} pipelined reply {i}"));
        }
    }

    // Lock commands pipelined: tokens in order, contention resolved in order.
    let mut c = srv.conn();
    let mut input = Vec::new();
    for i in 0..25 {
        input.extend(encode(&["LOCK", "pl", "a", "PX", "60000"]));
        input.extend(encode(&["LOCK", "pl", "b", "PX", "60000"]));
        input.extend(encode(&["UNLOCK", "pl", "a"]));
        input.extend(encode(&["LOCKINFO", &format!("none{i}")]));
    }
    c.send_raw(&input);
    let mut last = 0;
    for i in 0..25 {
        let t = token_or_nil(&c.read_reply(), 2, "LOCK").expect("LOCK a");
        assert!(t > last, "round {i}: token {t} after {last}");
        last = t;
        assert_reply(
            &c.read_reply(),
            b"$-1\r\n",
            &format!("round {i}: LOCK b while a holds"),
        );
        assert_reply(&c.read_reply(), b":1\r\n", &format!("round {i}: UNLOCK a"));
        assert_reply(&c.read_reply(), b"$-1\r\n", &format!("round {i}: LOCKINFO"));
    }
}
