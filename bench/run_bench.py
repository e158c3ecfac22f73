#!/usr/bin/env python3
"""`make bench`: kiln's workloads and the PyTorch peers side by side, one table.

Runs, in alternation for --rounds rounds (so machine drift hits both sides): kiln's
Google Benchmark suite (JSON), whole-process `kiln export` + `kiln run` of BLOCK, then
the peer programs of bench/peers (memory bandwidth, and the Python scripts under the
project's Python environment with current PyTorch from PyPI -- eager, and torch.compile in
its default mode and max-autotune-no-cudagraphs -- or, without that environment,
Debian's /usr/bin/python3 with its torch 1.13; KILN_PEERS may name another folder). Medians over rounds form
one table -- workload, kiln, peer, ratio, target, pass/fail -- printed and written
between the markers of docs/benchmarks.md with the date, machine and command.

Standard library only. Peers are optional: without torch (install it with
KILN_WITH_TORCH=1 make bench) their rows say "peer missing".
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import shutil
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.environ.get("KILN_PEERS", os.path.join(ROOT, "bench", "peers"))
PEER_BUILD = os.environ.get("PEER_BUILD", "/tmp/peers-build")
VENV_PY = os.path.expanduser("~/.cache/kiln/py-venv/bin/python")  # scripts/python-venv.sh
TORCH_PY = VENV_PY if os.path.exists(VENV_PY) else "/usr/bin/python3"
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")
# kiln's KILN_CPU_ISA level -> PyTorch's ATen capability and oneDNN's ISA cap, so both sides
# of a per-level row run the same vector width.
LEVELS = {"avx512": ("AVX512", "AVX512_CORE"), "avx2": ("AVX2", "AVX2")}
MATH_OPS = ("exp", "erf", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh")
ROW_OPS = ("layer_norm", "softmax", "gelu", "mean_all", "sum_rows")
PROCESS_SAMPLES = 5  # warm whole-process samples of `kiln export` + `kiln run`
# Rows whose two sides are both kiln benchmarks, a few percent from their target: their
# repetitions are interleaved at random (Google Benchmark), so the machine's drift within
# a round hits both sides alike; the medians of PAIR_REPETITIONS replace the round's
# single measurements. all_reduce times kiln's and MPI's calls in turn in one process, and
# is launched ALLREDUCE_ALTERNATIONS times per round, for the same reason.
PAIR_FILTER = "BM_TinyAdd/|BM_TinyExtensionAdd|BM_ShardedOps"
PAIR_REPETITIONS = 7
ALLREDUCE_ALTERNATIONS = 3
BUSY_CORES = 0.25  # other processes' CPU use (cores) above which a round is unreliable
MARK_START, MARK_END = "<!-- bench-table:start -->", "<!-- bench-table:end -->"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd, env=None, timeout=900):
    e = dict(os.environ, **(env or {}))
    p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr[-500:]}")
    return p.stdout


def json_lines(text):
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


# ---- kiln ----------------------------------------------------------------------------

KILN_FILTER = ("BM_TinyAddMeta|BM_SgemmKiln|BM_SgemmOpenBlas|BM_Add16M/|BM_FakeMlp|"
               "BM_FakeBlock|BM_MakeFxFake|BM_CaptureFakeMutation|BM_Eager/|BM_Program/|"
               "BM_TrainStep/|BM_TinyAddBackward|BM_CaptureJoint|BM_TrainProgram/|BM_Elementwise1M|"
               "BM_MakeFxFakeChain/(32|256|512|32768|100000)/|BM_Export/|BM_Run/|BM_FirstRunAtANewBinding")


def kiln_round(build, work):
    out = run([f"{build}/bench/kiln_bench", f"--benchmark_filter={KILN_FILTER}",
               "--benchmark_format=json", "--benchmark_min_time=0.2"])
    res = {}
    for b in json.loads(out)["benchmarks"]:
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        name = b["name"].removesuffix("/real_time")  # every benchmark uses UseRealTime()
        res[name] = dict(b, seconds=b["real_time"] * scale)
    for level in machine_levels():
        out = run([f"{build}/bench/kiln_bench", "--benchmark_filter=BM_Math1M|BM_BlockRowOps",
                   "--benchmark_format=json", "--benchmark_min_time=0.2"], env={"KILN_CPU_ISA": level})
        for b in json.loads(out)["benchmarks"]:
            scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
            res[f"{b['name'].removesuffix('/real_time')} {level}"] = dict(b, seconds=b["real_time"] * scale)
    out = run([f"{build}/bench/kiln_bench", f"--benchmark_filter={PAIR_FILTER}", "--benchmark_format=json",
               "--benchmark_min_time=0.1", f"--benchmark_repetitions={PAIR_REPETITIONS}",
               "--benchmark_enable_random_interleaving=true", "--benchmark_report_aggregates_only=true"])
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        name = b["run_name"].removesuffix("/real_time")
        res[name] = dict(b, seconds=b["real_time"] * scale)
    # Whole processes: export BLOCK, then run it (the target: <= 0.1 s together); one
    # warm-up pair, then the median and minimum of PROCESS_SAMPLES warm pairs.
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, "block.kiln")
        samples = []
        for i in range(PROCESS_SAMPLES + 1):
            t0 = time.perf_counter()
            run([f"{build}/tools/kiln/kiln", "export", "--model", "block", "-o", f])
            run([f"{build}/tools/kiln/kiln", "run", f])
            if i > 0:
                samples.append(time.perf_counter() - t0)
        res["process"] = {"seconds": statistics.median(samples), "min": min(samples)}
        # `kiln run` of BLOCK while a busy loop holds one core (pinned to CPU 0), at one
        # thread and at the default budget (Note [Threads on a shared machine]).
        if len(os.sched_getaffinity(0)) >= 2:
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                    preexec_fn=lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}))
            try:
                time.sleep(0.2)
                for label, env in (("1 thread", {"KILN_NUM_THREADS": "1"}), ("default", {})):
                    out = run([f"{build}/tools/kiln/kiln", "run", f, "--repeat", "50", "--warmup", "5"], env=env)
                    line = out.splitlines()[0]
                    med = float(line.split("median ")[1].split(" ms")[0]) * 1e-3
                    p90 = float(line.split("p90 ")[1].split(" ms")[0]) * 1e-3
                    res[f"busy neighbour {label}"] = {"seconds": med, "p90": p90}
            finally:
                busy.kill()
                busy.wait()
    # The demo's GPT (and BENCH's MLP) on cpu:0, eager and as a program; the weights and
    # input land in `work` for the PyTorch side (bench/gpu_peer.py) to run identically.
    for r in json_lines(run([f"{build}/bench/kiln_gpu_models", work, "200", "cpu:0"])):
        res[f"{r['model']} {r['impl']}"] = {"seconds": r["ms"] * 1e-3}
    # One BLOCK training step's peak extra RSS in a fresh process (as train_peer.py --memory).
    for r in json_lines(run([f"{build}/bench/kiln_train_memory", "block"])):
        res["block train memory"] = {"MiB": r["median"]}
    for m in ("mlp", "block"):
        for r in json_lines(run([f"{build}/bench/kiln_train_memory", m, "program"])):
            res[f"{m} train program memory"] = {"MiB": r["median"]}
        for r in json_lines(run([f"{build}/bench/kiln_train_memory", m, "forward"])):
            res[f"{m} forward program memory"] = {"MiB": r["median"]}
    # all_reduce at 2 ranks: kiln's MPI engine and a plain MPI_Allreduce loop, one call of
    # each in turn in one process (bench/allreduce_bench.cpp), ALLREDUCE_ALTERNATIONS launches.
    mpirun = shutil.which("mpirun")
    if mpirun and os.path.exists(f"{build}/bench/kiln_allreduce_bench"):
        launch = [mpirun, "-np", "2", "--allow-run-as-root", "--oversubscribe"]
        samples = {}
        for _ in range(ALLREDUCE_ALTERNATIONS):
            for r in json_lines(run(launch + [f"{build}/bench/kiln_allreduce_bench"])):
                for side, key in (("kiln", "kiln_us"), ("kiln async", "kiln_async_us"), ("mpi", "mpi_us")):
                    samples.setdefault(f"{side} allreduce {r['bytes']}", []).append(r[key] * 1e-6)
        for key, v in samples.items():
            res[key] = {"seconds": statistics.median(v)}
        # Issue 19: the TP GPT training step at 2 ranks vs one process, and its traffic; the
        # two launched in turn ALLREDUCE_ALTERNATIONS times, medians.
        tp, single = [], []
        for _ in range(ALLREDUCE_ALTERNATIONS):
            for r in json_lines(run(launch + [f"{build}/bench/kiln_tp_bench"])):
                tp.append(r["tp_ms"] * 1e-3)
                res["tp gpt bytes"] = {"moved": r["bytes_moved"], "minimum": r["bytes_minimum"]}
            for r in json_lines(run([f"{build}/bench/kiln_tp_bench", "--single"])):
                single.append(r["single_ms"] * 1e-3)
        if tp and single:
            res["tp gpt step"] = {"seconds": statistics.median(tp)}
            res["single gpt step"] = {"seconds": statistics.median(single)}
    return res


# ---- peers ---------------------------------------------------------------------------

def build_native_peers():
    """The native peers (bench/peers/build.sh: memory bandwidth), built once into PEER_BUILD
    by the peers' own script."""
    script = os.path.join(PEERS, "build.sh")
    if os.path.exists(f"{PEER_BUILD}/membw") or not os.path.exists(script):
        return
    log(f"bench: building the native peers into {PEER_BUILD}")
    run(["sh", script], env={"BUILD": PEER_BUILD}, timeout=600)


