#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "kiln/core/address_map.h"
#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

TEST(Dims, InlineAndHeap) {
  Dims d{1, 2, 3};
  EXPECT_EQ(d.size(), 3u);
  for (int i = 0; i < 10; ++i) d.push_back(i);
  EXPECT_EQ(d.size(), 13u);
  EXPECT_EQ(d[12], 9);
  Dims e = d;
  EXPECT_EQ(e, d);
  d.erase(0);
  EXPECT_EQ(d[0], 2);
  d.insert(0, 7);
  EXPECT_EQ(d[0], 7);
  EXPECT_EQ(Dims({2, 3}).str(), "[2, 3]");
  EXPECT_EQ(contiguous_strides(Dims{2, 3, 4}), (Dims{12, 4, 1}));
}

// TensorId: what the tracing tables check an address against (T2).
// AddressMap (the recorder's table): every key found after the table grows many times,
// a second set replaces, an address never set is absent.
TEST(AddressMap, FindsEveryKeyThroughGrowth) {
  AddressMap<int64_t> map(4);
  std::vector<int64_t> objects(5000);
  for (size_t i = 0; i < objects.size(); ++i) map.set(&objects[i], static_cast<int64_t>(i));
  map.set(&objects[7], -7);
  EXPECT_EQ(map.size(), objects.size());
  for (size_t i = 0; i < objects.size(); ++i) {
    const int64_t* v = map.find(&objects[i]);
    ASSERT_NE(v, nullptr) << i;
    EXPECT_EQ(*v, i == 7 ? -7 : static_cast<int64_t>(i));
  }
  int64_t elsewhere = 0;
  EXPECT_EQ(map.find(&elsewhere), nullptr);
}

TEST(Tensor, IdsAreNeverReused) {
  const TensorImpl* at = nullptr;
  uint64_t first = 0;
  {
    Tensor a = empty({2});
    at = a.impl();
    first = a.impl()->id.value();
  }
  Tensor b = empty({2});
  EXPECT_EQ(b.impl(), at);  // the pool hands the freed descriptor back: the case ids guard
  EXPECT_NE(b.impl()->id.value(), first);
  TensorImpl copy = *b.impl();  // a copy is another impl
  EXPECT_NE(copy.id.value(), b.impl()->id.value());
  uint64_t kept = copy.id.value();
  copy = *b.impl();  // assigning keeps the impl's identity
  EXPECT_EQ(copy.id.value(), kept);
  std::vector<uint64_t> ids[2];
  auto take = [&ids](int k) {
    for (int i = 0; i < 70000; ++i)
      ids[k].push_back(empty({1}).impl()->id.value());  // past a block
  };
  std::thread t0(take, 0), t1(take, 1);
  t0.join(), t1.join();
  std::vector<uint64_t> all = ids[0];
  all.insert(all.end(), ids[1].begin(), ids[1].end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());  // unique across threads
}

