"""The benchmark workloads in PyTorch, op for op as kiln's reference models.

MLP:   x[64, 512] through 8 x (Linear 512->512, ReLU)            (kiln: nn::Sequential)
BLOCK: x[4, 128, 256], pre-LayerNorm block: attention of 4 heads written with matmul
       and a non-causal softmax, a residual, then LayerNorm, Linear 256->1024, erf GELU,
       Linear 1024->256, a residual                                (kiln: nn::BenchBlock)

make(name) -> (module, example input, a target shaped like the output);
set_threads(n) sets PyTorch's intra-op threads (and BLAS's, through it).
"""
import math

import torch
from torch import nn

MODELS = ("mlp", "block")


class Block(nn.Module):
    def __init__(self, width=256, heads=4, hidden=1024):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x):
        b, t, w = x.shape
        d = w // self.heads
        qkv = self.qkv(self.ln1(x)).reshape(b, t, 3, self.heads, d).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = torch.softmax(q @ k.transpose(-2, -1) * (1.0 / math.sqrt(d)), dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, w))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


def make(name):
    torch.manual_seed(0)
    if name == "mlp":
        layers = []
        for _ in range(8):
            layers += [nn.Linear(512, 512), nn.ReLU()]
        module, x = nn.Sequential(*layers), torch.randn(64, 512)
    elif name == "block":
        module, x = Block(), torch.randn(4, 128, 256)
    else:
        raise ValueError(f"unknown model {name!r}; the models are {MODELS}")
    # Both models map x to its own shape. The target is made without a forward, so that a
    # fresh process's first forward is the first (the memory rows measure it cold, as
    # bench/train_memory.cpp measures kiln's first run).
    return module, x, torch.randn_like(x)


def set_threads(n):
    torch.set_num_threads(n)


def functional(module):
    """The module as a function of (its parameters by name, its input): what make_fx and
    FakeTensorMode see, so that the parameters are graph inputs as kiln's are."""
    from torch.func import functional_call

    def f(params, x):
        return functional_call(module, params, (x,))
    return f


def parameters(module):
    return {k: v.detach() for k, v in module.named_parameters()}
