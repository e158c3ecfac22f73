"""kiln from Python: load, run, show and train kiln programs and PyTorch's .pt2 programs.

Everything is the C++ library (``kiln._kiln``, nanobind); this file names it::

    import kiln, torch
    program = kiln.load("model.pt2", device_map={"cuda:0": "cpu:0"})
    y = program(torch.randn(2, 4))          # a torch.Tensor sharing kiln's memory

See docs/python.md.
"""
from . import _kiln
from ._kiln import (  # noqa: F401  (the public names)
    BackendError, ConstraintError, DataDependentError, DeviceError, DeviceMismatchError, DTypeError, Error, FormatError,
    FrozenMutationError, IndexError, InternalError, InvalidGraphError, InvalidValueError, OutOfMemoryError, Program,
    ShapeError, Tensor, UnsupportedError, device_count, from_dlpack, import_notes, set_cpu_device_count)

__all__ = ["Tensor", "Program", "Executor", "load", "train_step", "save", "show", "from_dlpack",
           "set_cpu_device_count", "device_count", "import_notes", "Error"]


def load(path, device_map=None):
    """A kiln program file or a .pt2 archive (torch.export.save) as a Program; device_map
    maps the file's devices to this machine's ({'cuda:0': 'cpu:0'})."""
    return _kiln.load(str(path), device_map)


def train_step(path, device_map=None):
    """A train-step program (`kiln export --train OPTIMIZER`): step(*batch) runs forward,
    backward and the update, and returns the loss; `lr` reads and sets its learning rate."""
    program = load(path, device_map)
    if program.loss_index() is None:
        raise InvalidValueError(f"{path}: the program has no loss output: export it with --train OPTIMIZER")
    return program


def Executor(program):  # noqa: N802  (reads as a class, as in C++)
    """The program itself: its run(*tensors) returns kiln tensors whatever it is given."""
    return program


def save(program, path):
    program.save(str(path))


def show(program, format="text"):
    """What `kiln show --format FORMAT` prints, for a Program or a path."""
    if not isinstance(program, Program):
        program = load(program)
    return program.show(format)
