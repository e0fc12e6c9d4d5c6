#!/usr/bin/env python3
"""Cost model (alpha-beta) of hierarchical vs flat all-reduce, reduce_scatter and all_gather
for N nodes x L GPUs, as explained in docs/multinode.md. A MODEL, not a measurement: every
input is a named constant below (its source in the comment), and each can be overridden on
the command line, e.g. `python3 docs/multinode_model.py --alpha-net-us 25 --eta-net 0.7`.

Prints markdown tables: time (us) and busbw (GB/s) per message size for
  flat ring   one communicator over all N*L ranks, NCCL ring (bandwidth-optimal)
  flat tree   one communicator, NCCL double binary tree between nodes, chains inside
              (all_reduce only: NCCL has no tree for reduce_scatter / all_gather)
  hier        node step (actorcc NVLink kernels) + rail step (one GPU per node) + node step,
              pipelined in chunks above the latency bar, the latency path below it
              (the rules of src/topology/rails.cpp)
busbw = algbw x 2(n-1)/n for all_reduce and (n-1)/n for the others (nccl-tests convention).
"""
import argparse
import math

GB = 1e9
US = 1e-6

# Inputs, each with where it comes from (figures quoted in shared baselines and the doc).
DEFAULTS = dict(
    nodes=2,
    gpus_per_node=8,
    # Per-GPU NVLink bandwidth a collective reaches inside an 8 x H200 NVSwitch node:
    # NCCL ring busbw ~370 GB/s (NVIDIA/nccl-tests issue 212); measured here: one process
    # writes its peer at 365-369 GB/s (H200 NV18, baselines/floor.cu).
    nvlink_gbs=370.0,
    # EFA on P5en: 16 x 200 Gb/s per node = 400 GB/s line rate per node, 2 links per GPU.
    efa_links_per_node=16,
    efa_link_gbits=200.0,
    # Fraction of line rate a collective gets on the network: 2 nodes x 8 H100 with
    # 8 x 400G RoCE reach 330 GB/s busbw of 400 GB/s line rate (NVIDIA/nccl issue 1221).
    eta_net=330.0 / 400.0,
    # One network message, GPU to GPU through NCCL's net path, small: chosen so that the
    # flat-tree model's 1 KB all-reduce lands inside the published 50-57 us for 2 nodes
    # over EFA (dstack PR 3961; ~46 us over IB, NVIDIA/nccl issue 1244).
    alpha_net_us=18.0,
    # One intra-node collective step by an actorcc kernel (one-shot style, 8 GPUs): 5.9 us
    # for a custom one-shot all-reduce on 8 x H100 (sglang PR 2904); measured here 4.7 us
    # eager for the LL one-shot on 2 H200.
    alpha_node_step_us=5.9,
    # One hop of an NCCL intra-node chain or ring step (LL protocol): an assumption, ~1.5 us.
    alpha_nvlink_hop_us=1.5,
    # Chunk of the pipelined hierarchical path and the latency bar (HierTuning defaults).
    chunk_bytes=4 << 20,
    latency_max_bytes=256 << 10,
)

SIZES = [1 << k for k in range(10, 31, 2)]  # 1 KB ... 1 GB, x4


def label(n):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div:
            return f"{n // div} {unit}"
    return f"{n} B"