def libtorch_flags():
    """Compiler and linker flags for the PyTorch peer's own libtorch: the PyPI wheel's
    headers and libraries when the peer is the project's environment, else Debian's
    libtorch-dev; None when neither is there."""
    if TORCH_PY == VENV_PY:
        try:
            site = run([TORCH_PY, "-c", "import os, torch; print(os.path.dirname(torch.__file__))"]).strip()
        except Exception:
            site = ""
        if os.path.isdir(f"{site}/include/torch/csrc/api/include"):
            return ([f"-I{site}/include", f"-I{site}/include/torch/csrc/api/include", "-D_GLIBCXX_USE_CXX11_ABI=1"],
                    [f"-L{site}/lib", f"-Wl,-rpath,{site}/lib", "-ltorch_cpu", "-lc10"])
    if os.path.isdir("/usr/include/torch/csrc/api/include"):
        return ["-I/usr/include/torch/csrc/api/include"], ["-ltorch", "-ltorch_cpu", "-lc10"]
    return None


def build_cpp_peers():
    """The libtorch C++ peers of the tiny-op rows (bench/peers/eager_dispatch.cpp,
    bench/autograd_peer.cpp), built once per source change against the peer's libtorch."""
    flags = libtorch_flags()
    if flags is None:
        return
    cflags, ldflags = flags
    os.makedirs(PEER_BUILD, exist_ok=True)
    for src, out in ((os.path.join(PEERS, "eager_dispatch.cpp"), f"{PEER_BUILD}/eager_dispatch_cpp"),
                     (os.path.join(ROOT, "bench", "autograd_peer.cpp"), f"{PEER_BUILD}/autograd_peer")):
        if not os.path.exists(src) or (os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(src)):
            continue
        log(f"bench: building {os.path.relpath(src, ROOT)} against libtorch")
        run(["g++", "-O2", "-std=c++20", src, *cflags, *ldflags, "-o", out], timeout=900)


