#!/usr/bin/env python3
"""Writes tests/golden/train_golden.safetensors with PyTorch (Debian's python3-torch:
KILN_WITH_TORCH=1 scripts/install-deps.sh, then /usr/bin/python3 this file).

For three small reference models (kiln's nn::MLP, BenchBlock and GPT, parameter names as
kiln's state_dict) it stores the initial parameters, an input and a target, then what
kiln's training must reproduce (tests/autograd/training_test.cpp):
  <model>.loss, <model>.grad.<param>      loss and gradients of the initial parameters
  <model>.sgd1.<param>, <model>.sgd2.<param>  after 1 and 2 SGD steps (momentum 0.9,
                                          nesterov, weight decay 0.01, lr 0.1)
  <model>.adamw2.<param>                  after 2 AdamW steps (lr 1e-2, weight decay 0.1)
Losses: mse_loss for mlp and block, cross_entropy over the tokens for gpt.
"""
import json
import math
import pathlib
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
from gpu_peer import GPT  # noqa: E402  the same GPT as kiln's (names, tanh GELU, mask)


class Block(nn.Module):  # kiln's BenchBlock (the benchmark BLOCK), erf GELU
    def __init__(self, width, heads, hidden):
        super().__init__()
        self.width, self.heads = width, heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x):
        B, T, D = x.shape[0], x.shape[1], self.width // self.heads
        t = self.qkv(self.ln1(x)).reshape(B, T, 3, self.heads, D).permute(2, 0, 3, 1, 4)
        q, k, v = t[0], t[1], t[2]
        att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(D)), dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(B, T, self.width)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def mlp(width, layers):
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*mods)


def cases():
    torch.manual_seed(0)
    m = mlp(16, 3)
    yield "mlp", m, torch.randn(4, 16), torch.randn(4, 16), F.mse_loss
    b = Block(16, 2, 32)
    yield "block", b, torch.randn(2, 5, 16), torch.randn(2, 5, 16), F.mse_loss
    g = GPT(vocab=32, context=8, layers=2, heads=2, width=16)
    ids, targets = torch.randint(0, 32, (2, 6)), torch.randint(0, 32, (2, 6))
    yield "gpt", g, ids, targets, lambda logits, t: F.cross_entropy(logits.reshape(-1, 32), t.reshape(-1))


def train(model, x, target, loss_fn, make_opt, steps):
    opt = make_opt(model.parameters())
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(model(x), target).backward()
        opt.step()
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def main():
    out = {}
    for name, model, x, target, loss_fn in cases():
        init = {k: v.detach().clone() for k, v in model.state_dict().items()}
        for k, v in init.items():
            out[f"{name}.param.{k}"] = v
        out[f"{name}.input"], out[f"{name}.target"] = x, target
        loss = loss_fn(model(x), target)
        loss.backward()
        out[f"{name}.loss"] = loss.detach()
        for k, p in model.named_parameters():
            out[f"{name}.grad.{k}"] = p.grad.detach().clone()
        sgd = lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True)
        adamw = lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1)
        for tag, make_opt, steps in (("sgd1", sgd, 1), ("sgd2", sgd, 2), ("adamw2", adamw, 2)):
            model.load_state_dict(init)
            for k, v in train(model, x, target, loss_fn, make_opt, steps).items():
                out[f"{name}.{tag}.{k}"] = v
    write(out, pathlib.Path(__file__).resolve().parents[2] / "tests" / "golden" / "train_golden.safetensors")


def write(tensors, path):
    codes = {torch.float32: ("F32", "<f"), torch.int64: ("I64", "<q")}
    header = {"__metadata__": {"writer": "tools/golden/make_train_golden.py", "torch": torch.__version__}}
    data = b""
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        code, fmt = codes[t.dtype]
        raw = b"".join(struct.pack(fmt, v) for v in t.reshape(-1).tolist())
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    print(f"wrote {path} ({len(tensors)} tensors)")


if __name__ == "__main__":
    main()
