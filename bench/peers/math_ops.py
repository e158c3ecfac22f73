"""PyTorch's time for the ops of kiln's BM_Math1M (transcendental ops on 1M f32 elements)
and BM_BlockRowOps (the BLOCK's row kernels at its shapes), one thread: one JSON line per
op, "math OP" / "rows OP" in us/call. bench/run_bench.py runs it once per vector level,
setting ATEN_CPU_CAPABILITY and ONEDNN_MAX_CPU_ISA (PyTorch's GELU runs in oneDNN, which
picks its own level) as kiln's KILN_CPU_ISA."""
import argparse

import torch
import torch.nn.functional as F

from peer import emit, time_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    a = torch.randn(1 << 20)
    math = {"exp": torch.exp, "erf": torch.erf, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
            "silu": F.silu, "gelu": F.gelu, "gelu_tanh": lambda v: F.gelu(v, approximate="tanh")}
    for name, f in math.items():
        emit(f"math {name}", "us/call", [v * 1e3 for v in time_ms(lambda: f(a), args.reps, warmup=10)])
    x, w, b = torch.randn(4, 128, 256), torch.randn(256), torch.randn(256)
    scores, hidden = torch.randn(4, 4, 128, 128), torch.randn(4, 128, 1024)
    rows = {"layer_norm": lambda: F.layer_norm(x, (256,), w, b),
            "softmax": lambda: torch.softmax(scores, -1),
            "gelu": lambda: F.gelu(hidden),
            "mean_all": lambda: x.mean(),
            "sum_rows": lambda: scores.sum(-1, keepdim=True)}
    for name, f in rows.items():
        emit(f"rows {name}", "us/call", [v * 1e3 for v in time_ms(f, args.reps, warmup=10)])
    print(f'{{"case": "capability", "unit": "-", "median": 0, "isa": "{torch.backends.cpu.get_cpu_capability()}"}}',
          flush=True)


if __name__ == "__main__":
    main()
