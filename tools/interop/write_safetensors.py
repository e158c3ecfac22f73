#!/usr/bin/env python3
"""Writes tests/golden/interop.safetensors with the standard library only (struct, json),
following the safetensors layout: an 8-byte little-endian header length, a JSON header
with dtype / shape / data_offsets per tensor (and optional __metadata__), then the raw
little-endian bytes. kiln's tests load it to prove interoperability."""
import json
import pathlib
import struct

tensors = [
    ("weights", "F32", [2, 3], struct.pack("<6f", 0.5, -1.0, 2.25, 3.0, -4.5, 1e-3)),
    ("ids", "I64", [4], struct.pack("<4q", 7, -2, 0, 1 << 40)),
    ("scale", "F64", [], struct.pack("<d", 3.141592653589793)),
    ("flags", "BOOL", [3], bytes([1, 0, 1])),
]
header, data = {"__metadata__": {"writer": "tools/interop/write_safetensors.py"}}, b""
for name, dtype, shape, raw in tensors:
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
text = json.dumps(header).encode()
out = pathlib.Path(__file__).resolve().parents[2] / "tests" / "golden" / "interop.safetensors"
out.write_bytes(struct.pack("<Q", len(text)) + text + data)
print(f"wrote {out}")
