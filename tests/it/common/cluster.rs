//! A local cluster of real Palisade processes on free ports, for the cluster tests.
//! Dropping it kills every node and removes the data.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::netns::Netns;
use super::{free_ports, signal, spawn_logged, tail, wait_ready, Conn};

/// The cluster secret of test clusters that do not give their own.
pub const CLUSTER_SECRET: &str = "palisade-test-cluster-secret";

/// One node's fixed identity.
pub struct Node {
    /// Raft node id (1-based).
    pub id: u64,
    /// Address the node is reached at (127.0.0.1, or its own with `Netns`).
    pub host: IpAddr,
    /// Client port.
    pub port: u16,
    /// Peer port.
    pub peer_port: u16,
    child: Option<Child>,
    join: bool,
}

/// A running cluster.
pub struct Cluster {
    /// Nodes by id.
    pub nodes: BTreeMap<u64, Node>,
    root: TempDir,
    peers: String,
    extra: Vec<String>,
    /// Flags for single nodes, after `extra` (e.g. a clock fault on one node).
    node_extra: BTreeMap<u64, Vec<String>>,
    /// Environment variables for single nodes' next starts (test-only hooks).
    pub node_env: BTreeMap<u64, Vec<(String, String)>>,
    /// The nodes' private network, if they run in network namespaces.
    pub net: Option<Netns>,
}

impl Cluster {
    /// Starts `n` nodes that bootstrap together from one `--peers` list, and waits until
    /// they agree on a leader.
    pub fn start(n: u64, extra: &[&str]) -> Cluster {
        Self::start_with(n, extra, BTreeMap::new())
    }

    /// `start`, with extra flags for some nodes (kept across restarts).
    pub fn start_with(n: u64, extra: &[&str], node_extra: BTreeMap<u64, Vec<String>>) -> Cluster {
        Self::start_in(n, extra, node_extra, None)
    }

