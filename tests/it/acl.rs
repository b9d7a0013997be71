//! ACL users (issue 15, item 4): replies and error texts against a real redis-server in
//! RESP2 and RESP3, authentication with users and with `--requirepass`, the checks inside
//! MULTI, scripts and pub/sub, and in a cluster: a user limited to `~lock:*` is refused other
//! keys through a follower and through the leader (also when a forged Forward frame reaches
//! the leader directly), and users survive a restart and reach a node by snapshot.

use std::time::Duration;

use crate::common::cluster::Cluster;
use crate::common::*;
use crate::differential::{diff, diff_with, run_steps, same, same_args, Step};

const NOPERM_KEY: &str =
    "NOPERM this user has no permissions to access one of the keys used as arguments";

/// Sends an idempotent write until it succeeds: right after start, under load, the cluster
/// may still change leaders (`CLUSTERDOWN`, `TRYAGAIN`).
fn until_ok(c: &mut Conn, line: &str) {
    wait_for(Duration::from_secs(30), line, || {
        let r = c.c(line);
        if r == b"+OK\r\n" {
            return Some(());
        }
        let retry = [&b"-CLUSTERDOWN"[..], b"-TRYAGAIN", b"-TIMEOUT"];
        assert!(
            retry.iter().any(|p| r.starts_with(p)),
            "{line}: {}",
            show(&r)
        );
        None
    })
}

fn noperm_cmd(name: &str) -> Vec<u8> {
    err_bytes(&format!(
        "NOPERM this user has no permissions to run the '{name}' command"
    ))
}

/// The users every differential sequence starts from (their rule strings are ones Redis 7.0
/// and 7.2 print alike).
fn setup() -> Vec<Step> {
    vec![
        // Listed below only with at most one command rule after the base: Redis 7.0 prints
        // several in its hash order (7.2, like Palisade, in the order they were given).
        same("ACL SETUSER alice on >p1 ~lock:* %R~r:* %W~w:* &ch* -@all +@read +set +multi +exec +eval +publish +subscribe +acl|whoami"),
        same("ACL SETUSER bob +@all -@dangerous allkeys"),
        same("ACL SETUSER carol reset"),
        same("ACL SETUSER dave on nopass ~* resetchannels -@all +get"),
        same("ACL SETUSER erin on >p1 >p2 <p1 >p3 ~lock:* %R~r:* %W~w:* %RW~rw:* &ch* &x -@all +@read"),
    ]
}

fn management_steps() -> Vec<Step> {
    let mut s = setup();
    s.extend([
        same("ACL GETUSER erin"),
        same("ACL GETUSER bob"),
        same("ACL GETUSER carol"),
        same("ACL GETUSER default"),
        same("ACL GETUSER nosuch"),
        same("ACL DELUSER alice"),
        same("ACL LIST"),
        same("ACL SETUSER alice on >p1 ~lock:* %R~r:* %W~w:* &ch* -@all +@read +set"),
        same("ACL USERS"),
        same("ACL WHOAMI"),
        same("ACL CAT nosuch"),
        same("ACL DRYRUN alice get lock:1"),
        same("ACL DRYRUN alice get other"),
        same("ACL DRYRUN alice del lock:1"),
        same("ACL DRYRUN alice set r:1 v"),
        same("ACL DRYRUN alice set w:1 v"),
        same("ACL DRYRUN alice get w:1"),
        same("ACL DRYRUN alice publish other m"),
        same("ACL DRYRUN alice publish chan m"),
        same("ACL DRYRUN alice acl whoami"),
        same("ACL DRYRUN dave acl list"),
        same("ACL DRYRUN nosuch get x"),
        same("ACL DRYRUN alice nosuchcmd x"),
        same("ACL DRYRUN alice get"),
        // CLIENT's subcommands that act on other clients are @dangerous, as in Redis 7.
        same("ACL DRYRUN bob client kill id 1"),
        same("ACL DRYRUN bob client pause 10"),
        same("ACL DRYRUN bob client unpause"),
        same("ACL DRYRUN bob client unblock 1"),
        same("ACL DRYRUN bob client no-evict on"),
        same("ACL DRYRUN bob client list"),
        same("ACL DRYRUN bob client id"),
        same("ACL DRYRUN bob client reply on"),
        same("ACL DRYRUN bob client setname x"),
        same("ACL DRYRUN bob client tracking off"),
        same("ACL SETUSER frank on nopass ~* +@all -client|kill"),
        same("ACL DRYRUN frank client kill id 1"),
        same("ACL DRYRUN frank client id"),
        // Every container's subcommands can be named in a rule (SCRIPT KILL was once missing).
        same("ACL SETUSER grace on nopass ~* -@all +script|kill +script|load +cluster|info"),
        same("ACL DRYRUN grace script kill"),
        same("ACL DRYRUN grace script flush"),
        // Refused rules change nothing.
        same("ACL SETUSER alice off foo"),
        same("ACL SETUSER alice +nosuch"),
        same("ACL SETUSER alice +@nosuch"),
        same("ACL SETUSER alice +acl|nosuch"),
        same("ACL SETUSER alice #abc"),
        same("ACL SETUSER alice !abc"),
        same("ACL SETUSER alice %X~a"),
        same("ACL SETUSER alice %~a"),
        same("ACL SETUSER bob ~more"),
        same("ACL SETUSER bob allchannels &more"),
        same_args(&[b"ACL", b"SETUSER", b"a b"]),
        same("ACL GETUSER erin"),
        same("ACL SETUSER"),
        same("ACL NOSUCH"),
        same("ACL"),
        same("ACL LOAD"),
        same("ACL SAVE"),
        same("ACL GENPASS 0"),
        same("ACL GENPASS abc"),
        same("ACL LOG RESET"),
        same("ACL DELUSER default"),
        same("ACL DELUSER carol nosuch"),
        same("ACL USERS"),
        same("AUTH onlypass"),
    ]);
    s
}

