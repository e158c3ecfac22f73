// Note [oneDNN for f32 GEMM]
// oneDNN's matmul (Debian's libdnnl, the version PyTorch 1.13 bundles) picks its
// kernel at run time for the CPU it runs on (AVX-512 brgemm here, AVX2 or SSE4.1
// elsewhere), which OpenBLAS in this environment cannot do: OPENBLAS_CORETYPE pins it
// to its Haswell kernels, about half of what an AVX-512 core does. kiln does not
// override that setting; f32 products of a useful size go to oneDNN instead, and
// OpenBLAS stays for f64 and for tiny products, where creating a primitive (a cache
// hit in oneDNN's primitive cache, a few microseconds) would cost more than the
// product. Where OpenBLAS's own detection fell below the CPU (a VM hiding the CPU model
// gets its SSE3 kernels), oneDNN takes f32 products from 32^3 on. KILN_GEMM=openblas sends
// everything to OpenBLAS (both paths are tested).
#include "kiln/backend/cpu/onednn.h"

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <vector>

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

namespace {

// What a matmul primitive is made for: shapes, layouts, scales, bias, and the thread count
// it was planned for (oneDNN splits the work when it creates the primitive).
struct MatmulKey {
  int64_t batch, n, m, k;
  int64_t a[3], b[3], c[3];  // batch, row and column strides
  float alpha, beta;
  bool bias;
  bool relu, residual;
  int64_t residual_row_stride;
  int threads;
  bool operator==(const MatmulKey&) const = default;
};

// A primitive with its memory objects and argument map, made once: per product only the
// data handles change (creating dnnl::memory objects allocates, and after big frees
// elsewhere glibc trimmed and regrew its heap around them, page-faulting every product).
struct CachedMatmul {
  MatmulKey key;
  dnnl::matmul primitive;
  size_t scratch_bytes;
  std::unordered_map<int, dnnl::memory> args;
};

CachedMatmul make_matmul(const MatmulKey& key, const MatrixBatch& a, const MatrixBatch& b,
                         const MatrixBatch& c) {
  dnnl::engine& eng = cpu_engine();
  auto ad = desc_of(key.batch, key.n, key.k, a), bd = desc_of(key.batch, key.k, key.m, b),
       cd = desc_of(key.batch, key.n, key.m, c);
  dnnl::primitive_attr attr;
  // Its scratch memory comes from us: oneDNN's own is malloc'ed (mmap'ed when large) and
  // freed on every call, which page-faults fresh memory on every product.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (key.alpha != 1.0f) attr.set_output_scales(0, {key.alpha});
  dnnl::memory::desc rd;
  if (key.beta != 0.0f || key.relu || key.residual) {
    dnnl::post_ops po;
    if (key.beta != 0.0f) po.append_sum(key.beta);
    if (key.relu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    if (key.residual) {
      rd = desc_of(key.batch, key.n, key.m, {nullptr, 0, key.residual_row_stride, 1});
      po.append_binary(dnnl::algorithm::binary_add, rd);
    }
    attr.set_post_ops(po);
  }
  // A bias is added where each output tile is still in registers (linear: no pass to
  // broadcast it into c first, and no read of c by the product).
  dnnl::memory::desc biasd;
  if (key.bias)
    biasd =
        key.batch == 1
            ? dnnl::memory::desc({1, key.m}, dnnl::memory::data_type::f32, {key.m, 1})
            : dnnl::memory::desc({1, 1, key.m}, dnnl::memory::data_type::f32, {key.m, key.m, 1});
  dnnl::matmul::primitive_desc pd(
      key.bias ? dnnl::matmul::desc(ad, bd, biasd, cd) : dnnl::matmul::desc(ad, bd, cd), attr, eng);
  dnnl::memory::desc sd = pd.scratchpad_desc();
  auto unbound = [&](const dnnl::memory::desc& d) {
    return dnnl::memory(d, eng, DNNL_MEMORY_NONE);
  };
  CachedMatmul made{key,
                    dnnl::matmul(pd),
                    sd.get_size(),
                    {{DNNL_ARG_SRC, unbound(ad)},
                     {DNNL_ARG_WEIGHTS, unbound(bd)},
                     {DNNL_ARG_DST, unbound(cd)},
                     {DNNL_ARG_SCRATCHPAD, unbound(sd)}}};
  if (key.bias) made.args.emplace(DNNL_ARG_BIAS, unbound(biasd));
  if (key.residual) {
    int index = (key.beta != 0.0f) + key.relu;  // the binary post-op's position
    made.args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1, unbound(rd));
  }
  return made;
}

// The primitives this thread used last, most recent at the back. oneDNN keeps its own
// cache, but a lookup there first builds a primitive descriptor (allocations and a few
// microseconds per product); a model's few shapes hit here instead.
constexpr size_t kCachedMatmuls = 64;
thread_local std::vector<CachedMatmul> t_matmuls;

CachedMatmul& matmul_for(const MatmulKey& key, const MatrixBatch& a, const MatrixBatch& b,
                         const MatrixBatch& c) {
  auto& cache = t_matmuls;
  for (size_t i = cache.size(); i-- > 0;)
    if (cache[i].key == key) {
      if (i + 1 != cache.size())
        std::rotate(cache.begin() + static_cast<std::ptrdiff_t>(i),
                    cache.begin() + static_cast<std::ptrdiff_t>(i) + 1, cache.end());
      return cache.back();
    }
  CachedMatmul made = make_matmul(key, a, b, c);
  if (cache.size() == kCachedMatmuls) cache.erase(cache.begin());
  cache.push_back(std::move(made));
  return cache.back();
}

}  // namespace

