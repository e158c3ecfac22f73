"""kiln from Python: load, run, show and train kiln programs and PyTorch's .pt2 programs.

Everything here is the C++ library (``kiln._kiln``); this file only gives results back in
the kind of tensors the caller passed (PyTorch in, PyTorch out; NumPy in, NumPy out),
through DLPack, without copies::

    import kiln, torch
    program = kiln.load("model.pt2", device_map={"cuda:0": "cpu:0"})
    y = program(torch.randn(2, 4))          # a torch.Tensor sharing kiln's memory
"""
from . import _kiln
from ._kiln import (  # noqa: F401  (the public names)
    BackendError, DataDependentError, DeviceError, DeviceMismatchError, DTypeError, Error, FormatError,
    FrozenMutationError, IndexError, InternalError, InvalidGraphError, InvalidValueError, OutOfMemoryError,
    ShapeError, Tensor, UnsupportedError, device_count, from_dlpack, import_notes, set_cpu_device_count)

__all__ = ["Tensor", "Program", "Executor", "TrainStep", "load", "train_step", "save", "show", "from_dlpack",
           "set_cpu_device_count", "device_count", "import_notes", "Error"]


def _kind(values):
    """'torch', 'numpy' or 'kiln': what the caller passed (the first tensor decides)."""
    for v in values:
        module = type(v).__module__
        if module.startswith("torch"):
            return "torch"
        if module.startswith("numpy"):
            return "numpy"
    return "kiln"


def _as(kind, t):
    if kind == "torch":
        import torch
        return torch.from_dlpack(t)
    if kind == "numpy":
        import numpy
        return numpy.from_dlpack(t)
    return t


class Program:
    """A loaded program. Call it with tensors (kiln, NumPy or PyTorch); the outputs come
    back in the same kind, sharing memory with kiln's. One output is returned as it is,
    several as a tuple. Runs release the GIL: threads may call a program concurrently."""

    def __init__(self, native):
        self._native = native

    def __call__(self, *tensors):
        outs = [_as(_kind(tensors), t) for t in self._native.run(*tensors)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    @property
    def signature(self):
        """{'inputs': [{'kind', 'name', 'target'}...], 'outputs': [{'kind', 'target'}...]}"""
        return self._native.signature

    @property
    def state(self):
        """The parameters, buffers and optimizer state by name, as kiln tensors (shared)."""
        return dict(self._native.state)

    @property
    def devices(self):
        return self._native.devices

    def show(self, format="text"):
        return self._native.show(format)

    def save(self, path):
        self._native.save(path)

    def __repr__(self):
        return repr(self._native)


class Executor:
    """Runs a program and returns kiln tensors, whatever it is given."""

    def __init__(self, program):
        self._native = program._native if isinstance(program, Program) else program

    def run(self, *tensors):
        return list(self._native.run(*tensors))


class TrainStep(Program):
    """A train-step program (`kiln export --train OPTIMIZER`): each step(batch) runs the
    forward, backward and optimizer update, updating the program's state, and returns
    the loss as a float."""

    def __init__(self, native):
        super().__init__(native)
        self._loss = native.loss_index()
        if self._loss is None:
            raise InvalidValueError("the program has no loss output: export it with --train OPTIMIZER")

    def step(self, *batch):
        outs = self._native.run(*batch)
        return float(outs[self._loss].numpy())

    @property
    def lr(self):
        return float(self.state["optimizer.lr"].numpy())

    @lr.setter
    def lr(self, value):
        import numpy
        self._native.set_state("optimizer.lr", numpy.array(value, dtype=numpy.float64))


def load(path, device_map=None):
    """A kiln program file or a .pt2 archive (torch.export.save) as a Program; device_map
    maps the file's devices to this machine's ({'cuda:0': 'cpu:0'})."""
    return Program(_kiln.load(str(path), device_map))


def train_step(path, device_map=None):
    """A train-step program file as a TrainStep."""
    return TrainStep(_kiln.load(str(path), device_map))


def save(program, path):
    program.save(str(path))


def show(program, format="text"):
    """What `kiln show --format FORMAT` prints, for a Program or a path."""
    if not isinstance(program, Program):
        program = load(program)
    return program.show(format)