def have_torch():
    try:
        run([TORCH_PY, "-c", "import torch"], timeout=120)
        return os.path.isdir(PEERS)
    except Exception:
        return False


def peer_round(work):
    recs = []
    for r in json_lines(run([TORCH_PY, os.path.join(ROOT, "bench", "gpu_peer.py"), work,
                             "--reps", "200", "--device", "cpu"])):
        recs.append({"case": f"{r['model']} torch eager cpu", "median": r["ms"], "unit": "ms"})
    if os.path.exists(f"{PEER_BUILD}/eager_dispatch_cpp"):
        recs += json_lines(run([f"{PEER_BUILD}/eager_dispatch_cpp", "100000", "5"]))
    if os.path.exists(f"{PEER_BUILD}/autograd_peer"):
        recs += json_lines(run([f"{PEER_BUILD}/autograd_peer", "50000", "5"]))
    log("  peer train_peer.py")
    recs += json_lines(run([TORCH_PY, os.path.join(ROOT, "bench", "train_peer.py"), "--reps", "20"],
                           env={"KILN_PEERS": PEERS}))
    for m in ("mlp", "block"):
        for flag in ("--memory", "--forward-memory"):
            recs += json_lines(run([TORCH_PY, os.path.join(ROOT, "bench", "train_peer.py"), flag, m],
                                   env={"KILN_PEERS": PEERS}))
    if os.path.exists(f"{PEER_BUILD}/membw"):
        # kiln's add runs on the machine's threads (intra-op), so the bound is the
        # triad on as many threads
        recs += json_lines(run([f"{PEER_BUILD}/membw"], env={"OMP_NUM_THREADS": str(os.cpu_count())}))
        recs += json_lines(run([f"{PEER_BUILD}/membw"], env={"OMP_NUM_THREADS": "1"}))
    for script, args in (("fake_prop.py", ["--reps", "10"]), ("trace_cost.py", ["--reps", "3"]),
                         ("dynamic_export.py", ["--reps", "3"]),
                         ("functionalize_bench.py", ["--reps", "10"]),
                         ("eager_models.py", ["--reps", "20"])):
        if not os.path.exists(os.path.join(PEERS, script)):
            log(f"  peer {script} is not in {PEERS}: its rows say peer missing")
            continue
        log(f"  peer {script}")
        recs += json_lines(run([TORCH_PY, os.path.join(PEERS, script)] + args))
    for wide in wide_openblas_coretypes():  # PyTorch's products on kernels OpenBLAS did not pick
        log(f"  peer eager_models.py, OPENBLAS_CORETYPE={wide}")
        for r in json_lines(run([TORCH_PY, os.path.join(PEERS, "eager_models.py"), "--reps", "20"],
                                env={"OPENBLAS_CORETYPE": wide})):
            r["case"] = f"{r.get('case')} openblas={wide}"
            recs.append(r)
    if TORCH_PY == VENV_PY:  # current PyTorch: torch.compile and the per-level kernels
        for mode in COMPILE_MODES:
            log(f"  peer eager_models.py / train_peer.py --compile {mode}")
            recs += json_lines(run([TORCH_PY, os.path.join(PEERS, "eager_models.py"), "--reps", "20",
                                    "--compile", mode], timeout=3600))
            recs += json_lines(run([TORCH_PY, os.path.join(ROOT, "bench", "train_peer.py"), "--reps", "20",
                                    "--compile", mode], env={"KILN_PEERS": PEERS}, timeout=3600))
        for level in machine_levels():
            aten, dnnl = LEVELS[level]
            for r in json_lines(run([TORCH_PY, os.path.join(PEERS, "math_ops.py")],
                                    env={"ATEN_CPU_CAPABILITY": aten.lower(), "ONEDNN_MAX_CPU_ISA": dnnl})):
                r["case"] = f"{r['case']} {level}"
                recs.append(r)
    t0 = time.perf_counter()
    run([TORCH_PY, "-c", "import torch"])
    recs.append({"case": "import torch", "median": time.perf_counter() - t0, "unit": "s"})
    return recs


def peer_value(rounds, case, unit=None, key="median"):
    vals = [r[key] for recs in rounds for r in recs
            if r.get("case") == case and (unit is None or r.get("unit") == unit) and key in r]
    if not vals:
        return None
    return min(vals) if key == "min" else statistics.median(vals)


def kiln_value(rounds, name, key="seconds"):
    vals = [r[name][key] for r in rounds if name in r and key in r[name]]
    return statistics.median(vals) if vals else None


