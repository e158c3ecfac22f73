#!/usr/bin/python3
"""Writes tests/golden/opdb_sweep.json: PyTorch's own OpInfo samples (the reference inputs
of torch.testing's op_db: broadcasting, 0-dim and empty tensors, extremal values, every
dtype an op supports on the CPU) for kiln's elementwise ops and reductions, with PyTorch's
outputs or the fact that it raised. tests/dispatch/opdb_sweep_test.cpp replays them.

Run with Debian's torch:  /usr/bin/python3 tools/golden/make_opdb_sweep.py
"""
import os
import sys

# Deterministic output (a regeneration diffs only where samples or PyTorch changed): string
# hashing (some sample functions iterate sets) and one BLAS thread (LAPACK's last bits
# moved between runs with several).
if os.environ.get("PYTHONHASHSEED") != "0" or os.environ.get("OMP_NUM_THREADS") != "1":
    os.execve(sys.executable, [sys.executable] + sys.argv,
              dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1"))

import json  # noqa: E402
import math  # noqa: E402
import pathlib
import random
import types
import unittest
import zlib

import numpy
import torch

# op_db imports expecttest, a test-only package Debian's torch does not ship; it is only
# used by tests we do not run, so a stand-in module is enough.
if "expecttest" not in sys.modules:
    stand_in = types.ModuleType("expecttest")
    stand_in.ACCEPT = False
    stand_in.TestCase = unittest.TestCase
    sys.modules["expecttest"] = stand_in
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402

NAMES = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16",
         torch.bfloat16: "bf16", torch.int64: "i64", torch.int32: "i32", torch.int16: "i16",
         torch.int8: "i8", torch.uint8: "u8", torch.bool: "bool"}
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
          torch.int8, torch.uint8, torch.bool]
MAX_NUMEL = 256       # larger samples are left out (the file stays small)
MAX_SAMPLES = 8       # per op and dtype

