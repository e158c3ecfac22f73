"""PyTorch's f32 linear (addmm: MKL in the PyPI wheels) at the BLOCK's four product shapes,
one thread, in GFLOP/s: the peer of kiln_bench's BM_BlockProducts (docs/benchmarks.md,
"Which GEMM"). Cap the ISA as for the other peers (ATEN_CPU_CAPABILITY, MKL_ENABLE_INSTRUCTIONS).

    python bench/peers/gemm_peer.py
"""
import json
import time

import torch

SHAPES = ((256, 768), (256, 256), (256, 1024), (1024, 256))  # (K, N) of [512, K] x [K, N]


def main():
    torch.set_num_threads(1)
    for k, n in SHAPES:
        x, w, b = torch.randn(512, k), torch.randn(n, k), torch.randn(n)
        for _ in range(20):
            torch.nn.functional.linear(x, w, b)
        runs = []
        for _ in range(7):
            t0 = time.perf_counter()
            for _ in range(50):
                torch.nn.functional.linear(x, w, b)
            runs.append((time.perf_counter() - t0) / 50)
        best = sorted(runs)[len(runs) // 2]
        print(json.dumps({"bench": "gemm_peer", "shape": f"512x{k}x{n}", "us": best * 1e6,
                          "GFLOP/s": 2 * 512 * k * n / best / 1e9}))


if __name__ == "__main__":
    main()