#[test]
fn acl_management_replies_match_redis_resp2() {
    diff(2, &management_steps());
}

#[test]
fn acl_management_replies_match_redis_resp3() {
    diff(3, &management_steps());
}

/// What a limited user meets: NOPERM for commands, keys and channels, at queue time inside
/// MULTI (which dooms the transaction), and Redis's script errors for `redis.call`.
fn limited_user_steps() -> Vec<Step> {
    let mut s = setup();
    s.extend([
        same("AUTH alice wrong"),
        same("AUTH nosuch p1"),
        same("AUTH alice p1"),
        same("ACL WHOAMI"),
        same("GET lock:1"),
        same("GET other"),
        same("SET lock:1 v"),
        same("GET lock:1"),
        same("SET r:1 v"),
        same("GET r:1"),
        same("SET w:1 v"),
        same("GET w:1"),
        same("DEL lock:1"),
        same("PUBLISH chan m"),
        same("PUBLISH other m"),
        same("EVAL return(redis.call('get','lock:1')) 0"),
        same("EVAL return(redis.pcall('get','other')) 0"),
        same("EVAL return(redis.call('get','other')) 0"),
        same("EVAL return(redis.call('del','lock:1')) 0"),
        same("EVAL return(1) 1 other"),
        same("MULTI"),
        same("GET lock:1"),
        same("GET other"),
        same("DEL x"),
        same("EXEC"),
        same("MULTI"),
        same("GET lock:1"),
        same("EXEC"),
        same("ACL LIST"),
        same("SUBSCRIBE other"),
        same("AUTH default x"),
        same("AUTH dave anything"),
        same("GET lock:1"),
        same("SET lock:1 v"),
        same("ACL WHOAMI"),
    ]);
    s
}

#[test]
fn a_limited_user_is_refused_as_redis_refuses_resp2() {
    diff(2, &limited_user_steps());
}

#[test]
fn a_limited_user_is_refused_as_redis_refuses_resp3() {
    diff(3, &limited_user_steps());
}

