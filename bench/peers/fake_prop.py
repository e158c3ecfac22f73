"""FakeTensorMode: a forward of each workload on fake tensors (shapes and dtypes, no data),
the peer of kiln's BM_FakeMlpForward / BM_FakeBlockForward (fake propagation).

Prints "<model> FakeTensorMode forward" in us/op (the forward's time over the ATen ops it
dispatches, counted by a dispatch mode; `ops` holds the count) and in ms/forward."""
import argparse
import os
import sys

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402
from peer import emit, time_ms  # noqa: E402


class OpCounter(TorchDispatchMode):
    """Counts the ATen ops a call dispatches."""

    def __init__(self):
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        return func(*args, **(kwargs or {}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    models.set_threads(1)
    for name in models.MODELS:
        module, x, _ = models.make(name)
        f, params = models.functional(module), models.parameters(module)
        with torch.no_grad(), OpCounter() as counter:
            f(params, x)
        mode = FakeTensorMode()
        fake_params = {k: mode.from_tensor(v) for k, v in params.items()}
        fake_x = mode.from_tensor(x)

        def forward():
            with torch.no_grad(), mode:
                f(fake_params, fake_x)
        samples = time_ms(forward, args.reps, warmup=2)
        emit(f"{name} FakeTensorMode forward", "us/op", [s * 1e3 / counter.ops for s in samples],
             ops=counter.ops)
        emit(f"{name} FakeTensorMode forward", "ms/forward", samples, ops=counter.ops)


if __name__ == "__main__":
    main()
