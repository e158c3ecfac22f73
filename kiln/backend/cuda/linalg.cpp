// The matmul family on CUDA devices through cuBLAS (D5): a handle from the device's
// pool (one per thread), bound to the current stream at each call; f32 uses TF32 only
// when allow_tf32() says so; f16/bf16 accumulate in f32.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <string>

#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/plan.h"
#include "kiln/device/cuda_runtime.h"
#include "kiln/device/handle_pool.h"
#include "kiln/device/registry.h"
#include "kiln/device/stream.h"
#include "kiln/ops/meta.h"

namespace kiln::cuda {

using ops::OpCall;

namespace {

// cuBLAS is opened on first use rather than linked: mapping libcublas and libcublasLt
// (about 600 MB) would cost every kiln process ~150 ms at start, GPU or not.
struct Cublas {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetWorkspace_v2) set_workspace;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasGetStatusString) status_string;
  cublasStatus_t (*gemm_strided_batched)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                         int, int, const void*, const void*, cudaDataType, int,
                                         long long, const void*, cudaDataType, int, long long,
                                         const void*, void*, cudaDataType, int, long long, int,
                                         cublasComputeType_t, cublasGemmAlgo_t);
};

const Cublas& cublas() {
  static const Cublas api = [] {
    // By soname (the loader's paths), else from the toolkit kiln was built against.
    std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* lib = load_library(name, "cuBLAS");
    auto sym = [&](const char* symbol) { return library_symbol(lib, symbol, name, "cuBLAS"); };
    Cublas c;
    c.create = reinterpret_cast<decltype(c.create)>(sym("cublasCreate_v2"));
    c.set_stream = reinterpret_cast<decltype(c.set_stream)>(sym("cublasSetStream_v2"));
    c.set_workspace = reinterpret_cast<decltype(c.set_workspace)>(sym("cublasSetWorkspace_v2"));
    c.set_math_mode = reinterpret_cast<decltype(c.set_math_mode)>(sym("cublasSetMathMode"));
    c.status_string = reinterpret_cast<decltype(c.status_string)>(sym("cublasGetStatusString"));
    c.gemm_strided_batched =
        reinterpret_cast<decltype(c.gemm_strided_batched)>(sym("cublasGemmStridedBatchedEx"));
    return c;
  }();
  return api;
}

}  // namespace

void load_cublas() { cublas(); }

namespace {

void check_blas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  fail(ErrorKind::backend, "[cuBLAS] {} failed: {} ({})", what, cublas().status_string(s),
       static_cast<int>(s));
}

HandlePool& blas_pool() {
  static auto* pool = new HandlePool("cuBLAS handle", [](Device d) -> void* {
    set_device(d.index);
    cublasHandle_t h = nullptr;
    check_blas(cublas().create(&h), "cublasCreate");
    return h;
  });
  return *pool;
}

// cuBLAS scratch memory per (handle, stream): a handle used on two streams must not
// share one workspace between them. Taken from the device's caching allocator while the
// stream is current, so it belongs to that stream; kept for the process.
void* workspace(cublasHandle_t h, cudaStream_t s, Device d, size_t bytes) {
  static std::mutex mu;
  static auto* spaces = new std::map<std::pair<void*, void*>, void*>;
  std::lock_guard lock(mu);
  void*& w = (*spaces)[{static_cast<void*>(h), static_cast<void*>(s)}];
  if (!w) w = device_allocator(d).allocate(bytes);
  return w;
}

// The current device's handle, bound to its current stream, its workspace for that
// stream and the TF32 policy.
cublasHandle_t handle() {
  constexpr size_t kWorkspace = 32 << 20;  // what cuBLAS recommends for Hopper
  Device d = current_device(DeviceType::cuda);
  auto h = static_cast<cublasHandle_t>(blas_pool().acquire(d));  // checks D8
  set_device(d.index);
  auto s = static_cast<cudaStream_t>(current_stream(d).native_handle());
  const Cublas& api = cublas();
  check_blas(api.set_stream(h, s), "cublasSetStream");
  check_blas(api.set_workspace(h, workspace(h, s, d, kWorkspace), kWorkspace),
             "cublasSetWorkspace");
  check_blas(api.set_math_mode(h, allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
             "cublasSetMathMode");
  return h;
}

// A [batch, rows, cols] operand as cuBLAS sees it (plan_operand), with the dense copy
// when its layout needs one.
struct Operand {
  Tensor keep;
  GemmOperand plan;
  const void* p = nullptr;
};

Operand operand(const Tensor& t) {
  Operand o;
  o.plan = plan_operand(t.shape()[0], t.shape()[1], t.shape()[2], t.strides()[0], t.strides()[1],
                        t.strides()[2]);
  o.keep = o.plan.copy ? dense(t, t.dtype(), t.device()) : t;
  o.p = static_cast<const char*>(o.keep.storage()->data) + o.keep.offset() * itemsize(t.dtype());
  return o;
}

cudaDataType data_type(DType d) {
  switch (d) {
    case DType::f32: return CUDA_R_32F;
    case DType::f64: return CUDA_R_64F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: fail(ErrorKind::unsupported, "[matmul] does not support dtype {} on cuda", d);
  }
}

}  // namespace

