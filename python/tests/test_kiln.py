"""The Python package against NumPy, PyTorch and kiln's own C++ results.

Run by `make test` (ctest's python_package) with PYTHONPATH pointing at the build tree's
python/ and KILN_TEST_DATA at tests/.
"""
import gc
import os
import re
import subprocess
import threading

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

import kiln

DATA = os.environ.get("KILN_TEST_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "tests"))
CORPUS = os.path.join(DATA, "pt2")
ROOT = os.path.abspath(os.path.join(DATA, ".."))


# ---- zero-copy exchange ---------------------------------------------------------------

NUMPY_DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int32, np.int16, np.int8, np.uint8, np.bool_]
TORCH_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
                torch.int8, torch.uint8, torch.bool]


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_numpy_round_trip_shares_memory(dtype):
    a = (np.arange(24) % 2 if dtype == np.bool_ else np.arange(24)).astype(dtype).reshape(4, 6)
    k = kiln.from_dlpack(a)
    assert k.shape == [4, 6]
    assert k.data_ptr == a.ctypes.data
    b = np.from_dlpack(k)
    assert b.ctypes.data == a.ctypes.data and b.dtype == a.dtype
    np.testing.assert_array_equal(b, a)
    a[0, 0] = 1  # one memory: a write shows through every view
    assert np.asarray(k)[0, 0] == 1


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_torch_round_trip_shares_memory(dtype):
    t = torch.arange(24).reshape(4, 6).to(dtype)
    k = kiln.from_dlpack(t)
    assert k.data_ptr == t.data_ptr()
    back = torch.from_dlpack(k)
    assert back.data_ptr() == t.data_ptr() and back.dtype == dtype
    assert torch.equal(back, t)


def test_strided_views_cross_without_copies():
    t = torch.arange(48, dtype=torch.float32).reshape(6, 8)[1:, ::3]  # offset and strides
    k = kiln.from_dlpack(t)
    assert k.shape == [5, 3] and k.strides == [8, 3]
    assert k.data_ptr == t.data_ptr()
    assert torch.equal(torch.from_dlpack(k), t)
    a = np.arange(30, dtype=np.float64).reshape(5, 6).T  # transposed
    np.testing.assert_array_equal(np.from_dlpack(kiln.from_dlpack(a)), a)


def test_a_tensor_kept_across_the_boundary_keeps_its_memory():
    a = np.arange(1000, dtype=np.float32)
    k = kiln.from_dlpack(a)
    del a
    gc.collect()
    np.testing.assert_array_equal(np.asarray(k)[:3], [0, 1, 2])  # the array lives in k
    b = np.from_dlpack(kiln.from_dlpack(torch.ones(7)))  # the kiln tensor lives in b
    gc.collect()
    np.testing.assert_array_equal(b, np.ones(7, dtype=np.float32))


def test_virtual_cpu_devices():
    kiln.set_cpu_device_count(4)  # the count the tests run with (a change after first use is an error)
    k = kiln.from_dlpack(np.ones(3, dtype=np.float32), device="cpu:2")
    assert k.device == "cpu:2"
    assert k.to("cpu:0").device == "cpu:0"
    with pytest.raises(kiln.DeviceError):
        kiln.from_dlpack(np.ones(3), device="cuda:0")


# ---- programs ---------------------------------------------------------------------------

CORPUS_NAMES = ["cnn", "cnn_core", "encoder", "decoder", "decoder_core", "recurrent", "mlp_bn_train_core", "assorted",
                "mlp_dynamic"]


def reference(name):
    ref = load_file(os.path.join(CORPUS, name + ".safetensors"))
    count = lambda prefix: len([k for k in ref if k.startswith(prefix)])  # noqa: E731
    return ([ref[f"input_{i}"] for i in range(count("input_"))],
            [ref[f"output_{i}"] for i in range(count("output_"))])


