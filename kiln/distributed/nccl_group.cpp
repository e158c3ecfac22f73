// The NCCL engine for CUDA tensors (C1, C3): one communicator per process and device,
// bootstrapped by broadcasting NCCL's unique id over another group (MPI). NCCL is
// dlopen'ed on first use (as cuBLAS is), so processes that never use it do not map it.
// Each collective is queued on the current stream of its tensors' device, under that
// device's guard; its outputs' writer is that stream (D4), so host reads and other
// streams order after it, and wait() blocks until it has run.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <functional>

#include "kiln/autograd/autograd.h"
#include "kiln/device/cuda_runtime.h"
#include "kiln/device/registry.h"
#include "kiln/device/stream.h"
#include "kiln/distributed/groups.h"

namespace kiln::dist {

namespace {

struct Nccl {
  ncclResult_t (*get_unique_id)(ncclUniqueId*);
  ncclResult_t (*comm_init_rank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*comm_destroy)(ncclComm_t);
  const char* (*error_string)(ncclResult_t);
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t);
  ncclResult_t (*all_gather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*reduce_scatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                 ncclComm_t, cudaStream_t);
  ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                            cudaStream_t);
  ncclResult_t (*send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*group_start)();
  ncclResult_t (*group_end)();
};

const Nccl& nccl() {
  static const Nccl api = [] {
    std::string name = "libnccl.so.2";
    void* lib = cuda::load_library(name, "NCCL");
    auto sym = [&](const char* symbol) { return cuda::library_symbol(lib, symbol, name, "NCCL"); };
    Nccl n;
    n.get_unique_id = reinterpret_cast<decltype(n.get_unique_id)>(sym("ncclGetUniqueId"));
    n.comm_init_rank = reinterpret_cast<decltype(n.comm_init_rank)>(sym("ncclCommInitRank"));
    n.comm_destroy = reinterpret_cast<decltype(n.comm_destroy)>(sym("ncclCommDestroy"));
    n.error_string = reinterpret_cast<decltype(n.error_string)>(sym("ncclGetErrorString"));
    n.all_reduce = reinterpret_cast<decltype(n.all_reduce)>(sym("ncclAllReduce"));
    n.all_gather = reinterpret_cast<decltype(n.all_gather)>(sym("ncclAllGather"));
    n.reduce_scatter = reinterpret_cast<decltype(n.reduce_scatter)>(sym("ncclReduceScatter"));
    n.broadcast = reinterpret_cast<decltype(n.broadcast)>(sym("ncclBroadcast"));
    n.send = reinterpret_cast<decltype(n.send)>(sym("ncclSend"));
    n.recv = reinterpret_cast<decltype(n.recv)>(sym("ncclRecv"));
    n.group_start = reinterpret_cast<decltype(n.group_start)>(sym("ncclGroupStart"));
    n.group_end = reinterpret_cast<decltype(n.group_end)>(sym("ncclGroupEnd"));
    return n;
  }();
  return api;
}

void check_nccl(ncclResult_t r, std::string_view what) {
  if (r == ncclSuccess) return;
  fail(ErrorKind::backend, "[{}] NCCL failed: {}", what, nccl().error_string(r));
}

ncclDataType_t nccl_type(DType d, std::string_view op) {
  switch (d) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i64: return ncclInt64;
    case DType::i32: return ncclInt32;
    case DType::i8: return ncclInt8;
    case DType::u8:
    case DType::b8: return ncclUint8;
    default: break;
  }
  fail(ErrorKind::unsupported, "[{}] NCCL has no type for {}", op, d);
}
ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::product: return ncclProd;
  }
  return ncclSum;
}

// Waits for the collective's stream up to the point it was queued.
class StreamWork final : public Work {
 public:
  StreamWork(Event done, std::function<void()> finish)
      : done_(std::move(done)), finish_(std::move(finish)) {}
  void wait() override {
    if (finished_) return;
    done_.synchronize();
    finished_ = true;
    if (finish_) finish_();
  }
  bool completed() override { return finished_ || done_.query(); }

 private:
  Event done_;
  std::function<void()> finish_;
  bool finished_ = false;
};

