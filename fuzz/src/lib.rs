//! Helpers shared by the fuzz targets: a reference glob matcher that is slow but plainly
//! right, and a thread with a server thread's stack to run decoders on.

use std::panic::{self, AssertUnwindSafe};
use std::sync::{mpsc, Mutex, OnceLock};

/// One element of a glob pattern, tokenized the way Redis 7's `stringmatchlen` reads it.
#[derive(Debug)]
enum Token {
    /// `*`: any run of bytes, the empty one included.
    Star,
    /// `?`: any one byte.
    Any,
    /// A byte class (`[...]`): which of the 256 bytes it accepts.
    Class(Box<[bool; 256]>),
    /// A literal byte (plain, or escaped with `\`).
    Lit(u8),
}

/// Splits `pat` into tokens. Redis's quirks, each checked against redis-server 7.0.15 (see
/// [`REDIS_OBSERVED`]): in a class, `x-y` is a range whenever two more bytes follow `x`,
/// even when `y` is `]` (so `[a-]` is the range `]`..`a`, and the class is unterminated); a
/// reversed range is swapped; an unterminated class ends at the end of the pattern; a `\` as
/// the last byte of the pattern is a literal `\`.
fn tokenize(pat: &[u8]) -> Vec<Token> {
    let mut out = Vec::new();
    let mut p = 0;
    while p < pat.len() {
        let left = pat.len() - p;
        match pat[p] {
            b'*' => out.push(Token::Star),
            b'?' => out.push(Token::Any),
            b'\\' if left >= 2 => {
                p += 1;
                out.push(Token::Lit(pat[p]));
            }
            b'[' => {
                p += 1;
                let negate = pat.get(p) == Some(&b'^');
                if negate {
                    p += 1;
                }
                let mut set = Box::new([false; 256]);
                while p < pat.len() && pat[p] != b']' {
                    let left = pat.len() - p;
                    if pat[p] == b'\\' && left >= 2 {
                        p += 1;
                        set[pat[p] as usize] = true;
                    } else if left >= 3 && pat[p + 1] == b'-' {
                        let (lo, hi) = (pat[p].min(pat[p + 2]), pat[p].max(pat[p + 2]));
                        for c in lo..=hi {
                            set[c as usize] = true;
                        }
                        p += 2;
                    } else {
                        set[pat[p] as usize] = true;
                    }
                    p += 1;
                }
                if negate {
                    set.iter_mut().for_each(|b| *b = !*b);
                }
                out.push(Token::Class(set));
            }
            c => out.push(Token::Lit(c)),
        }
        p += 1;
    }
    out
}

/// True when `s` matches the Redis glob `pat`, by the textbook definition over tokens,
/// memoized on (token, position). One Redis quirk sits outside the textbook: an empty
/// string matches only the empty pattern (`stringmatchlen` never enters its loop, so even
/// `*` does not match it; KEYS and SCAN special-case a lone `*` before matching).
pub fn reference_matches(pat: &[u8], s: &[u8]) -> bool {
    if s.is_empty() {
        return pat.is_empty();
    }
    let toks = tokenize(pat);
    // memo[t][i]: does toks[t..] match s[i..]? None while unknown.
    let mut memo = vec![vec![None; s.len() + 1]; toks.len() + 1];
    go(&toks, s, 0, 0, &mut memo)
}

fn go(toks: &[Token], s: &[u8], t: usize, i: usize, memo: &mut [Vec<Option<bool>>]) -> bool {
    if let Some(known) = memo[t][i] {
        return known;
    }
    let here = s.get(i).copied();
    let answer = match (toks.get(t), here) {
        (None, _) => i == s.len(),
        (Some(Token::Star), _) => {
            go(toks, s, t + 1, i, memo) || (here.is_some() && go(toks, s, t, i + 1, memo))
        }
        (Some(_), None) => false,
        (Some(Token::Any), Some(_)) => go(toks, s, t + 1, i + 1, memo),
        (Some(Token::Class(set)), Some(c)) => set[c as usize] && go(toks, s, t + 1, i + 1, memo),
        (Some(Token::Lit(l)), Some(c)) => *l == c && go(toks, s, t + 1, i + 1, memo),
    };
    memo[t][i] = Some(answer);
    answer
}

/// Answers of redis-server 7.0.15 (`SCAN 0 MATCH pat` over the keys "", "b", "]", "^", "-"),
/// which keep the reference honest: [`check_reference`] asserts it agrees with all of them.
pub const REDIS_OBSERVED: &[(&[u8], &[u8], bool)] = &[
    (b"**", b"", false),
    (b"**", b"b", true),
    (b"*?", b"-", true),
    (b"[a-]", b"^", true),
    (b"[a-]", b"]", true),
    (b"[a-]", b"-", false),
    (b"[a-]", b"b", false),
    (b"[a-]]", b"]", true),
    (b"[a-]]", b"-", false),
    (b"[^", b"b", true),
    (b"[^", b"", false),
    (b"[", b"", false),
    (b"[", b"b", false),
    (b"[]", b"]", false),
    (b"[]]", b"]", false),
    (b"[b-", b"b", true),
    (b"[b-", b"-", true),
    (b"[b-", b"^", false),
    (b"\\", b"b", false),
];

/// Panics if the reference disagrees with an observed Redis answer.
pub fn check_reference() {
    for &(pat, s, want) in REDIS_OBSERVED {
        assert_eq!(
            reference_matches(pat, s),
            want,
            "reference vs redis-server: pattern {:?}, string {:?}",
            pat.escape_ascii().to_string(),
            s.escape_ascii().to_string()
        );
    }
}

/// The stack of a tokio worker thread (tokio's default), where the server decodes peer
/// frames and snapshot images and applies scripts.
pub const SERVER_STACK: usize = 2 * 1024 * 1024;

/// One input for the worker, and where its outcome goes.
type Job = (Vec<u8>, fn(&[u8]), mpsc::Sender<std::thread::Result<()>>);

/// Runs `check(data)` on a thread with a server thread's stack, so that deep recursion
/// overflows here when it would in the server (libFuzzer's own thread has 8 MiB). A panic is
/// raised again on the caller's thread. The thread is started once and reused: a new thread
/// per input would cost more than most inputs.
pub fn on_server_stack(data: &[u8], check: fn(&[u8])) {
    static WORKER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    let worker = WORKER.get_or_init(|| {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("server-stack".into())
            .stack_size(SERVER_STACK)
            .spawn(move || {
                for (input, check, done) in queue {
                    let outcome = panic::catch_unwind(AssertUnwindSafe(|| check(&input)));
                    let _ = done.send(outcome);
                }
            })
            .expect("start the server-stack thread");
        Mutex::new(jobs)
    });
    let (done, outcome) = mpsc::channel();
    let sent = worker
        .lock()
        .expect("the worker queue")
        .send((data.to_vec(), check, done));
    sent.expect("the server-stack thread is running");
    if let Err(panic) = outcome.recv().expect("the server-stack thread answers") {
        panic::resume_unwind(panic);
    }
}
