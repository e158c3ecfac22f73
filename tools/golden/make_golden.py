#!/usr/bin/python3
"""Writes tests/golden/torch_ops.json: inputs and PyTorch's outputs for a fixed set of
ops, so kiln's tests compare against PyTorch without needing torch at run time.

Run with Debian's torch:  /usr/bin/python3 tools/golden/make_golden.py
"""
import json
import math
import pathlib

import torch
import torch.nn.functional as F

NAMES = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16",
         torch.bfloat16: "bf16", torch.int64: "i64", torch.int32: "i32", torch.int16: "i16",
         torch.int8: "i8", torch.uint8: "u8", torch.bool: "bool"}


def enc(t):
    return {"dtype": NAMES[t.dtype], "shape": list(t.shape),
            "data": [v if math.isfinite(v) else str(v)  # JSON has no inf/nan
                     for v in t.detach().double().reshape(-1).tolist()]}


g = torch.Generator().manual_seed(1234)


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=g).to(dtype)


def ints(high, *shape, dtype=torch.int64):
    return torch.randint(0, high, shape, generator=g).to(dtype)


cases = []


def case(op, inputs, output, args=None, note="", rtol=1e-5, atol=1e-6):
    cases.append({"op": op, "note": note, "inputs": [enc(t) for t in inputs],
                  "args": args or {}, "output": enc(output), "rtol": rtol, "atol": atol})


a, b = randn(3, 4), randn(4)
case("add", [a, b], torch.add(a, b, alpha=2.0), {"alpha": 2.0}, "broadcast row, alpha")
c = randn(3, 1)
case("sub", [a, c], a - c, note="broadcast column")
x3, y3 = randn(2, 1, 3), randn(4, 1)
case("mul", [x3, y3], x3 * y3, note="3-D broadcast")
case("div", [a, b], a / b)
i1, i2 = ints(10, 5, dtype=torch.int32), ints(10, 5) + 1
case("div", [i1, i2], i1 / i2, note="integer true division -> f32")
u, s8 = ints(200, 6, dtype=torch.uint8), (ints(200, 6) - 100).to(torch.int8)
case("add", [u, s8], torch.add(u, s8), note="u8 + i8 -> i16")
h = randn(5, dtype=torch.float16)
case("add_scalar", [h], h + 2.5, {"other": 2.5}, "f16 tensor + float scalar stays f16", 1e-3, 1e-3)
case("add_scalar", [i1], i1 + 2.5, {"other": 2.5}, "int tensor + float scalar -> f32")
case("add_int_scalar", [u], u + 7, {"other": 7}, "u8 + int scalar stays u8 (wraps)")
hb = randn(5, dtype=torch.bfloat16)
case("add", [h, hb], h + hb, note="f16 + bf16 -> f32", rtol=1e-2, atol=1e-2)
base, e = randn(6).abs() + 0.1, randn(6)
case("pow", [base, e], torch.pow(base, e), rtol=1e-5)
case("maximum", [a, b], torch.maximum(a, b))
case("lt", [a, b], a < b)
p, q = ints(3, 8), ints(3, 8)
case("eq", [p, q], p == q)
cond = randn(3, 4) > 0
case("where", [cond, a, b.to(torch.float64)], torch.where(cond, a, b.to(torch.float64)),
     note="promotes to f64")
z = randn(4, 5)
case("exp", [z], z.exp())
case("gelu", [z], F.gelu(z))
case("gelu", [z], F.gelu(z, approximate="tanh"), {"approximate": "tanh"}, "tanh form")
case("silu", [z], F.silu(z))
case("sigmoid", [z], torch.sigmoid(z))
case("tanh", [z], torch.tanh(z))
case("rsqrt", [z.abs() + 0.1], torch.rsqrt(z.abs() + 0.1))
r = randn(2, 3, 4)
case("sum", [r], r.sum(dim=[0, 2], keepdim=True), {"dim": [0, 2], "keepdim": True})
ri = ints(5, 3, 4, dtype=torch.int32)
case("sum", [ri], ri.sum(dim=[1]), {"dim": [1]}, "int32 sums to i64")
case("mean", [r], r.mean(dim=[-1]), {"dim": [-1]})
case("var", [r], r.var(dim=[1]), {"dim": [1], "correction": 1})
case("amax", [r], r.amax(dim=[1, 2]), {"dim": [1, 2]})
case("argmax", [r], r.argmax(dim=1), {"dim": 1})
case("softmax", [r], torch.softmax(r, dim=1), {"dim": 1})
case("log_softmax", [r], torch.log_softmax(r, dim=-1), {"dim": -1})
m1, m2 = randn(2, 1, 5, 6), randn(3, 6, 4)
case("matmul", [m1, m2], m1 @ m2, note="batch broadcast", rtol=1e-4, atol=1e-5)
v1, v2 = randn(6), randn(6, 3)
case("matmul", [v1, v2], v1 @ v2, note="1-D @ 2-D", rtol=1e-4, atol=1e-5)
xl, wl, bl = randn(2, 3, 8), randn(5, 8), randn(5)
case("linear", [xl, wl, bl], F.linear(xl, wl, bl), rtol=1e-4, atol=1e-5)
ln_w, ln_b = randn(8), randn(8)
case("layer_norm", [xl, ln_w, ln_b], F.layer_norm(xl, [8], ln_w, ln_b), {"shape": [8]},
     rtol=1e-4, atol=1e-5)
t1, t2 = randn(4, 3), randn(3, 4)
case("transpose_add", [t1, t2], t1.t() + t2, note="non-contiguous input")
c1, c2 = randn(3, 2), randn(3, 4, dtype=torch.float64)
case("cat", [c1, c2], torch.cat([c1, c2], 1), {"dim": 1}, "promotes to f64")
idx = ints(4, 5)
case("index_select", [a, idx], a.index_select(1, idx), {"dim": 1})
gi = ints(4, 3, 2)
case("gather", [a, gi], torch.gather(a, 1, gi), {"dim": 1})
emb, ei = randn(10, 4), ints(10, 2, 3)
case("embedding", [emb, ei], F.embedding(ei, emb))
mask = randn(3, 4) > 0.5
case("masked_fill", [a, mask], a.masked_fill(mask, -1.5), {"value": -1.5})
big = torch.tensor([0.1, 1e-5, 65504.0, 7e4, -3.3333, 1e-8], dtype=torch.float32)
case("to_f16", [big], big.to(torch.float16), note="rounding, overflow, subnormals", rtol=0,
     atol=0)

out = pathlib.Path(__file__).resolve().parents[2] / "tests" / "golden" / "torch_ops.json"
out.write_text(json.dumps({"generator": "tools/golden/make_golden.py",
                           "torch": torch.__version__, "cases": cases}, indent=1) + "\n")
print(f"wrote {len(cases)} cases to {out}")
