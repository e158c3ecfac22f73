#!/usr/bin/env python3
"""PyTorch eager on the work of kiln_gpu_models: the same modules (parameter names as
kiln's state_dict), the same weights and input read from the safetensors files it wrote,
timed the same way (3 warm-up calls, then REPS calls between two synchronizes). Prints
one JSON line per model with the time and the largest difference from kiln's output.

    python3 bench/gpu_peer.py DIR [--reps 50] [--device cuda]
"""
import argparse
import json
import math
import os
import struct
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16,
          "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8,
          "BOOL": torch.bool}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = DTYPES[info["dtype"]]
        t = torch.frombuffer(bytearray(data[base + begin:base + end]), dtype=dtype)
        out[name] = t.reshape(info["shape"])
    return out


class Attention(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self.width, self.heads = width, heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        idx = torch.arange(context)
        self.register_buffer("mask", idx[None, :] > idx[:, None], persistent=False)

    def forward(self, x):
        B, T = x.shape[0], x.shape[1]
        D = self.width // self.heads
        t = self.qkv(x).reshape(B, T, 3, self.heads, D).permute(2, 0, 3, 1, 4)
        q, k, v = t[0], t[1], t[2]
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = torch.softmax(att.masked_fill(self.mask[:T, :T], float("-inf")), dim=-1)
        return self.proj(torch.matmul(att, v).transpose(1, 2).reshape(B, T, self.width))


class Block(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.ln2 = nn.LayerNorm(width)
        self.attn = Attention(width, heads, context)
        self.fc = nn.Linear(width, 4 * width)
        self.proj = nn.Linear(4 * width, width)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, context, layers, heads, width):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.blocks = nn.ModuleList([Block(width, heads, context) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


def build(name, state):
    if name == "mlp":  # the benchmark MLP: (Linear + ReLU) per layer, as kiln's Sequential
        mods = []
        for i in sorted({int(k.split(".")[0]) for k in state}):
            out_f, in_f = state[f"{i}.weight"].shape
            mods += [nn.Linear(in_f, out_f), nn.ReLU()]
        return nn.Sequential(*mods)
    heads = int(state.pop("__heads__")[0])
    vocab, width = state["wte.weight"].shape
    context = state["wpe.weight"].shape[0]
    layers = len({k.split(".")[1] for k in state if k.startswith("blocks.")})
    return GPT(vocab, context, layers, heads, width)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # as kiln's default (D5)
        torch.backends.cudnn.allow_tf32 = False
    for name in ("mlp", "gpt"):
        path = os.path.join(args.dir, name + ".safetensors")
        if not os.path.exists(path):
            continue
        tensors = read_safetensors(path)
        x = tensors.pop("__input__").to(dev)
        want = tensors.pop("__output__")
        model = build(name, tensors)
        model.load_state_dict(tensors, strict=True)
        model = model.to(dev).eval()
        with torch.no_grad():
            for _ in range(3):
                out = model(x)
            sync()
            t0 = time.perf_counter()
            for _ in range(args.reps):
                out = model(x)
            sync()
            ms = (time.perf_counter() - t0) * 1e3 / args.reps
        diff = (out.float().cpu() - want.float()).abs().max().item()
        print(json.dumps({"model": name, "impl": f"torch {torch.__version__} eager", "ms": round(ms, 4),
                          "max_abs_diff_vs_kiln": diff}), flush=True)


if __name__ == "__main__":
    main()