/// Each key needs the access its key spec asks for (issue 28), as Redis's ACLs ask it: a
/// `%W~` user may SET but not SET ... GET, LMOVE's source needs read and write and its
/// destination only write, a BITFIELD of GETs only reads, EXISTS needs neither; channels
/// are checked for SUBSCRIBE, PSUBSCRIBE (patterns must be the user's own), PUBLISH and
/// SPUBLISH, and shard channels are not keys.
fn key_access_steps() -> Vec<Step> {
    let mut s = vec![
        same("ACL SETUSER wendy on nopass %W~w:* %R~r:* ~rw:* -@all +@all"),
        same("ACL SETUSER reader on nopass %R~* -@all +@all"),
        same("ACL SETUSER chan on nopass resetchannels &news.* &sh:1 -@all +@all"),
    ];
    for line in [
        "wendy set w:1 v",
        "wendy set w:1 v GET",
        "wendy set w:1 v NX get EX 10",
        "wendy set r:1 v",
        "wendy setnx w:1 v",
        "wendy getset w:1 v",
        "wendy lmove rw:1 w:1 LEFT RIGHT",
        "wendy lmove w:1 w:2 LEFT RIGHT",
        "wendy lmove rw:1 r:1 LEFT RIGHT",
        "wendy rpoplpush rw:1 w:1",
        "wendy bitfield w:1 SET u8 0 1",
        "wendy bitfield rw:1 SET u8 0 1",
        "wendy bitfield r:1 GET u8 0",
        "wendy bitfield r:1 GET u8 0 OVERFLOW SAT GET u8 8",
        "wendy bitfield r:1 GET u8 0 INCRBY u8 0 1",
        "wendy bitfield_ro r:1 GET u8 0",
        "wendy exists w:1 r:1",
        "wendy type w:1",
        "wendy get w:1",
        "wendy get r:1",
        "wendy del w:1",
        "wendy del r:1",
        "wendy eval s 1 r:1",
        "wendy eval s 1 rw:1",
        "wendy eval_ro s 1 r:1",
        "wendy zunionstore w:d 2 r:a r:b",
        "wendy zunionstore r:d 2 r:a r:b",
        "wendy zunionstore w:d 0 r:a",
        "wendy sort r:l STORE w:d",
        "wendy sort r:l STORE r:d",
        "wendy copy r:1 w:1",
        "wendy copy w:1 w:2",
        "wendy georadius r:g 1 2 3 km STORE w:d",
        "wendy georadius r:g 1 2 3 km STOREDIST r:d",
        "wendy geosearchstore w:d r:g FROMMEMBER m BYRADIUS 1 km",
        "wendy sintercard 2 r:a r:b",
        "wendy lmpop 2 rw:a rw:b LEFT",
        "wendy lmpop 2 rw:a r:b LEFT",
        "wendy incr w:1",
        "wendy append w:1 x",
        "wendy mset w:1 a w:2 b",
        "wendy mset w:1 a r:2 b",
        "reader get x",
        "reader set x v",
        "reader exists x",
        "reader bitfield x GET u8 0",
        "reader bitfield x SET u8 0 1",
        "reader lmove a b LEFT RIGHT",
        "reader sort_ro l",
        "reader eval_ro s 2 a b",
        "reader eval s 1 a",
        "chan publish news.1 m",
        "chan publish other m",
        "chan spublish sh:1 m",
        "chan spublish sh:2 m",
        "chan subscribe news.1",
        "chan subscribe news.1 other",
        "chan ssubscribe sh:1",
        "chan ssubscribe sh:2",
        "chan psubscribe news.*",
        "chan psubscribe news.1*",
        "chan unsubscribe other",
        "chan punsubscribe other*",
    ] {
        s.push(same(&format!("ACL DRYRUN {line}")));
    }
    // The same through the command path, as the user.
    s.extend([
        same("AUTH wendy x"),
        same("SET w:1 v"),
        same("SET w:1 v GET"),
        same("LMOVE w:1 w:2 LEFT RIGHT"),
        same("BITFIELD r:1 GET u8 0"),
        same("BITFIELD r:1 SET u8 0 1"),
        same("EXISTS w:1 r:1"),
        same("AUTH chan x"),
        same("PUBLISH news.1 m"),
        same("PUBLISH other m"),
        same("SPUBLISH sh:1 m"),
        same("SPUBLISH sh:2 m"),
    ]);
    s
}

#[test]
fn each_key_needs_its_specs_access_as_in_redis_resp2() {
    diff(2, &key_access_steps());
}

#[test]
fn each_key_needs_its_specs_access_as_in_redis_resp3() {
    diff(3, &key_access_steps());
}