# ---- the table -------------------------------------------------------------------------

def build_rows(k, p):
    rows = []

    def row(what, kv, pv, ratio, target, ok, note=""):
        rows.append((what, kv, pv, ratio, target, ok, note))

    def speedup(what, kiln_s, peer_s, target=1000):
        goal = "- (reported)" if target is None else f">= {target}x faster"
        if kiln_s is None or peer_s is None:
            return row(what, fmt_t(kiln_s), fmt_t(peer_s), "-", goal, None)
        r = peer_s / kiln_s
        row(what, fmt_t(kiln_s), fmt_t(peer_s), f"{r:.0f}x faster", goal, None if target is None else r >= target)

    def ratio(what, kiln_s, peer_s, target):
        if kiln_s is None or peer_s is None:
            return row(what, fmt_t(kiln_s), fmt_t(peer_s), "-", f"<= {target}x", None)
        r = kiln_s / peer_s
        row(what, fmt_t(kiln_s), fmt_t(peer_s), f"{r:.2f}x", f"<= {target}x", r <= target)

    def compiled_row(what, kiln_s, peer_s, target):
        """Against torch.compile: a target in the default mode, reported in the others."""
        if target is not None:
            return ratio(what, kiln_s, peer_s, target)
        r = "-" if kiln_s is None or peer_s is None else f"{kiln_s / peer_s:.2f}x"
        row(what, fmt_t(kiln_s), fmt_t(peer_s), r, "- (reported)", None)

    us = lambda v: None if v is None else v * 1e-6
    ms = lambda v: None if v is None else v * 1e-3
    ns = lambda v: None if v is None else v * 1e-9
    ratio("eager add f32[8], per call (vs libtorch C++)", kiln_value(k, "BM_TinyAdd"),
          ns(peer_value(p, "at::add(a,b)  [a+b, allocates]")), 0.3)
    ratio("meta-device add f32[8], per call (vs libtorch C++)", kiln_value(k, "BM_TinyAddMeta"),
          ns(peer_value(p, "meta: at::add(a,b) [8]")), 0.3)
    # Issue 20: the same add registered with define_op, vs the built-in (both kiln).
    ratio("extension op add f32[8], per call (vs the built-in add)", kiln_value(k, "BM_TinyExtensionAdd"),
          kiln_value(k, "BM_TinyAdd"), 1.1)
    for m in ("mlp", "block"):
        # Per whole forward: kiln and PyTorch count ops differently (kiln's linear is one
        # op, PyTorch's is t + addmm), so a per-op ratio would divide by different counts.
        per_op, ops = (peer_value(p, f"{m} FakeTensorMode forward", "us/op"),
                       peer_value(p, f"{m} FakeTensorMode forward", "us/op", "ops"))
        speedup(f"fake propagation per forward, {m.upper()} (vs FakeTensorMode)",
                kiln_value(k, f"BM_Fake{m.capitalize()}Forward"),
                None if per_op is None or ops is None else us(per_op * ops))
    # Tracing per node (like with like). The graphs of the same model differ in
    # node count (PyTorch's linear is t + addmm, kiln's one node; PyTorch's relu backward
    # one threshold_backward, and so is kiln's now), so both sides are divided by
    # PyTorch's count: kiln's whole trace over PyTorch's nodes, against PyTorch's time per
    # node. Each side divided by its own count is reported beside it.
    def per_peer_node(what, kiln_trace, case, own_per_node):
        nodes = peer_value(p, case, "s/trace", "nodes_call")
        speedup(f"{what}, per call node (both sides by PyTorch's count)",
                None if kiln_trace is None or not nodes else kiln_trace / nodes,
                us(peer_value(p, case, "us/call-node")))
        speedup(f"{what}, per call node of each side's own graph", own_per_node,
                us(peer_value(p, case, "us/call-node")), None)
    for m in ("mlp", "block"):
        per_peer_node(f"make_fx fake, {m.upper()}", kiln_value(k, f"BM_MakeFxFake{m.capitalize()}"),
                      f"{m} make_fx fwd tracing_mode=fake", kiln_value(k, f"BM_MakeFxFake{m.capitalize()}", "ns/node"))
    c32, c256 = kiln_value(k, "BM_MakeFxFakeChain/32"), kiln_value(k, "BM_MakeFxFakeChain/256")
    slope = None if c32 is None or c256 is None else (c256 - c32) / 224
    speedup("make_fx fake, marginal per node (chain)", slope,
            us(peer_value(p, "chain slope make_fx tracing_mode=fake (marginal cost per add node)")))
    # Issue 21: tracing stays linear -- per node at 32k and 100k nodes vs at 512.
    n512 = kiln_value(k, "BM_MakeFxFakeChain/512", "ns/node")
    for n in (32768, 100000):
        big = kiln_value(k, f"BM_MakeFxFakeChain/{n}", "ns/node")
        if n512 and big:
            row(f"make_fx chain, per node at {n} nodes (vs at 512 nodes)", fmt_t(big), fmt_t(n512),
                f"{big / n512:.2f}x", "< 3x", big / n512 < 3)
    # Issue 49: dynamic shapes against the same work with static shapes (kiln on both sides).
    for m in ("mlp", "block", "gpt"):
        st, dy = (kiln_value(k, f"BM_Export/{kind}_{m}", "ns/node") for kind in ("static", "dynamic"))
        if st and dy:
            row(f"export with a dynamic batch{'' if m == 'mlp' else ' and sequence'}, {m.upper()}, per call node "
                "(vs static export)", fmt_t(dy), fmt_t(st), f"{dy / st:.2f}x", "<= 1.5x", dy <= 1.5 * st)
    for m in ("mlp", "block"):  # the same work in PyTorch: torch.export with Dim (bench/peers/dynamic_export.py)
        dy = kiln_value(k, f"BM_Export/dynamic_{m}", "ns/node")
        speedup(f"export with a dynamic batch{'' if m == 'mlp' else ' and sequence'}, {m.upper()}, per call node "
                "of each side's own graph (vs torch.export with Dim)", dy,
                us(peer_value(p, f"{m} torch.export dynamic", "us/call-node")))
    for m in ("mlp", "block"):
        st, dy = kiln_value(k, f"BM_Run/static_{m}"), kiln_value(k, f"BM_Run/dynamic_{m}")
        if st and dy:
            row(f"program run {m.upper()} with symbols, at a binding seen before, 1 thread (vs exported static)",
                fmt_t(dy), fmt_t(st), f"{dy / st:.3f}x", "<= 1.05x", dy <= 1.05 * st)
    first, st = kiln_value(k, "BM_FirstRunAtANewBinding/block"), kiln_value(k, "BM_Run/dynamic_block")
    if first and st:
        row("program run BLOCK with symbols, first run at a new binding (plans memory; vs a run at a seen one)",
            fmt_t(first), fmt_t(st), f"{first / st:.3f}x", "- (reported)", None)
    # The same program's source ops are one count for both sides (its graphs differ:
    # kiln's has ~150 nodes, PyTorch's ~177); per each side's own graph node is reported.
    mut = kiln_value(k, "BM_CaptureFakeMutationProgram")
    nodes = kiln_value(k, "BM_CaptureFakeMutationProgram", "graph_nodes")
    per_src = kiln_value(k, "BM_CaptureFakeMutationProgram", "per_source_op")
    speedup("functionalize + trace, per source op of the same program (one count both sides)", per_src,
            us(peer_value(p, "make_fx(functionalize(prog, remove=mutations)) fake", "us/source-op")))
    speedup("functionalize + trace, per graph node of each side's own graph", None if mut is None else mut / nodes,
            us(peer_value(p, "make_fx(functionalize(prog, remove=mutations)) fake", "us/graph-node")), None)
    for m, target in (("mlp", 0.8), ("block", 0.6)):
        for t in (1, 2):
            peer = ms(peer_value(p, f"{m} eager nn.Module threads={t}", "ms/forward"))
            ratio(f"eager {m.upper()} forward, {t} thread(s)", kiln_value(k, f"BM_Eager/{m}/{t}"), peer, target)
    # PyTorch's BLOCK is bimodal (runs that page-fault fresh memory and runs that do not):
    # its median and its fastest run side by side, with its faults per forward.
    for t in (1, 2):
        case = f"block eager nn.Module threads={t}"
        med, fastest = peer_value(p, case, "ms/forward"), peer_value(p, case, "ms/forward", "min")
        faults = peer_value(p, case, "ms/forward", "minor_faults_per_forward")
        kv = kiln_value(k, f"BM_Eager/block/{t}")
        if med is not None and fastest is not None and kv is not None:
            row(f"eager BLOCK forward, {t} thread(s), vs PyTorch's fault-free minimum "
                f"(PyTorch median {med:.2f} ms, {faults:.0f} faults/fwd)", fmt_t(kv), fmt_t(ms(fastest)),
                f"{kv / ms(fastest):.2f}x", "- (reported)", None)
    for m in ("mlp", "block"):
        for t in (1, 2):
            peer = ms(peer_value(p, f"{m} eager nn.Module threads={t}", "ms/forward"))
            ratio(f"program run {m.upper()}, {t} thread(s) (vs PyTorch eager)",
                  kiln_value(k, f"BM_Program/{m}/{t}"), peer, 0.7)
            for mode, target in zip(COMPILE_MODES, (0.9, None)):
                peer = ms(peer_value(p, f"{m} compile={mode} threads={t}", "ms/forward"))
                compiled_row(f"program run {m.upper()}, {t} thread(s) (vs torch.compile, mode {mode})",
                             kiln_value(k, f"BM_Program/{m}/{t}"), peer, target)
    # Where OpenBLAS chose kernels narrower than the CPU, PyTorch's products are slowed by
    # that choice: the same rows once more against PyTorch on OpenBLAS's widest kernels.
    for wide, m in ((w, m) for w in wide_openblas_coretypes() for m in ("mlp", "block")):
        peer = ms(peer_value(p, f"{m} eager nn.Module threads=1 openblas={wide}", "ms/forward"))
        if peer:
            for what, bench in (("eager", "BM_Eager"), ("program run", "BM_Program")):
                kv = kiln_value(k, f"{bench}/{m}/1")
                if kv is not None:
                    row(f"{what} {m.upper()} forward, 1 thread(s), vs PyTorch with OPENBLAS_CORETYPE={wide}",
                        fmt_t(kv), fmt_t(peer), f"{kv / peer:.2f}x", "- (reported)", None)
    # Training (issue 16): forward + mse_loss + backward + SGD step, same shapes both sides.
    for m in ("mlp", "block"):
        for t in (1, 2):
            peer = ms(peer_value(p, f"{m} train step threads={t}", "ms/step"))
            ratio(f"train step {m.upper()} (fwd + bwd + SGD), {t} thread(s)",
                  kiln_value(k, f"BM_TrainStep/{m}/{t}"), peer, 0.8)
    ratio("autograd a + b f32[8], forward + backward (vs libtorch C++)",
          kiln_value(k, "BM_TinyAddBackward"), ns(peer_value(p, "a+b requires_grad fwd+bwd")), 0.5)
    # Issue 17: joint capture, and the train step as one program.
    for m in ("mlp", "block"):
        per_peer_node(f"joint capture (fwd + bwd) fake, {m.upper()}", kiln_value(k, f"BM_CaptureJoint{m.capitalize()}"),
                      f"{m} make_fx fwd+bwd tracing_mode=fake", kiln_value(k, f"BM_CaptureJoint{m.capitalize()}", "ns/node"))
    for m in ("mlp", "block"):
        for t in (1, 2):
            peer = ms(peer_value(p, f"{m} train step threads={t}", "ms/step"))
            ratio(f"train-step program {m.upper()}, {t} thread(s) (vs PyTorch eager step)",
                  kiln_value(k, f"BM_TrainProgram/{m}/{t}"), peer, 0.8)
            for mode, target in zip(COMPILE_MODES, (0.9, None)):
                peer = ms(peer_value(p, f"{m} train step compile={mode} threads={t}", "ms/step"))
                what = f"train-step program {m.upper()}, {t} thread(s) (vs the step with torch.compile, mode {mode})"
                compiled_row(what, kiln_value(k, f"BM_TrainProgram/{m}/{t}"), peer, target)
    for m in ("mlp", "block"):
        mk = kiln_value(k, f"{m} train program memory", "MiB")
        mp = peer_value(p, f"{m} train step peak extra RSS", "MiB")
        if mk is not None and mp is not None:
            row(f"{m.upper()} train-step program peak extra RSS (vs PyTorch eager step)", f"{mk:.1f} MiB",
                f"{mp:.1f} MiB", f"{mk / mp:.2f}x", "<= 0.7x", mk <= 0.7 * mp)
    # Issue 18: all_reduce through the MPI engine vs a plain MPI_Allreduce loop, 2 ranks:
    # as the collective ops call it (Launch::blocking), and as an async Work waited at once.
    small_k, small_w, small_c = (kiln_value(k, f"{side} allreduce 4096") for side in ("kiln", "kiln async", "mpi"))
    if small_k is not None and small_c is not None:
        row("all_reduce 4 KiB at 2 ranks: per-call overhead over MPI_Allreduce", fmt_t(small_k),
            fmt_t(small_c), f"+{fmt_t(max(small_k - small_c, 0))}", "- (reported)", None)
    if small_w is not None and small_c is not None:
        row("all_reduce 4 KiB at 2 ranks, async Work waited at once: overhead over MPI_Allreduce", fmt_t(small_w),
            fmt_t(small_c), f"+{fmt_t(max(small_w - small_c, 0))}", "- (reported)", None)
    for size, label in ((1 << 20, "1 MiB"), (4 << 20, "4 MiB"), (16 << 20, "16 MiB"), (64 << 20, "64 MiB")):
        kk, cc = kiln_value(k, f"kiln allreduce {size}"), kiln_value(k, f"mpi allreduce {size}")
        ratio(f"all_reduce {label} at 2 ranks (vs an MPI_Allreduce loop)", kk, cc, 1.05)
    ww, cc = kiln_value(k, f"kiln async allreduce {1 << 20}"), kiln_value(k, f"mpi allreduce {1 << 20}")
    if ww is not None and cc is not None:
        row("all_reduce 1 MiB at 2 ranks, async Work waited at once (vs an MPI_Allreduce loop)", fmt_t(ww),
            fmt_t(cc), f"{ww / cc:.2f}x", "- (reported)", None)
    # Issue 19: DTensor sharding propagation per op vs fake propagation of the same local op;
    # the TP GPT step at 2 ranks vs one process (both kiln) and the bytes its collectives move.
    ratio("DTensor sharding propagation per op, fake 8-rank mesh (vs fake propagation of the local op)",
          kiln_value(k, "BM_ShardedOpsDTensor", "ns/op"), kiln_value(k, "BM_ShardedOpsLocal", "ns/op"), 2.0)
    ratio("TP GPT train step at 2 ranks (vs the same step in one process)", kiln_value(k, "tp gpt step"),
          kiln_value(k, "single gpt step"), 1.0)
    moved, least = kiln_value(k, "tp gpt bytes", "moved"), kiln_value(k, "tp gpt bytes", "minimum")
    if moved is not None and least:
        row("TP GPT step: bytes moved per rank (vs Megatron's analytical minimum)", f"{moved / 2**20:.2f} MiB",
            f"{least / 2**20:.2f} MiB", f"{moved / least:.2f}x", "- (reported)", None)
    mem_k = kiln_value(k, "block train memory", "MiB")
    mem_p = peer_value(p, "block train step peak extra RSS", "MiB")
    if mem_k is not None and mem_p is not None:
        row("BLOCK train step peak extra RSS, fresh process", f"{mem_k:.1f} MiB", f"{mem_p:.1f} MiB",
            f"{mem_k / mem_p:.2f}x", "<= 1.0x", mem_k <= mem_p)
    for m in ("mlp", "block"):
        mk = kiln_value(k, f"{m} forward program memory", "MiB")
        mp = peer_value(p, f"{m} forward peak extra RSS", "MiB")
        if mk is not None and mp is not None:
            row(f"program peak extra RSS, {m.upper()} forward, fresh process (vs PyTorch eager forward)",
                f"{mk:.2f} MiB", f"{mp:.2f} MiB", f"{mk / mp:.2f}x", "<= 0.7x", mk <= 0.7 * mp)
        faults = max(kiln_value(k, f"BM_Eager/{m}/1", "faults/fwd") or 0,
                     kiln_value(k, f"BM_Program/{m}/1", "faults/fwd") or 0)
        row(f"page faults per forward, {m.upper()} (steady state)", f"{faults:.1f}", "-", "-", "0", faults == 0)
    sk, so = kiln_value(k, "BM_SgemmKiln/1024"), kiln_value(k, "BM_SgemmOpenBlas/1024")
    if sk and so:
        row("SGEMM 1024^3 (vs OpenBLAS direct)", fmt_t(sk), fmt_t(so), f"{so / sk:.2f}x", ">= 0.9x", so / sk >= 0.9)
    add = kiln_value(k, "BM_Add16M", "bytes_per_second")
    bw = peer_value(p, f"triad threads={os.cpu_count()}", "GB/s")
    if add and bw:
        r = bw * 1e9 / add
        row(f"add 2 x 16M f32, {os.cpu_count()} threads (vs the triad bandwidth on as many)", f"{add / 1e9:.1f} GB/s", f"{bw:.1f} GB/s",
            f"{r:.2f}x of bound", "<= 1.3x", r <= 1.3)
    # Issue 21: the half types on the CPU, 1M elements, one thread, vs the same op in f32.
    for op in ("add", "gelu"):
        f32 = kiln_value(k, f"BM_Elementwise1M/{op}_f32")
        for dt in ("f16", "bf16"):
            v = kiln_value(k, f"BM_Elementwise1M/{op}_{dt}")
            if f32 and v and dt == "f16":  # the target is for f16
                ratio(f"{op} of 1M {dt} elements (vs the same in f32), 1 thread", v, f32, 1.5)
            elif f32 and v:
                row(f"{op} of 1M {dt} elements (vs the same in f32), 1 thread", fmt_t(v), fmt_t(f32),
                    f"{v / f32:.2f}x", "- (reported)", None)
    # Issue 51: the transcendental ops (1M f32) and the BLOCK's row kernels at every vector
    # level the CPU has, against PyTorch at the same level, and against a bound: the
    # memory traffic (8 bytes per element for the math ops) at the triad's one-core
    # bandwidth.
    bw1 = peer_value(p, "triad threads=1", "GB/s")
    for level in machine_levels():
        for op in MATH_OPS:
            kv, pv = kiln_value(k, f"BM_Math1M/{op} {level}"), us(peer_value(p, f"math {op} {level}"))
            ratio(f"{op} of 1M f32, 1 thread, {level} (vs PyTorch at {level})", kv, pv, 1.2)
            if kv is not None and bw1:
                bound = 8 * (1 << 20) / (bw1 * 1e9)
                row(f"{op} of 1M f32, 1 thread, {level} (vs the bound: 8 MB at the one-core triad bandwidth)",
                    fmt_t(kv), fmt_t(bound), f"{kv / bound:.2f}x of bound", "- (reported)", None)
        for op in ROW_OPS:
            kv, pv = kiln_value(k, f"BM_BlockRowOps/{op} {level}"), us(peer_value(p, f"rows {op} {level}"))
            if kv is not None:
                row(f"BLOCK row op {op}, 1 thread, {level} (vs PyTorch at {level})", fmt_t(kv), fmt_t(pv),
                    "-" if pv is None else f"{kv / pv:.2f}x", "- (reported)", None)
    # No target: reported so the demo model's speed is visible (same weights).
    gpt_peer = ms(peer_value(p, "gpt torch eager cpu", "ms"))
    for impl in ("eager", "program"):
        kv = kiln_value(k, f"gpt kiln {impl}")
        r = "-" if kv is None or gpt_peer is None else f"{kv / gpt_peer:.2f}x"
        row(f"GPT of `kiln demo` (2 x 64 wide, 2 x 32 tokens), kiln {impl} vs PyTorch eager",
            fmt_t(kv), fmt_t(gpt_peer), r, "- (none set)", None)
    one, default = kiln_value(k, "busy neighbour 1 thread"), kiln_value(k, "busy neighbour default")
    one90, default90 = kiln_value(k, "busy neighbour 1 thread", "p90"), kiln_value(k, "busy neighbour default", "p90")
    for what, kv, pv in (("median", default, one), ("p90", default90, one90)):
        r = None if kv is None or pv is None else kv / pv
        row(f"kiln run of BLOCK with a busy loop on one core, {what}: default threads vs 1 thread (both kiln)",
            fmt_t(kv), fmt_t(pv), "-" if r is None else f"{r:.2f}x", "<= 1.25x", None if r is None else r <= 1.25)
    proc, proc_min = kiln_value(k, "process"), kiln_value(k, "process", "min")
    row(f"kiln export + kiln run of BLOCK, whole processes (median of {PROCESS_SAMPLES} warm; "
        f"fastest {fmt_t(proc_min)})", fmt_t(proc),
        fmt_t(peer_value(p, "import torch", "s")) + " (import torch)", "-", "<= 0.1 s",
        None if proc is None else proc <= 0.1)
    return rows


