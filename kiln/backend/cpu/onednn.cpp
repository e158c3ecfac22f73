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
#include <array>
#include <memory>
#include <optional>
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
// microseconds per call); a model's few shapes hit here instead.
constexpr size_t kCachedPrimitives = 64;

template <typename Cached, typename Key, typename Make>
Cached& cached(std::vector<Cached>& cache, const Key& key, Make make) {
  for (size_t i = cache.size(); i-- > 0;)
    if (cache[i].key == key) {
      if (i + 1 != cache.size())
        std::rotate(cache.begin() + static_cast<std::ptrdiff_t>(i),
                    cache.begin() + static_cast<std::ptrdiff_t>(i) + 1, cache.end());
      return cache.back();
    }
  Cached made = make();
  if (cache.size() == kCachedPrimitives) cache.erase(cache.begin());
  cache.push_back(std::move(made));
  return cache.back();
}

CachedMatmul& matmul_for(const MatmulKey& key, const MatrixBatch& a, const MatrixBatch& b,
                         const MatrixBatch& c) {
  thread_local std::vector<CachedMatmul> cache;
  return cached(cache, key, [&] { return make_matmul(key, a, b, c); });
}

// One scratch buffer per host thread, grown as needed and kept (oneDNN's own scratch
// would be malloc'ed and freed on every call, page-faulting fresh memory each time).
// 64-byte aligned (a cache line: what oneDNN's kernels load best).
char* thread_scratch(size_t bytes) {
  thread_local std::unique_ptr<char[]> scratch;
  thread_local size_t size = 0;
  if (bytes > size) {
    scratch.reset(new char[bytes + 64]);
    size = bytes;
  }
  auto at = reinterpret_cast<std::uintptr_t>(scratch.get());
  return scratch.get() + ((64 - at % 64) % 64);
}

// A CPU stream is only a handle, but not thread-safe: one per host thread.
dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

}  // namespace

void onednn_matmul(int64_t batch, int64_t n, int64_t m, int64_t k, MatrixBatch a, MatrixBatch b,
                   MatrixBatch c, float alpha, float beta, const float* bias,
                   const MatmulEpilogue& epilogue) {
  use_kernel_threads_for_openmp();
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
    mm.args.at(DNNL_ARG_SRC).set_data_handle(a.data);
    mm.args.at(DNNL_ARG_WEIGHTS).set_data_handle(b.data);
    mm.args.at(DNNL_ARG_DST).set_data_handle(c.data);
    mm.args.at(DNNL_ARG_SCRATCHPAD).set_data_handle(thread_scratch(mm.scratch_bytes));
    if (bias) mm.args.at(DNNL_ARG_BIAS).set_data_handle(const_cast<float*>(bias));
    if (epilogue.residual)
      mm.args.at(DNNL_ARG_ATTR_MULTIPLE_POST_OP((beta != 0.0f) + epilogue.relu) | DNNL_ARG_SRC_1)
          .set_data_handle(const_cast<float*>(epilogue.residual));
    mm.primitive.execute(thread_stream(), mm.args);
    thread_stream().wait();
  } catch (const dnnl::error& e) {
    fail(ErrorKind::internal, "[mm] oneDNN refused a [{}, {}, {}] x [{}, {}] product: {}", batch, n,
         k, k, m, e.what());
  }
}