/// A user without `@dangerous` runs the subcommands Redis files elsewhere (CLIENT SETNAME,
/// ACL WHOAMI, COMMAND INFO) and is refused the dangerous ones (CLIENT KILL, ACL SETUSER,
/// CONFIG GET), each by its subcommand row's categories.
fn subcommand_category_steps() -> Vec<Step> {
    let mut s = setup();
    s.extend([
        same("ACL SETUSER frank on nopass +@all -@dangerous allkeys allchannels"),
        same("AUTH frank x"),
        same("CLIENT SETNAME n"),
        same("CLIENT GETNAME"),
        same("CLIENT KILL ID 999999"),
        same("CLIENT LIST ID 1"),
        same("ACL WHOAMI"),
        same("ACL SETUSER x"),
        same("ACL DELUSER x"),
        same("CONFIG GET maxclients"),
        same("COMMAND INFO nosuch"),
        same("SLOWLOG LEN"),
        same("OBJECT ENCODING nosuch"),
        same("ROLE"),
        same("LASTSAVE"),
        same("KEYS nosuch*"),
        same("DBSIZE"),
    ]);
    s
}

#[test]
fn subcommands_are_refused_by_their_own_categories() {
    diff(2, &subcommand_category_steps());
}

/// ACL CAT of each of Redis's categories names the same commands and subcommands
/// (`client|kill`, as Redis 7 lists them) as redis-server's, among those both have: each
/// subcommand is filed by its own row. PUBSUB, which carries its subcommands' `pubsub` flag
/// (`CONTAINER_FLAGS` in differential.rs), is also in `@pubsub`.
#[test]
fn acl_cat_of_each_category_matches_redis() {
    use crate::differential::command_list;
    use palisade::cmd::registry::sub_spec;
    use std::collections::BTreeSet;
    let redis = RedisServer::start();
    let pal = Server::start();
    let (mut rc, mut pc) = (redis.conn(), pal.conn());
    let ours_has = |name: &str| match name.split_once('|') {
        Some((c, s)) => palisade::cmd::lookup(c)
            .and_then(|c| sub_spec(c, s))
            .is_some(),
        None => palisade::cmd::lookup(name).is_some(),
    };
    let cats = command_list(&rc.c("ACL CAT"));
    let lists: Vec<(String, Vec<String>, Vec<String>)> = cats
        .iter()
        .map(|cat| {
            let line = format!("ACL CAT {cat}");
            (
                cat.clone(),
                command_list(&rc.c(&line)),
                command_list(&pc.c(&line)),
            )
        })
        .collect();
    let redis_has: BTreeSet<&String> = lists.iter().flat_map(|l| &l.1).collect();
    let mut bad = Vec::new();
    let mut subs = 0;
    for (cat, theirs, ours) in &lists {
        let theirs: BTreeSet<&String> = theirs.iter().filter(|n| ours_has(n)).collect();
        let ours: BTreeSet<&String> = ours.iter().filter(|n| redis_has.contains(n)).collect();
        subs += ours.iter().filter(|n| n.contains('|')).count();
        for n in theirs.symmetric_difference(&ours) {
            if (cat.as_str(), n.as_str()) == ("pubsub", "pubsub") {
                continue;
            }
            let who = if ours.contains(n) {
                "Palisade"
            } else {
                "redis-server"
            };
            bad.push(format!("@{cat}: only {who} lists {n}"));
        }
    }
    assert!(subs >= 100, "only {subs} subcommand entries compared");
    assert!(bad.is_empty(), "ACL CAT differs:\n{}", bad.join("\n"));
}

/// `--requirepass` keeps working as before: it is the `default` user's password.
fn requirepass_steps() -> Vec<Step> {
    vec![
        same("GET k"),
        same("ACL WHOAMI"),
        same("AUTH wrong"),
        same("AUTH default wrong"),
        same("AUTH pw"),
        same("ACL WHOAMI"),
        same("AUTH default pw"),
        same("ACL GETUSER default"),
        same("ACL LIST"),
        same("SET k v"),
        same("GET k"),
    ]
}

#[test]
fn requirepass_is_the_default_users_password_resp2() {
    let flags = ["--requirepass", "pw"];
    diff_with(2, &requirepass_steps(), &flags, &flags);
}