# The op_db entries kiln replays (tests/dispatch/opdb_sweep_test.cpp maps each to kiln).
UNARY = """abs acos acosh asin asinh atan atanh bitwise_not ceil positive cos cosh deg2rad exp frac
floor i0 log1p log log10 log2 logical_not neg rad2deg round round.decimals_0 round.decimals_3
round.decimals_neg_3 sin sinc sinh sign sgn signbit tan tanh trunc exp2 expm1 nan_to_num reciprocal
rsqrt sqrt square isfinite isinf isposinf isneginf isreal isnan sigmoid digamma erf erfc erfinv lgamma
logit polygamma.polygamma_n_0 polygamma.polygamma_n_1 polygamma.polygamma_n_2 mvlgamma.mvlgamma_p_1
mvlgamma.mvlgamma_p_3 nn.functional.relu nn.functional.elu nn.functional.celu nn.functional.selu
nn.functional.silu nn.functional.hardsigmoid nn.functional.logsigmoid nn.functional.mish
nn.functional.softsign nn.functional.tanhshrink nn.functional.threshold nn.functional.softshrink
nn.functional.hardshrink nn.functional.hardtanh nn.functional.relu6 nn.functional.softplus
special.i0e special.i1 special.i1e special.ndtr special.entr special.ndtri special.log_ndtr
special.erfcx special.airy_ai special.bessel_j0 special.bessel_j1 special.bessel_y0 special.bessel_y1
special.modified_bessel_i0 special.modified_bessel_i1 special.modified_bessel_k0
special.modified_bessel_k1 special.scaled_modified_bessel_k0 special.scaled_modified_bessel_k1
special.spherical_bessel_j0""".split()
BINARY = """add clamp_max clamp_min mul sub atan2 bitwise_left_shift bitwise_right_shift copysign
div.no_rounding_mode div.trunc_rounding div.floor_rounding true_divide eq fmax fmin fmod remainder
floor_divide ge gt le ldexp lt max.binary maximum min.binary minimum logical_and logical_or
logical_xor bitwise_and bitwise_or bitwise_xor heaviside lcm gcd isclose nextafter igamma igammac ne
pow float_power __radd__ __rmul__ __rand__ __ror__ __rxor__ __rsub__ rsub hypot xlogy
special.xlog1py special.zeta special.chebyshev_polynomial_t special.hermite_polynomial_h
special.laguerre_polynomial_l special.legendre_polynomial_p""".split()
REDUCTION = """all any amax amin argmax argmin count_nonzero mean nanmean std var prod sum nansum
linalg.vector_norm""".split()
OTHER = """where clamp lerp addcmul addcdiv logsumexp cumsum cumprod cummax cummin logcumsumexp sort
argsort topk kthvalue median nanmedian mode msort quantile nanquantile softmax log_softmax
nn.functional.softmin nn.functional.layer_norm nn.functional.linear nn.functional.gelu
nn.functional.leaky_relu nn.functional.glu nn.functional.normalize nn.functional.cosine_similarity
nn.functional.pairwise_distance gather scatter scatter_add index_select take take_along_dim index_add
index_copy index_fill masked_fill masked_select masked_scatter tril triu flip roll rot90 diag diagonal
diag_embed cat stack hstack vstack dstack matmul mm bmm addmm addmv addbmm baddbmm addr mv dot vdot inner
outer tensordot kron einsum cross linalg.cross dist cdist renorm logaddexp logaddexp2 var_mean std_mean
aminmax unique unique_consecutive nonzero argwhere isin bincount bucketize searchsorted histc diff trapz
trapezoid cumulative_trapezoid cov corrcoef reshape view permute squeeze unsqueeze expand repeat tile
narrow select split chunk unbind movedim t transpose flatten unflatten ravel broadcast_to atleast_1d
column_stack tensor_split hsplit vsplit fliplr flipud block_diag cartesian_prod meshgrid.list_of_tensors
logdet trace diagflat""".split()
NN = """nn.functional.conv1d nn.functional.conv2d nn.functional.conv_transpose1d nn.functional.conv_transpose2d
nn.functional.avg_pool1d nn.functional.avg_pool2d nn.functional.max_pool1d nn.functional.max_pool2d
nn.functional.adaptive_avg_pool1d nn.functional.adaptive_avg_pool2d nn.functional.adaptive_max_pool1d
nn.functional.adaptive_max_pool2d nn.functional.mse_loss nn.functional.l1_loss nn.functional.smooth_l1_loss
nn.functional.huber_loss nn.functional.nll_loss nn.functional.cross_entropy nn.functional.binary_cross_entropy
nn.functional.binary_cross_entropy_with_logits nn.functional.kl_div nn.functional.soft_margin_loss
nn.functional.hinge_embedding_loss nn.functional.margin_ranking_loss nn.functional.poisson_nll_loss
nn.functional.gaussian_nll_loss nn.functional.cosine_embedding_loss nn.functional.multilabel_soft_margin_loss
nn.functional.triplet_margin_loss nn.functional.batch_norm nn.functional.group_norm nn.functional.instance_norm
nn.functional.local_response_norm nn.functional.embedding nn.functional.one_hot nn.functional.pad.constant
nn.functional.pad.reflect nn.functional.pad.replicate nn.functional.pad.circular nn.functional.pixel_shuffle
nn.functional.pixel_unshuffle nn.functional.unfold nn.functional.interpolate.nearest
nn.functional.interpolate.bilinear nn.functional.interpolate.linear nn.functional.interpolate.bicubic
nn.functional.interpolate.area nn.functional.prelu nn.functional.bilinear nn.functional.pdist
nn.functional.multi_margin_loss nn.functional.multilabel_margin_loss nn.functional.max_unpool1d
nn.functional.grid_sample nn.functional.hardswish nn.functional.embedding_bag""".split()
LINALG = """linalg.det linalg.inv linalg.inv_ex linalg.solve linalg.solve_ex linalg.cholesky linalg.cholesky_ex
linalg.matrix_norm linalg.norm linalg.pinv linalg.matrix_rank linalg.slogdet linalg.lu_factor linalg.lu
linalg.eigvalsh linalg.svdvals linalg.matrix_power linalg.multi_dot linalg.vecdot linalg.solve_triangular
linalg.tensorinv linalg.tensorsolve linalg.cond linalg.lstsq linalg.householder_product linalg.lu_solve
cholesky_solve cholesky_inverse triangular_solve pinverse matrix_exp lu_unpack geqrf ormqr linalg.qr""".split()
MORE = """masked.sum masked.prod masked.amax masked.amin masked.argmax masked.argmin masked.mean masked.median
masked.norm masked.normalize masked.var masked.std masked.logsumexp masked.cumsum masked.cumprod masked.softmax
masked.log_softmax masked.softmin masked.logaddexp nn.functional.avg_pool3d nn.functional.max_pool3d
nn.functional.adaptive_avg_pool3d nn.functional.conv_transpose3d nn.functional.upsample_nearest
nn.functional.upsample_bilinear nn.functional.interpolate.trilinear nn.functional.max_unpool2d
nn.functional.ctc_loss""".split()
# The twentieth pass: shape and copy ops, scatter variants, reductions with dim, dtype
# keywords, conversions and factories, the remaining polynomials, norms, old linalg APIs.
MORE2 = """allclose equal clone contiguous expand_as reshape_as view_as atleast_2d atleast_3d sum_to_size narrow_copy
split_with_sizes split.list_args dsplit diagonal_scatter select_scatter slice_scatter constant_pad_nd native_layer_norm
native_batch_norm max.reduction_with_dim max.reduction_no_dim min.reduction_with_dim min.reduction_no_dim
softmax.with_dtype log_softmax.dtype nn.functional.softmin.with_dtype frexp gradient histogram repeat_interleave
scatter_reduce.sum scatter_reduce.prod scatter_reduce.mean scatter_reduce.amin scatter_reduce.amax index_reduce put
polygamma.polygamma_n_3 polygamma.polygamma_n_4 mvlgamma.mvlgamma_p_5 linalg.vander linalg.lu_factor_ex combinations
unfold cholesky lu_solve norm norm.fro norm.nuc norm.inf nn.functional.max_unpool3d nn.functional.adaptive_max_pool3d
special.chebyshev_polynomial_u special.chebyshev_polynomial_v special.chebyshev_polynomial_w
special.hermite_polynomial_he special.shifted_chebyshev_polynomial_t special.shifted_chebyshev_polynomial_u
special.shifted_chebyshev_polynomial_v special.shifted_chebyshev_polynomial_w __rdiv__ __rmod__ __rpow__ __rmatmul__
T H mT mH double float half bfloat16 bool byte char int long short zeros_like ones_like full_like new_zeros new_ones
new_full""".split()
# Indexing: x[...] (the index as a list of entries) and index_put.
INDEXING = "__getitem__ index_put".split()
# Creation ops: the sample's input is a number or a shape ("value" in the case).
CREATION = "arange linspace logspace eye zeros ones triu_indices tril_indices".split()


