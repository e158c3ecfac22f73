// Note [oneDNN for f32 GEMM]
// oneDNN's matmul (Debian's libdnnl, the version PyTorch 1.13 bundles) picks its
// kernel at run time for the CPU it runs on (AVX-512 brgemm here, AVX2 or SSE4.1
// elsewhere), which OpenBLAS in this environment cannot do: OPENBLAS_CORETYPE pins it
// to its Haswell kernels, about half of what an AVX-512 core does. kiln does not
// override that setting; f32 products of a useful size go to oneDNN instead, and
// OpenBLAS stays for f64 and for tiny products, where creating a primitive (a cache
// hit in oneDNN's primitive cache, a few microseconds) would cost more than the
// product. KILN_GEMM=openblas sends everything to OpenBLAS (both paths are tested).
#include "kiln/backend/cpu/onednn.h"

#include <memory>
#include <unordered_map>

#include "kiln/backend/cpu/parallel.h"
#include "kiln/core/error.h"

#if KILN_WITH_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace kiln::cpu {

#if KILN_WITH_ONEDNN

bool onednn_available() { return true; }

namespace {

dnnl::engine& cpu_engine() {
  static dnnl::engine* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *e;
}

dnnl::memory::desc desc_of(int64_t batch, int64_t rows, int64_t cols, const MatrixBatch& m) {
  using dnnl::memory;
  if (batch == 1)
    return memory::desc({rows, cols}, memory::data_type::f32, {m.row_stride, m.col_stride});
  return memory::desc({batch, rows, cols}, memory::data_type::f32,
                      {m.batch_stride, m.row_stride, m.col_stride});
}

}  // namespace

void onednn_warm_up() {
  using dnnl::memory;
  memory::desc d({32, 32}, memory::data_type::f32, {32, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(d, d, d), attr, cpu_engine());
  (void)pd;
}

void onednn_matmul(int64_t batch, int64_t n, int64_t m, int64_t k, MatrixBatch a, MatrixBatch b,
                   MatrixBatch c, float alpha, float beta, const float* bias) {
  use_kernel_threads_for_openmp();
  dnnl::engine& eng = cpu_engine();
  // A stream is not thread-safe; one per host thread (a CPU stream is only a handle).
  thread_local dnnl::stream stream(eng);
  auto ad = desc_of(batch, n, k, a), bd = desc_of(batch, k, m, b), cd = desc_of(batch, n, m, c);
  dnnl::primitive_attr attr;
  // Its scratch memory comes from us: oneDNN's own is malloc'ed (mmap'ed when large) and
  // freed on every call, which page-faults fresh memory on every product.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops po;
    po.append_sum(beta);
    attr.set_post_ops(po);
  }
  try {
    // A bias is added where each output tile is still in registers (linear: no pass to
    // broadcast it into c first, and no read of c by the product).
    dnnl::memory::desc biasd;
    if (bias) biasd = batch == 1 ? dnnl::memory::desc({1, m}, dnnl::memory::data_type::f32, {m, 1})
                                 : dnnl::memory::desc({1, 1, m}, dnnl::memory::data_type::f32, {m, m, 1});
    dnnl::matmul::primitive_desc pd(bias ? dnnl::matmul::desc(ad, bd, biasd, cd) : dnnl::matmul::desc(ad, bd, cd),
                                    attr, eng);
    dnnl::matmul mm(pd);  // oneDNN's primitive cache makes this a lookup after the first time
    // One scratch buffer per host thread, grown as needed and kept.
    thread_local std::unique_ptr<char[]> scratch;
    thread_local size_t scratch_size = 0;
    dnnl::memory::desc sd = pd.scratchpad_desc();
    if (sd.get_size() > scratch_size) {
      scratch_size = sd.get_size();
      scratch.reset(new char[scratch_size]);
    }
    std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, dnnl::memory(ad, eng, a.data)},
                                                  {DNNL_ARG_WEIGHTS, dnnl::memory(bd, eng, b.data)},
                                                  {DNNL_ARG_DST, dnnl::memory(cd, eng, c.data)},
                                                  {DNNL_ARG_SCRATCHPAD, dnnl::memory(sd, eng, scratch.get())}};
    if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(biasd, eng, const_cast<float*>(bias)));
    mm.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    fail(ErrorKind::internal, "[mm] oneDNN refused a [{}, {}, {}] x [{}, {}] product: {}", batch, n,
         k, k, m, e.what());
  }
}

#else

bool onednn_available() { return false; }

void onednn_warm_up() {}

void onednn_matmul(int64_t, int64_t, int64_t, int64_t, MatrixBatch, MatrixBatch, MatrixBatch,
                   float, float, const float*) {
  fail(ErrorKind::internal, "[mm] this kiln was built without oneDNN");
}

#endif

}  // namespace kiln::cpu
