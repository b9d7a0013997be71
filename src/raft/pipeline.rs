//! Pipelined AppendEntries: openraft's replication hands a stream of requests to
//! `stream_append`, and each gets its own connection on which requests go out as soon as
//! openraft produces them, without waiting for the previous answer. The receiver feeds them
//! to its Raft in order (`Raft::stream_append`) and answers each, in order, once its log has
//! synced it. So an entry never waits for the round trip of the one before it, and a
//! follower's one fsync can cover several appends.
//!
//! Timeouts: while answers are owed, one must arrive within the RPC's soft TTL of the last
//! one (or of the first request owed); an idle stream waits without limit.
//!
//! CPU: every request openraft has ready goes out with one socket write, and the writer wakes
//! the reader only when a request is sent on an idle stream (the reader must start its
//! timer then); while answers are owed, the reader is already waiting for the next one.
//!
//! Reuse: openraft sends every heartbeat as a stream of one request, so a stream per
//! connection would pay a connect and a handshake per heartbeat. A stream that ends cleanly
//! (its input finished, every request answered, nothing failed or timed out) hands its
//! connection back to its client ([`IdleStream`]), and the client's next stream continues on
//! it: the receiver serves one append stream per connection for as long as it stays open, and
//! one stream after another on it is the same sequence of appends as one longer stream. A
//! stream that failed, was dropped early or still owes an answer closes its connection, so a
//! late answer is never taken for a later request's.
//!
//! Coalescing: when a write commits, openraft sends each follower an append without entries
//! whose only job is to carry the new commit index, and the next write's append follows it
//! soon after. The writer holds such a commit-only append for up to [`COMMIT_HOLD`] and drops
//! it when the next request of the stream covers it ([`covers`]: same vote and `prev_log_id`,
//! a commit at least as high); otherwise it goes out when the hold ends or the input does
//! (a heartbeat is a stream of one request, so it is never held). openraft does not pair
//! answers with requests: the covering request's answer drains the dropped one from its
//! queue of requests in flight, and the reader never waits for an answer to a request that
//! was not sent.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{SplitSink, SplitStream};
use futures::{FutureExt, SinkExt, Stream, StreamExt};
use openraft::raft::{AppendEntriesRequest, StreamAppendResult};
use tokio::sync::watch;
use tokio::time::Instant;

use super::network::{
    network_err, remote_failed, unreachable, PeerClient, PeerContext, RpcErr, CONNECT_TIMEOUT,
};
use super::protocol::{PeerConn, PeerError, PeerFramed, PeerRequest, PeerResponse};
use super::{NodeId, TypeConfig};

/// Requests sent and answers received, shared by the writer and the reader.
#[derive(Debug, Default)]
struct Counts {
    /// Requests handed to the connection (counted before each is sent).
    sent: AtomicU64,
    /// Answers the reader has taken.
    received: AtomicU64,
}

/// How the writer ended, for the reader; also changed (to wake the reader) when a request
/// goes out on a stream that owed nothing.
#[derive(Debug, Default, Clone)]
struct Progress {
    /// The input has ended: once every answer is in, so does the output.
    done: bool,
    /// The writer stopped on an error.
    failed: Option<String>,
}

/// The connection of the last append stream that ended cleanly, kept for the client's next
/// stream (already in stream mode on the receiver: no new `OpenStream`).
pub(super) type IdleStream = Arc<Mutex<Option<PeerFramed>>>;

/// Where the writer leaves its half of the connection when its input ended cleanly.
type ReturnedSink = Arc<Mutex<Option<SplitSink<PeerFramed, Bytes>>>>;

/// Takes the idle stream connection out of `slot`, unless the peer closed it or sent
/// anything on it while it was idle (out of step: dropped).
fn take_idle(slot: &IdleStream) -> Option<PeerFramed> {
    let mut framed = slot.lock().ok()?.take()?;
    // Anything but "nothing yet" is the end: a close, an error, or an unsolicited frame.
    framed.next().now_or_never().is_none().then_some(framed)
}