namespace {

// What a convolution primitive is made for: the geometry, both operands' layouts, the
// bias, and the thread count.
struct ConvKey {
  int rank;
  int64_t batch, in_channels, out_channels, groups;
  std::array<int64_t, 3> in, kernel, stride, padding, dilation;
  std::array<int64_t, 5> src_strides, weight_strides;
  bool bias;
  int threads;
  bool operator==(const ConvKey&) const = default;
};

size_t aligned(size_t bytes) { return (bytes + 63) / 64 * 64; }

// The primitive in the layouts oneDNN chose for this CPU, the reorders between them and
// the tensors' layouts (absent where they agree), and where each buffer sits in the
// thread's scratch: [src | weights | dst | oneDNN's scratchpad].
struct CachedConv {
  ConvKey key;
  dnnl::convolution_forward primitive;
  dnnl::memory src, weights, bias, dst;                  // the tensors' layouts
  dnnl::memory src_in, weights_in, dst_out, scratchpad;  // the primitive's
  std::optional<dnnl::reorder> to_src, to_weights, from_dst;
  size_t weights_at, dst_at, scratchpad_at, scratch_bytes;
};

CachedConv make_conv(const ConvKey& k) {
  using dnnl::memory;
  dnnl::engine& eng = cpu_engine();
  auto f32 = memory::data_type::f32;
  auto r = static_cast<size_t>(k.rank);
  memory::dims src{k.batch, k.in_channels}, dst{k.batch, k.out_channels}, weights, src_strides,
      weight_strides, stride, dilation, padding;
  for (size_t i = 0; i < r; ++i) {
    src.push_back(k.in[i]);
    int64_t span = k.dilation[i] * (k.kernel[i] - 1) + 1;
    dst.push_back((k.in[i] + 2 * k.padding[i] - span) / k.stride[i] + 1);
    stride.push_back(k.stride[i]);
    dilation.push_back(k.dilation[i] - 1);  // oneDNN counts the gaps between taps
    padding.push_back(k.padding[i]);
  }
  src_strides.assign(k.src_strides.begin(), k.src_strides.begin() + k.rank + 2);
  // Grouped weights are [G, O / G, C / G, *K] to oneDNN.
  int64_t og = k.out_channels / k.groups;
  const auto& ws = k.weight_strides;
  if (k.groups > 1) {
    weights = {k.groups, og, k.in_channels / k.groups};
    weight_strides = {og * ws[0], ws[0], ws[1]};
  } else {
    weights = {k.out_channels, k.in_channels};
    weight_strides = {ws[0], ws[1]};
  }
  for (size_t i = 0; i < r; ++i) {
    weights.push_back(k.kernel[i]);
    weight_strides.push_back(ws[i + 2]);
  }
  memory::dims dst_strides(dst.size(), 1);
  for (size_t i = dst.size() - 1; i-- > 0;) dst_strides[i] = dst_strides[i + 1] * dst[i + 1];
  memory::desc src_d(src, f32, src_strides), weights_d(weights, f32, weight_strides),
      dst_d(dst, f32, dst_strides), bias_d({k.out_channels}, f32, memory::format_tag::x);
  auto any = [&](const memory::dims& d) { return memory::desc(d, f32, memory::format_tag::any); };
  dnnl::convolution_forward::desc desc =
      k.bias ? dnnl::convolution_forward::desc(
                   dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                   any(src), any(weights), bias_d, any(dst), stride, dilation, padding, padding)
             : dnnl::convolution_forward::desc(
                   dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                   any(src), any(weights), any(dst), stride, dilation, padding, padding);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::convolution_forward::primitive_desc pd(desc, attr, eng);
  auto unbound = [&](const memory::desc& d) { return memory(d, eng, DNNL_MEMORY_NONE); };
  CachedConv c{k,
               dnnl::convolution_forward(pd),
               unbound(src_d),
               unbound(weights_d),
               unbound(bias_d),
               unbound(dst_d),
               unbound(pd.src_desc()),
               unbound(pd.weights_desc()),
               unbound(pd.dst_desc()),
               unbound(pd.scratchpad_desc()),
               {},
               {},
               {},
               0,
               0,
               0,
               0};
  size_t at = 0;
  if (pd.src_desc() != src_d) {
    c.to_src.emplace(c.src, c.src_in);
    at += aligned(pd.src_desc().get_size());
  }
  c.weights_at = at;
  if (pd.weights_desc() != weights_d) {
    c.to_weights.emplace(c.weights, c.weights_in);
    at += aligned(pd.weights_desc().get_size());
  }
  c.dst_at = at;
  if (pd.dst_desc() != dst_d) {
    c.from_dst.emplace(c.dst_out, c.dst);
    at += aligned(pd.dst_desc().get_size());
  }
  c.scratchpad_at = at;
  c.scratch_bytes = at + pd.scratchpad_desc().get_size();
  return c;
}

}  // namespace

