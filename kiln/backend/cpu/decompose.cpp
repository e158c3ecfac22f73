// linalg_eigh and linalg_svd: the batch made dense, then LAPACK matrix by matrix.
#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/lapack.h"
#include "kiln/backend/cpu/loops.h"

namespace kiln::cpu {

namespace {

// `out` itself when it is dense, else a dense buffer copied into it by `finish`.
struct DenseOut {
  const Tensor& out;
  Tensor dense;
  explicit DenseOut(const Tensor& o)
      : out(o), dense(o.is_contiguous() ? o : empty(o.shape(), o.dtype(), o.device())) {}
  template <typename T>
  T* data() const {
    return dense.data<T>();
  }
  void finish() const {
    if (!dense.is_same(out)) copy_into(out, dense);
  }
};

}  // namespace

void k_linalg_eigh(const OpCall& c, std::span<Tensor> outs) {
  Tensor a = contiguous(c.args.tensor(0));
  int64_t n = a.size(-1), batch = n ? a.numel() / (n * n) : 0;
  char uplo = c.args.str(1) == "U" ? 'U' : 'L';
  DenseOut w(outs[0]), v(outs[1]);
  if (a.dtype() == DType::f64)
    lapack::eigh(a.data<double>(), w.data<double>(), v.data<double>(), batch, n, uplo,
                 "linalg.eigh");
  else
    lapack::eigh(a.data<float>(), w.data<float>(), v.data<float>(), batch, n, uplo, "linalg.eigh");
  w.finish();
  v.finish();
}

void k_linalg_svd(const OpCall& c, std::span<Tensor> outs) {
  Tensor a = contiguous(c.args.tensor(0));
  int64_t m = a.size(-2), n = a.size(-1);
  int64_t batch = 1;
  for (int64_t i = 0; i < a.dim() - 2; ++i) batch *= a.size(i);
  DenseOut u(outs[0]), s(outs[1]), vh(outs[2]);
  if (a.dtype() == DType::f64)
    lapack::svd(a.data<double>(), u.data<double>(), s.data<double>(), vh.data<double>(), batch, m,
                n, c.args.flag(1), "linalg.svd");
  else
    lapack::svd(a.data<float>(), u.data<float>(), s.data<float>(), vh.data<float>(), batch, m, n,
                c.args.flag(1), "linalg.svd");
  u.finish();
  s.finish();
  vh.finish();
}

}  // namespace kiln::cpu