def short(v, dtype):
    """A value as JSON: shortest text that reads back to the same value of `dtype`."""
    if isinstance(v, bool):
        return v
    if not math.isfinite(v):
        return str(v)
    if dtype in (torch.float32, torch.float16, torch.bfloat16):
        return float(f"{v:.9g}")
    return int(v) if dtype is not None and not dtype.is_floating_point and dtype != torch.bool else v


def enc(t):
    t = t.detach()
    if t.is_conj():
        t = t.resolve_conj()
    return {"dtype": NAMES[t.dtype], "shape": list(t.shape),
            "data": [short(v, t.dtype) for v in t.double().reshape(-1).tolist()]}


def enc_index(v):
    """One entry of x[...]: an integer, a slice, None, Ellipsis, an index tensor (inline) or
    a list (an index tensor of its values)."""
    if isinstance(v, bool) or v is None:
        return {"none": True} if v is None else {"tensor_value": enc(torch.tensor(v))}
    if isinstance(v, int):
        return v
    if isinstance(v, slice):
        return {"slice": [v.start, v.stop, v.step]}
    if v is Ellipsis:
        return {"ellipsis": True}
    if torch.is_tensor(v):
        return {"tensor_value": enc(v)}
    if isinstance(v, (list, tuple)):
        return {"tensor_value": enc(torch.tensor(v))}
    raise TypeError(type(v))


