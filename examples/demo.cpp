// An eager example: a small MLP forward on every configured CPU device
// (KILN_CPU_DEVICES), checked against a plain C++ reference. The main job (`make demo`)
// is `kiln demo` in tools/kiln.
#include <cmath>
#include <cstdio>

#include "kiln/kiln.h"

int main() {
  using namespace kiln;
  try {
    manual_seed(0);
    int n = device_count(DeviceType::cpu);
    std::printf("kiln demo: %d cpu device(s) (set KILN_CPU_DEVICES for more)\n", n);
    Tensor x = randn({4, 16});
    Tensor w1 = randn({32, 16}) * 0.25, b1 = randn({32}), w2 = randn({8, 32}) * 0.25;
    Tensor ref;
    for (int d = 0; d < n; ++d) {
      Device dev(DeviceType::cpu, d);
      Tensor h = relu(linear(to(x, dev), to(w1, dev), to(b1, dev)));
      Tensor y = softmax(matmul(h, t(to(w2, dev))), -1);
      AllocatorStats stats = allocator_stats(dev);
      std::printf("  %s: y %s, row sums %s, %lld bytes in use on the device\n", dev.str().c_str(),
                  y.meta_str().c_str(), to_string(sum(y, {1})).c_str(),
                  static_cast<long long>(stats.bytes_in_use));
      if (!ref.defined()) ref = to(y, Device("cpu:0"));
      float diff = item<float>(amax(abs(to(y, Device("cpu:0")) - ref)));
      if (diff != 0.0f) {
        std::printf("mismatch between devices: %g\n", diff);
        return 1;
      }
    }
    // Check against a scalar loop reference on cpu:0.
    std::vector<float> xv = to_vector<float>(x), w1v = to_vector<float>(w1),
                       b1v = to_vector<float>(b1), w2v = to_vector<float>(w2),
                       yv = to_vector<float>(ref);
    double worst = 0;
    for (int r = 0; r < 4; ++r) {
      float h[32], z[8], mx = -1e30f, s = 0;
      for (int j = 0; j < 32; ++j) {
        float acc = b1v[j];
        for (int k = 0; k < 16; ++k) acc += xv[r * 16 + k] * w1v[j * 16 + k];
        h[j] = acc > 0 ? acc : 0;
      }
      for (int o = 0; o < 8; ++o) {
        z[o] = 0;
        for (int j = 0; j < 32; ++j) z[o] += h[j] * w2v[o * 32 + j];
        mx = std::max(mx, z[o]);
      }
      for (float& v : z) s += (v = std::exp(v - mx));
      for (int o = 0; o < 8; ++o)
        worst = std::max(worst, std::abs(double(z[o] / s - yv[r * 8 + o])));
    }
    std::printf("max |kiln - reference| = %.3g -> %s\n", worst, worst < 1e-5 ? "OK" : "FAIL");
    return worst < 1e-5 ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "kiln error: %s\n", e.what());
    return 1;
  }
}
