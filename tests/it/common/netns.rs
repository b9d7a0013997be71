//! A private network for a `Cluster`: one Linux network namespace per node, each with a
//! veth link into a bridge in the root namespace, so nodes talk over real sockets on
//! their own addresses (10.77.<x>.<id>, the bridge is 10.77.<x>.254). Links are cut with
//! blackhole routes inside the namespaces. Needs root and `ip` (iproute2). Dropping it
//! removes the namespaces, veths and bridge. Opt in with `CHAOS_NET=netns` (see chaos).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;

/// The namespaces, links and cuts of one run.
pub struct Netns {
    /// Third octet of the subnet and part of every name; unique per run (see `create`).
    x: u8,
    nodes: BTreeSet<u64>,
    cuts: BTreeSet<(u64, u64)>,
}

/// Runs `ip args`; the error text if it fails.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// `ip args`, panicking on failure (for setup steps).
fn ip_ok(args: &[&str]) {
    if let Err(e) = ip(args) {
        panic!("{e}");
    }
}

impl Netns {
    /// Creates the bridge. The run claims the first free bridge name `pal<x>` (creating a
    /// link is atomic), starting from a point picked by the process id, so concurrent runs
    /// and leftovers of a killed run get distinct names and subnets.
    pub fn create() -> Netns {
        let start = std::process::id() as usize;
        for i in 0..250 {
            let x = ((start + i) % 250 + 1) as u8;
            let br = format!("pal{x}");
            if ip(&["link", "add", &br, "type", "bridge"]).is_err() {
                continue;
            }
            let net = Netns {
                x,
                nodes: BTreeSet::new(),
                cuts: BTreeSet::new(),
            };
            ip_ok(&["addr", "add", &format!("10.77.{x}.254/24"), "dev", &br]);
            ip_ok(&["link", "set", &br, "up"]);
            return net;
        }
        panic!("netns: no free bridge name pal1..pal250");
    }

    /// The bridge's name, which starts every other name of this run.
    pub fn prefix(&self) -> String {
        format!("pal{}", self.x)
    }

    fn ns(&self, id: u64) -> String {
        format!("pal{}-n{id}", self.x)
    }

    /// The root-namespace end of node `id`'s veth pair (the other end is its `eth0`).
    fn veth(&self, id: u64) -> String {
        format!("pal{}v{id}", self.x)
    }

    /// The address of node `id`.
    pub fn host(&self, id: u64) -> IpAddr {
        assert!((1..254).contains(&id), "netns: node id {id} out of 1..253");
        IpAddr::V4(Ipv4Addr::new(10, 77, self.x, id as u8))
    }

    /// The bridge's address in the root namespace, where a server of the root namespace is
    /// reached from the nodes' namespaces.
    pub fn bridge(&self) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 77, self.x, 254))
    }

    /// Creates node `id`'s namespace and its link into the bridge (once).
    pub fn add_node(&mut self, id: u64) {
        if !self.nodes.insert(id) {
            return;
        }
        let (ns, veth, br) = (self.ns(id), self.veth(id), self.prefix());
        let addr = format!("{}/24", self.host(id));
        ip_ok(&["netns", "add", &ns]);
        ip_ok(&[
            "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
        ]);
        ip_ok(&["link", "set", &veth, "master", &br, "up"]);
        ip_ok(&["-n", &ns, "addr", "add", &addr, "dev", "eth0"]);
        ip_ok(&["-n", &ns, "link", "set", "eth0", "up"]);
        ip_ok(&["-n", &ns, "link", "set", "lo", "up"]);
    }

    /// A command that runs `program` inside node `id`'s namespace (`ip netns exec` execs
    /// it, so the child's pid is the program's).
    pub fn command(&self, id: u64, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns(id), program]);
        cmd
    }

    fn route(&self, from: u64, to: u64, op: &str) -> Result<(), String> {
        let dst = format!("{}/32", self.host(to));
        ip(&["-n", &self.ns(from), "route", op, "blackhole", &dst])
    }

    /// Cuts the link between `a` and `b` in both directions.
    pub fn cut(&mut self, a: u64, b: u64) {
        for (from, to) in [(a, b), (b, a)] {
            if self.cuts.insert((from, to)) {
                if let Err(e) = self.route(from, to, "add") {
                    eprintln!("netns: {e}");
                }
            }
        }
    }

    /// Removes every cut.
    pub fn heal(&mut self) {
        for (from, to) in std::mem::take(&mut self.cuts) {
            if let Err(e) = self.route(from, to, "del") {
                eprintln!("netns: {e}");
            }
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting a veth deletes both ends at once (a deleted namespace lets go of its
        // end only later).
        for id in &self.nodes {
            let _ = ip(&["link", "del", &self.veth(*id)]);
            let _ = ip(&["netns", "del", &self.ns(*id)]);
        }
        let _ = ip(&["link", "del", &self.prefix()]);
    }
}