class NcclGroup final : public ProcessGroup {
 public:
  NcclGroup(ncclComm_t comm, int rank, int size, Device device)
      : comm_(comm), rank_(rank), size_(size), device_(device) {}
  ~NcclGroup() override { nccl().comm_destroy(comm_); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view engine() const override { return "nccl"; }

  std::shared_ptr<Work> all_reduce(const Tensor& t, ReduceOp op, Launch) override {
    return run(
        "all_reduce", {t}, {t}, [&](cudaStream_t s, const TensorList& in, const TensorList& out) {
          check_nccl(nccl().all_reduce(ptr(in[0]), ptr(out[0]), static_cast<size_t>(t.numel()),
                                       nccl_type(t.dtype(), "all_reduce"), nccl_op(op), comm_, s),
                     "all_reduce");
        });
  }
  std::shared_ptr<Work> all_gather(const Tensor& out, const Tensor& in, Launch) override {
    check_output("all_gather", out, in, Rows::gather);
    return run("all_gather", {in}, {out},
               [&](cudaStream_t s, const TensorList& i, const TensorList& o) {
                 check_nccl(nccl().all_gather(ptr(i[0]), ptr(o[0]), static_cast<size_t>(in.numel()),
                                              nccl_type(in.dtype(), "all_gather"), comm_, s),
                            "all_gather");
               });
  }
  std::shared_ptr<Work> reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op,
                                       Launch) override {
    check_output("reduce_scatter", out, in, Rows::scatter);
    return run("reduce_scatter", {in}, {out},
               [&](cudaStream_t s, const TensorList& i, const TensorList& o) {
                 check_nccl(nccl().reduce_scatter(
                                ptr(i[0]), ptr(o[0]), static_cast<size_t>(out.numel()),
                                nccl_type(in.dtype(), "reduce_scatter"), nccl_op(op), comm_, s),
                            "reduce_scatter");
               });
  }
  std::shared_ptr<Work> all_to_all(const Tensor& out, const Tensor& in, Launch) override {
    check_output("all_to_all", out, in, Rows::same);
    return run(
        "all_to_all", {in}, {out}, [&](cudaStream_t s, const TensorList& i, const TensorList& o) {
          size_t chunk = static_cast<size_t>(in.numel() / size_);
          size_t bytes = chunk * in.itemsize();
          ncclDataType_t type = nccl_type(in.dtype(), "all_to_all");
          check_nccl(nccl().group_start(), "all_to_all");
          for (int r = 0; r < size_; ++r) {
            check_nccl(nccl().send(static_cast<const char*>(ptr(i[0])) + r * bytes, chunk, type, r,
                                   comm_, s),
                       "all_to_all");
            check_nccl(
                nccl().recv(static_cast<char*>(ptr(o[0])) + r * bytes, chunk, type, r, comm_, s),
                "all_to_all");
          }
          check_nccl(nccl().group_end(), "all_to_all");
        });
  }
  std::shared_ptr<Work> all_to_all_v(const Tensor& out, const Tensor& in,
                                     const std::vector<int64_t>& out_splits,
                                     const std::vector<int64_t>& in_splits, Launch) override {
    check_splits("all_to_all_v", out, in, out_splits, in_splits);
    return run("all_to_all_v", {in}, {out},
               [&](cudaStream_t s, const TensorList& i, const TensorList& o) {
                 int64_t row = in.size(0) > 0 ? in.numel() / in.size(0) : 0;
                 size_t row_bytes = static_cast<size_t>(row) * in.itemsize();
                 ncclDataType_t type = nccl_type(in.dtype(), "all_to_all_v");
                 check_nccl(nccl().group_start(), "all_to_all_v");
                 size_t sent = 0, got = 0;
                 for (int r = 0; r < size_; ++r) {
                   auto rs = static_cast<size_t>(in_splits[static_cast<size_t>(r)]);
                   auto rr = static_cast<size_t>(out_splits[static_cast<size_t>(r)]);
                   check_nccl(nccl().send(static_cast<const char*>(ptr(i[0])) + sent * row_bytes,
                                          rs * static_cast<size_t>(row), type, r, comm_, s),
                              "all_to_all_v");
                   check_nccl(nccl().recv(static_cast<char*>(ptr(o[0])) + got * row_bytes,
                                          rr * static_cast<size_t>(row), type, r, comm_, s),
                              "all_to_all_v");
                   sent += rs;
                   got += rr;
                 }
                 check_nccl(nccl().group_end(), "all_to_all_v");
               });
  }
  std::shared_ptr<Work> broadcast(const Tensor& t, int root, Launch) override {
    check_rank("broadcast", root);
    return run(
        "broadcast", {t}, {t}, [&](cudaStream_t s, const TensorList& in, const TensorList& out) {
          check_nccl(nccl().broadcast(ptr(in[0]), ptr(out[0]), static_cast<size_t>(t.numel()),
                                      nccl_type(t.dtype(), "broadcast"), root, comm_, s),
                     "broadcast");
        });
  }
  std::shared_ptr<Work> send(const Tensor& t, int dst, int) override {
    check_rank("send", dst);
    return run("send", {t}, {}, [&](cudaStream_t s, const TensorList& in, const TensorList&) {
      check_nccl(nccl().send(ptr(in[0]), static_cast<size_t>(t.numel()),
                             nccl_type(t.dtype(), "send"), dst, comm_, s),
                 "send");
    });
  }
  std::shared_ptr<Work> recv(const Tensor& t, int src, int) override {
    check_rank("recv", src);
    return run("recv", {}, {t}, [&](cudaStream_t s, const TensorList&, const TensorList& out) {
      check_nccl(nccl().recv(ptr(out[0]), static_cast<size_t>(t.numel()),
                             nccl_type(t.dtype(), "recv"), src, comm_, s),
                 "recv");
    });
  }
  void barrier() override {
    Tensor one = zeros({1}, {.device = device_});
    all_reduce(one, ReduceOp::sum, Launch::blocking)->wait();
  }
  std::shared_ptr<ProcessGroup> split(const std::vector<int>&) override {
    fail(ErrorKind::unsupported,
         "[split] NCCL groups are made with nccl_group over a split bootstrap group");
  }