def enc_indices(v):
    """x[v] as a list of entries: a list holding a slice, None, Ellipsis, a sequence or a
    tensor stands for a tuple (as in PyTorch and NumPy); any other list is one index."""
    if isinstance(v, tuple) or (isinstance(v, list) and any(
            x is None or x is Ellipsis or isinstance(x, (slice, list, tuple)) or torch.is_tensor(x) for x in v)):
        return [enc_index(x) for x in v]
    return [enc_index(v)]


def enc_value(v):
    """A sample's positional or keyword argument: a tensor index is filled in by the caller."""
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, (bool, int, str)) or v is None:
        return v
    if isinstance(v, torch.dtype):
        return {"dtype": NAMES[v]}
    if isinstance(v, (tuple, list)) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return list(v)
    if isinstance(v, (tuple, list)) and all(isinstance(x, (tuple, list)) for x in v):
        return [enc_value(x) for x in v]
    raise TypeError(type(v))


# Where PyTorch 1.13's kernel is measurably off (its Bessel J/Y and the float erfcx lose
# digits: bessel_j0(-5.7146) is wrong in the 7th), the case holds mpmath's value instead,
# and says so: kiln computes these in double and rounds once.
TOLERANCE = {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5), torch.float32: (1.3e-6, 1e-5),
             torch.float64: (1e-7, 1e-7)}


def mp_reference(name):
    try:
        import mpmath
    except ImportError:
        return None

    def real(f):
        def g(x):
            try:
                v = complex(f(mpmath.mpf(x)))
            except (ValueError, ZeroDivisionError, OverflowError):
                return math.nan
            return v.real if v.imag == 0 else math.nan
        return g
    mpmath.mp.dps = 40
    return {"special.bessel_j0": real(lambda x: mpmath.besselj(0, x)),
            "special.bessel_j1": real(lambda x: mpmath.besselj(1, x)),
            "special.bessel_y0": real(lambda x: mpmath.bessely(0, x) if x > 0 else mpmath.nan),
            "special.bessel_y1": real(lambda x: mpmath.bessely(1, x) if x > 0 else mpmath.nan),
            "special.erfcx": real(lambda x: mpmath.exp(x * x) * mpmath.erfc(x)),
            "special.airy_ai": real(mpmath.airyai),
            # the polynomials of degree n, truncated toward zero as PyTorch does (0 below 0)
            "special.chebyshev_polynomial_t": polynomial(mpmath.chebyt),
            "special.hermite_polynomial_h": polynomial(mpmath.hermite),
            "special.laguerre_polynomial_l": polynomial(lambda n, x: mpmath.laguerre(n, 0, x)),
            "special.legendre_polynomial_p": polynomial(mpmath.legendre)}.get(name)


def polynomial(f):
    def g(x, n):
        if not (math.isfinite(x) and math.isfinite(n)) or abs(n) > 1000:
            return math.nan  # left to PyTorch's value
        k = int(n)  # toward zero
        return 0.0 if k < 0 else float(f(k, x))
    return g


def corrected(name, tensors, out):
    """out, or mpmath's values (rounded to out's dtype) where PyTorch's are off."""
    ref = mp_reference(name)
    if ref is None or out.dtype not in TOLERANCE or any(t.dtype != out.dtype for t in tensors):
        return out, False
    rtol, atol = TOLERANCE[out.dtype]
    columns = [t.expand(out.shape).double().reshape(-1).tolist() for t in tensors]
    try:
        truth = torch.tensor([ref(*v) for v in zip(*columns)], dtype=torch.float64).reshape(out.shape)
    except TypeError:  # a number where the reference takes a tensor: PyTorch's value stands
        return out, False
    exact = truth.to(out.dtype).double()
    got = out.double()
    finite = torch.isfinite(exact) & torch.isfinite(got)
    off = finite & ((got - exact).abs() > atol + rtol * exact.abs())
    if not off.any():
        return out, False
    return torch.where(off, exact, got).to(out.dtype), True