def machine_load():
    """(1-minute load average, CPU seconds of the whole machine, our children's CPU seconds)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    busy = (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # minus idle, iowait
    import resource
    ours = resource.getrusage(resource.RUSAGE_CHILDREN)
    return os.getloadavg()[0], busy, ours.ru_utime + ours.ru_stime


def other_load(before, after, wall):
    """Cores kept busy by other processes while a round ran."""
    return max(0.0, ((after[1] - before[1]) - (after[2] - before[2])) / wall)


def fmt_t(s):
    if s is None:
        return "peer missing"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.2f} us"
    return f"{s * 1e9:.0f} ns"


def table(rows):
    head = "| workload | kiln | peer | ratio | target | met |\n|---|---|---|---|---|---|\n"
    body = "".join(f"| {w} | {kv} | {pv} | {r} | {t} | {'yes' if ok else 'no' if ok is False else '-'} |\n"
                   for w, kv, pv, r, t, ok, _ in rows)
    return head + body


def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    have = cpu_flags()
    flags = ", " + ("AVX-512" if "avx512f" in have else "AVX2" if "avx2" in have else "no AVX2") if have else ""
    return f"{cpu}{flags}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def cpu_flags():
    """The CPU's feature flags from /proc/cpuinfo (empty when unreadable)."""
    try:
        with open("/proc/cpuinfo") as f:
            return set(next(l for l in f if l.startswith("flags")).split(":", 1)[1].split())
    except (OSError, StopIteration):
        return set()


