#!/usr/bin/env python3
"""`make bench` (with the project's Python environment): the Python package's costs.

- the call overhead of a one-op program on 8 elements from Python (kiln tensors in, and
  torch tensors in and out) against the same program run by `kiln run` in C++, and
  against PyTorch eager's call of the same op from Python;
- zero-copy exchange: from_dlpack / np.from_dlpack of 1 KB and 1 GB take the same time.

Run with PYTHONPATH=build/python and the python of scripts/python-venv.sh. Prints one
table and writes it between the python markers of docs/benchmarks.md.
"""
import argparse
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import timeit

import numpy as np
import torch

import kiln
from doc_table import write_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def per_call_us(fn, number):
    """Median over 7 repeats of the time per call, in microseconds."""
    return statistics.median(timeit.repeat(fn, number=number, repeat=7)) / number * 1e6


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


class AddOne(torch.nn.Module):
    def forward(self, x):
        return x + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "tools", "kiln", "kiln"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "add_one.pt2")
        x = torch.ones(8)
        torch.export.save(torch.export.export(AddOne(), (x,)), path)
        program = kiln.load(path)
        k = kiln.from_dlpack(x)
        py_kiln = per_call_us(lambda: program(k), 20000)
        py_torch = per_call_us(lambda: program(x), 20000)
        eager = per_call_us(lambda: x + 1, 20000)
        out = subprocess.run([args.kiln, "run", path, "--warmup", "100", "--repeat", "20000"], capture_output=True,
                             text=True, check=True, env=dict(os.environ, KILN_NUM_THREADS="1")).stdout
        cpp = float(out.split("median ")[1].split(" ms")[0]) * 1e3
    rows.append(("one-op program, 8 elements: Python call (kiln tensors) vs the C++ call", f"{py_kiln:.2f} us",
                 f"{cpp:.2f} us (C++)", py_kiln / cpp, "≤ 2×"))
    rows.append(("one-op program, 8 elements: Python call (kiln tensors) vs PyTorch eager `x + 1`", f"{py_kiln:.2f} us",
                 f"{eager:.2f} us (eager)", py_kiln / eager, "≤ 0.5×"))
    rows.append(("one-op program, 8 elements: Python call (torch in, torch out: two DLPack exchanges)",
                 f"{py_torch:.2f} us", f"{eager:.2f} us (eager)", py_torch / eager, "reported"))
    small, big = np.ones(256, dtype=np.float32), np.ones(256 * 1024 * 1024, dtype=np.float32)
    t_small = per_call_us(lambda: np.from_dlpack(kiln.from_dlpack(small)), 20000)
    t_big = per_call_us(lambda: np.from_dlpack(kiln.from_dlpack(big)), 20000)
    rows.append(("zero-copy round trip NumPy -> kiln -> NumPy: 1 GB vs 1 KB", f"{t_big:.2f} us", f"{t_small:.2f} us",
                 t_big / t_small, "≈ 1× (within noise)"))

    head = (f"Measured {datetime.date.today()} on {cpu_name()}, one thread; PyTorch {torch.__version__} (PyPI). "
            f"Command: `KILN_WITH_TORCH=1 make bench`.")
    lines = [head, "", "| workload | kiln from Python | reference | ratio | target |", "|---|---|---|---|---|"]
    lines += [f"| {n} | {a} | {b} | {r:.2f}× | {t} |" for n, a, b, r, t in rows]
    table = "\n".join(lines)
    print(table)
    write_table("python", "The Python package", table)


if __name__ == "__main__":
    sys.exit(main())