# Ops whose f16/bf16 kernels compute in f32 and round once in current PyTorch, where 1.13
# rounds steps in the dtype (its bf16 layer_norm of one element is not its bias; its
# log_softmax loses half the digits; its bf16 vector-matrix products accumulate in bf16):
# there a case holds the f64 computation rounded to the dtype, marked "reference": "float64".
OPMATH = {"softmax", "log_softmax", "nn.functional.softmin", "nn.functional.layer_norm", "nn.functional.gelu",
          "lerp", "addcmul", "addcdiv", "matmul", "mm", "bmm", "mv", "addmm", "addmv", "addbmm", "baddbmm", "addr",
          "dot", "vdot", "inner", "outer", "einsum", "tensordot", "dist", "renorm", "cdist", "histc",
          "nn.functional.bilinear", "nn.functional.binary_cross_entropy_with_logits", "nn.functional.soft_margin_loss",
          "nn.functional.interpolate.linear", "nn.functional.interpolate.bilinear", "nn.functional.interpolate.bicubic",
          "nn.functional.interpolate.area", "nn.functional.instance_norm", "nn.functional.group_norm",
          "nn.functional.batch_norm", "nn.functional.huber_loss", "nn.functional.hardswish",
          "nn.functional.adaptive_avg_pool1d", "nn.functional.adaptive_avg_pool2d", "nn.functional.local_response_norm",
          "nn.functional.cosine_embedding_loss", "nn.functional.conv1d", "nn.functional.conv2d",
          "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d", "nn.functional.embedding_bag",
          "linalg.multi_dot", "matrix_exp", "masked.softmax", "masked.log_softmax", "masked.softmin", "masked.mean",
          "masked.var", "masked.std", "masked.norm", "masked.normalize", "masked.logsumexp",
          "nn.functional.upsample_bilinear", "nn.functional.conv_transpose3d", "nn.functional.avg_pool3d",
          "nn.functional.adaptive_avg_pool3d", "nn.functional.cross_entropy", "nn.functional.nll_loss", "logsumexp",
          "logaddexp", "logaddexp2", "masked.logaddexp", "hypot", "__rmatmul__", "native_batch_norm", "native_layer_norm",
          "nn.functional.hinge_embedding_loss"}
# Ops whose f32 result in PyTorch 1.13 is itself off (its matrix_exp squares an f32 Taylor
# polynomial: 5e-6 relative on a 5 x 5 matrix of norm 50; its bf16 one gives NaN): the f64
# computation rounded is the reference in every floating dtype.
# Its f32 layer_norm of one element is not the bias either.
WIDE_REFERENCE = {"matrix_exp", "nn.functional.layer_norm", "native_layer_norm"}


def opmath_corrected(o, name, first, args, kwargs, out):
    narrow_types = (torch.float16, torch.bfloat16) + ((torch.float32,) if name in WIDE_REFERENCE else ())
    if isinstance(out, (tuple, list)):  # each output on its own (native_batch_norm's statistics)
        if name not in OPMATH:
            return out, False
        wide_outs = None
        fixed = []
        for i, t in enumerate(out):
            if not torch.is_tensor(t) or t.dtype not in narrow_types or t.numel() == 0:
                fixed.append((t, False))
                continue
            if wide_outs is None:
                wide_outs = wide_call(o, first, args, kwargs)
            fixed.append(replace_off(t, wide_outs[i].to(t.dtype)))
        return [t for t, _ in fixed], any(f for _, f in fixed)
    if name not in OPMATH or not torch.is_tensor(out) or out.dtype not in narrow_types:
        return out, False
    return replace_off(out, wide_call(o, first, args, kwargs).to(out.dtype))


def creation_corrected(name, first, args, kwargs, out):
    """linspace/logspace in f16/bf16 and integer dtypes: PyTorch 1.13 steps in the dtype
    per vector chunk (its integer linspace is not even monotonic); the reference is the
    computation in double from the bounds converted to the dtype (PyTorch's rule), rounded
    (truncated for integers) once."""
    dtype = kwargs.get("dtype")
    if name not in ("linspace", "logspace") or dtype in (None, torch.float32, torch.float64) or dtype == torch.bool:
        return out, False
    integral = not dtype.is_floating_point
    start, end = (math.trunc(first), math.trunc(args[0])) if integral else (first, args[0])
    f = torch.linspace if name == "linspace" else torch.logspace
    exact = f(start, end, *args[1:], **{**kwargs, "dtype": torch.float64})
    exact = exact.trunc().to(dtype) if integral else exact.to(dtype)
    if integral:
        return (exact, True) if not torch.equal(exact, out) else (out, False)
    return replace_off(out, exact)


