"""torch.export of the benchmark workloads with a dynamic batch (MLP) or a dynamic batch and
sequence (BLOCK), and the same export static, per call node of the exported graph: the peer
of kiln's BM_Export/{static,dynamic}_{mlp,block} rows (issue 49's tracing target).

Prints one JSON line per case: "<model> torch.export dynamic" / "... static", in
us/call-node (the median export time over the graph's call_function nodes)."""
import argparse
import os
import sys

import torch
from torch.export import Dim, export

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402
from peer import emit, time_ms  # noqa: E402


def call_nodes(program):
    return sum(1 for n in program.graph.nodes if n.op == "call_function")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    for name in ("mlp", "block"):
        module, x, _ = models.make(name)
        dims = {0: Dim("batch", min=1, max=1024)}
        if name == "block":
            dims[1] = Dim("seq", min=1, max=1024)
        for kind, kw in (("static", {}), ("dynamic", {"dynamic_shapes": (dims,)})):
            program = export(module, (x,), **kw)
            nodes = call_nodes(program)
            samples = time_ms(lambda: export(module, (x,), **kw), args.reps, warmup=1)
            emit(f"{name} torch.export {kind}", "us/call-node", [s * 1e3 / nodes for s in samples],
                 nodes=nodes)


if __name__ == "__main__":
    main()
