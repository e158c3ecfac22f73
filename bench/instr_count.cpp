// Instructions per call of the tracing workloads, for work on the tracing path where the
// VM's timing noise (±30% between runs) hides changes of a few percent. It runs one
// workload N times; run it under valgrind twice and take the difference:
//
//   scripts/instr-count.sh make_fx block      # prints instructions per trace
//
// Workloads (the same models and shapes as bench/trace_bench.cpp and fake_bench.cpp):
//   make_fx mlp|block, capture mlp|block|mutation (BM_CaptureFakeMutationProgram),
//   joint mlp|block, chain N (make_fx of N adds),
//   dtensor local|sharded (the four ops of BM_ShardedOps*, per iteration),
//   eager add|extension_add (BM_TinyAdd / BM_TinyExtensionAdd: one add of 8 floats).
// Not a benchmark: it times nothing and reports nothing but what valgrind counts.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "extension_add.h"
#include "kiln/distributed/dtensor.h"
#include "models.h"

namespace {

using namespace kiln;
using bench::Functional;

template <typename Model>
int trace(const std::string& what, IntList shape, int n) {
  Functional<Model> f(std::move(shape));
  std::vector<bool> wants(f.inputs.size(), true);
  wants[0] = false;
  auto loss = [&f](const TensorList& in) { return TensorList{sum(f(in)[0])}; };
  for (int i = 0; i < n; ++i) {
    if (what == "make_fx")
      make_fx(std::cref(f), f.inputs);
    else if (what == "capture")
      passes::capture(std::cref(f), f.inputs);
    else if (what == "joint")
      passes::capture_joint(loss, f.inputs, {.requires_grad = wants});
    else
      return 2;
  }
  return 0;
}

int chain(int64_t length, int n) {
  TensorList inputs = {randn({8}), randn({8})};
  auto fn = [length](const TensorList& in) {
    Tensor x = in[0];
    for (int64_t i = 0; i < length; ++i) x = add(x, in[1]);
    return TensorList{x};
  };
  for (int i = 0; i < n; ++i) make_fx(fn, inputs);
  return 0;
}

int dtensor_ops(bool sharded, int n) {
  FakeMode fake;
  dist::DeviceMesh mesh = dist::DeviceMesh::fake({8}, {"tp"}, 3, Device("cpu:0"));
  Tensor x = empty({64, 256}), w = empty({256});
  if (sharded) {
    x = dist::distribute_tensor(empty({512, 256}), mesh, {dist::Shard(0)});
    w = dist::distribute_tensor(w, mesh, {dist::Replicate()});
  }
  for (int i = 0; i < n; ++i) {
    Tensor y = relu(add(mul(x, w), 1.0));
    Tensor s = sum(y, {1});
  }
  return 0;
}

// The built-in add, or the same meta and kernel registered as an extension op (E1).
int eager_add(bool extension, int n) {
  const ops::OpKind op = bench::extension_add_op();
  Tensor a = ones({8}), b = ones({8});
  for (int i = 0; i < n; ++i) {
    Tensor c = extension ? std::move(call_op(op, {a, b, Scalar(1)})[0]) : add(a, b);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(
        stderr,
        "usage: %s make_fx|capture|joint mlp|block N | chain LENGTH N | dtensor local|sharded N | "
        "eager add|extension_add N\n",
        argv[0]);
    return 2;
  }
  std::string what = argv[1], arg = argv[2];
  int n = std::atoi(argv[3]);
  int rc = 2;
  if (what == "chain")
    rc = chain(std::atoll(arg.c_str()), n);
  else if (what == "eager")
    rc = arg == "add" || arg == "extension_add" ? eager_add(arg == "extension_add", n) : 2;
  else if (what == "dtensor")
    rc = arg == "local" || arg == "sharded" ? dtensor_ops(arg == "sharded", n) : 2;
  else if (what == "capture" && arg == "mutation") {
    TensorList inputs = {randn({64, 64}), randn({64, 64})};
    for (int i = 0; i < n; ++i) passes::capture(bench::mutation_program, inputs);
    rc = 0;
  } else if (arg == "mlp")
    rc = trace<bench::Mlp>(what, {64, 512}, n);
  else if (arg == "block")
    rc = trace<bench::Block>(what, {4, 128, 256}, n);
  if (rc) std::fprintf(stderr, "unknown workload: %s %s\n", argv[1], argv[2]);
  return rc;
}