/// Drops the idle stream connection (fault injection cut the link).
fn drop_idle(slot: &IdleStream) {
    if let Ok(mut idle) = slot.lock() {
        idle.take();
    }
}

/// Aborts the writer task when the output stream is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The reading half and its bookkeeping.
struct Reader {
    source: SplitStream<PeerFramed>,
    progress: watch::Receiver<Progress>,
    counts: Arc<Counts>,
    writer_gone: bool,
    received: u64,
    /// Since when an answer has been owed without one arriving.
    owed_since: Option<Instant>,
    ttl: Duration,
    finished: bool,
    /// The writer's half of the connection once its input ended cleanly.
    sink: ReturnedSink,
    /// Where a cleanly ended stream leaves its connection for the client's next stream.
    idle: IdleStream,
    _writer: AbortOnDrop,
}

type Item = Result<StreamAppendResult<TypeConfig>, RpcErr>;

/// The wait before the first retry of a failed open; it doubles with each failure in a row.
const OPEN_BACKOFF_FIRST: Duration = Duration::from_millis(10);
/// The longest wait between opens: well inside the election timeout (500 ms), so that a
/// follower back from a partition hears from the leader before it would start a (pre-)vote.
const OPEN_BACKOFF_MAX: Duration = Duration::from_millis(250);

/// How long to wait after `failures` failed opens in a row.
fn open_backoff(failures: u32) -> Duration {
    match failures {
        0 => Duration::ZERO,
        n => OPEN_BACKOFF_FIRST
            .saturating_mul(1 << (n - 1).min(16))
            .min(OPEN_BACKOFF_MAX),
    }
}

/// Opens an append stream to `client`'s target and starts sending `input` on it.
///
/// After a failed open the next one waits (10 ms, doubling, at most 250 ms). openraft backs
/// off only inside a request stream it has handed over, which a failed open never polls: a
/// refused connection or a cut link would otherwise be retried at once, in a loop.
pub(super) async fn open<S>(
    client: &mut PeerClient,
    input: S,
    ttl: Duration,
) -> Result<impl Stream<Item = Item> + Send + 'static, RpcErr>
where
    S: Stream<Item = AppendEntriesRequest<TypeConfig>> + Send + Unpin + 'static,
{
    let (failures, last) = client.open_failures;
    if let Some(last) = last {
        tokio::time::sleep_until(last + open_backoff(failures)).await;
    }
    let opened = try_open(client, input, ttl).await;
    client.open_failures = match opened {
        Ok(_) => (0, None),
        Err(_) => (failures.saturating_add(1), Some(Instant::now())),
    };
    opened
}

async fn try_open<S>(
    client: &PeerClient,
    input: S,
    ttl: Duration,
) -> Result<impl Stream<Item = Item> + Send + 'static, RpcErr>
where
    S: Stream<Item = AppendEntriesRequest<TypeConfig>> + Send + Unpin + 'static,
{
    if let Some(e) = client.cut() {
        drop_idle(&client.idle_stream);
        return Err(unreachable(&e));
    }
    let framed = match take_idle(&client.idle_stream) {
        Some(framed) => framed,
        None => connect_stream(client, ttl).await?,
    };
    let (sink, source) = framed.split();
    let (tx, progress) = watch::channel(Progress::default());
    let counts = Arc::new(Counts::default());
    let returned: ReturnedSink = Arc::default();
    let writer = tokio::spawn(write_loop(
        input,
        sink,
        client.ctx.clone(),
        client.target,
        (tx, counts.clone(), returned.clone()),
    ));
    let reader = Reader {
        source,
        progress,
        counts,
        writer_gone: false,
        received: 0,
        owed_since: None,
        ttl,
        finished: false,
        sink: returned,
        idle: client.idle_stream.clone(),
        _writer: AbortOnDrop(writer),
    };
    Ok(futures::stream::unfold(reader, next_item))
}