@pytest.mark.parametrize("name", CORPUS_NAMES)
def test_pt2_corpus_matches_pytorch_on_torch_tensors(name):
    inputs, outputs = reference(name)
    program = kiln.load(os.path.join(CORPUS, name + ".pt2"))
    got = program(*[torch.from_numpy(x) for x in inputs])
    got = got if isinstance(got, tuple) else (got,)
    assert all(isinstance(g, torch.Tensor) for g in got)  # torch in, torch out
    for g, want in zip(got, outputs):
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["decoder_dynamic", "decoder_dynamic_core"])
def test_a_dynamic_pt2_program_runs_at_every_shape(name):  # (Y1, I4) batch and sequence symbolic
    program = kiln.load(os.path.join(CORPUS, name + ".pt2"))
    user = [s for s in program.signature["inputs"] if s["kind"] == "user_input"]
    assert user[0]["shape"] == ["s0", "s1"]
    for ref in (name, name + "_alt"):
        inputs, outputs = reference(ref)
        got = program(*[torch.from_numpy(x) for x in inputs])
        for g, want in zip(got, outputs):
            np.testing.assert_allclose(g.numpy(), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(kiln.ShapeError, match="outside the range"):
        program(torch.zeros(2, 17, dtype=torch.int64))


def test_outputs_come_back_in_the_kind_given():
    inputs, _ = reference("cnn")
    program = kiln.load(os.path.join(CORPUS, "cnn.pt2"))
    assert isinstance(program(inputs[0]), np.ndarray)
    assert isinstance(program(kiln.from_dlpack(inputs[0])), kiln.Tensor)
    assert isinstance(kiln.Executor(program).run(inputs[0])[0], kiln.Tensor)


def test_signature_state_show_save(tmp_path):
    program = kiln.load(os.path.join(CORPUS, "mlp_bn_train.pt2"))
    sig = program.signature
    user = [s for s in sig["inputs"] if s["kind"] == "user_input"]
    assert user == [{"kind": "user_input", "name": "x", "target": "input_0", "shape": [8, 6], "dtype": "f32",
                     "device": "cpu:0"}]
    assert {o["target"] for o in sig["outputs"] if o["kind"] == "buffer_mutation"} == {
        "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}
    assert "fc.weight" in program.state
    assert "<html" in kiln.show(program, format="html")
    assert "signature:" in kiln.show(os.path.join(CORPUS, "cnn.pt2"))
    path = tmp_path / "mlp.kiln"
    kiln.save(program, path)
    again = kiln.load(path)
    x = np.random.default_rng(0).standard_normal((8, 6)).astype(np.float32)
    np.testing.assert_allclose(again(x), kiln.load(os.path.join(CORPUS, "mlp_bn_train.pt2"))(x), rtol=1e-6)


def test_device_map_retargets_a_cuda_program():  # KILN_CPU_DEVICES=4: cpu:0..cpu:3
    inputs, outputs = reference("mlp_cuda0")
    with pytest.raises(kiln.DeviceError, match="--device-map cuda:0=cpu:0"):
        kiln.load(os.path.join(CORPUS, "mlp_cuda0.pt2"))
    program = kiln.load(os.path.join(CORPUS, "mlp_cuda0.pt2"), device_map={"cuda:0": "cpu:1"})
    assert program.devices == ["cpu:1"]
    y = program(kiln.from_dlpack(inputs[0], device="cpu:1"))
    assert y.device == "cpu:1"
    np.testing.assert_allclose(np.asarray(y), outputs[0], rtol=1e-5, atol=1e-5)


def test_errors_are_python_exceptions_of_their_kind(tmp_path):
    program = kiln.load(os.path.join(CORPUS, "cnn.pt2"))
    with pytest.raises(ValueError, match="expects f32\\[2,3,16,16\\]"):
        program(np.zeros((1, 3, 16, 16), dtype=np.float32))
    with pytest.raises(kiln.InvalidValueError):
        program()
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(kiln.FormatError, match="not a zip archive"):
        kiln.load(bad)
    with pytest.raises(kiln.FormatError, match="cannot open"):
        kiln.load(tmp_path / "missing.kiln")
    with pytest.raises(kiln.DTypeError):
        kiln.from_dlpack(np.ones(2, dtype=np.complex64))
    assert issubclass(kiln.DeviceError, kiln.Error) and issubclass(kiln.DeviceError, ValueError)


def test_threads_run_one_program_concurrently():
    inputs, outputs = reference("decoder")
    program = kiln.load(os.path.join(CORPUS, "decoder.pt2"))
    results, errors = [], []

    def work():
        try:
            for _ in range(20):
                results.append(program(inputs[0])[1])
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 80
    for r in results:
        np.testing.assert_allclose(r, outputs[1], rtol=1e-5, atol=1e-5)


def test_train_step_lowers_the_loss(tmp_path):
    path = tmp_path / "step.kiln"
    subprocess.run([os.environ["KILN_CLI"], "export", "--model", "mlp", "--set", "batch=8", "--train", "sgd",
                    "-o", str(path)], check=True, capture_output=True)
    step = kiln.train_step(path)
    rng = np.random.default_rng(1)
    batch = [rng.standard_normal(s["shape"]).astype(np.float32) if s["dtype"] == "f32"
             else rng.integers(0, 2, s["shape"]).astype(np.int64)
             for s in step.signature["inputs"] if s["kind"] == "user_input"]
    step.lr = 0.05
    assert abs(step.lr - 0.05) < 1e-7
    losses = [step.step(*batch) for _ in range(10)]
    assert losses[-1] < losses[0]


def test_readme_python_section_runs():
    """The README's Python section is executed as written (from the repository root)."""
    with open(os.path.join(ROOT, "README.md")) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert blocks, "the README has a Python section"
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        for code in blocks:
            exec(compile(code, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