/// RESP3 with `HELLO 3 AUTH`: the handshake authenticates and switches protocol at once.
#[test]
fn requirepass_is_the_default_users_password_resp3() {
    let flags = ["--requirepass", "pw"];
    let redis = RedisServer::start_with(&flags);
    let pal = Server::start_with(&flags);
    let (mut rc, mut pc) = (redis.conn(), pal.conn());
    for c in [&mut rc, &mut pc] {
        assert_reply(
            &c.c("HELLO 3 AUTH default wrong"),
            &err_bytes("WRONGPASS invalid username-password pair or user is disabled."),
            "HELLO 3 with a wrong password",
        );
        let r = c.c("HELLO 3");
        assert!(
            r.starts_with(b"-NOAUTH HELLO must be called"),
            "{}",
            show(&r)
        );
        let r = c.c("HELLO 3 AUTH default pw");
        assert!(r.starts_with(b"%7\r\n"), "HELLO 3 AUTH: {}", show(&r));
    }
    let bad = run_steps(&requirepass_steps()[1..], &mut rc, &mut pc);
    assert!(bad.is_empty(), "RESP3 differs:\n{}", bad.join("\n"));
}

/// ACL CAT lists Redis's categories, then Palisade's own `palisade` (LOCK, FENCEDSET, ...).
#[test]
fn acl_cat_lists_redis_categories_and_palisade() {
    let redis = RedisServer::start();
    let pal = Server::start();
    let want = redis.conn().c("ACL CAT");
    let mut c = pal.conn();
    let got = c.c("ACL CAT");
    let n: usize = std::str::from_utf8(&want[1..want.iter().position(|&b| b == b'\r').unwrap()])
        .unwrap()
        .parse()
        .unwrap();
    let body = &want[want.iter().position(|&b| b == b'\n').unwrap() + 1..];
    let mut expected = format!("*{}\r\n", n + 1).into_bytes();
    expected.extend_from_slice(body);
    expected.extend_from_slice(&bulk_bytes(b"palisade"));
    assert_reply(&got, &expected, "ACL CAT");
    let lock_cmds = c.c("ACL CAT palisade");
    for name in ["lock", "unlock", "fencedset", "fencecheck"] {
        assert!(
            lock_cmds.windows(name.len()).any(|w| w == name.as_bytes()),
            "ACL CAT palisade lacks {name}: {}",
            show(&lock_cmds)
        );
    }
}

/// A new user who authenticates on a follower right after being created there, and whose
/// commands are then refused on other keys through the follower and through the leader.
#[test]
fn a_lock_user_gets_noperm_on_other_keys_through_a_follower_and_the_leader() {
    let cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let follower = [1, 2, 3].into_iter().find(|id| *id != leader).unwrap();
    let mut admin = cluster.conn(follower);
    until_ok(
        &mut admin,
        "ACL SETUSER locker on >pw ~lock:* -@all +@palisade +get +set",
    );
    for id in [follower, leader] {
        let mut c = cluster.conn(id);
        assert_reply(
            &c.c("AUTH locker pw"),
            b"+OK\r\n",
            "AUTH right after SETUSER",
        );
        let token = c.c(&format!("LOCK lock:{id} me PX 10000"));
        assert!(
            try_int(&token).is_some(),
            "LOCK on node {id}: {}",
            show(&token)
        );
        assert_reply(&c.c(&format!("SET lock:v{id} x")), b"+OK\r\n", "SET lock:*");
        assert_reply(
            &c.c("LOCK other me PX 10000"),
            &err_bytes(NOPERM_KEY),
            "LOCK on another key",
        );
        assert_reply(&c.c("GET other"), &err_bytes(NOPERM_KEY), "GET another key");
        assert_reply(&c.c("DEL lock:1"), &noperm_cmd("del"), "DEL");
        assert_reply(&c.c("ACL LIST"), &noperm_cmd("acl|list"), "ACL LIST");
    }
    // Changes reach every node: once taken away, SET is refused everywhere.
    until_ok(&mut admin, "ACL SETUSER locker -set");
    for id in [1, 2, 3] {
        let mut c = cluster.conn(id);
        // The third node was not used above: it may still be applying the user's creation.
        wait_for(
            Duration::from_secs(10),
            "the user to reach every node",
            || (c.c("AUTH locker pw") == b"+OK\r\n").then_some(()),
        );
        wait_for(Duration::from_secs(10), "-set to reach every node", || {
            (c.c("SET lock:x v") == noperm_cmd("set")).then_some(())
        });
    }
}