/// Connects to the client's target and turns the connection into an append stream.
async fn connect_stream(client: &PeerClient, ttl: Duration) -> Result<PeerFramed, RpcErr> {
    let mut conn = PeerConn::connect(
        &client.addr,
        CONNECT_TIMEOUT.min(ttl),
        &client.ctx,
        client.target,
    )
    .await
    .map_err(|e| unreachable(&e))?;
    let open = client.ctx.envelope(client.target, PeerRequest::OpenStream);
    match conn.call(&open, ttl).await {
        Ok(PeerResponse::StreamOpened) => Ok(conn.into_framed()),
        Ok(_) => Err(network_err(&PeerError::Io(
            "unexpected answer to an append stream".into(),
        ))),
        Err(e) => Err(network_err(&e)),
    }
}

/// How long the writer holds a commit-only append (one without entries, sent by openraft
/// only to carry a new commit index) in the hope that the next request of the stream makes
/// it needless. Two milliseconds: longer than a client of the leader takes to send its next
/// write after the reply to its last one (about 1.1 ms per step of a lock cycle at one client
/// on the 2-core benchmark machine, so a 300 µs hold let most commit-only appends go out),
/// and far inside anything openraft times (heartbeats every 100 ms, elections after 500 ms).
/// A follower's commit index, and with it its applied state and the events it delivers, lags
/// the leader's by at most this much more than before; reads are served by the leader, and
/// safety never rests on a follower's commit index. With 2 ms instead of 300 µs, a 3-node
/// cluster ran 10-28% more lock cycles at 1, 16 and 64 clients (docs/performance.md).
pub const COMMIT_HOLD: Duration = Duration::from_millis(2);

/// `next` makes `held`, a commit-only append of the same stream, needless: it has the same
/// vote and `prev_log_id` and a `leader_commit` at least as high. The follower then commits
/// at least as far on `next` (its commit is the request's `leader_commit`, under the same
/// vote), and openraft's answer to `next` stands for `held`'s too: the leader drains every
/// queued request whose last log id a successful answer reaches (`held` ends at `prev_log_id`,
/// where `next` starts), and a conflict at `prev_log_id` drains the request starting there,
/// which is `held` (the stream ends after it either way), while a higher vote would have
/// refused both alike.
fn covers(
    next: &AppendEntriesRequest<TypeConfig>,
    held: &AppendEntriesRequest<TypeConfig>,
) -> bool {
    held.entries.is_empty()
        && next.vote == held.vote
        && next.prev_log_id == held.prev_log_id
        && next.leader_commit >= held.leader_commit
}

/// The writer's coalescing of commit-only appends: a commit-only append is held (at most
/// [`COMMIT_HOLD`] from when the first of a chain of them arrived) and dropped if the next
/// request covers it ([`covers`]); anything else goes out at once, in order, and the held one
/// goes out before it, at the hold's end or at the input's end.
#[derive(Debug)]
struct Coalescer<R = AppendEntriesRequest<TypeConfig>> {
    /// The held commit-only append and when it must go out.
    held: Option<(R, Instant)>,
}

/// A request as the [`Coalescer`] sees it (a trait so that the tests can tag requests).
trait Coalescible {
    fn request(&self) -> &AppendEntriesRequest<TypeConfig>;
}

impl Coalescible for AppendEntriesRequest<TypeConfig> {
    fn request(&self) -> &Self {
        self
    }
}

impl<R> Default for Coalescer<R> {
    fn default() -> Self {
        Coalescer { held: None }
    }
}

