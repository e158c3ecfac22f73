// Matrix products through OpenBLAS (f32, f64); other dtypes use a plain loop.
#include <cblas.h>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/device/blas.h"
#include "kiln/backend/cpu/loops.h"
#include "kiln/ops/meta.h"

namespace kiln::cpu {

namespace {

// A 2-D operand as BLAS sees it: row-major with a leading dimension, maybe transposed.
struct BlasMat {
  Tensor t;
  bool trans = false;
  int64_t ld = 0;
};

BlasMat blas_operand(const Tensor& m) {
  int64_t rows = m.shape()[0], cols = m.shape()[1];
  int64_t s0 = m.strides()[0], s1 = m.strides()[1];
  if ((s1 == 1 || cols == 1) && s0 >= std::max<int64_t>(cols, 1)) return {m, false, s0};
  if ((s0 == 1 || rows == 1) && s1 >= std::max<int64_t>(rows, 1)) return {m, true, s1};
  Tensor dense = empty(m.shape(), m.dtype(), m.device());
  copy_into(dense, m);
  return {dense, false, std::max<int64_t>(cols, 1)};
}

template <typename T>
void naive_gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta) {
  int64_t n = a.shape()[0], k = a.shape()[1], m = b.shape()[1];
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* pc = c.data<T>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      T acc = T(0);
      for (int64_t p = 0; p < k; ++p)
        acc += pa[i * a.strides()[0] + p * a.strides()[1]] * pb[p * b.strides()[0] + j * b.strides()[1]];
      T& dst = pc[i * c.strides()[0] + j * c.strides()[1]];
      dst = static_cast<T>(beta == 0 ? alpha * acc : beta * dst + alpha * acc);
    }
}

}  // namespace

// c = beta * c + alpha * a @ b, with c's rows contiguous.
void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta) {
  int64_t n = a.shape()[0], k = a.shape()[1], m = b.shape()[1];
  if (n == 0 || m == 0) return;
  DType d = c.dtype();
  if (d != DType::f32 && d != DType::f64) {
    DType cd = compute_dtype(d);
    if (cd != d) {  // half types: compute in f32
      Tensor cc = cast(c, cd);
      gemm(cast(a, cd), cast(b, cd), cc, alpha, beta);
      copy_into(c, cc);
      return;
    }
    KILN_CHECK(d != DType::b8, unsupported, "[mm] does not support dtype bool on cpu");
    KILN_DISPATCH_COMPUTE(d, "mm", if constexpr (!std::is_same_v<T, bool>) naive_gemm<T>(a, b, c, alpha, beta));
    return;
  }
  KILN_ASSERT(c.strides()[1] == 1 || m == 1);
  // (D5) The handle of the kernel's device, bound to its current stream. OpenBLAS
  // itself takes no handle; the handle carries device, stream and threading.
  blas_handle(DeviceType::cpu).begin_use();
  BlasMat A = blas_operand(a), B = blas_operand(b);
  auto ta = A.trans ? CblasTrans : CblasNoTrans;
  auto tb = B.trans ? CblasTrans : CblasNoTrans;
  auto ldc = std::max<int64_t>(c.strides()[0], std::max<int64_t>(m, 1));
  if (d == DType::f32)
    cblas_sgemm(CblasRowMajor, ta, tb, n, m, k, static_cast<float>(alpha), A.t.data<float>(), A.ld,
                B.t.data<float>(), B.ld, static_cast<float>(beta), c.data<float>(), ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, n, m, k, alpha, A.t.data<double>(), A.ld,
                B.t.data<double>(), B.ld, beta, c.data<double>(), ldc);
}

namespace {

Tensor mat(const Tensor& t, int64_t rows, int64_t cols) {
  // A dense [rows, cols] view of a contiguous tensor.
  return make_view(t, Dims{rows, cols}, Dims{cols, 1}, t.offset());
}

Tensor batch_slice(const Tensor& t, int64_t i) {
  return make_view(t, Dims{t.shape()[1], t.shape()[2]}, Dims{t.strides()[1], t.strides()[2]},
                   t.offset() + i * t.strides()[0]);
}

}  // namespace

void k_mm(const OpCall& c, std::span<Tensor> outs) {
  gemm(c.args.tensor(0), c.args.tensor(1), outs[0], 1.0, 0.0);
}

void k_bmm(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& a = c.args.tensor(0);
  const Tensor& b = c.args.tensor(1);
  for (int64_t i = 0; i < a.shape()[0]; ++i)
    gemm(batch_slice(a, i), batch_slice(b, i), batch_slice(outs[0], i), 1.0, 0.0);
}

void k_addmm(const OpCall& c, std::span<Tensor> outs) {
  double beta = c.args.scalar(3).to_double(), alpha = c.args.scalar(4).to_double();
  if (beta != 0) copy_into(outs[0], c.args.tensor(0));
  gemm(c.args.tensor(1), c.args.tensor(2), outs[0], alpha, beta);
}

void k_linear(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& x = c.args.tensor(0);
  const Tensor& w = c.args.tensor(1);
  Tensor bias = c.args.opt_tensor(2);
  int64_t in = w.shape()[1], outf = w.shape()[0], rows = x.numel() / std::max<int64_t>(in, 1);
  Tensor out2 = mat(outs[0], rows, outf);
  if (bias.defined()) copy_into(out2, bias);
  Tensor wt = make_view(w, Dims{in, outf}, Dims{w.strides()[1], w.strides()[0]}, w.offset());
  gemm(mat(contiguous(x), rows, in), wt, out2, 1.0, bias.defined() ? 1.0 : 0.0);
}

void k_matmul(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& a = c.args.tensor(0);
  const Tensor& b = c.args.tensor(1);
  const Tensor& out = outs[0];
  Tensor a2 = backend::as_left_matrix(a), b2 = backend::as_right_matrix(b);
  int64_t n = a2.shape()[a2.dim() - 2], k = a2.shape()[a2.dim() - 1], m = b2.shape()[b2.dim() - 1];
  if (b2.dim() == 2) {  // fold a's batch dims into rows: one GEMM
    int64_t rows = a2.numel() / std::max<int64_t>(k, 1);
    gemm(mat(contiguous(a2), rows, k), b2, mat(out, rows, m), 1.0, 0.0);
    return;
  }
  Dims batch = backend::matmul_batch(a2, b2);
  int64_t nb = numel_of(batch);
  auto fresh = [](const Dims& shape, const Tensor& like) {
    return empty(shape, like.dtype(), like.device());
  };
  Tensor A = backend::dense_batch(a2, batch, fresh, copy_into);
  Tensor B = backend::dense_batch(b2, batch, fresh, copy_into);
  Tensor O = make_view(out, Dims{nb, n, m}, Dims{n * m, m, 1}, out.offset());
  for (int64_t i = 0; i < nb; ++i) gemm(batch_slice(A, i), batch_slice(B, i), batch_slice(O, i), 1.0, 0.0);
}

}  // namespace kiln::cpu