 private:
  static void* ptr(const Tensor& t) {
    return static_cast<char*>(t.storage()->data) + t.offset() * t.itemsize();
  }
  // Stages inputs and outputs densely, queues `call` on the device's current stream
  // under its guard (C3), and lands staged outputs when the work is waited for.
  template <typename Call>
  std::shared_ptr<Work> run(std::string_view op, const TensorList& ins, const TensorList& outs,
                            Call call) {
    for (const TensorList* list : {&ins, &outs})
      for (const Tensor& t : *list)
        KILN_CHECK(t.device() == device_ && !t.is_fake(), device,
                   "[{}] this NCCL group moves tensors on {}, got {}", op, device_, t.meta_str());
    DeviceGuard guard(device_);
    autograd::NoGradGuard no_grad;
    Stream stream = current_stream(device_);
    TensorList in, out;
    for (const Tensor& t : ins) {
      if (StreamImpl* w = t.storage()->writer.load(); w && w != stream.impl()) {
        Event written;  // (D4) after the stream that last wrote it
        written.record(Stream::of(w));
        written.wait(stream);
      }
      in.push_back(t.is_contiguous() ? t : contiguous(t));
    }
    for (const Tensor& t : outs) {
      bool same = !ins.empty() && t.is_same(ins[0]);
      out.push_back(same                ? in[0]
                    : t.is_contiguous() ? t
                                        : empty(IntList(t.shape().begin(), t.shape().end()),
                                                {.dtype = t.dtype(), .device = t.device()}));
    }
    cuda::set_device(device_.index);
    call(static_cast<cudaStream_t>(stream.native_handle()), in, out);
    for (const Tensor& t : out) t.storage()->writer.store(stream.impl());
    Event done;
    done.record(stream);
    return std::make_shared<StreamWork>(done, [dst = TensorList(outs), out]() mutable {
      for (size_t k = 0; k < dst.size(); ++k)
        if (!out[k].is_same(dst[k])) copy_(dst[k], out[k]);
    });
  }

  ncclComm_t comm_;
  int rank_, size_;
  Device device_;
};

}  // namespace

bool nccl_available() { return device_count(DeviceType::cuda) > 0; }

std::shared_ptr<ProcessGroup> nccl_group(const std::shared_ptr<ProcessGroup>& bootstrap,
                                         Device device) {
  device = resolve_device(device);
  KILN_CHECK(device.type == DeviceType::cuda && device.index < device_count(DeviceType::cuda),
             device,
             "[nccl_group] needs a CUDA device, got {} (this machine has {} CUDA device(s))",
             device, device_count(DeviceType::cuda));
  // Rank 0 makes the id; the bootstrap group (MPI) hands it to every rank.
  Tensor id = zeros({static_cast<int64_t>(sizeof(ncclUniqueId))}, {.dtype = DType::u8});
  if (bootstrap->rank() == 0) {
    ncclUniqueId uid;
    check_nccl(nccl().get_unique_id(&uid), "nccl_group");
    std::memcpy(id.raw_data(), &uid, sizeof uid);
  }
  bootstrap->broadcast(id, 0)->wait();
  ncclUniqueId uid;
  std::memcpy(&uid, id.raw_data(), sizeof uid);
  DeviceGuard guard(device);
  cuda::set_device(device.index);
  ncclComm_t comm;
  check_nccl(nccl().comm_init_rank(&comm, bootstrap->size(), uid, bootstrap->rank()), "nccl_group");
  return std::make_shared<NcclGroup>(comm, bootstrap->rank(), bootstrap->size(), device);
}

}  // namespace kiln::dist