impl<R: Coalescible> Coalescer<R> {
    /// Takes the next request of the input at `now`; appends what must go out now to `out`,
    /// in order. Returns whether a held request was dropped.
    fn push(&mut self, req: R, now: Instant, out: &mut Vec<R>) -> bool {
        let (deadline, dropped) = match self.held.take() {
            // The new one inherits the hold's end: a chain of covered requests never waits
            // longer than the first of them would have.
            Some((held, deadline)) if covers(req.request(), held.request()) => (deadline, true),
            Some((held, _)) => {
                out.push(held);
                (now + COMMIT_HOLD, false)
            }
            None => (now + COMMIT_HOLD, false),
        };
        if req.request().entries.is_empty() {
            self.held = Some((req, deadline));
        } else {
            out.push(req);
        }
        dropped
    }

    /// When the held request must go out, if one is held.
    fn deadline(&self) -> Option<Instant> {
        self.held.as_ref().map(|(_, d)| *d)
    }

    /// The held request, which must go out now (its hold ended, or the input did).
    fn release(&mut self) -> Option<R> {
        self.held.take().map(|(req, _)| req)
    }
}

/// Sends every request of `input` as soon as it is produced (what is ready together goes out
/// with one flush), except a commit-only append, which the [`Coalescer`] holds for at most
/// [`COMMIT_HOLD`] and drops if the next request covers it.
async fn write_loop<S>(
    mut input: S,
    mut sink: SplitSink<PeerFramed, Bytes>,
    ctx: Arc<PeerContext>,
    target: NodeId,
    (progress, counts, returned): (watch::Sender<Progress>, Arc<Counts>, ReturnedSink),
) where
    S: Stream<Item = AppendEntriesRequest<TypeConfig>> + Unpin,
{
    let fail = |why: String| progress.send_modify(|p| p.failed = Some(why));
    let mut coalescer = Coalescer::default();
    let mut out = Vec::new();
    let mut ended = false;
    while !ended {
        let mut got = match coalescer.deadline() {
            None => input.next().await,
            Some(deadline) => tokio::select! {
                biased;
                _ = tokio::time::sleep_until(deadline) => {
                    // The hold ended: the held request goes out alone.
                    out.extend(coalescer.release());
                    if let Err(why) = send_all(&mut sink, &mut out, &ctx, target, &progress, &counts).await {
                        return fail(why);
                    }
                    if let Err(e) = sink.flush().await {
                        return fail(e.to_string());
                    }
                    continue;
                }
                got = input.next() => got,
            },
        };
        // Everything ready goes out with one flush, each request as soon as it is produced.
        let mut fed = 0;
        loop {
            match got {
                Some(req) => {
                    if coalescer.push(req, Instant::now(), &mut out) {
                        ctx.appends.coalesced.fetch_add(1, Relaxed);
                    }
                }
                None => {
                    out.extend(coalescer.release());
                    ended = true;
                }
            }
            match send_all(&mut sink, &mut out, &ctx, target, &progress, &counts).await {
                Ok(n) => fed += n,
                Err(why) => return fail(why),
            }
            if ended {
                break;
            }
            match input.next().now_or_never() {
                Some(next) => got = next,
                None => break,
            }
        }
        // Nothing to flush when the one request produced is held.
        if fed == 0 {
            continue;
        }
        if let Err(e) = sink.flush().await {
            return fail(e.to_string());
        }
    }
    // Every request went out and was flushed: the connection may serve the next stream once
    // the reader has every answer (left before `done`, which the reader waits for).
    if let Ok(mut slot) = returned.lock() {
        *slot = Some(sink);
    }
    progress.send_modify(|p| p.done = true);
}

