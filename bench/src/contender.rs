//! One contender of the contention workload: a connection to one member, and the loop of
//! lock cycles it runs on its hot key until the deadline, waiting by poll or by queue.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis_protocol::resp2::types::OwnedFrame;
use tokio::time::Instant;

use crate::client::{is_error, Client};
use crate::contention::{ContentionArgs, Method};
use crate::grant::Grant;

/// One client of one run, from its connection to its last release.
pub struct Contender {
    /// Client number.
    pub id: usize,
    /// The member it connects to.
    pub addr: String,
    /// Its hot key's number.
    pub key: usize,
    /// The key's name.
    pub key_name: String,
    /// How it waits.
    pub method: Method,
    /// The workload's options.
    pub opts: ContentionArgs,
    /// When the run started: the zero of [`Grant`] times.
    pub start: Instant,
    /// When the warm-up ends: cycles that start from here on are timed.
    pub measure_from: Instant,
    /// No cycle starts after this, and only those that end before it are timed.
    pub deadline: Instant,
    /// Timed cycles of all clients, for the progress line.
    pub done: Arc<AtomicU64>,
}

/// What one client reports at the end of a run.
pub struct Outcome {
    /// Acquire latency of the timed cycles, µs.
    pub hist: Histogram<u64>,
    /// Timed cycles (= this client's grants in the timed window).
    pub cycles: u64,
    /// LOCK commands sent in the timed cycles.
    pub lock_commands: u64,
    /// Acquires that ran out of wait (whole run).
    pub timeouts: u64,
    /// Error replies (whole run).
    pub errors: u64,
    /// FENCEDSETs refused with FENCED although the UNLOCK then released (whole run).
    pub fenced: u64,
    /// UNLOCKs that found the lock no longer held by this owner (whole run).
    pub lost: u64,
    /// Every grant, also in the warm-up and after the deadline.
    pub grants: Vec<Grant>,
}

fn ns_since(start: Instant, t: Instant) -> u64 {
    t.duration_since(start).as_nanos() as u64
}

impl Contender {
    /// Acquires the lock by the method; the token, or None after a timeout, an error, or
    /// (poll) the deadline. Counts the LOCK commands sent into `sent`.
    async fn acquire(
        &self,
        c: &mut Client,
        owner: &str,
        rng: &mut StdRng,
        out: &mut Outcome,
        sent: &mut u64,
    ) -> anyhow::Result<Option<u64>> {
        let (key, lease) = (self.key_name.as_bytes(), self.opts.lease_ms.to_string());
        let started = Instant::now();
        loop {
            *sent += 1;
            let reply = match self.method {
                Method::Poll => {
                    c.call(&[b"LOCK", key, owner.as_bytes(), b"PX", lease.as_bytes()])
                        .await?
                }
                Method::Queue => {
                    let wait = self.opts.wait_ms.to_string();
                    let argv: [&[u8]; 7] = [
                        b"LOCK",
                        key,
                        owner.as_bytes(),
                        b"PX",
                        lease.as_bytes(),
                        b"WAIT",
                        wait.as_bytes(),
                    ];
                    c.call(&argv).await?
                }
            };
            match reply {
                OwnedFrame::Integer(t) => return Ok(Some(t as u64)),
                OwnedFrame::Null if self.method == Method::Queue => {
                    out.timeouts += 1;
                    return Ok(None);
                }
                OwnedFrame::Null => {}
                r if is_error(&r) => {
                    out.errors += 1;
                    // An election, say: back off instead of spinning on errors.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    if self.method == Method::Queue {
                        return Ok(None);
                    }
                }
                other => bail!("LOCK replied {other:?}"),
            }
            let now = Instant::now();
            if now >= self.deadline {
                return Ok(None);
            }
            let wait = self.opts.wait_ms;
            if wait > 0 && now >= started + Duration::from_millis(wait) {
                out.timeouts += 1;
                return Ok(None);
            }
            let jitter = rng.gen_range(0..=self.opts.retry_jitter_ms * 1000);
            let nap = Duration::from_micros(self.opts.retry_ms * 1000 + jitter);
            tokio::time::sleep(nap).await;
        }
    }

    /// The client's loop: cycles until the deadline.
    pub async fn run(self) -> anyhow::Result<Outcome> {
        let mut c = Client::connect(&self.addr)
            .await
            .with_context(|| format!("connecting to {}", self.addr))?;
        let mut rng = StdRng::from_entropy();
        let mut out = Outcome {
            hist: Histogram::new_with_bounds(1, 60_000_000, 3)?,
            cycles: 0,
            lock_commands: 0,
            timeouts: 0,
            errors: 0,
            fenced: 0,
            lost: 0,
            grants: Vec::new(),
        };
        let resource = format!("res:{}", self.key_name);
        let mut n = 0u64;
        while Instant::now() < self.deadline {
            n += 1;
            let owner = format!("c{}-{n}", self.id);
            let started = Instant::now();
            let mut sent = 0;
            let Some(token) = self
                .acquire(&mut c, &owner, &mut rng, &mut out, &mut sent)
                .await?
            else {
                continue;
            };
            let granted = Instant::now();
            let t = token.to_string();
            let write = c
                .call(&[
                    b"FENCEDSET",
                    resource.as_bytes(),
                    owner.as_bytes(),
                    t.as_bytes(),
                ])
                .await?;
            let fenced = matches!(&write, OwnedFrame::Error(e) if e.starts_with("FENCED"));
            if is_error(&write) && !fenced {
                out.errors += 1;
            }
            if self.opts.hold_ms > 0 {
                tokio::time::sleep(Duration::from_millis(self.opts.hold_ms)).await;
            }
            let release = Instant::now();
            let released = match c
                .call(&[b"UNLOCK", self.key_name.as_bytes(), owner.as_bytes()])
                .await?
            {
                OwnedFrame::Integer(1) => true,
                OwnedFrame::Integer(_) => {
                    out.lost += 1;
                    false
                }
                r => {
                    out.errors += is_error(&r) as u64;
                    false
                }
            };
            // A holder whose lease ran out is rightly fenced off by the next one; a holder
            // that still held the lock at its UNLOCK must never be.
            out.fenced += (fenced && released) as u64;
            out.grants.push(Grant {
                key: self.key,
                client: self.id,
                token,
                granted_ns: ns_since(self.start, granted),
                released_ns: released.then(|| ns_since(self.start, release)),
            });
            if started >= self.measure_from && Instant::now() <= self.deadline {
                out.cycles += 1;
                out.lock_commands += sent;
                out.hist
                    .saturating_record(granted.duration_since(started).as_micros() as u64);
                self.done.fetch_add(1, Ordering::Relaxed);
            }
            if self.opts.pause_ms > 0 {
                tokio::time::sleep(Duration::from_millis(self.opts.pause_ms)).await;
            }
        }
        Ok(out)
    }
}