def wide_call(o, first, args, kwargs):
    """The op on the f64 versions of its floating tensors (copies: in-place statistics
    updates must not touch the sample)."""
    def wide(v):
        if isinstance(v, (list, tuple)):
            return [wide(x) for x in v]
        return v.detach().double() if torch.is_tensor(v) and v.is_floating_point() else v
    return o.op(wide(first), *[wide(a) for a in args], **{k: wide(v) for k, v in kwargs.items()})


def replace_off(out, exact):
    """out, with exact's values where out is outside its dtype's tolerance of them."""
    rtol, atol = TOLERANCE[out.dtype]
    e, g = exact.double(), out.double()
    off = torch.isfinite(e) & (~torch.isfinite(g) | ((g - e).abs() > atol + rtol * e.abs()))
    if not off.any():
        return out, False
    return torch.where(off, e, g).to(out.dtype), True


def gradient_case(o, s, inputs, tensors):
    """PyTorch's gradients of sum(out * cotangent) w.r.t. the sample's f64 tensors (f64
    samples only: tight tolerances), or None where the op or its backward refuses."""
    if any(t.is_floating_point() and not torch.isfinite(t).all() for t in tensors):
        return None  # gradients at infinities and NaN are conventions PyTorch does not keep consistent
    leaves = [t.detach().clone().requires_grad_(t.dtype == torch.float64) for t in tensors]
    wrt = [i for i, t in enumerate(leaves) if t.requires_grad]
    if not wrt:
        return None
    fresh = dict(zip(map(id, tensors), leaves))
    first = leaves[:len(inputs)] if isinstance(s.input, (list, tuple)) else leaves[0]
    kwargs = dict(s.kwargs)
    # PyTorch 1.13's CPU embedding_bag misapplies scale_grad_by_freq's counts (an index seen
    # once in [[0, 1, 1, 1], [2, 3, 4, 5]] gets 1/3): the reference is the documented
    # gradient, each weight row's divided by its index's count in the input.
    by_frequency = o.name == "nn.functional.embedding_bag" and kwargs.get("scale_grad_by_freq")
    if by_frequency:
        kwargs["scale_grad_by_freq"] = False
    try:
        out = o.op(first, *[fresh.get(id(a), a) for a in s.args], **{k: fresh.get(id(v), v) for k, v in kwargs.items()})
        if not torch.is_tensor(out) or not out.requires_grad or out.dtype != torch.float64:
            return None
        cotangent = torch.randn(out.shape, generator=GRAD_SEED, dtype=torch.float64)
        grads = torch.autograd.grad(out, [leaves[i] for i in wrt], cotangent, allow_unused=True,
                                    create_graph=not by_frequency)
    except (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError):
        return None
    second = None if by_frequency else second_order(leaves, wrt, grads)
    if by_frequency:
        counts = torch.bincount(s.args[0].reshape(-1), minlength=s.input.shape[0]).clamp(min=1).double()
        grads = tuple((g.to_dense() if g.is_sparse else g) / counts.unsqueeze(1) if g is not None and i == 0 else g
                      for i, g in zip(wrt, grads))
    try:
        if any(g is not None and not torch.isfinite(g).all() for g in grads):
            return None  # infinities and NaN in gradients are left to the forward checks
        case = {"cotangent": enc(cotangent), "wrt": wrt,
                "grads": [enc((g.to_dense() if g.is_sparse else g).detach().contiguous()) if g is not None else None
                          for g in grads]}
        if second:
            case["gradgrad"] = second
        return case
    except RuntimeError:  # a gradient without storage (a few backward formulas): left out
        return None


GRAD_SEED = torch.Generator().manual_seed(7)


