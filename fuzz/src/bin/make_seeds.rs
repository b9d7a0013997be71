//! Writes the binary seeds of the snapshot and peer_frame targets with the real encoders:
//! a hand-written postcard frame or image would rot silently when a format changes. Run it
//! after such a change (`scripts/fuzz.sh seeds`) and commit what it writes; the text seeds
//! of the other targets are written by hand.
//!
//! Usage: make_seeds CORPUS_DIR (the fuzz/corpus directory).

use std::path::Path;

// Links the C++ runtime that the prebuilt RocksDB needs (see build.rs).
extern crate palisade_fuzz;

use bytes::Bytes;
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, VoteRequest};
use openraft::EntryPayload;
use palisade::cmd::{self, Command, Ctx, Request};
use palisade::raft::protocol::{Envelope, PeerRequest, PeerResponse, PROTOCOL_VERSION};
use palisade::raft::{log_id, Batch, Entry, SnapshotMeta, StoredMembership, Vote};
use palisade::resp::Reply;
use palisade::state::Keyspace;
use palisade::store::schema::{cf, enc, open_db, CF_FENCE, CF_KV, CF_LOCK};
use palisade::store::snapshot::{encode, Header, IMAGE_FORMAT};

fn argv(line: &str) -> Vec<Bytes> {
    line.split(' ')
        .map(|w| Bytes::copy_from_slice(w.as_bytes()))
        .collect()
}

/// The replicated command a client's line parses to.
fn command(line: &str) -> Command {
    match cmd::parse(argv(line)) {
        Ok(Request::Data(c)) => c,
        _ => panic!("{line}: not a data command"),
    }
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).expect("create the corpus directory");
    std::fs::write(dir.join(name), bytes).expect("write a seed");
}

/// A keyspace with a string, a hash, a list, a lock with a waiter's queue, a fence and a
/// cached script.
fn keyspace() -> Keyspace {
    let mut ks = Keyspace::default();
    for line in [
        "SET s v PX 5000",
        "HSET h f v",
        "RPUSH l a b",
        "LOCK q a PX 1000 DELAY 50",
        "FENCEDSET f v 7",
    ] {
        let revision = ks.bump_revision();
        command(line).apply(&mut ks, Ctx { now: 10, revision });
    }
    ks.cache_script("ab".into(), Bytes::from_static(b"return 1"));
    ks
}

fn snapshot_seeds(dir: &Path) {
    let ks = keyspace();
    let db_dir = std::env::temp_dir().join(format!("palisade-seeds-{}", std::process::id()));
    let db = open_db(&db_dir).expect("open a scratch database");
    let (kv, fence, lock) = (
        cf(&db, CF_KV).unwrap(),
        cf(&db, CF_FENCE).unwrap(),
        cf(&db, CF_LOCK).unwrap(),
    );
    for (k, e) in ks.entries() {
        db.put_cf(kv, k, enc(e).unwrap()).unwrap();
    }
    for (k, f) in ks.fences() {
        db.put_cf(fence, k, f.to_be_bytes()).unwrap();
    }
    for (k, m) in ks.lock_metas() {
        db.put_cf(lock, k, enc(m).unwrap()).unwrap();
    }
    let header = Header {
        format: IMAGE_FORMAT,
        last_applied: Some(log_id(2, 1, 9)),
        membership: StoredMembership::default(),
        revision: ks.revision(),
        clock: *ks.clock(),
        scripts: ks.scripts().clone(),
        script_budget: 1000,
    };
    write(dir, "image", &encode(&db, &db.snapshot(), &header).unwrap());
    let empty = open_db(&db_dir.join("empty")).unwrap();
    write(
        dir,
        "empty",
        &encode(&empty, &empty.snapshot(), &header).unwrap(),
    );
    drop((db, empty));
    let _ = std::fs::remove_dir_all(&db_dir);
}

fn envelope(body: PeerRequest) -> Vec<u8> {
    let env = Envelope {
        proto: PROTOCOL_VERSION,
        cluster_id: 7,
        from: 1,
        target: 2,
        body,
    };
    // The target's first byte picks the decoder: even for a request.
    let mut out = vec![0];
    out.extend(postcard::to_allocvec(&env).unwrap());
    out
}

fn response(resp: PeerResponse) -> Vec<u8> {
    let mut out = vec![1];
    out.extend(postcard::to_allocvec(&resp).unwrap());
    out
}

fn peer_seeds(dir: &Path) {
    let batch = Batch {
        ts: 5,
        boot: 6,
        cmds: vec![command("SET k v PX 100"), command("LOCK l o PX 10")],
    };
    let entries: Vec<Entry> = vec![
        Entry {
            log_id: log_id(1, 1, 1),
            payload: EntryPayload::Blank,
        },
        Entry {
            log_id: log_id(1, 1, 2),
            payload: EntryPayload::Normal(batch),
        },
    ];
    let append = AppendEntriesRequest {
        vote: Vote::new_committed(1, 1),
        prev_log_id: None,
        leader_commit: Some(log_id(1, 1, 1)),
        entries,
    };
    let vote = || VoteRequest::new(Vote::new(3, 1), Some(log_id(2, 1, 9)));
    let meta = SnapshotMeta {
        last_log_id: Some(log_id(2, 1, 9)),
        last_membership: StoredMembership::default(),
    };
    let requests = [
        ("append", PeerRequest::Append(append)),
        ("vote", PeerRequest::Vote(vote())),
        ("prevote", PeerRequest::PreVote(vote())),
        ("open_stream", PeerRequest::OpenStream),
        (
            "chunk",
            PeerRequest::SnapshotChunk {
                offset: 0,
                data: Bytes::from_static(b"image"),
            },
        ),
        (
            "done",
            PeerRequest::SnapshotDone {
                vote: Vote::new_committed(2, 1),
                meta,
                len: 5,
            },
        ),
        (
            "forward",
            PeerRequest::Forward {
                write: true,
                cmds: vec![command("INCR n"), command("HSET h f v"), command("GET k")],
                users: vec![None, Some("locker".into()), None],
            },
        ),
        (
            "admin",
            PeerRequest::Admin(argv("RAFT.NODE ADD 4 127.0.0.1:16400")),
        ),
    ];
    for (name, body) in requests {
        write(dir, &format!("req_{name}"), &envelope(body));
    }
    let replies = vec![
        Reply::Int(3),
        Reply::bulk("v"),
        Reply::Nil,
        Reply::err("ERR x"),
        Reply::Array(vec![Reply::bulk("a")]),
    ];
    let responses = [
        (
            "append",
            PeerResponse::Append(Ok(AppendEntriesResponse::Success)),
        ),
        (
            "append_err",
            PeerResponse::Append(Err("shutting down".into())),
        ),
        ("opened", PeerResponse::StreamOpened),
        ("chunk", PeerResponse::SnapshotChunk),
        ("forward", PeerResponse::Forward(replies)),
        ("admin", PeerResponse::Admin(Reply::ok())),
        ("rejected", PeerResponse::Rejected("wrong cluster".into())),
    ];
    for (name, resp) in responses {
        write(dir, &format!("resp_{name}"), &response(resp));
    }
}

fn main() {
    let corpus = std::env::args()
        .nth(1)
        .expect("usage: make_seeds CORPUS_DIR");
    let corpus = Path::new(&corpus);
    snapshot_seeds(&corpus.join("snapshot"));
    peer_seeds(&corpus.join("peer_frame"));
}
