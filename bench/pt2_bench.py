#!/usr/bin/env python3
"""`make bench` (with KILN_WITH_TORCH=1): imported .pt2 programs against current PyTorch.

Run with the python of scripts/python-venv.sh (PyTorch from PyPI). Exports, at bench time,
random-weight models with torch.export, then measures side by side:

- load + first result: a fresh `kiln run model.pt2` process against a fresh Python
  process doing torch.export.load(...).module()(x), for a GPT-2-small-sized decoder;
- resident memory after `kiln show` imports that program (weights mapped, not copied)
  against the size of its weights;
- the steady state of imported programs (a CNN, an encoder, a decoder) against PyTorch
  eager and torch.compile of the same module, time and the memory a run adds.

Prints one table and writes it between the pt2 markers of docs/benchmarks.md.
"""
import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time

from doc_table import write_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "pt2"))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def wall(cmd, env=None):
    """Seconds a fresh process of `cmd` takes, start to exit."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, env=env)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {p.stderr.decode()[-400:]}")
    return dt


WORK = os.environ.get("KILN_PT2_BENCH_DIR", "/tmp/kiln-pt2-bench")
# name -> module maker; the inputs are made once and stored beside the program
SPECS = {
    # GPT-2 small: 12 layers, width 768, 12 heads, 50257-token vocabulary, tied weights
    "gpt2_small": lambda torch: __import__("make_corpus").Decoder(vocab=50257, d=768, heads=12, kv_heads=12,
                                                                   layers=12, max_len=128),
    "cnn": lambda torch: __import__("make_corpus").Cnn(width=64, classes=100),
    "encoder": lambda torch: __import__("make_corpus").Encoder(vocab=1000, d=256, heads=8, layers=4, max_len=128),
    "decoder": lambda torch: __import__("make_corpus").Decoder(vocab=1000, d=256, heads=8, kv_heads=2, layers=4,
                                                                max_len=128),
}
INPUTS = {
    "gpt2_small": lambda torch: (torch.randint(0, 50257, (1, 128)),),
    "cnn": lambda torch: (torch.randn(8, 3, 96, 96),),
    "encoder": lambda torch: (torch.randint(0, 1000, (8, 128)), torch.ones(8, 128, dtype=torch.bool)),
    "decoder": lambda torch: (torch.randint(0, 1000, (4, 128)),),
}


def make_programs(torch):
    """Exports the bench models into WORK (kept between runs of the bench)."""
    from safetensors.torch import save_file
    made = {}
    for name in SPECS:
        path, inp = os.path.join(WORK, name + ".pt2"), os.path.join(WORK, name + ".safetensors")
        torch.manual_seed(0)
        m = SPECS[name](torch).eval()
        if not os.path.exists(path) or not os.path.exists(inp):
            log(f"pt2 bench: exporting {name}")
            x = INPUTS[name](torch)
            torch.export.save(torch.export.export(m, x), path)
            save_file({f"input_{i}": t for i, t in enumerate(x)}, inp)
        made[name] = (m, path, inp)
    return made


def kiln_steady(kiln, path, inp, reps, env):
    out = subprocess.run([kiln, "run", path, "--inputs", inp, "--warmup", "3", "--repeat", str(reps)],
                         capture_output=True, text=True, check=True, env=env).stdout
    median = float(out.split("median ")[1].split(" ms")[0])
    more = float(out.split("(")[-1].split(" MB more")[0])
    return median, more


def vm(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024 / 1e6
    return 0.0


def torch_worker(name, compiled, reps, threads):
    """In a fresh process: the module of `name`, its inputs; prints median ms and the
    resident memory the calls add (the high-water mark reset before the first call)."""
    import json
    import torch
    from safetensors.torch import load_file
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    m = SPECS[name](torch).eval()
    ref = load_file(os.path.join(WORK, name + ".safetensors"))
    x = tuple(ref[f"input_{i}"] for i in range(len(ref)))
    fn = torch.compile(m) if compiled else m
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = vm("VmRSS")
    times = []
    with torch.no_grad():
        for i in range(reps + 3):
            t0 = time.perf_counter()
            fn(*x)
            if i >= 3:
                times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"median": statistics.median(times), "added": max(0.0, vm("VmHWM") - before)}))


def torch_steady(name, reps, threads, compiled=False):
    import json
    out = subprocess.run([sys.executable, __file__, "--torch-worker", name, "--reps", str(reps), "--threads",
                          str(threads)] + (["--compiled"] if compiled else []),
                         capture_output=True, text=True, check=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return r["median"], r["added"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "tools", "kiln", "kiln"))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--torch-worker")
    ap.add_argument("--compiled", action="store_true")
    args = ap.parse_args()
    if args.torch_worker:
        return torch_worker(args.torch_worker, args.compiled, args.reps, args.threads)
    import torch
    os.makedirs(WORK, exist_ok=True)
    made = make_programs(torch)
    env = dict(os.environ, KILN_NUM_THREADS=str(args.threads))
    rows = []

    # load + first result, fresh processes, alternating
    _, gpt, gpt_in = made["gpt2_small"]
    torch_cmd = [sys.executable, "-c",
                 "import sys, torch; from safetensors.torch import load_file; "
                 f"torch.set_num_threads({args.threads}); "
                 "m = torch.export.load(sys.argv[1]).module(); x = load_file(sys.argv[2])['input_0']; "
                 "torch.no_grad().__enter__(); m(x)", gpt, gpt_in]
    kiln_cmd = [args.kiln, "run", gpt, "--inputs", gpt_in, "--warmup", "0", "--repeat", "1"]
    k_first, t_first = [], []
    for _ in range(args.rounds):
        k_first.append(wall(kiln_cmd, env))
        t_first.append(wall(torch_cmd, env))
    k, t = statistics.median(k_first), statistics.median(t_first)
    rows.append(("GPT-2 small .pt2: load + first result (fresh process)", f"{k * 1e3:.0f} ms",
                 f"{t * 1e3:.0f} ms", "", k / t, "≤ 0.1×"))

    # resident memory with the program loaded (every weight page read once): weights
    # mapped from the archive count once; a copy would count twice
    weights_mb = sum(p.numel() * p.element_size() for p in made["gpt2_small"][0].parameters()) / 1e6
    out = subprocess.run(kiln_cmd, capture_output=True, text=True, check=True, env=env).stdout
    loaded = float(out.split("memory: ")[1].split(" MB")[0])
    rows.append(("GPT-2 small .pt2: resident memory with the program loaded vs its weights",
                 f"{loaded:.0f} MB", f"{weights_mb:.0f} MB (weights)", "", loaded / weights_mb, "≤ 1.1×"))

    # steady state
    for name in ("cnn", "encoder", "decoder"):
        _, path, inp = made[name]
        ks, km, es, em, cs = [], [], [], [], []
        for _ in range(args.rounds):
            a, b = kiln_steady(args.kiln, path, inp, args.reps, env)
            ks.append(a), km.append(b)
            a, b = torch_steady(name, args.reps, args.threads)
            es.append(a), em.append(b)
        try:
            for _ in range(args.rounds):
                cs.append(torch_steady(name, args.reps, args.threads, compiled=True)[0])
            compiled = f"{statistics.median(cs):.2f} ms"
        except subprocess.CalledProcessError as e:  # torch.compile needs a C++ compiler: say so
            compiled = "failed: " + (e.stderr or "").strip().splitlines()[-1][:60] if e.stderr else "failed"
        k, e = statistics.median(ks), statistics.median(es)
        rows.append((f"{name} (imported) forward, {args.threads} threads", f"{k:.2f} ms", f"{e:.2f} ms", compiled,
                     k / e, "≤ 0.8×"))
        kmem, emem = statistics.median(km), statistics.median(em)
        rows.append((f"{name}: resident memory the runs add", f"{kmem:.1f} MB", f"{emem:.1f} MB", "",
                     kmem / emem if emem > 0 else float("nan"), "≤ 0.7×"))

    head = (f"Measured {datetime.date.today()} on {cpu_name()}, {os.cpu_count()} cores; PyTorch "
            f"{torch.__version__} (PyPI) eager and torch.compile (default mode); medians of {args.rounds} "
            f"alternating rounds. Command: `KILN_WITH_TORCH=1 make bench`.")
    lines = [head, "", "| workload | kiln | PyTorch eager | torch.compile | kiln / eager | target |",
             "|---|---|---|---|---|---|"]
    for name, k, e, c, ratio, target in rows:
        lines.append(f"| {name} | {k} | {e} | {c} | {ratio:.3f}× | {target} |")
    table = "\n".join(lines)
    print(table)
    write_table("pt2", "Imported .pt2 programs against PyTorch", table)


if __name__ == "__main__":
    main()