namespace {

// Images per primitive call: as many as keep one call's blocked copies of input and
// output within about an L2 cache (at least one). The copies then stay in cache between
// reorder, convolution and reorder back, and the scratch they need stays small (a whole
// batch's copies were 10 MB of a small CNN's 40).
constexpr int64_t kChunkBytes = 1 << 20;

int64_t images_per_call(const ops::ConvGeometry& g) {
  int64_t in = g.in_channels;
  for (int i = 0; i < g.rank; ++i) in *= g.in[static_cast<size_t>(i)];
  int64_t per_image = (in + g.out_channels * g.positions()) * 4;
  return std::clamp<int64_t>(kChunkBytes / std::max<int64_t>(per_image, 1), 1, g.batch);
}

// Images [first, first + count * calls) through one primitive, `count` per call.
void convolve_images(const ConvOperands& op, ConvKey key, int64_t first, int64_t calls) {
  const ops::ConvGeometry& g = op.geometry;
  thread_local std::vector<CachedConv> cache;
  CachedConv& c = cached(cache, key, [&] { return make_conv(key); });
  dnnl::stream& stream = thread_stream();
  char* scratch = thread_scratch(c.scratch_bytes);
  // Where no reorder is needed, the primitive reads or writes the tensor itself.
  c.weights.set_data_handle(const_cast<float*>(op.weights));
  c.weights_in.set_data_handle(c.to_weights ? static_cast<void*>(scratch + c.weights_at)
                                            : const_cast<float*>(op.weights));
  if (c.to_weights) c.to_weights->execute(stream, c.weights, c.weights_in);  // once
  c.scratchpad.set_data_handle(scratch + c.scratchpad_at);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, c.src_in},
                                             {DNNL_ARG_WEIGHTS, c.weights_in},
                                             {DNNL_ARG_DST, c.dst_out},
                                             {DNNL_ARG_SCRATCHPAD, c.scratchpad}};
  if (op.bias) {
    c.bias.set_data_handle(const_cast<float*>(op.bias));
    args.emplace(DNNL_ARG_BIAS, c.bias);
  }
  int64_t out_image = g.out_channels * g.positions();
  for (int64_t i = 0; i < calls; ++i) {
    int64_t n = first + i * key.batch;
    auto* src = const_cast<float*>(op.src + n * op.src_strides[0]);
    float* dst = op.dst + n * out_image;
    c.src.set_data_handle(src);
    c.dst.set_data_handle(dst);
    c.src_in.set_data_handle(c.to_src ? static_cast<void*>(scratch) : src);
    c.dst_out.set_data_handle(c.from_dst ? static_cast<void*>(scratch + c.dst_at) : dst);
    if (c.to_src) c.to_src->execute(stream, c.src, c.src_in);
    c.primitive.execute(stream, args);
    if (c.from_dst) c.from_dst->execute(stream, c.dst_out, c.dst);
  }
  stream.wait();
}

}  // namespace

void onednn_convolution(const ConvOperands& op) {
  use_kernel_threads_for_openmp();
  const ops::ConvGeometry& g = op.geometry;
  int64_t per_call = images_per_call(g);
  ConvKey key{g.rank, per_call, g.in_channels,      g.out_channels,  g.groups,
              g.in,   g.kernel, g.stride,           g.padding,       g.dilation,
              {},     {},       op.bias != nullptr, kernel_threads()};
  std::copy(op.src_strides, op.src_strides + g.rank + 2, key.src_strides.begin());
  std::copy(op.weight_strides, op.weight_strides + g.rank + 2, key.weight_strides.begin());
  try {
    int64_t calls = g.batch / per_call, tail = g.batch % per_call;
    convolve_images(op, key, 0, calls);
    if (tail) {  // the last images, one call of their own
      key.batch = tail;
      convolve_images(op, key, calls * per_call, 1);
    }
  } catch (const dnnl::error& e) {
    fail(ErrorKind::internal,
         "[convolution] oneDNN refused a convolution of [{}, {}, ..] by {} "
         "filters: {}",
         g.batch, g.in_channels, g.out_channels, e.what());
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

void onednn_convolution(const ConvOperands&) {
  fail(ErrorKind::internal, "[convolution] this kiln was built without oneDNN");
}

#endif

}  // namespace kiln::cpu