def machine_levels():
    """kiln's vector levels this CPU has, among those with a per-level row."""
    have = cpu_flags()
    return [lv for lv, flag in (("avx512", "avx512f"), ("avx2", "avx2")) if flag in have]


def torch_version():
    try:
        return run([TORCH_PY, "-c", "import torch; print(torch.__version__)"], timeout=120).strip()
    except Exception:
        return "none"


def wide_openblas_coretypes():
    """When OpenBLAS chose kernels narrower than the CPU by itself (a VM hiding the CPU
    model) and the environment pins none: the AVX2 family (what the first benchmark machine pinned)
    and, on AVX-512, the widest. Else none."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        return []
    if openblas_core().lower() in ("haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"):
        return []
    have = cpu_flags()
    return (["Haswell"] if "avx2" in have else []) + (["SkylakeX"] if "avx512f" in have else [])


def openblas_core():
    """The kernel family OpenBLAS chose on this machine (PyTorch 1.13's products run on it;
    kiln's f32 products go to oneDNN when it is narrower than the CPU)."""
    import ctypes
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return "unknown"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md")
    args = ap.parse_args()
    peers = not args.no_peers and have_torch()
    if peers:
        build_native_peers()
        build_cpp_peers()
    if not peers:
        log("bench: PyTorch peers unavailable (KILN_WITH_TORCH=1 make bench installs them); kiln only")
    k_rounds, p_rounds = [], []
    work = tempfile.mkdtemp(prefix="kiln-bench-")
    loads, others = [], []
    for r in range(args.rounds):
        before, t0 = machine_load(), time.perf_counter()
        log(f"bench: round {r + 1}/{args.rounds}: kiln")
        k_rounds.append(kiln_round(args.build, work))
        if peers:
            log(f"bench: round {r + 1}/{args.rounds}: peers")
            p_rounds.append(peer_round(work))
        after = machine_load()
        loads.append(after[0])
        others.append(other_load(before, after, time.perf_counter() - t0))
    shutil.rmtree(work, ignore_errors=True)
    rows = build_rows(k_rounds, p_rounds)
    busy = max(others) > BUSY_CORES
    if busy:  # every timing is suspect when something else ran beside the rounds
        rows = [(w, kv, pv, f"{r} (unreliable: machine busy)" if r != "-" else r, t, ok, n)
                for w, kv, pv, r, t, ok, n in rows]
    text = table(rows)
    text += (f"\nLoad: 1-minute load average after each round {', '.join(f'{v:.2f}' for v in loads)}; "
             f"cores used by other processes during each round {', '.join(f'{v:.2f}' for v in others)} "
             f"(rows are marked unreliable above {BUSY_CORES}).\n")
    print(text)
    if args.no_write:
        return
    stamp = datetime.date.today().isoformat()
    section = (f"{MARK_START}\n## Latest table ({stamp})\n\nMachine: {machine()}. "
               f"Peer: PyTorch {torch_version()} ({TORCH_PY}), eager and torch.compile. "
               f"Command: `make bench` ({args.rounds} alternating rounds, medians; "
               f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}, "
               f"OpenBLAS kernels: {openblas_core()}).\n\n{text}{MARK_END}")
    path = os.path.join(ROOT, "docs", "benchmarks.md")
    doc = open(path).read()
    if MARK_START in doc:
        doc = doc[:doc.index(MARK_START)] + section + doc[doc.index(MARK_END) + len(MARK_END):]
    else:
        head, _, rest = doc.partition("\n\n")
        doc = head + "\n\n" + section + "\n\n" + rest
    open(path, "w").write(doc)
    log(f"bench: wrote the table to {path}")


if __name__ == "__main__":
    main()