void onednn_matmul(int64_t batch, int64_t n, int64_t m, int64_t k, MatrixBatch a, MatrixBatch b,
                   MatrixBatch c, float alpha, float beta, const float* bias,
                   const MatmulEpilogue& epilogue) {
  use_kernel_threads_for_openmp();
  dnnl::engine& eng = cpu_engine();
  // A stream is not thread-safe; one per host thread (a CPU stream is only a handle).
  thread_local dnnl::stream stream(eng);
  MatmulKey key{batch,
                n,
                m,
                k,
                {a.batch_stride, a.row_stride, a.col_stride},
                {b.batch_stride, b.row_stride, b.col_stride},
                {c.batch_stride, c.row_stride, c.col_stride},
                alpha,
                beta,
                bias != nullptr,
                epilogue.relu,
                epilogue.residual != nullptr,
                epilogue.residual ? epilogue.residual_row_stride : 0,
                kernel_threads()};
  if (batch == 1) key.a[0] = key.b[0] = key.c[0] = 0;  // not part of a 2-d layout
  try {
    CachedMatmul& mm = matmul_for(key, a, b, c);
    // One scratch buffer per host thread, grown as needed and kept.
    thread_local std::unique_ptr<char[]> scratch;
    thread_local size_t scratch_size = 0;
    if (mm.scratch_bytes > scratch_size) {
      scratch_size = mm.scratch_bytes;
      scratch.reset(new char[scratch_size]);
    }
    mm.args.at(DNNL_ARG_SRC).set_data_handle(a.data);
    mm.args.at(DNNL_ARG_WEIGHTS).set_data_handle(b.data);
    mm.args.at(DNNL_ARG_DST).set_data_handle(c.data);
    mm.args.at(DNNL_ARG_SCRATCHPAD).set_data_handle(scratch.get());
    if (bias) mm.args.at(DNNL_ARG_BIAS).set_data_handle(const_cast<float*>(bias));
    if (epilogue.residual)
      mm.args.at(DNNL_ARG_ATTR_MULTIPLE_POST_OP((beta != 0.0f) + epilogue.relu) | DNNL_ARG_SRC_1)
          .set_data_handle(const_cast<float*>(epilogue.residual));
    mm.primitive.execute(stream, mm.args);
    stream.wait();
  } catch (const dnnl::error& e) {
    fail(ErrorKind::internal, "[mm] oneDNN refused a [{}, {}, {}] x [{}, {}] product: {}", batch, n,
         k, k, m, e.what());
  }
}

bool onednn_avx512() {
  static const bool wide =
      (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  return wide;
}

#else

bool onednn_available() { return false; }

bool onednn_avx512() { return false; }

void onednn_warm_up() {}

void onednn_matmul(int64_t, int64_t, int64_t, int64_t, MatrixBatch, MatrixBatch, MatrixBatch, float,
                   float, const float*, const MatmulEpilogue&) {
  fail(ErrorKind::internal, "[mm] this kiln was built without oneDNN");
}

#endif

}  // namespace kiln::cpu
