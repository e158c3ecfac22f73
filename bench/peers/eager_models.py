"""PyTorch eager forward of the benchmark models (models.py) at 1 and 2 threads.

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


def minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    for name in models.MODELS:
        module, x, _ = models.make(name)
        module.eval()
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
            print(json.dumps({"case": f"{name} eager nn.Module threads={threads}", "unit": "ms/forward",
                              "median": statistics.median(times), "min": min(times),
                              "minor_faults_per_forward": faults}), flush=True)


if __name__ == "__main__":
    main()