// C = alpha * A @ B + beta * C for [batch, m, k] x [batch, k, n] -> dense [batch, m, n].
void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta) {
  int64_t batch = c.shape()[0], m = c.shape()[1], n = c.shape()[2], k = a.shape()[2];
  if (batch == 0 || m == 0 || n == 0) return;
  KILN_CHECK(c.is_contiguous(), internal, "[matmul] cuda gemm output must be dense");
  DType dt = c.dtype();
  KILN_CHECK(a.dtype() == dt && b.dtype() == dt, dtype,
             "[matmul] expected operands of one dtype, got {} and {}", a.dtype(), b.dtype());
  Operand A = operand(a), B = operand(b);
  GemmCall g = plan_gemm(batch, m, n, k, A.plan, B.plan);
  cudaDataType type = data_type(dt);
  void* cp = static_cast<char*>(c.storage()->data) + c.offset() * itemsize(dt);
  auto op = [](bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; };
  auto i32 = [](int64_t v) { return static_cast<int>(v); };
  bool f64 = dt == DType::f64;
  float af = static_cast<float>(alpha), bf = static_cast<float>(beta);
  const void* pa = f64 ? static_cast<const void*>(&alpha) : &af;
  const void* pb = f64 ? static_cast<const void*>(&beta) : &bf;
  cublasComputeType_t compute = f64                                  ? CUBLAS_COMPUTE_64F
                                : (dt == DType::f32 && allow_tf32()) ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                     : CUBLAS_COMPUTE_32F;
  // k == 0 is valid for cuBLAS: C = beta * C.
  for (int64_t v : {g.rows, g.cols, g.inner, g.ld_first, g.ld_second, g.batch})
    KILN_CHECK(v < (int64_t(1) << 31), unsupported, "[matmul] size {} exceeds cuBLAS's int range",
               v);
  check_blas(cublas().gemm_strided_batched(
                 handle(), op(g.trans_first), op(g.trans_second), i32(g.rows), i32(g.cols),
                 i32(g.inner), pa, B.p, type, i32(g.ld_first), g.stride_first, A.p, type,
                 i32(g.ld_second), g.stride_second, pb, cp, type, i32(g.ldc), g.stride_c,
                 i32(g.batch), compute, CUBLAS_GEMM_DEFAULT),
             "cublasGemmStridedBatchedEx");
}

namespace {

// A 2-D matrix as a batch of one.
Tensor batch1(const Tensor& t) {
  return make_view(t, Dims{1, t.shape()[0], t.shape()[1]}, Dims{0, t.strides()[0], t.strides()[1]},
                   t.offset());
}

// `t` ([..., r, c], batch dims broadcast to `batch`) as [nb, r, c] with one batch stride:
// a view when the batch dims collapse, else a dense copy.
Tensor batched(const Tensor& t, const Dims& batch) {
  int64_t r = t.shape()[t.dim() - 2], c = t.shape()[t.dim() - 1];
  int64_t nb = numel_of(batch);
  size_t lead = batch.size() - (t.dim() - 2);
  Dims st(batch.size(), 0);  // strides of the broadcast batch dims
  for (size_t i = lead; i < batch.size(); ++i)
    st[i] = t.shape()[i - lead] == 1 ? 0 : t.strides()[i - lead];
  if (auto bs = collapsed_batch_stride(batch, st))
    return make_view(t, Dims{nb, r, c},
                     Dims{*bs, t.strides()[t.dim() - 2], t.strides()[t.dim() - 1]}, t.offset());
  auto fresh = [](const Dims& shape, const Tensor& like) {
    return empty(shape, like.dtype(), like.device());
  };
  return backend::dense_batch(t, batch, fresh, copy_into);
}

}  // namespace

void k_mm(const OpCall& c, std::span<Tensor> outs) {
  gemm(batch1(c.args.tensor(0)), batch1(c.args.tensor(1)), batch1(outs[0]), 1.0, 0.0);
}

void k_bmm(const OpCall& c, std::span<Tensor> outs) {
  gemm(c.args.tensor(0), c.args.tensor(1), outs[0], 1.0, 0.0);
}

void k_addmm(const OpCall& c, std::span<Tensor> outs) {
  double beta = c.args.scalar(3).to_double(), alpha = c.args.scalar(4).to_double();
  if (beta != 0) copy_into(outs[0], c.args.tensor(0));
  gemm(batch1(c.args.tensor(1)), batch1(c.args.tensor(2)), batch1(outs[0]), alpha, beta);
}

void k_linear(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& x = c.args.tensor(0);
  const Tensor& w = c.args.tensor(1);
  Tensor bias = c.args.opt_tensor(2);
  int64_t in = w.shape()[1], outf = w.shape()[0], rows = backend::linear_rows(x);
  Tensor xd = dense(x, x.dtype(), x.device());
  Tensor out2 = make_view(outs[0], Dims{rows, outf}, Dims{outf, 1}, outs[0].offset());
  if (bias.defined()) copy_into(out2, bias);
  Tensor wt = make_view(w, Dims{in, outf}, Dims{w.strides()[1], w.strides()[0]}, w.offset());
  gemm(batch1(make_view(xd, Dims{rows, in}, Dims{in, 1}, xd.offset())), batch1(wt), batch1(out2),
       1.0, bias.defined() ? 1.0 : 0.0);
}

void k_matmul(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& a = c.args.tensor(0);
  const Tensor& b = c.args.tensor(1);
  const Tensor& out = outs[0];
  Tensor a2 = backend::as_left_matrix(a), b2 = backend::as_right_matrix(b);
  int64_t m = a2.shape()[a2.dim() - 2], n = b2.shape()[b2.dim() - 1];
  Dims batch = backend::matmul_batch(a2, b2);
  int64_t nb = numel_of(batch);
  Tensor o = make_view(out, Dims{nb, m, n}, Dims{m * n, n, 1}, out.offset());
  gemm(batched(a2, batch), batched(b2, batch), o, 1.0, 0.0);
}

}  // namespace kiln::cuda
