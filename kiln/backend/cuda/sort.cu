// sort and topk on CUDA with thrust (CCCL): every element of every row sorted by value
// at once, then stably by row, which leaves each row in its own order; topk is the
// first k of the sorted rows.
#include <thrust/execution_policy.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/sort.h>

#include "kiln/backend/cuda/common.cuh"

namespace kiln::cuda {

using ops::OpKind;

namespace {

template <typename T>
struct Order {
  bool descending;
  __host__ __device__ bool operator()(T a, T b) const {
    return backend::sorts_before(a, b, descending);
  }
};

// thrust's scratch memory from kiln's caching allocator (stream-ordered), kept until the
// sorts are queued.
struct ScratchAllocator {
  using value_type = char;
  Device device;
  std::vector<Tensor>* keep;
  char* allocate(std::ptrdiff_t bytes) {
    keep->push_back(empty(Dims{static_cast<int64_t>(bytes)}, DType::u8, device));
    return static_cast<char*>(keep->back().storage()->data) + keep->back().offset();
  }
  void deallocate(char*, size_t) {}
};

__global__ void row_positions(int64_t* position, int64_t* row, int64_t total, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  position[i] = i % n;
  row[i] = i / n;
}

template <typename T>
void sort_rows(T* values, int64_t* position, int64_t* row, int64_t total, bool descending,
               Device device) {
  std::vector<Tensor> keep;
  auto policy = thrust::cuda::par_nosync(ScratchAllocator{device, &keep}).on(stream());
  thrust::stable_sort_by_key(policy, values, values + total,
                             thrust::make_zip_iterator(position, row), Order<T>{descending});
  thrust::stable_sort_by_key(policy, row, row + total, thrust::make_zip_iterator(values, position));
  check_launch("sort");
}

}  // namespace

void k_sort(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  bool topk = c.op == OpKind::topk;
  int64_t d = wrap_dim(c.args.i64(topk ? 2 : 1), self.dim(), ops::op_name(c.op));
  bool descending = c.args.flag(topk ? 3 : 2);  // topk: largest
  // Sorted as f32, f64 or i64: conversions that keep the order, and three instantiations.
  DType cd = !is_floating(self.dtype())   ? DType::i64
             : self.dtype() == DType::f64 ? DType::f64
                                          : DType::f32;
  backend::Rows r =
      backend::to_rows(self, backend::only_dim(self.dim(), d), cd,
                       [](const Tensor& view, DType) { return view; });  // copied below
  int64_t n = r.inner, total = r.outer * n;
  Tensor values = empty(r.data.shape(), cd, self.device());  // sorted in place: a copy
  copy_into(values, r.data);
  Tensor position = empty(r.data.shape(), DType::i64, self.device());
  if (total > 0) {
    Tensor row = empty(Dims{total}, DType::i64, self.device());
    auto* pos = static_cast<int64_t*>(position.storage()->data);
    auto* rows = static_cast<int64_t*>(row.storage()->data);
    constexpr int kThreads = 256;
    row_positions<<<static_cast<unsigned>((total + kThreads - 1) / kThreads), kThreads, 0,
                    stream()>>>(pos, rows, total, n);
    check_launch("sort");
    switch (cd) {
      case DType::f32:
        sort_rows(static_cast<float*>(values.storage()->data), pos, rows, total, descending,
                  self.device());
        break;
      case DType::f64:
        sort_rows(static_cast<double*>(values.storage()->data), pos, rows, total, descending,
                  self.device());
        break;
      default:
        sort_rows(static_cast<int64_t*>(values.storage()->data), pos, rows, total, descending,
                  self.device());
        break;
    }
  }
  int64_t k = topk && self.dim() ? c.args.i64(1) : n;
  auto first_k = [&](const Tensor& t) {  // the first k of each (dense) row
    if (k == n) return t;
    Dims shape = t.shape();
    shape[shape.size() - 1] = k;
    return make_view(t, shape, t.strides(), t.offset());
  };
  copy_into(backend::moved_last(outs[0], d), first_k(values));
  copy_into(backend::moved_last(outs[1], d), first_k(position));
}

}  // namespace kiln::cuda
