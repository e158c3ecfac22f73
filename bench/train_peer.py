#!/usr/bin/python3
"""PyTorch (eager, or torch.compile with --compile MODE) on kiln's training benchmarks (bench/train_bench.cpp), same shapes and
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
from peer import compiled, emit, time_ms  # noqa: E402


def setup(name, mode=None):
    mod, x, _ = models.make(name)
    mod.train()
    target = torch.randn_like(x)
    opt = torch.optim.SGD(mod.parameters(), lr=1e-3, momentum=0.9)
    fwd = compiled(mod, mode) if mode else mod

    def step():
        opt.zero_grad()
        F.mse_loss(fwd(x), target).backward()
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
    ap.add_argument("--compile", metavar="MODE", help="the forward through torch.compile in this mode")
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
        step = setup(name, args.compile)
        label = f"{name} train step" + (f" compile={args.compile}" if args.compile else "")
        for t in (1, 2):
            models.set_threads(t)
            emit(f"{label} threads={t}", "ms/step", time_ms(step, args.reps, warmup=3))
    if args.compile:
        return
    a = torch.randn(8, requires_grad=True)
    b, g = torch.randn(8), torch.ones(8)

    def tiny():
        (a + b).backward(g)
    emit("a+b fwd+bwd (python)", "us/call", [v * 1e3 for v in time_ms(tiny, 20000, warmup=1000)])


if __name__ == "__main__":
    main()