/// The leader checks each forwarded command against the user it names, whatever the
/// follower decided: a Forward frame sent straight to the leader's peer port with a command
/// the user may not run is refused, and one it may run is run.
#[test]
fn the_leader_refuses_a_forwarded_command_its_user_may_not_run() {
    use crate::common::cluster::CLUSTER_SECRET;
    use palisade::raft::auth::PeerAuth;
    use palisade::raft::network::{Faults, PeerContext};
    use palisade::raft::protocol::{
        Envelope, PeerConn, PeerRequest, PeerResponse, PROTOCOL_VERSION,
    };
    let cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let follower = [1, 2, 3].into_iter().find(|id| *id != leader).unwrap();
    let mut c = cluster.conn(leader);
    until_ok(
        &mut c,
        "ACL SETUSER locker on >pw ~lock:* -@all +@palisade +set",
    );
    let cluster_id = u64::from_str_radix(&cluster.info(leader, "cluster_id").unwrap(), 16).unwrap();
    let parse = |line: &str| match palisade::cmd::parse(
        words(line).into_iter().map(Into::into).collect(),
    ) {
        Ok(palisade::cmd::Request::Data(cmd)) => cmd,
        other => panic!("{line}: {other:?}"),
    };
    let cmds = vec![
        parse("SET other v"),
        parse("SET lock:1 v"),
        parse("DEL lock:1"),
    ];
    let env = Envelope {
        proto: PROTOCOL_VERSION,
        cluster_id,
        from: follower,
        target: leader,
        body: PeerRequest::Forward {
            write: true,
            cmds,
            users: vec![
                Some("locker".into()),
                Some("locker".into()),
                Some("locker".into()),
            ],
        },
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let replies = rt.block_on(async {
        let addr = cluster.peer_addr(leader);
        // A node of the cluster: it knows the cluster secret.
        let ctx = PeerContext {
            node_id: follower,
            cluster_id: cluster_id.into(),
            faults: Faults::default(),
            auth: PeerAuth::new(Some(CLUSTER_SECRET.as_bytes().to_vec())),
            appends: Default::default(),
            vote_hold: Default::default(),
        };
        let mut conn = PeerConn::connect(&addr, Duration::from_secs(5), &ctx, leader)
            .await
            .unwrap();
        match conn.call(&env, Duration::from_secs(10)).await {
            Ok(PeerResponse::Forward(r)) => r,
            other => panic!("forward: {other:?}"),
        }
    });
    use palisade::resp::Reply;
    assert_eq!(
        replies,
        vec![
            Reply::err(NOPERM_KEY),
            Reply::ok(),
            Reply::err("NOPERM this user has no permissions to run the 'del' command"),
        ]
    );
    assert_reply(&c.c("GET other"), nil(2), "the refused write did not run");
    assert_reply(
        &c.c("GET lock:1"),
        &bulk_bytes(b"v"),
        "the allowed write ran",
    );
}

/// Users are replicated state: they survive a restart, and a node that missed them while
/// the log was compacted receives them in a snapshot.
#[test]
fn users_survive_a_restart_and_a_snapshot_install() {
    let mut cluster = Cluster::start(3, &["--snapshot-every", "10"]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let lagger = [1, 2, 3].into_iter().find(|id| *id != leader).unwrap();
    cluster.kill9(lagger);
    let mut c = cluster.conn(leader);
    let rules = "ACL SETUSER snap on >pw ~s:* &news -@all +get +set";
    until_ok(&mut c, rules);
    until_ok(&mut c, "ACL SETUSER gone on");
    assert_reply(&c.c("ACL DELUSER gone"), b":1\r\n", "DELUSER gone");
    for i in 0..100 {
        until_ok(&mut c, &format!("SET k{i} v"));
    }
    // openraft builds the snapshot and purges behind it in the background.
    wait_for(
        Duration::from_secs(20),
        "the leader to compact its log",
        || (cluster.info_u64(leader, "purged_index") > 0).then_some(()),
    );
    let want = c.c("ACL GETUSER snap");
    cluster.restart(lagger);
    cluster.wait_converged(&[1, 2, 3]);
    assert!(
        cluster.info_u64(lagger, "snapshot_index") > 0,
        "the lagging node did not install a snapshot"
    );
    for round in ["after the snapshot install", "after a restart"] {
        let mut l = cluster.conn(lagger);
        assert_reply(&l.c("ACL GETUSER snap"), &want, round);
        assert_reply(&l.c("ACL GETUSER gone"), nil(2), round);
        assert_reply(&l.c("AUTH snap pw"), b"+OK\r\n", round);
        assert_reply(&l.c("GET k1"), &err_bytes(NOPERM_KEY), round);
        cluster.restart(lagger);
    }
}

/// `--aclfile`: the users of the file are loaded at start (through the log), ACL SAVE
/// writes them back in ACL LIST form, and ACL LOAD replaces every user with the file's.
#[test]
fn the_acl_file_is_loaded_at_start_saved_and_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("users.acl");
    std::fs::write(
        &file,
        "user default on nopass ~* &* +@all\nuser filed on >pw ~f:* -@all +get\n",
    )
    .unwrap();
    let server = Server::start_with(&["--aclfile", file.to_str().unwrap()]);
    let mut c = server.conn();
    wait_for(Duration::from_secs(10), "the file's users", || {
        (c.c("AUTH filed pw") == b"+OK\r\n").then_some(())
    });
    assert_reply(&c.c("AUTH default x"), b"+OK\r\n", "back to default");
    assert_reply(&c.c("ACL SETUSER extra on nopass"), b"+OK\r\n", "SETUSER");
    assert_reply(&c.c("ACL SAVE"), b"+OK\r\n", "ACL SAVE");
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(
        saved.contains("user extra on nopass resetchannels -@all\n")
            && saved.contains("user filed on #"),
        "saved file: {saved}"
    );
    std::fs::write(&file, "user only on nopass ~* -@all +ping\n").unwrap();
    assert_reply(&c.c("ACL LOAD"), b"+OK\r\n", "ACL LOAD");
    let users = c.c("ACL USERS");
    assert_reply(
        &users,
        b"*2\r\n$7\r\ndefault\r\n$4\r\nonly\r\n",
        "ACL LOAD replaced every user",
    );
    std::fs::write(&file, "user broken on nosuchrule\n").unwrap();
    assert!(
        c.c("ACL LOAD").starts_with(b"-ERR"),
        "a bad file is refused"
    );
    assert_reply(&c.c("ACL USERS"), &users, "a refused file changes nothing");
}

/// Refusals are in ACL LOG with Redis's fields, and a connection whose user is deleted is
/// closed at its next command.
#[test]
fn refusals_are_logged_and_a_deleted_users_connections_close() {
    let server = Server::start();
    let mut admin = server.conn();
    assert_reply(
        &admin.c("ACL SETUSER temp on >pw ~t:* -@all +get"),
        b"+OK\r\n",
        "SETUSER",
    );
    let mut c = server.conn();
    assert_reply(
        &c.c("AUTH temp bad"),
        &err_bytes("WRONGPASS invalid username-password pair or user is disabled."),
        "AUTH",
    );
    assert_reply(&c.c("AUTH temp pw"), b"+OK\r\n", "AUTH");
    assert_reply(&c.c("GET other"), &err_bytes(NOPERM_KEY), "GET other");
    assert_reply(&c.c("GET other"), &err_bytes(NOPERM_KEY), "GET other again");
    let log = String::from_utf8_lossy(&admin.c("ACL LOG")).into_owned();
    for field in [
        "*2\r\n*14\r\n$5\r\ncount\r\n:2\r\n$6\r\nreason\r\n$3\r\nkey\r\n$7\r\ncontext\r\n$8\r\ntoplevel\r\n$6\r\nobject\r\n$5\r\nother\r\n$8\r\nusername\r\n$4\r\ntemp\r\n$11\r\nage-seconds\r\n",
        "$6\r\nreason\r\n$4\r\nauth\r\n$7\r\ncontext\r\n$8\r\ntoplevel\r\n$6\r\nobject\r\n$4\r\nAUTH\r\n",
        "user=temp",
    ] {
        assert!(log.contains(field), "ACL LOG lacks {field:?}: {log}");
    }
    assert_reply(&admin.c("ACL LOG RESET"), b"+OK\r\n", "ACL LOG RESET");
    assert_reply(&admin.c("ACL LOG"), b"*0\r\n", "ACL LOG after RESET");
    assert_reply(&admin.c("ACL DELUSER temp"), b":1\r\n", "DELUSER");
    c.send(&words("GET t:1"));
    let (rest, closed) = c.read_until_close(Duration::from_secs(5));
    assert!(
        closed && rest.is_empty(),
        "the connection stayed open: {}",
        show(&rest)
    );
}