    /// `start_with`, each node in its own network namespace of `net` if given.
    pub fn start_in(
        n: u64,
        extra: &[&str],
        node_extra: BTreeMap<u64, Vec<String>>,
        mut net: Option<Netns>,
    ) -> Cluster {
        let root = tempfile::Builder::new()
            .prefix("palisade-cluster-")
            .tempdir()
            .expect("tempdir");
        let ports = free_ports(2 * n as usize);
        let mut nodes = BTreeMap::new();
        for i in 0..n {
            let id = i + 1;
            let node = Node {
                id,
                host: host_for(&mut net, id),
                port: ports[2 * i as usize],
                peer_port: ports[2 * i as usize + 1],
                child: None,
                join: false,
            };
            nodes.insert(id, node);
        }
        let peers = nodes
            .values()
            .map(|nd| format!("{}={}:{}", nd.id, nd.host, nd.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let mut c = Cluster {
            nodes,
            root,
            peers,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            node_extra,
            node_env: BTreeMap::new(),
            net,
        };
        let ids: Vec<u64> = c.nodes.keys().copied().collect();
        for id in &ids {
            c.spawn(*id, false);
        }
        for id in &ids {
            c.wait_ready(*id);
        }
        c.wait_leader(&ids);
        c
    }

    /// Replaces node `id`'s own flags, for its next start.
    pub fn set_node_extra(&mut self, id: u64, flags: &[&str]) {
        self.node_extra
            .insert(id, flags.iter().map(|s| s.to_string()).collect());
    }

    /// The data directory of node `id`.
    pub fn dir(&self, id: u64) -> PathBuf {
        self.root.path().join(format!("n{id}"))
    }

    /// The log file of node `id`.
    pub fn log(&self, id: u64) -> PathBuf {
        self.root.path().join(format!("n{id}.log"))
    }

    fn spawn(&mut self, id: u64, wait: bool) {
        let node = &self.nodes[&id];
        let exe = env!("CARGO_BIN_EXE_palisade");
        let (mut cmd, bind) = match &self.net {
            Some(net) => (net.command(id, exe), "0.0.0.0"),
            None => (Command::new(exe), "127.0.0.1"),
        };
        cmd.args([
            "--bind",
            bind,
            "--node-id",
            &id.to_string(),
            "--port",
            &node.port.to_string(),
        ])
        .args([
            "--peer-port",
            &node.peer_port.to_string(),
            "--peers",
            &self.peers,
        ])
        .arg("--dir")
        .arg(self.dir(id))
        .args(&self.extra)
        .args(self.node_extra.get(&id).into_iter().flatten());
        // Every test cluster proves a secret in the peer handshake (required anyway when the
        // nodes bind 0.0.0.0 in network namespaces), unless the test sets its own or
        // authenticates its peers with mutual TLS.
        let own_secret = self
            .extra
            .iter()
            .chain(self.node_extra.get(&id).into_iter().flatten())
            .any(|a| a.starts_with("--cluster-secret") || a == "--tls-cluster");
        if !own_secret {
            cmd.args(["--cluster-secret", CLUSTER_SECRET]);
        }
        if node.join {
            cmd.arg("--join");
        }
        for (k, v) in self.node_env.get(&id).into_iter().flatten() {
            cmd.env(k, v);
        }
        let child = spawn_logged(cmd, &self.log(id));
        self.nodes.get_mut(&id).expect("node").child = Some(child);
        if wait {
            self.wait_ready(id);
        }
    }

    fn wait_ready(&mut self, id: u64) {
        let log = self.log(id);
        let node = self.nodes.get_mut(&id).expect("node");
        let addr = SocketAddr::new(node.host, node.port);
        let child = node.child.as_mut().expect("running");
        wait_ready(child, addr, &format!("node {id}"), &log);
    }

    /// Adds a node that starts with `--join` (not yet a member); returns its id.
    pub fn spawn_joiner(&mut self) -> u64 {
        let id = self.nodes.keys().max().copied().unwrap_or(0) + 1;
        let ports = free_ports(2);
        self.nodes.insert(
            id,
            Node {
                id,
                host: host_for(&mut self.net, id),
                port: ports[0],
                peer_port: ports[1],
                child: None,
                join: true,
            },
        );
        self.spawn(id, true);
        id
    }

    /// A connection to node `id`.
    pub fn conn(&self, id: u64) -> Conn {
        let addr = self.addr(id);
        Conn::try_connect_addr(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
    }

    /// The client address of node `id`.
    pub fn addr(&self, id: u64) -> SocketAddr {
        SocketAddr::new(self.nodes[&id].host, self.nodes[&id].port)
    }

    /// The peer address of node `id`, as `--peers` and RAFT.NODE ADD take it.
    pub fn peer_addr(&self, id: u64) -> String {
        format!("{}:{}", self.nodes[&id].host, self.nodes[&id].peer_port)
    }

    /// The client port of node `id`.
    pub fn port(&self, id: u64) -> u16 {
        self.nodes[&id].port
    }

    /// The process id of node `id`.
    pub fn pid(&self, id: u64) -> u32 {
        self.nodes[&id].child.as_ref().expect("running").id()
    }

    /// A RAFT.INFO field of node `id`, if the node answers.
    pub fn info(&self, id: u64, field: &str) -> Option<String> {
        let mut c = Conn::try_connect_addr(self.addr(id)).ok()?;
        // A paused node must not stall the caller for the full I/O timeout.
        c.stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .ok()?;
        c.try_send_raw(b"*1\r\n$9\r\nRAFT.INFO\r\n").ok()?;
        let reply = c.try_read_reply().ok()?;
        let text = String::from_utf8_lossy(&reply).into_owned();
        let prefix = format!("{field}:");
        text.split("\r\n")
            .find_map(|l| l.strip_prefix(&prefix).map(str::to_string))
    }

    /// A numeric RAFT.INFO field (0 if missing).
    pub fn info_u64(&self, id: u64, field: &str) -> u64 {
        self.info(id, field)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// Waits until every node in `ids` reports the same leader, which is one of `ids` and
    /// reports itself as leader; returns it.
    pub fn wait_leader(&self, ids: &[u64]) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let views: Vec<Option<String>> =
                ids.iter().map(|id| self.info(*id, "leader_id")).collect();
            if let Some(Some(first)) = views.first() {
                if let Ok(leader) = first.parse::<u64>() {
                    let agreed = views.iter().all(|v| v.as_deref() == Some(first.as_str()));
                    if agreed
                        && ids.contains(&leader)
                        && self.info(leader, "role").as_deref() == Some("leader")
                    {
                        return leader;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "no agreed leader among {ids:?} after 30 s: views {views:?}\n{}",
                self.logs()
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the nodes in `ids` have all applied the same log index.
    pub fn wait_converged(&self, ids: &[u64]) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let applied: Vec<u64> = ids
                .iter()
                .map(|id| self.info_u64(*id, "applied_index"))
                .collect();
            if applied.iter().all(|a| *a == applied[0] && *a > 0) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "nodes {ids:?} did not converge: applied {applied:?}\n{}",
                self.logs()
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILLs node `id` (its data stays).
    pub fn kill9(&mut self, id: u64) {
        if let Some(mut c) = self.nodes.get_mut(&id).and_then(|n| n.child.take()) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts node `id` again with its data and waits until it answers.
    pub fn restart(&mut self, id: u64) {
        self.kill9(id);
        self.spawn(id, true);
    }

    /// SIGSTOPs or SIGCONTs node `id`.
    pub fn signal(&self, id: u64, sig: &str) {
        signal(self.pid(id), sig);
    }

    /// The last lines of every node's log, for failure messages.
    pub fn logs(&self) -> String {
        self.nodes
            .keys()
            .map(|id| format!("---- node {id} ----\n{}", tail(&self.log(*id), 15)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Node `id`'s address: its own in `net` (whose namespace it gets now), else loopback.
fn host_for(net: &mut Option<Netns>, id: u64) -> IpAddr {
    match net {
        Some(net) => {
            net.add_node(id);
            net.host(id)
        }
        None => IpAddr::V4(Ipv4Addr::LOCALHOST),
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!("{}", self.logs());
        }
        let ids: Vec<u64> = self.nodes.keys().copied().collect();
        for id in ids {
            if let Some(n) = self.nodes.get_mut(&id) {
                if let Some(c) = n.child.as_mut() {
                    // SIGKILL also ends a SIGSTOPped process.
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
        }
    }
}
