#!/usr/bin/env python3
"""Writes tests/golden/torch_optim.json: PyTorch's optimizer trajectories and learning-rate
schedules, for tests/autograd/optim_golden_test.cpp. Run with a Python that has torch
(Debian's python3-torch is enough): python3 tools/golden/make_optim_golden.py"""
import json
import math
import os

import torch

torch.set_default_dtype(torch.float64)
START = [0.5, -1.5, 3.0, 0.0, -0.25]
STEPS = 5


def loss_of(p):  # kiln's test computes the same loss: sum(sin(p) * p) + 0.5 sum(p^2)
    return (torch.sin(p) * p).sum() + 0.5 * (p * p).sum()


def trajectory(make, options):
    p = torch.tensor(START, requires_grad=True)
    opt = make([p], **options)
    out = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss_of(p).backward()
        opt.step()
        out.append(p.detach().tolist())
    state = {k: (v.tolist() if torch.is_tensor(v) else v) for k, v in opt.state[p].items()}
    return out, state


optimizers = [
    ("sgd", torch.optim.SGD, {"lr": 0.1}),
    ("sgd_momentum_nesterov", torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("adam", torch.optim.Adam, {"lr": 0.1}),
    ("adam_l2_amsgrad", torch.optim.Adam, {"lr": 0.05, "betas": (0.8, 0.9), "weight_decay": 0.1, "amsgrad": True}),
    ("adam_maximize", torch.optim.Adam, {"lr": 0.01, "maximize": True, "eps": 1e-3}),
    ("adamw", torch.optim.AdamW, {"lr": 0.1}),
    ("adamw_amsgrad", torch.optim.AdamW, {"lr": 0.05, "weight_decay": 0.5, "amsgrad": True}),
    ("rmsprop", torch.optim.RMSprop, {"lr": 0.01}),
    ("rmsprop_centered_momentum", torch.optim.RMSprop,
     {"lr": 0.01, "alpha": 0.9, "momentum": 0.5, "centered": True, "weight_decay": 0.1}),
    ("rmsprop_maximize", torch.optim.RMSprop, {"lr": 0.001, "maximize": True, "momentum": 0.2}),
    ("adagrad", torch.optim.Adagrad, {"lr": 0.1}),
    ("adagrad_decay", torch.optim.Adagrad,
     {"lr": 0.1, "lr_decay": 0.5, "weight_decay": 0.1, "initial_accumulator_value": 0.3, "eps": 1e-6}),
]

cases = []
for name, cls, options in optimizers:
    params, state = trajectory(cls, options)
    opts = {k: (list(v) if isinstance(v, tuple) else v) for k, v in options.items()}
    cases.append({"name": name, "optimizer": cls.__name__, "options": opts, "params": params, "state": state})

EPOCHS = 12
S = torch.optim.lr_scheduler
schedulers = [
    ("step", lambda o: S.StepLR(o, step_size=3, gamma=0.5), {"step_size": 3, "gamma": 0.5}),
    ("multistep", lambda o: S.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.1), {"milestones": [2, 5, 5, 9], "gamma": 0.1}),
    ("exponential", lambda o: S.ExponentialLR(o, gamma=0.9), {"gamma": 0.9}),
    ("cosine", lambda o: S.CosineAnnealingLR(o, T_max=4, eta_min=0.01), {"t_max": 4, "eta_min": 0.01}),
    ("linear", lambda o: S.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=4),
     {"start_factor": 0.25, "end_factor": 1.0, "total_iters": 4}),
    ("linear_down", lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.5, total_iters=3),
     {"start_factor": 1.0, "end_factor": 0.5, "total_iters": 3}),
    ("lambda", lambda o: S.LambdaLR(o, lr_lambda=lambda e: 1.0 / (1 + e)), {}),
]
schedules = []
for name, make, options in schedulers:
    p = torch.tensor([1.0], requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.1)
    sched = make(opt)
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(EPOCHS):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    schedules.append({"name": name, "options": options, "base_lr": 0.1, "lrs": lrs})

out = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden", "torch_optim.json")
with open(out, "w") as f:
    # One case per line: diffs of a regenerated file stay readable.
    f.write('{"torch": %s, "start": %s, "steps": %d,\n' % (json.dumps(torch.__version__), json.dumps(START), STEPS))
    f.write(' "optimizers": [\n  ' + ",\n  ".join(json.dumps(c) for c in cases) + "],\n")
    f.write(' "schedulers": [\n  ' + ",\n  ".join(json.dumps(c) for c in schedules) + "]}\n")
print(f"{len(cases)} optimizers, {len(schedules)} schedules -> {os.path.normpath(out)}")