/// Feeds the requests of `out` to the connection, in order (flushed by the caller).
async fn send_all(
    sink: &mut SplitSink<PeerFramed, Bytes>,
    out: &mut Vec<AppendEntriesRequest<TypeConfig>>,
    ctx: &PeerContext,
    target: NodeId,
    progress: &watch::Sender<Progress>,
    counts: &Counts,
) -> Result<usize, String> {
    let fed = out.len();
    for req in out.drain(..) {
        if ctx.faults.is_dropped(target) {
            return Err(format!("fault injection: link to node {target} cut"));
        }
        let delay = ctx.faults.delay_ms();
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let env = ctx.envelope(target, PeerRequest::Append(req));
        let bytes = postcard::to_allocvec(&env).map_err(|e| format!("encode: {e}"))?;
        // Counted before it is sent, so that the reader waits for its answer. A reader that
        // owed nothing may be idle, without a timer: wake it. (SeqCst on both sides: either
        // the reader sees this count, or this sees its last answer.)
        let before = counts.sent.fetch_add(1, SeqCst);
        if counts.received.load(SeqCst) == before {
            progress.send_modify(|_| {});
        }
        ctx.appends.sent.fetch_add(1, Relaxed);
        sink.feed(Bytes::from(bytes))
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(fed)
}

/// The next answer, an error, or the end of the stream.
async fn next_item(mut r: Reader) -> Option<(Item, Reader)> {
    if r.finished {
        return None;
    }
    loop {
        let Progress { done, failed } = r.progress.borrow_and_update().clone();
        let owed = r.counts.sent.load(SeqCst) > r.received;
        if !owed {
            r.owed_since = None;
            if let Some(why) = failed {
                return r.fail(unreachable(&PeerError::Io(why)));
            }
            if done {
                r.hand_back();
                return None;
            }
        } else if r.owed_since.is_none() {
            r.owed_since = Some(Instant::now());
        }
        let deadline = r.owed_since.map(|t| t + r.ttl);
        tokio::select! {
            frame = r.source.next() => return r.answer(frame, owed || !done),
            changed = r.progress.changed(), if !r.writer_gone => {
                // The writer has ended: what it last reported stays in the channel.
                r.writer_gone = changed.is_err();
            }
            _ = sleep_until(deadline) => {
                let ttl = r.ttl;
                return r.fail(network_err(&PeerError::Io(format!("no append answer within {ttl:?}"))));
            }
        }
    }
}

/// Sleeps until `deadline`, or for ever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => futures::future::pending().await,
    }
}

impl Reader {
    /// The input ended, every request was answered and nothing failed: leaves the connection
    /// for the client's next stream.
    fn hand_back(self) {
        let Some(sink) = self.sink.lock().ok().and_then(|mut s| s.take()) else {
            return;
        };
        let Ok(framed) = self.source.reunite(sink) else {
            return;
        };
        if let Ok(mut idle) = self.idle.lock() {
            *idle = Some(framed);
        }
    }

    fn fail(mut self, e: RpcErr) -> Option<(Item, Reader)> {
        self.finished = true;
        Some((Err(e), self))
    }

    /// Turns one received frame (or the end of the connection) into an item.
    fn answer(
        mut self,
        frame: Option<Result<bytes::BytesMut, std::io::Error>>,
        expecting: bool,
    ) -> Option<(Item, Reader)> {
        let bytes = match frame {
            Some(Ok(b)) => b,
            Some(Err(e)) => return self.fail(network_err(&PeerError::Io(e.to_string()))),
            None if expecting => {
                return self.fail(network_err(&PeerError::Io(
                    "append stream closed by the peer".into(),
                )))
            }
            None => return None,
        };
        self.received += 1;
        self.counts.received.store(self.received, SeqCst);
        self.owed_since = Some(Instant::now());
        match postcard::from_bytes::<PeerResponse>(&bytes) {
            Ok(PeerResponse::StreamItem(Ok(res))) => {
                // A conflict or a higher vote ends the stream on both sides.
                self.finished = res.is_err();
                Some((Ok(res), self))
            }
            Ok(PeerResponse::StreamItem(Err(why))) => self.fail(remote_failed(why)),
            Ok(PeerResponse::Rejected(why)) => self.fail(unreachable(&PeerError::Rejected(why))),
            Ok(_) => self.fail(network_err(&PeerError::Io(
                "unexpected answer on an append stream".into(),
            ))),
            Err(e) => self.fail(network_err(&PeerError::Io(format!("decode: {e}")))),
        }
    }
}

#[cfg(test)]
mod tests;