class Model:
    def __init__(self, p):
        self.p = p
        self.N = p["nodes"]
        self.L = p["gpus_per_node"]
        self.W = self.N * self.L
        self.b_nvl = p["nvlink_gbs"] * GB
        line_node = p["efa_links_per_node"] * p["efa_link_gbits"] / 8 * GB
        self.b_node_net = line_node * p["eta_net"]  # what one node's NICs deliver together
        self.b_gpu_net = self.b_node_net / self.L  # one rail member's share (2 EFA links)
        self.a_net = p["alpha_net_us"] * US
        self.a_step = p["alpha_node_step_us"] * US
        self.a_hop = p["alpha_nvlink_hop_us"] * US

    # ---- flat: one communicator over all W ranks ----
    def ring(self, coll, S):
        W = self.W
        steps = 2 * (W - 1) if coll == "all_reduce" else W - 1
        net_steps = (2 if coll == "all_reduce" else 1) * (self.N - 1)
        # A pipelined (LL) ring's latency is the sum of the hops a piece of data travels:
        # net_steps of them cross the network, the rest are NVLink hops (the form of NCCL's
        # own tuning model, src/graph/tuning.cc).
        lat = (steps - net_steps) * self.a_hop + net_steps * self.a_net
        # Each rank (NVLink) and each node's NICs (the rings that leave it) carry
        # steps/W * S: the ring is bound by the slower of the two.
        bw = steps / W * S / min(self.b_nvl, self.b_node_net)
        return lat + bw

    def tree(self, S):
        # Chain of L GPUs inside each node, binary tree between nodes, reduce up then
        # broadcast down; double tree: each node sends about S in total on the network.
        depth = math.ceil(math.log2(self.N)) if self.N > 1 else 0
        lat = 2 * ((self.L - 1) * self.a_hop + depth * self.a_net)
        bw = max(2 * S / self.b_nvl, S / self.b_node_net)  # pipelined chain: the slower stage
        return lat + bw

    # ---- hierarchical (src/topology/rails.cpp rules) ----
    def rail_all_reduce(self, nbytes, gpu_share):
        """Ring all-reduce of nbytes over the N members of a rail; gpu_share: fraction of a
        node's network the rail gets (1/L when all rails run, 1/L as well for one rail: a GPU
        reaches its own NICs only)."""
        N = self.N
        if N == 1:
            return 0.0, 0.0
        lat = 2 * (N - 1) * self.a_net
        bw = 2 * (N - 1) / N * nbytes / (self.b_node_net * gpu_share)
        return lat, bw

    def hier(self, coll, S):
        N, L, W = self.N, self.L, self.W
        pipelined = S > self.p["latency_max_bytes"]
        if coll == "all_reduce" and not pipelined:
            # node reduce to local 0, all-reduce on rail 0, node broadcast from local 0
            rl, rb = self.rail_all_reduce(S, 1 / L)
            return 2 * self.a_step + 2 * S / self.b_nvl + rl + rb
        if coll == "all_reduce":
            node_bw = 2 * (L - 1) / L * S / self.b_nvl  # reduce-scatter + all-gather in node
            rl, rb = self.rail_all_reduce(S / L, 1 / L)  # every rail, a 1/L shard each
            lat = 2 * self.a_step + rl
        else:
            # reduce_scatter: node reduce-scatter of rail blocks, rail reduce-scatter;
            # all_gather: rail all-gather, node all-gather of rail blocks. S = the full buffer.
            node_bw = (L - 1) / L * S / self.b_nvl
            rb = (N - 1) / N * S / self.b_node_net  # each node sends (N-1)/N of S over its NICs
            lat = self.a_step + (N - 1) * self.a_net
        if not pipelined:
            return lat + node_bw + rb
        # Pipelined: the two resources work at once; the slower sets the pace, and one chunk
        # of the faster one is the fill/drain cost.
        frac = min(1.0, self.p["chunk_bytes"] / S)
        return lat + max(node_bw, rb) + min(node_bw, rb) * frac

    def busbw(self, coll, S, t):
        f = 2 * (self.W - 1) / self.W if coll == "all_reduce" else (self.W - 1) / self.W
        return S / t * f / GB


def table(m, coll):
    shapes = ["flat ring", "flat tree", "hier"] if coll == "all_reduce" else ["flat ring", "hier"]
    head = "| size | " + " | ".join(f"{s} us" for s in shapes) + " | " + " | ".join(f"{s} busbw" for s in shapes) + " | hier vs best flat |"
    rows = [head, "|" + " ---: |" * (2 * len(shapes) + 2)]
    for S in SIZES:
        ts = []
        for s in shapes:
            if s == "flat ring":
                ts.append(m.ring(coll, S))
            elif s == "flat tree":
                ts.append(m.tree(S))
            else:
                ts.append(m.hier(coll, S))
        best_flat = min(ts[:-1])
        rows.append(
            f"| {label(S)} | "
            + " | ".join(f"{t / US:.1f}" for t in ts)
            + " | "
            + " | ".join(f"{m.busbw(coll, S, t):.1f}" for t in ts)
            + f" | {best_flat / ts[-1]:.2f}x |"
        )
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for k, v in DEFAULTS.items():
        ap.add_argument("--" + k.replace("_", "-"), type=type(v), default=v)
    p = vars(ap.parse_args())
    m = Model(p)
    print(f"Model inputs: {m.N} nodes x {m.L} GPUs; NVLink {p['nvlink_gbs']:.0f} GB/s per GPU; "
          f"network {m.b_node_net / GB:.0f} GB/s per node ({p['efa_links_per_node']} x {p['efa_link_gbits']:.0f} Gb/s "
          f"x eta {p['eta_net']:.3f}); alpha_net {p['alpha_net_us']} us; node step {p['alpha_node_step_us']} us; "
          f"NVLink hop {p['alpha_nvlink_hop_us']} us; chunk {label(p['chunk_bytes'])}; latency bar {label(p['latency_max_bytes'])}")
    for coll in ("all_reduce", "reduce_scatter", "all_gather"):
        print(f"\n### {coll} (model)\n")
        print(table(m, coll))


if __name__ == "__main__":
    main()
