"""What the Python peers share: timing a call and printing one JSON line per case
({"case", "unit", "median", "min", ...}), the form bench/run_bench.py reads by case name."""
import json
import statistics
import time


def time_ms(fn, reps, warmup=3):
    """Milliseconds of each of `reps` calls of fn(), after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def emit(case, unit, samples, **extra):
    rec = {"case": case, "unit": unit, "median": statistics.median(samples), "min": min(samples)}
    rec.update(extra)
    print(json.dumps(rec), flush=True)


def compiled(module, mode):
    """`module` through torch.compile in `mode` ("default" is torch.compile's own)."""
    import torch
    return torch.compile(module) if mode == "default" else torch.compile(module, mode=mode)