def second_order(leaves, wrt, grads):
    """test_ops' gradgrad: the gradients of sum_i(grads_i * v_i) w.r.t. the same inputs, for
    random v_i, where every first gradient is differentiable and everything is finite."""
    if any(g is None or g.is_sparse or not g.requires_grad for g in grads):
        return None
    vs = [torch.randn(g.shape, generator=GRAD_SEED, dtype=torch.float64) for g in grads]
    try:
        total = sum((g * v).sum() for g, v in zip(grads, vs))
        second = torch.autograd.grad(total, [leaves[i] for i in wrt], allow_unused=True)
    except (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError):
        return None
    try:
        if any(g is not None and not torch.isfinite(g).all() for g in second):
            return None
        return {"v": [enc(v) for v in vs], "grads": [enc(g.contiguous()) if g is not None else None for g in second]}
    except RuntimeError:  # a gradient without storage (as in gradient_case): left out
        return None


def encode_call(s, tensors, name=""):
    """A sample's args and kwargs as JSON, tensors as indices into `tensors` (the index of
    __getitem__ and index_put's list of index tensors as entries of their own)."""
    if name == "__getitem__":
        return [enc_indices(s.args[0])], {}
    if name == "index_put":
        values = next(i for i, t in enumerate(tensors) if t is s.args[1])
        return [[enc_index(t) for t in s.args[0]], {"tensor": values}], \
            {k: enc_value(v) for k, v in s.kwargs.items()}
    index = {id(t): i for i, t in enumerate(tensors)}
    args = [{"tensor": index[id(a)]} if torch.is_tensor(a) else enc_value(a) for a in s.args]
    kwargs = {k: {"tensor": index[id(v)]} if torch.is_tensor(v) else enc_value(v) for k, v in s.kwargs.items()}
    return args, kwargs


def is_value(v):
    """A sample input that is a number or a shape (the creation ops), not tensors."""
    return isinstance(v, (int, float)) or (isinstance(v, (list, tuple)) and all(isinstance(x, int) for x in v))


def sample_tensors(s):
    if is_value(s.input):
        return [], [a for a in s.args if torch.is_tensor(a)] + [v for v in s.kwargs.values() if torch.is_tensor(v)]
    inputs = list(s.input) if isinstance(s.input, (list, tuple)) else [s.input]
    return inputs, inputs + [a for a in s.args if torch.is_tensor(a)] + \
        [v for v in s.kwargs.values() if torch.is_tensor(v)]


def fits(tensors):
    return all(torch.is_tensor(t) and t.numel() <= MAX_NUMEL and t.dtype in NAMES for t in tensors)


def error_cases(o, name, kind):
    """op_db's error inputs PyTorch raises on (RuntimeError, IndexError, ValueError: what
    kiln reports as an Error; Python's argument-type errors have no C++ counterpart)."""
    cases = []
    try:
        errors = list(o.error_inputs("cpu")) if o.error_inputs_func else []
    except Exception:  # noqa: BLE001 - an error_inputs_func that does not run on 1.13
        return cases
    for e in errors:
        if e.error_type not in (RuntimeError, IndexError, ValueError) or "out" in e.sample_input.kwargs:
            continue
        s = e.sample_input
        inputs, tensors = sample_tensors(s)
        if not fits(tensors):
            continue
        try:
            args, kwargs = encode_call(s, tensors)
        except TypeError:
            continue
        first = s.input if is_value(s.input) else inputs if isinstance(s.input, (list, tuple)) else inputs[0]
        try:
            o.op(first, *s.args, **s.kwargs)
        except e.error_type as err:
            case = {"op": name, "kind": kind, "inputs": [enc(t) for t in tensors], "args": args, "kwargs": kwargs,
                    "error": (str(err).splitlines() or [type(err).__name__])[0][:80], "error_input": True}
            if is_value(s.input):
                case["value"] = enc_value(s.input)
            elif isinstance(s.input, (list, tuple)):
                case["input_list"] = len(inputs)
            cases.append(case)
        except Exception:  # noqa: BLE001 - raised something else: not what op_db says
            continue
    return cases


def op_name(o):
    return o.name + ("." + o.variant_test_name if o.variant_test_name else "")


