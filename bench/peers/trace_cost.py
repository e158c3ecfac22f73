"""make_fx in fake mode: tracing each workload's forward (parameters as inputs), its forward
and backward as one graph, and chains of 32 and 256 adds for the cost of one more node: the
peer of kiln's BM_MakeFxFakeMlp/Block, BM_CaptureJointMlp/Block and BM_MakeFxFakeChain.

Prints "<model> make_fx fwd tracing_mode=fake" and "<model> make_fx fwd+bwd
tracing_mode=fake" in s/trace (with `nodes_call`, the graph's call_function nodes) and in
us/call-node, and "chain slope make_fx tracing_mode=fake (marginal cost per add node)" in
us/node."""
import argparse
import os
import sys

import torch
from torch.fx.experimental.proxy_tensor import make_fx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402
from peer import emit, time_ms  # noqa: E402


def call_nodes(gm):
    return sum(1 for n in gm.graph.nodes if n.op == "call_function")


def adds(n):
    def chain(x, y):
        for _ in range(n):
            x = x + y
        return x
    return chain


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    models.set_threads(1)
    for name in models.MODELS:
        module, x, _ = models.make(name)
        f, params = models.functional(module), models.parameters(module)
        nodes = call_nodes(make_fx(f, tracing_mode="fake")(params, x))
        samples = time_ms(lambda: make_fx(f, tracing_mode="fake")(params, x), args.reps, warmup=1)
        case = f"{name} make_fx fwd tracing_mode=fake"
        emit(case, "s/trace", [s * 1e-3 for s in samples], nodes_call=nodes)
        emit(case, "us/call-node", [s * 1e3 / nodes for s in samples], nodes_call=nodes)
        # forward and backward in one graph, as AOTAutograd traces a joint: the peer of
        # kiln's joint capture (BM_CaptureJoint*)
        grad_params = {k: v.clone().requires_grad_(True) for k, v in params.items()}

        def joint(p, x):
            loss = f(p, x).sum()
            return loss, torch.autograd.grad(loss, list(p.values()))
        nodes = call_nodes(make_fx(joint, tracing_mode="fake")(grad_params, x))
        samples = time_ms(lambda: make_fx(joint, tracing_mode="fake")(grad_params, x), args.reps, warmup=1)
        case = f"{name} make_fx fwd+bwd tracing_mode=fake"
        emit(case, "s/trace", [s * 1e-3 for s in samples], nodes_call=nodes)
        emit(case, "us/call-node", [s * 1e3 / nodes for s in samples], nodes_call=nodes)
    a, b = torch.randn(8), torch.randn(8)
    per_length = {n: time_ms(lambda n=n: make_fx(adds(n), tracing_mode="fake")(a, b), args.reps, warmup=1)
                  for n in (32, 256)}
    slope = [(long - short) * 1e3 / (256 - 32) for short, long in zip(per_length[32], per_length[256])]
    emit("chain slope make_fx tracing_mode=fake (marginal cost per add node)", "us/node", slope)


if __name__ == "__main__":
    main()
