#!/usr/bin/env python3
"""Throughput of Palisade with many Raft groups: a cost model (docs/scaling.md).

Nothing here is measured by this script: it combines figures measured for one group
(docs/performance.md) into an estimate for G groups over N nodes, each group with 3 replicas
and its leader placed round-robin. Three limits, the lowest wins:

  cpu   every write costs LEADER_US of CPU on its leader and FOLLOWER_US on each of its two
        followers; a node has CORES cores.
  group one group's serial path (one apply loop, one log-sync thread): GROUP_MAX writes/s.
  disk  a node completes SYNCS_PER_NODE fsyncs/s; a sync carries the entries that were ready,
        WRITES_PER_SYNC at 64 clients for one group. With one log per group the clients are
        split over G logs, so each sync carries fewer writes (at least 1); with one shared
        log per node (one RocksDB WAL for every group on it) the batch stays whole.

Usage: scripts/scaling-model.py [--cores 8] [--clients 64]
"""

import argparse

# From docs/performance.md: 3 nodes sharing one 2-core VM completed about 9,900 replicated,
# fsync'd writes/s at 64 clients, CPU-bound: about 2 cores / 9,900 = 202 us of CPU per
# write over the three nodes, split leader:follower about 1.5:1 (the leader encodes, sends
# twice and answers the client).
LEADER_US = 87.0
FOLLOWER_US = 58.0
# One node alone (no replication) reached about 17,000 writes/s on the same 2 cores; the
# serial path of a group is taken as 3x that, since it used well under one core of the two.
GROUP_MAX = 50_000.0
# Measured on the same disk: about 4,600 appends+fdatasync/s per writer with three writers.
SYNCS_PER_NODE = 4_600.0
# Measured at 64 clients: 5.41 commands per entry x 3.26 entries per sync.
WRITES_PER_SYNC_AT_64 = 17.6


def throughput(groups, nodes, cores, clients, shared_log):
    """Writes/s of the whole cluster, and which limit binds."""
    # Leaders round-robin: the busiest node leads ceil(G/N) groups when G >= N, else 1.
    leading = -(-groups // nodes) if groups >= nodes else 1
    # Per unit of cluster write rate, the CPU the busiest node spends.
    if groups >= nodes:
        per_node_us = (LEADER_US + 2 * FOLLOWER_US) / nodes
        # Uneven division: the busiest node leads `leading` of G groups.
        per_node_us = max(per_node_us, leading / groups * LEADER_US + 2 * FOLLOWER_US / nodes)
    else:
        # G leaders on G distinct nodes; followers spread; the leader nodes are busiest.
        per_node_us = LEADER_US / groups + 2 * FOLLOWER_US / min(nodes, 3 * groups) * 1.0
    cpu = cores * 1e6 / per_node_us
    group = GROUP_MAX * groups
    batch = WRITES_PER_SYNC_AT_64 * clients / 64
    if not shared_log:
        batch = max(1.0, batch / groups)
    # Each write is synced on 3 nodes; syncs spread over every node.
    disk = SYNCS_PER_NODE * nodes * batch / 3
    limits = {"cpu": cpu, "group": group, "disk": disk}
    which = min(limits, key=limits.get)
    return limits[which], which


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=8, help="cores per node")
    ap.add_argument("--clients", type=int, default=64, help="concurrent clients in all")
    a = ap.parse_args()
    print(f"# model: {a.cores} cores/node, {a.clients} clients, 3 replicas per group")
    print("# writes/s (limit) per log layout; 'x' is against 1 group on the same nodes")
    print(f"{'nodes':>5} {'groups':>6} {'log per group':>22} {'shared log per node':>24}")
    for nodes in (3, 6, 9):
        base, _ = throughput(1, nodes, a.cores, a.clients, True)
        for groups in (1, 2, 3, 6, 9, 16, 32, 64):
            if groups > 1 and groups < nodes and nodes > 3 and groups not in (2, 3):
                continue
            sep, ws = throughput(groups, nodes, a.cores, a.clients, False)
            sh, wh = throughput(groups, nodes, a.cores, a.clients, True)
            print(
                f"{nodes:>5} {groups:>6} {sep:>10,.0f} {ws:>5} {sep / base:>4.1f}x"
                f" {sh:>12,.0f} {wh:>5} {sh / base:>4.1f}x"
            )


if __name__ == "__main__":
    main()