TEST(Tensor, MetadataOfAFreshTensor) {
  Tensor t = zeros({2, 3});
  EXPECT_EQ(t.shape(), (Dims{2, 3}));
  EXPECT_EQ(t.strides(), (Dims{3, 1}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.dtype(), f32);
  EXPECT_EQ(t.device(), Device("cpu:0"));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_FALSE(t.is_fake());
  EXPECT_EQ(t.meta_str(), "f32[2, 3]@cpu:0");
  testing::expect_error([&] { t.size(2); }, ErrorKind::index, "Dimension out of range");
}

TEST(Allocator, StatsTrackEachDevice) {
  Device d("cpu:3");
  allocator_stats(d);
  AllocatorStats before = allocator_stats(d);
  {
    Tensor t = empty({1024}, {.device = d});  // 4 KiB
    AllocatorStats during = allocator_stats(d);
    EXPECT_EQ(during.bytes_in_use - before.bytes_in_use, 4096);
    EXPECT_EQ(during.num_allocs, before.num_allocs + 1);
    EXPECT_GE(during.peak_bytes, during.bytes_in_use);
  }
  AllocatorStats after = allocator_stats(d);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  // The freed block is cached: the next allocation of that size asks the OS for nothing.
  Tensor again = empty({1024}, {.device = d});
  EXPECT_EQ(allocator_stats(d).num_os_allocs, after.num_os_allocs);
}

TEST(Allocator, RoundsToBlocks) {
  EXPECT_EQ(CachingHostAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingHostAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingHostAllocator::round_size(3 << 20), 4u << 20);
}

TEST(Random, SeededAndReproducible) {
  manual_seed(42);
  std::vector<float> a = to_vector<float>(randn({16}));
  manual_seed(42);
  std::vector<float> b = to_vector<float>(randn({16}));
  EXPECT_EQ(a, b);
  std::vector<float> c = to_vector<float>(randn({16}));
  EXPECT_NE(a, c);
  Tensor u = rand({1000});
  EXPECT_GE(item<float>(min(u)), 0.0f);
  EXPECT_LT(item<float>(max(u)), 1.0f);
  EXPECT_NEAR(item<float>(mean(u)), 0.5f, 0.05f);
  Tensor n = randn({4000}, {.dtype = f64});
  EXPECT_NEAR(item<double>(mean(n)), 0.0, 0.08);
  EXPECT_NEAR(item<double>(var(n)), 1.0, 0.1);
  testing::expect_error([] { rand({2}, {.dtype = i64}); }, ErrorKind::dtype,
                        "[rand] needs a floating point dtype");
}

TEST(Printing, LooksLikeTorch) {
  EXPECT_EQ(to_string(tensor({1, 2, 3})), "tensor([1., 2., 3.])");
  EXPECT_EQ(to_string(arange(4)), "tensor([0, 1, 2, 3])");
  EXPECT_EQ(to_string(tensor({1.5, 2}, {2}, {.device = Device("cpu:1")})),
            "tensor([1.5000, 2.0000], device='cpu:1')");
  EXPECT_EQ(to_string(tensor({1, 2, 3, 4}, {2, 2}, {.dtype = f64})),
            "tensor([[1., 2.],\n        [3., 4.]], dtype=f64)");
  EXPECT_EQ(to_string(eq(arange(2), arange(2))), "tensor([True, True])");
  // PyTorch's number formats: one for the whole tensor, right-aligned to one width.
  EXPECT_EQ(to_string(tensor({1e-5, 1.})), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(to_string(tensor({0.5, 123.456})), "tensor([  0.5000, 123.4560])");
  EXPECT_EQ(to_string(tensor({0.1, 123.456})), "tensor([1.0000e-01, 1.2346e+02])");  // ratio > 1000
  EXPECT_EQ(to_string(tensor({NAN, 1., -INFINITY})), "tensor([nan, 1., -inf])");
  EXPECT_EQ(to_string(tensor({0., 0.})), "tensor([0., 0.])");
  EXPECT_EQ(to_string(tensor({-2., 10.})), "tensor([-2., 10.])");
  EXPECT_EQ(to_string(tensor(0.5)), "tensor(0.5000)");
  EXPECT_EQ(to_string(from_vector<bool>({true, false}, {2}, {})), "tensor([ True, False])");
  // Rows wrap at 80 columns; more than 1000 elements are summarised (3 at each edge).
  EXPECT_EQ(to_string(arange(0, 30, 1, {.dtype = f32})),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
            "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
            "        28., 29.])");
  EXPECT_EQ(to_string(arange(1001)), "tensor([   0,    1,    2,  ...,  998,  999, 1000])");
  EXPECT_EQ(to_string(arange(0, 2000, 1, {.dtype = f32})),
            "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
            "        1.9990e+03])");
  EXPECT_EQ(to_string(view(arange(0, 2000, 1, {.dtype = f64}), {1000, 2})),
            "tensor([[0.0000e+00, 1.0000e+00],\n"
            "        [2.0000e+00, 3.0000e+00],\n"
            "        [4.0000e+00, 5.0000e+00],\n"
            "        ...,\n"
            "        [1.9940e+03, 1.9950e+03],\n"
            "        [1.9960e+03, 1.9970e+03],\n"
            "        [1.9980e+03, 1.9990e+03]], dtype=f64)");
  EXPECT_EQ(to_string(empty({0, 3})), "tensor([], size=(0, 3))");
  {
    FakeMode mode;
    EXPECT_EQ(to_string(empty({5}, {.device = Device("cuda:0")})),
              "tensor(..., device='cuda:0', size=(5,))");
  }
  EXPECT_EQ(to_string(empty({0}, {.dtype = i64})), "tensor([], dtype=i64)");
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// A tensor that outlives the thread's pool (destroyed with the statics at exit) must
// still release cleanly; this process's exit is the test.
Tensor& static_tensor() {
  static Tensor t = ones({4});
  return t;
}

TEST(Pool, DescriptorsSurviveThreadsAndStatics) {
  EXPECT_EQ(item<float>(sum(static_tensor())), 4.0f);
  Tensor made_elsewhere;
  std::thread([&] { made_elsewhere = arange(8); }).join();  // allocated on a dead thread
  EXPECT_EQ(item<int64_t>(sum(made_elsewhere)), 28);
  made_elsewhere = Tensor();  // released here, into this thread's pool
  for (int i = 0; i < 1000; ++i) ones({2}) + ones({2});
}

}  // namespace
}  // namespace kiln
