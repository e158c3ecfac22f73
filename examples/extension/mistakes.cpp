// The five multi-device mistakes of kiln's founding case (a kernel library fixed by
// hand for multiple GPUs), each written as a wrong variant of kx::gated_mlp's kernel
// or module, and each stopped by kiln with an error naming the op and the devices --
// on virtual CPU devices, so on any machine. Then the correct kernel runs on cpu:1
// and cpu:2 at once. Run with KILN_CPU_DEVICES=3; exit status 0 when all holds.
#include <cstdio>
#include <string>
#include <thread>

#include "gated_mlp.h"

using namespace kiln;

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  failures += !ok;
}

// Runs `f`, which must throw a kiln::Error of `kind` whose message holds every needle.
template <typename F>
void expect_stopped(const char* mistake, F&& f, ErrorKind kind,
                    std::initializer_list<std::string> needles) {
  try {
    f();
    expect(false, std::string(mistake) + ": not stopped");
  } catch (const Error& e) {
    bool ok = e.kind() == kind;
    for (const std::string& n : needles)
      ok = ok && std::string(e.what()).find(n) != std::string::npos;
    expect(ok, std::string(mistake) + ": " + e.what());
  }
}

// The wrong kernels. Each registers as its own op with the correct op's meta function.
void no_guard(const ops::OpCall& call, std::span<Tensor> outs) {
  // What a launch without a device guard sees: the process's default device current.
  DeviceGuard as_if_unguarded(Device(DeviceType::cpu, 0));
  kx::detail::gated_mlp_cpu(call, outs, blas_handle(DeviceType::cpu),
                            current_stream(DeviceType::cpu));
}
void other_stream(const ops::OpCall& call, std::span<Tensor> outs) {
  // Device 0's default stream, whatever the tensors' device.
  kx::detail::gated_mlp_cpu(call, outs, blas_handle(call.device),
                            current_stream(Device(DeviceType::cpu, 0)));
}
void global_handle(const ops::OpCall& call, std::span<Tensor> outs) {
  // One handle for the process, made on the device of the first call.
  static const BlasHandle& handle = blas_handle(call.device);
  kx::detail::gated_mlp_cpu(call, outs, handle, current_stream(call.device));
}

ops::OpKind variant(const char* name, ops::Kernel kernel) {
  std::string schema =
      std::string("kx_wrong::") + name +
      "(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down, Tensor workspace) -> Tensor";
  return define_op({.schema = schema,
                    .meta = ops::op_info(kx::gated_mlp_op()).meta,
                    .cpu = kernel,
                    .differentiable = false});
}

Tensor call(ops::OpKind op, kx::GatedMLP& m, const Tensor& x) {
  return call_op(op, {x, m.w_gate, m.w_up, m.w_down, m.workspace})[0];
}

// The module mistake: the workspace kept as a plain member, not registered, so
// `to(device)` leaves it behind.
class LeakyGatedMLP : public kx::GatedMLP {
 public:
  using GatedMLP::GatedMLP;
  Tensor scratch = zeros({2 * 8 * 48}, {.device = Device("cpu:1")});
  TensorList forward(const TensorList& in) override {
    return {kx::gated_mlp(in[0], w_gate, w_up, w_down, scratch)};
  }
};

}  // namespace

int main() {
  if (device_count(DeviceType::cpu) < 3) {
    std::fprintf(stderr, "run with KILN_CPU_DEVICES=3 (this process has %d CPU devices)\n",
                 device_count(DeviceType::cpu));
    return 2;
  }
  autograd::NoGradGuard no_grad;
  Device cpu1("cpu:1"), cpu2("cpu:2");
  kx::GatedMLP m1(16, 48, 16, 8, cpu1), m2(16, 48, 16, 8, cpu2);
  Tensor x1 = randn({8, 16}, {.device = cpu1}), x2 = randn({8, 16}, {.device = cpu2});

  expect_stopped("1. no device guard", [&] { call(variant("no_guard", no_guard), m1, x1); },
                 ErrorKind::device_mismatch,
                 {"[kx_wrong::no_guard]", "cpu:1", "current device of cpu:0"});
  expect_stopped(
      "2. another device's stream", [&] { call(variant("other_stream", other_stream), m1, x1); },
      ErrorKind::device_mismatch, {"[kx_wrong::other_stream]", "cpu:1", "stream of cpu:0"});
  ops::OpKind global = variant("global_handle", global_handle);
  call(global, m1, x1);  // the first device works: the handle was made there
  expect_stopped("3. another device's BLAS handle", [&] { call(global, m2, x2); },
                 ErrorKind::device_mismatch,
                 {"[kx_wrong::global_handle]", "kernel for cpu:2", "BLAS handle of cpu:1"});
  LeakyGatedMLP leaky(16, 48, 16, 8, cpu1);
  leaky.to(cpu2);
  expect_stopped("4. workspace left behind by module.to", [&] { leaky(x2); },
                 ErrorKind::device_mismatch,
                 {"[kx::gated_mlp]", "cpu:2 (argument 'x')", "cpu:1 (argument 'workspace')"});
  expect_stopped("5. inputs on two devices",
                 [&] { kx::gated_mlp(x2, m1.w_gate, m1.w_up, m1.w_down, m1.workspace); },
                 ErrorKind::device_mismatch,
                 {"[kx::gated_mlp]", "cpu:2 (argument 'x')", "cpu:1 (argument 'w_gate')"});

  // The correct kernel on two devices at once, each thread checked against kiln's own ops.
  auto run = [](kx::GatedMLP& m, const Tensor& x, double& worst) {
    Tensor ref = matmul(silu(matmul(x, t(m.w_gate))) * matmul(x, t(m.w_up)), t(m.w_down));
    for (int i = 0; i < 200; ++i) worst = std::max(worst, item<double>(max(abs(m(x) - ref))));
  };
  double worst1 = 0, worst2 = 0;
  std::thread a([&] { run(m1, x1, worst1); }), b([&] { run(m2, x2, worst2); });
  a.join();
  b.join();
  expect(worst1 < 1e-5 && worst2 < 1e-5,
         "correct kernel on cpu:1 and cpu:2 concurrently: max error " +
             std::to_string(std::max(worst1, worst2)));
  return failures == 0 ? 0 : 1;
}
