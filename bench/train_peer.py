#!/usr/bin/python3
"""PyTorch eager on kiln's training benchmarks (bench/train_bench.cpp), same shapes and
step: the MLP and BLOCK workloads (bench/peers/models.py), forward, mse_loss against a
fixed target, backward, SGD(lr=1e-3, momentum=0.9) step; 1 and 2 threads (torch and
OpenBLAS both, models.set_threads). Prints JSON lines: ms per step (median of --reps).

    /usr/bin/python3 bench/train_peer.py [--reps 20]
    /usr/bin/python3 bench/train_peer.py --memory block   # peak extra RSS of one step

--memory runs one step in this fresh process and reports how far the resident set rose
above what model, input and target already held (VmHWM after the step minus VmRSS
before it; /proc/self/clear_refs resets the high-water mark). bench/train_memory.cpp
measures kiln the same way.
"""
import argparse
import json
import os
import sys

PEERS = os.environ.get("KILN_PEERS", os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
sys.path.insert(0, PEERS)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import models  # noqa: E402
from peerutil import emit, time_call  # noqa: E402


def setup(name):
    mod, x, _ = models.make(name)
    mod.train()
    target = torch.randn_like(x)
    opt = torch.optim.SGD(mod.parameters(), lr=1e-3, momentum=0.9)

    def step():
        opt.zero_grad()
        F.mse_loss(mod(x), target).backward()
        opt.step()
    return step


def rss_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(field)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--memory", choices=models.MODELS)
    ap.add_argument("--forward-memory", choices=models.MODELS,
                    help="peak extra RSS of one eager forward (eval, no_grad) instead of a step")
    args = ap.parse_args()
    if args.forward_memory:
        models.set_threads(1)
        mod, x, _ = models.make(args.forward_memory)
        mod.eval()
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = rss_kib("VmRSS")
        with torch.no_grad():
            mod(x)
        peak = rss_kib("VmHWM")
        print(json.dumps({"bench": "train_peer", "case": f"{args.forward_memory} forward peak extra RSS",
                          "unit": "MiB", "median": (peak - before) / 1024.0}), flush=True)
        return
    if args.memory:
        models.set_threads(1)
        step = setup(args.memory)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = rss_kib("VmRSS")
        step()
        peak = rss_kib("VmHWM")
        print(json.dumps({"bench": "train_peer", "case": f"{args.memory} train step peak extra RSS",
                          "unit": "MiB", "median": (peak - before) / 1024.0}), flush=True)
        return
    for name in models.MODELS:
        step = setup(name)
        for t in (1, 2):
            models.set_threads(t)
            s = time_call(step, args.reps, warmup=3)
            emit("train_peer", f"{name} train step threads={t}", "ms/step", [v * 1e3 for v in s],
                 env=models.env_info())
    a = torch.randn(8, requires_grad=True)
    b, g = torch.randn(8), torch.ones(8)

    def tiny():
        (a + b).backward(g)
    s = time_call(tiny, 20000, warmup=1000)
    emit("train_peer", "a+b fwd+bwd (python)", "us/call", [v * 1e6 for v in s])


if __name__ == "__main__":
    main()
