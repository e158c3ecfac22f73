"""Functionalization plus tracing of a program full of in-place ops and views, in fake mode:
the peer of kiln's BM_CaptureFakeMutationProgram, the same program (bench/models.h's
mutation_program): a clone, then 16 rounds of add_, mul_, a column view written with add_,
relu_, then the result added into the first input.

Prints "make_fx(functionalize(prog, remove=mutations)) fake" in us/source-op (over the
program's 98 source ops, the count kiln divides by too) and in us/graph-node (over the
call_function nodes of PyTorch's own graph)."""
import argparse
import os
import sys

import torch
from torch.func import functionalize
from torch.fx.experimental.proxy_tensor import make_fx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer import emit, time_ms  # noqa: E402

SOURCE_OPS = 1 + 16 * 6 + 1  # clone, 16 x (add_, mul_, view, select, add_, relu_), add_


def program(x, y):
    t = x.clone()
    for _ in range(16):
        t.add_(y)
        t.mul_(0.5)
        t.view(-1, 8).select(1, 0).add_(1.0)
        t.relu_()
    x.add_(t)
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(1)
    x, y = torch.randn(64, 64), torch.randn(64, 64)

    def trace():
        return make_fx(functionalize(program, remove="mutations"), tracing_mode="fake")(x, y)
    nodes = sum(1 for n in trace().graph.nodes if n.op == "call_function")
    samples = time_ms(trace, args.reps, warmup=1)
    case = "make_fx(functionalize(prog, remove=mutations)) fake"
    emit(case, "us/source-op", [s * 1e3 / SOURCE_OPS for s in samples], graph_nodes=nodes)
    emit(case, "us/graph-node", [s * 1e3 / nodes for s in samples], graph_nodes=nodes)


if __name__ == "__main__":
    main()
