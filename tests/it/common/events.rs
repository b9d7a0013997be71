//! Keyspace notifications compared with redis-server's: the same commands run on both
//! servers with the same `notify-keyspace-events` classes, and what a `__key*` subscriber
//! receives must be byte-identical, command by command.

use super::{show, words, Conn, RedisServer, Server};

/// The channel of the marker published after each command: it splits a transcript into
/// the events of each command, in order (both servers deliver a PUBLISH after the events
/// of the writes before it).
const MARK: &str = "notify-test-mark";

/// Splits each line into arguments (see [`words`]); the word `""` stands for an empty
/// argument.
pub fn lines(commands: &[&str]) -> Vec<Vec<Vec<u8>>> {
    let arg = |w: Vec<u8>| if w == b"\"\"" { Vec::new() } else { w };
    commands
        .iter()
        .map(|l| words(l).into_iter().map(arg).collect())
        .collect()
}

/// Runs `commands` with `classes` on the server at `port`, then `settle` (e.g. a wait for
/// an expiry), and returns what a subscriber to `__key*` received: each message's raw bytes
/// shown, after a `> command` line naming the command that produced it. Palisade's lock
/// events (`lock_...`) are published whatever the classes, are not Redis's, and are left
/// out.
pub fn event_transcript(
    port: u16,
    proto: u8,
    classes: &str,
    commands: &[Vec<Vec<u8>>],
    settle: fn(&mut Conn),
) -> Vec<String> {
    let mut c = Conn::connect(port);
    super::assert_reply(
        &c.cmd(&["CONFIG", "SET", "notify-keyspace-events", classes]),
        b"+OK\r\n",
        "CONFIG SET notify-keyspace-events",
    );
    let mut sub = Conn::connect(port);
    if proto == 3 {
        sub.c("HELLO 3");
    }
    sub.c("PSUBSCRIBE __key*");
    sub.cmd(&["SUBSCRIBE", MARK]);
    for (i, args) in commands.iter().enumerate() {
        c.cmd(args);
        c.cmd(&["PUBLISH", MARK, i.to_string().as_str()]);
    }
    settle(&mut c);
    c.cmd(&["PUBLISH", MARK, "done"]);
    let mut got = Vec::new();
    loop {
        let m = show(&sub.read_reply());
        if m.contains(MARK) {
            if m.contains("done") {
                break;
            }
            // The marker's message is the index of the command whose events came before.
            let i: usize = m
                .rsplit("\\r\\n")
                .nth(1)
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("a marker without an index: {m}"));
            let args: Vec<String> = commands[i]
                .iter()
                .map(|a| a.escape_ascii().to_string())
                .collect();
            got.push(format!("> {}", args.join(" ")));
        } else if !m.contains("lock_") {
            got.push(m);
        }
    }
    got
}

/// Runs `commands` on a fresh redis-server and a fresh Palisade, once for each of
/// `classes` (flushing both between runs), in RESP `proto`, and asserts that the
/// transcripts ([`event_transcript`]) are identical.
pub fn compare_events(
    proto: u8,
    classes: &[&str],
    commands: &[Vec<Vec<u8>>],
    settle: fn(&mut Conn),
) {
    let redis = RedisServer::start();
    let pal = Server::start();
    for classes in classes {
        let mut transcripts = Vec::new();
        for port in [redis.port(), pal.port()] {
            Conn::connect(port).c("FLUSHALL");
            transcripts.push(event_transcript(port, proto, classes, commands, settle));
        }
        let (want, got) = (transcripts[0].join("\n"), transcripts[1].join("\n"));
        assert!(
            got == want,
            "RESP{proto} notifications with '{classes}' differ from redis-server's\n\
             --- redis-server:\n{want}\n--- palisade:\n{got}"
        );
    }
}
