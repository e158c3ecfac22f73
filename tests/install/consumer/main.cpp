#include <cstdio>

#include <kiln/kiln.h>

int main() {
  kiln::Tensor x = kiln::tensor({1, 2, 3});
  std::printf("sum=%g\n", kiln::item<float>(kiln::sum(x)));
  return 0;
}
