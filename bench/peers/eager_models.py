"""PyTorch's forward of the benchmark models (models.py) at 1 and 2 threads: eager, or
through torch.compile with --compile MODE (the case names then end in "compile=MODE").

One JSON line per model and thread count: the median and fastest ms per forward over
--reps timed calls (after warm-up), and the minor page faults per forward (a fresh page
touched is a fault: what kiln's caching allocator avoids).
"""
import argparse
import json
import resource
import statistics
import time

import torch

import models
from peer import compiled


def minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--compile", metavar="MODE", help="torch.compile mode: default, max-autotune-no-cudagraphs, ...")
    args = ap.parse_args()
    for name in models.MODELS:
        module, x, _ = models.make(name)
        module.eval()
        label = f"{name} eager nn.Module"
        if args.compile:
            module, label = compiled(module, args.compile), f"{name} compile={args.compile}"
        for threads in (1, 2):
            models.set_threads(threads)
            times = []
            with torch.no_grad():
                for _ in range(3):
                    module(x)
                faults = minor_faults()
                for _ in range(args.reps):
                    t0 = time.perf_counter()
                    module(x)
                    times.append((time.perf_counter() - t0) * 1e3)
                faults = (minor_faults() - faults) / args.reps
            print(json.dumps({"case": f"{label} threads={threads}", "unit": "ms/forward",
                              "median": statistics.median(times), "min": min(times),
                              "minor_faults_per_forward": faults}), flush=True)


if __name__ == "__main__":
    main()