def main():
    by_name = {op_name(o): o for o in op_db}
    cases, skipped = [], {}
    for kind, names in (("unary", UNARY), ("binary", BINARY), ("reduction", REDUCTION), ("other", OTHER), ("nn", NN), ("linalg", LINALG), ("more", MORE), ("more", MORE2), ("creation", CREATION), ("indexing", INDEXING)):
        for name in names:
            o = by_name[name]
            # each op draws from its own seed: adding an op leaves the other cases alone
            seed = zlib.crc32(name.encode())
            torch.manual_seed(seed)
            random.seed(seed)  # some sample functions draw from Python's or NumPy's generator too
            numpy.random.seed(seed)
            GRAD_SEED.manual_seed(seed)
            for dtype in DTYPES:
                if dtype not in o.supported_dtypes("cpu"):
                    continue
                fitting = []
                for s in o.reference_inputs("cpu", dtype):
                    inputs, tensors = sample_tensors(s)
                    if fits(tensors):
                        fitting.append((s, inputs, tensors))
                # evenly spread over the list: the plain samples come first, extremal values last
                step = max(1, len(fitting) / MAX_SAMPLES)
                for s, inputs, tensors in [fitting[int(i * step)] for i in range(min(MAX_SAMPLES, len(fitting)))]:
                    try:
                        args, kwargs = encode_call(s, tensors, name)
                    except TypeError:
                        skipped[name] = skipped.get(name, 0) + 1
                        continue
                    case = {"op": name, "kind": kind, "inputs": [enc(t) for t in tensors], "args": args,
                            "kwargs": kwargs}
                    if is_value(s.input):
                        case["value"] = enc_value(s.input)
                    elif isinstance(s.input, (list, tuple)):
                        case["input_list"] = len(inputs)
                    try:
                        copies = [t.detach().clone() for t in tensors]
                        fresh = dict(zip(map(id, tensors), copies))
                        first = s.input if is_value(s.input) else \
                            copies[:len(inputs)] if isinstance(s.input, (list, tuple)) else copies[0]
                        call_args = [fresh.get(id(a), a) for a in s.args]
                        call_kwargs = {k: fresh.get(id(v), v) for k, v in s.kwargs.items()}
                        out = o.op(first, *call_args, **call_kwargs)
                    except (RuntimeError, ValueError, TypeError, IndexError) as e:
                        case["error"] = str(e).splitlines()[0][:80] if str(e) else type(e).__name__
                    else:
                        if isinstance(out, (tuple, list)) and all(torch.is_tensor(t) for t in out):
                            out, widened = opmath_corrected(o, name, first, call_args, call_kwargs, out)
                            case["outputs"] = [enc(t) for t in out]
                            if widened:
                                case["reference"] = "float64"
                        else:
                            if not torch.is_tensor(out):
                                out = torch.tensor(out)
                            out, fixed = corrected(name, tensors, out)
                            out, widened = opmath_corrected(o, name, first, call_args, call_kwargs, out)
                            if is_value(s.input):
                                out, widened = creation_corrected(name, first, call_args, call_kwargs, out)
                            case["output"] = enc(out)
                            if fixed or widened:
                                case["reference"] = "mpmath" if fixed else "float64"
                            if dtype == torch.float64 and o.supports_autograd and not fixed and not widened:
                                gradient = gradient_case(o, s, inputs, tensors)
                                if gradient:
                                    case["grad"] = gradient
                    cases.append(case)
            cases += error_cases(o, name, kind)
    out = pathlib.Path(__file__).resolve().parents[2] / "tests" / "golden" / "opdb_sweep.json"
    if "--out" in sys.argv:  # elsewhere (KILN_OPDB_SWEEP=FILE replays it)
        out = pathlib.Path(sys.argv[sys.argv.index("--out") + 1])
    # one case a line: a regenerated file's diff is the cases that changed
    head = json.dumps({"generator": "tools/golden/make_opdb_sweep.py", "torch": torch.__version__})[:-1]
    lines = ",\n".join(json.dumps(c, separators=(",", ":")) for c in cases)
    out.write_text(f'{head}, "cases": [\n{lines}\n]}}\n')
    print(f"wrote {len(cases)} cases to {out} ({out.stat().st_size // 1024} KiB); skipped {skipped}")


if __name__ == "__main__":
    main()
