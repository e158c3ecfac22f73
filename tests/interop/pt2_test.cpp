// Importing torch.export archives (I1-I4) against PyTorch's own results: the corpus in
// tests/pt2 was written by tools/pt2/make_corpus.py with current PyTorch (inputs,
// outputs and written buffers beside each archive), so these tests need no Python.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "interop/zip_util.h"
#include "kiln/kiln.h"
#include "kiln/runtime/executor.h"
#include "program_file.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::all_close;

const std::string kCorpus = std::string(KILN_TEST_DATA) + "/pt2/";

std::string archive(const std::string& name) { return kCorpus + name + ".pt2"; }
std::string tmp(const std::string& name) { return ::testing::TempDir() + "kiln_pt2_" + name; }

// PyTorch's tensors beside an archive: input_N, output_N, state.<buffer>.
Tensor reference(const NamedTensors& ref, const std::string& key) {
  for (const auto& [name, t] : ref)
    if (name == key) return t;
  ADD_FAILURE() << "no '" << key << "' in the reference";
  return Tensor();
}
TensorList reference_inputs(const NamedTensors& ref, Device device = Device("cpu:0")) {
  TensorList in;
  for (int i = 0;; ++i) {
    auto it = std::find_if(ref.begin(), ref.end(),
                           [&](const auto& e) { return e.first == "input_" + std::to_string(i); });
    if (it == ref.end()) return in;
    in.push_back(to(it->second, device));
  }
}
std::vector<double> values(const Tensor& t) {
  Tensor d = to(to(t, Device("cpu:0")), DType::f64);
  d = contiguous(d);
  return std::vector<double>(d.data<double>(), d.data<double>() + d.numel());
}
// Outputs equal PyTorch's within 1e-5 relative (f32), with 1e-5 absolute near zero.
void expect_outputs(const NamedTensors& ref, const TensorList& got, const std::string& what) {
  for (size_t i = 0; i < got.size(); ++i) {
    Tensor want = reference(ref, "output_" + std::to_string(i));
    ASSERT_EQ(got[i].shape(), want.shape()) << what << " output " << i;
    ASSERT_EQ(got[i].dtype(), want.dtype()) << what << " output " << i;
    EXPECT_TRUE(all_close(got[i], values(want), 1e-5, 1e-5)) << what << " output " << i;
  }
}

const Tensor* state_of(const ExportedProgram& p, const std::string& name) {
  for (const auto& [n, t] : p.state)
    if (n == name) return &t;
  return nullptr;
}

class Corpus : public ::testing::TestWithParam<std::string> {};

// (I1-I3) Each family runs through the interpreter and the executor with PyTorch's results.
TEST_P(Corpus, MatchesPyTorch) {
  const std::string name = GetParam();
  NamedTensors ref = load_safetensors(kCorpus + name + ".safetensors");
  ExportedProgram p = load_pt2(archive(name));
  expect_outputs(ref, p.run(reference_inputs(ref)), name + " (interpreter)");

  ExportedProgram q = load_pt2(archive(name));
  runtime::Executor exec(q);
  expect_outputs(ref, exec.run(reference_inputs(ref)), name + " (executor)");

  // kiln import: the program file loads without the importer and computes the same
  std::string file = tmp(name + ".kiln");
  save(read_pt2(archive(name)).program, file);
  ExportedProgram loaded = load_program(file);
  expect_outputs(ref, loaded.run(reference_inputs(ref)), name + " (saved and loaded)");
}

INSTANTIATE_TEST_SUITE_P(Pt2, Corpus,
                         ::testing::Values("cnn", "cnn_core", "encoder", "decoder", "decoder_core",
                                           "recurrent", "mlp_bn_train", "mlp_bn_train_core",
                                           "mlp_dynamic", "assorted", "assorted_core",
                                           "birecurrent", "regions", "layers", "layers_core",
                                           "linalg"));

// (I3) BatchNorm in training mode, in both dialects: the training IR writes the running
// statistics in place (batch_norm, add_ on num_batches_tracked), the core-ATen dialect
// returns them as buffer_mutation outputs. Both become kiln's buffer mutations.
TEST(Pt2, BatchNormTrainingUpdatesRunningStatisticsInBothDialects) {
  for (std::string name : {"mlp_bn_train", "mlp_bn_train_core"}) {
    SCOPED_TRACE(name);
    NamedTensors ref = load_safetensors(kCorpus + name + ".safetensors");
    ExportedProgram p = load_pt2(archive(name));
    std::vector<std::string> written;
    for (const OutputSpec& o : p.signature.outputs)
      if (o.kind == OutputSpec::Kind::buffer_mutation) written.push_back(o.target);
    std::sort(written.begin(), written.end());
    EXPECT_EQ(written, (std::vector<std::string>{"bn.num_batches_tracked", "bn.running_mean",
                                                 "bn.running_var"}));
    p.run(reference_inputs(ref));
    for (std::string buffer : {"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}) {
      const Tensor* t = state_of(p, buffer);
      ASSERT_TRUE(t) << buffer;
      EXPECT_TRUE(all_close(*t, values(reference(ref, "state." + buffer)), 1e-5, 1e-6)) << buffer;
    }
  }
}

// (I3, X4) Non-persistent buffers and tensor constants are constants, not state; the
// parameters and persistent buffers are the state.
TEST(Pt2, BuffersAndConstantsLandWhereKilnKeepsThem) {
  ExportedProgram p = read_pt2(archive("mlp_bn_train")).program;
  auto has = [](const NamedTensors& ts, const std::string& n) {
    return std::any_of(ts.begin(), ts.end(), [&](const auto& e) { return e.first == n; });
  };
  EXPECT_TRUE(has(p.constants, "offset"));  // register_buffer(persistent=False)
  EXPECT_TRUE(has(p.constants, "scale"));   // a tensor constant
  EXPECT_FALSE(has(p.state, "offset"));
  EXPECT_TRUE(has(p.state, "fc.weight"));
  EXPECT_TRUE(has(p.state, "bn.running_mean"));
  const InputSpec* scale = nullptr;
  for (const InputSpec& s : p.signature.inputs)
    if (s.target == "scale") scale = &s;
  ASSERT_TRUE(scale);
  EXPECT_EQ(scale->kind, InputSpec::Kind::constant);
}

// (I3) Tied embedding and LM-head weights are one storage in the file and one tensor in
// kiln: the program has one input and one state entry for both, and says so.
TEST(Pt2, TiedWeightsStayOneTensor) {
  ImportedProgram imported = read_pt2(archive("decoder"));
  const ExportedProgram& p = imported.program;
  EXPECT_TRUE(state_of(p, "embed.weight"));
  EXPECT_FALSE(state_of(p, "lm_head.weight"));
  EXPECT_TRUE(std::any_of(imported.notes.begin(), imported.notes.end(), [](const std::string& n) {
    return n.find("'lm_head.weight' is tied to 'embed.weight'") != std::string::npos;
  }));
  // an update of the one tensor changes both uses: zeroing it zeroes the logits
  ExportedProgram q = load_pt2(archive("decoder"));
  NamedTensors ref = load_safetensors(kCorpus + std::string("decoder.safetensors"));
  for (auto& [n, t] : q.state)
    if (n == "embed.weight") t = zeros(t.shape().vec());
  TensorList out = q.run(reference_inputs(ref));
  std::vector<double> logp = values(out[0]);
  double first = logp[0];  // uniform log-probabilities: every logit is 0
  EXPECT_TRUE(
      std::all_of(logp.begin(), logp.end(), [&](double v) { return std::abs(v - first) < 1e-5; }));
}

// Weights are viewed in the mapped archive, not copied, where the entry is aligned
// (torch.export.save aligns entries to 64 bytes).
TEST(Pt2, AlignedWeightsAreMappedNotCopied) {
  std::string path = archive("cnn");
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ExportedProgram p = read_pt2(path).program;
  const Tensor* w = state_of(p, "stem.weight");
  ASSERT_TRUE(w);
  // the weight's bytes appear in the file exactly: find them, and check the tensor's data
  // pointer is not a heap copy by writing to it (a private mapping) and re-reading the file
  std::vector<float> v(static_cast<size_t>(w->numel()));
  std::memcpy(v.data(), w->raw_data(), v.size() * sizeof(float));
  auto at = std::search(bytes.begin(), bytes.end(), reinterpret_cast<const char*>(v.data()),
                        reinterpret_cast<const char*>(v.data() + v.size()));
  ASSERT_NE(at, bytes.end());
  EXPECT_EQ((at - bytes.begin()) % 64, 0);
  Tensor storage_owner = *w;
  EXPECT_NE(storage_owner.storage()->owner, nullptr) << "the weight should keep the mapping alive";
}

// Deflated entries (torch writes stored ones; other writers may not) import too; weights
// viewing an inflated entry keep its bytes alive after the archive is gone.
TEST(Pt2, DeflatedArchivesImport) {
  std::string path = tmp("deflated.pt2");
  testing::write_zip(path, testing::read_zip(archive("mlp_bn_train")), /*deflate=*/true);
  NamedTensors ref = load_safetensors(kCorpus + std::string("mlp_bn_train.safetensors"));
  ExportedProgram p = load_pt2(path);
  expect_outputs(ref, p.run(reference_inputs(ref)), "deflated mlp_bn_train");
}

// (I4, X3) A program exported on cuda:0 loads onto cpu:1 with a device map; without one
// the error names the map to pass.
TEST(Pt2, ProgramExportedOnCudaRunsOnAVirtualCpu) {
  ExportedProgram fake = read_pt2(archive("mlp_cuda0")).program;
  EXPECT_EQ(fake.devices(), std::vector<Device>{Device("cuda:0")});
  if (device_count(DeviceType::cuda) == 0)
    testing::expect_error([&] { load_pt2(archive("mlp_cuda0")); }, ErrorKind::device,
                          "--device-map cuda:0=cpu:0");
  NamedTensors ref = load_safetensors(kCorpus + std::string("mlp_cuda0.safetensors"));
  ExportedProgram p = load_pt2(archive("mlp_cuda0"), {{Device("cuda:0"), Device("cpu:1")}});
  EXPECT_EQ(p.devices(), std::vector<Device>{Device("cpu:1")});
  TensorList out = p.run(reference_inputs(ref, Device("cpu:1")));
  EXPECT_EQ(out[0].device(), Device("cpu:1"));
  expect_outputs(ref, out, "mlp_cuda0 on cpu:1");
}

// (I4, Y1) A dynamic dim of the file is a symbol of the imported program, with the file's
// range: one program runs at every batch the range allows.
TEST(Pt2, SymbolicSizesAreImportedAsSymbols) {
  ImportedProgram imported = read_pt2(archive("mlp_dynamic"));
  ASSERT_FALSE(imported.notes.empty());
  EXPECT_NE(imported.notes[0].find("input_0.shape[0] (s77) is symbolic: s0 in [1, 64]"),
            std::string::npos)
      << imported.notes[0];
  ExportedProgram p = load_pt2(archive("mlp_dynamic"));
  ASSERT_EQ(p.shapes.symbols.size(), 1u);
  NamedTensors ref = load_safetensors(kCorpus + std::string("mlp_dynamic.safetensors"));
  TensorList in = reference_inputs(ref);
  Tensor want = p.run(in)[0];
  expect_outputs(ref, {want}, "mlp_dynamic at its example batch");
  // The MLP works row by row: a batch of the example's rows twice gives its output twice.
  runtime::Executor ex(p);
  for (int64_t copies : {1, 2, 3}) {
    TensorList rows(static_cast<size_t>(copies), in[0]);
    Tensor got = ex.run({cat(rows, 0)})[0];
    TensorList wants(static_cast<size_t>(copies), want);
    EXPECT_TRUE(testing::all_close(got, to_vector<double>(cat(wants, 0)))) << copies;
  }
  TensorList row = {slice(in[0], 0, 0, 1, 1)};
  EXPECT_TRUE(testing::all_close(ex.run(row)[0], to_vector<double>(slice(want, 0, 0, 1, 1))));
  testing::expect_error(
      [&] {
        ex.run({zeros({65, 4})});
      },
      ErrorKind::shape, "outside the range [1, 64]");
  // The import saved as a kiln program keeps the symbol.
  std::string path = ::testing::TempDir() + "kiln_mlp_dynamic.kiln";
  save(p, path);
  EXPECT_EQ(load_program(path).shapes.str(), p.shapes.str());
}

// (I4, Y1) A decoder exported with a dynamic batch and sequence (rotary tables sliced to
// the sequence, a causal mask from arange, roll, gather, cumsum): one imported program
// matches PyTorch at the example shape and at another, in both dialects.
TEST(Pt2, DynamicDecoderRunsAtEveryShapeOfItsRange) {
  for (std::string name : {"decoder_dynamic", "decoder_dynamic_core"}) {
    SCOPED_TRACE(name);
    ImportedProgram imported = read_pt2(archive(name));
    ExportedProgram& p = imported.program;
    EXPECT_EQ(p.shapes.symbols.size(), 2u) << p.shapes.str();
    runtime::Executor ex(p);
    for (std::string refs : {name, name + "_alt"}) {
      NamedTensors ref = load_safetensors(kCorpus + refs + ".safetensors");
      expect_outputs(ref, ex.run(reference_inputs(ref)), refs);
      expect_outputs(ref, p.run(reference_inputs(ref)), refs + " (interpreted)");
    }
    testing::expect_error(
        [&] {
          ex.run({zeros({2, 17}, {.dtype = i64})});
        },
        ErrorKind::shape, "outside the range");
  }
}

// (I4, Y3) Data-dependent sizes in the file (nonzero's rows, boolean-mask selection,
// masked_select: u0, u1, ... with their _assert_scalar range checks) are kiln's unbacked
// sizes: one imported program runs at any count, none included, in both dialects.
TEST(Pt2, DataDependentSizesAreReadWhenTheProgramRuns) {
  for (std::string name : {"data_dependent", "data_dependent_core"}) {
    SCOPED_TRACE(name);
    ImportedProgram imported = read_pt2(archive(name));
    ExportedProgram& p = imported.program;
    int unbacked = 0;
    for (const SymbolInfo& s : p.shapes.symbols) unbacked += s.unbacked;
    EXPECT_EQ(unbacked, 3) << p.shapes.str();
    runtime::Executor ex(p);
    for (std::string refs : {name, name + "_alt"}) {
      NamedTensors ref = load_safetensors(kCorpus + refs + ".safetensors");
      expect_outputs(ref, ex.run(reference_inputs(ref)), refs);
    }
  }
  // t.item() used as a size (item, sym_constrain_range_for_size, torch._check's
  // _assert_scalar): read when the program runs, its facts asserted then.
  ImportedProgram imported = read_pt2(archive("item_size"));
  runtime::Executor ex(imported.program);
  for (std::string refs : {"item_size", "item_size_alt"}) {
    NamedTensors ref = load_safetensors(kCorpus + refs + ".safetensors");
    expect_outputs(ref, ex.run(reference_inputs(ref)), refs);
  }
  Tensor x = reference(load_safetensors(kCorpus + "item_size.safetensors"), "input_0");
  testing::expect_error(
      [&] {
        ex.run({x, full({1}, 7, {.dtype = i64})});
      },
      ErrorKind::value, "breaks the assertion u0 <= 6");
  // a float item() used in arithmetic: the one-element tensor itself, negative included
  ImportedProgram v = read_pt2(archive("item_value"));
  runtime::Executor run_v(v.program);
  for (std::string refs : {"item_value", "item_value_alt"}) {
    NamedTensors ref = load_safetensors(kCorpus + refs + ".safetensors");
    expect_outputs(ref, run_v.run(reference_inputs(ref)), refs);
  }
  // one_hot: the core dialect checks its classes with torch._assert_async, which becomes a
  // runtime assertion on a size read from the data (t != 0 must be at least 1); kiln's own
  // one_hot, traced with num_classes, states the same check (classes out of range are an
  // error in both dialects, as in PyTorch, not a row of zeros)
  for (std::string name : {"one_hot", "one_hot_core"}) {
    SCOPED_TRACE(name);
    ImportedProgram o = read_pt2(archive(name));
    runtime::Executor run_o(o.program);
    for (std::string refs : {name, name + "_alt"}) {
      NamedTensors ref = load_safetensors(kCorpus + refs + ".safetensors");
      expect_outputs(ref, run_o.run(reference_inputs(ref)), refs);
    }
    Tensor weights = reference(load_safetensors(kCorpus + name + ".safetensors"), "input_1");
    for (int64_t bad : {5, -1})
      testing::expect_error(
          [&] {
            run_o.run({from_vector(std::vector<int64_t>{0, bad, 1, 1}), weights});
          },
          ErrorKind::value,
          name == "one_hot_core" ? "that aten._assert_async.msg stated"
                                 : "that aten.one_hot.default stated");
  }
  // unique (_unique2, unique_dim, unique_consecutive) and bincount: counts of distinct
  // values and bins, read when the program runs
  for (std::string name : {"unique_counts", "unique_counts_core"}) {
    SCOPED_TRACE(name);
    ImportedProgram u = read_pt2(archive(name));
    runtime::Executor run_u(u.program);
    for (std::string refs : {name, name + "_alt"}) {
      NamedTensors ref = load_safetensors(kCorpus + refs + ".safetensors");
      expect_outputs(ref, run_u.run(reference_inputs(ref)), refs);
    }
  }
}

// (I4, Y2) Sizes public models use as values -- a convolution (and max pooling) over a
// dynamic batch, positions from arange and diff, advanced indexing with them -- stay
// symbolic: one imported program runs at both shapes PyTorch computed.
TEST(Pt2, ConvolutionsPositionsAndIndexingKeepTheirSymbols) {
  for (std::string name : {"sizes_dynamic", "sizes_dynamic_core"}) {
    SCOPED_TRACE(name);
    ImportedProgram imported = read_pt2(archive(name));
    ExportedProgram& p = imported.program;
    EXPECT_EQ(p.shapes.symbols.size(), 2u) << p.shapes.str();
    EXPECT_TRUE(p.shapes.guards.empty()) << p.shapes.str();
    runtime::Executor ex(p);
    for (std::string refs : {name, name + "_alt"}) {
      NamedTensors ref = load_safetensors(kCorpus + refs + ".safetensors");
      expect_outputs(ref, ex.run(reference_inputs(ref)), refs);
    }
  }
}

// (I3) nn_module_stack becomes kiln's scopes: kiln show --format html folds by module.
TEST(Pt2, ModulePathsBecomeScopes) {
  ExportedProgram p = read_pt2(archive("cnn")).program;
  std::set<std::string> scopes;
  for (ir::Node* n : p.graph.nodes()) scopes.insert(n->scope());
  for (std::string s : {"stem", "bn", "dw", "se.reduce", "se.expand", "pool", "head"})
    EXPECT_TRUE(scopes.count(s)) << s;
}

// (E3, I2) A namespaced custom op resolves to the kiln extension op of the same name.
TEST(Pt2, CustomOpsResolveToExtensionOps) {
  testing::expect_error([&] { read_pt2(archive("custom_op")); }, ErrorKind::unsupported,
                        "1 op kiln does not map: kilntest.scaled_add.default (node 'scaled_add')");
  define_op({.schema = "kilntest::scaled_add(Tensor x, Tensor y, float alpha) -> Tensor",
             .meta =
                 [](const ops::OpCall& c, ops::MetaOut& out) {
                   out.fresh(c.args.tensor(0).shape(), c.args.tensor(0).dtype());
                 },
             .library = "the pt2 test",
             .cpu =
                 [](const ops::OpCall& c, std::span<Tensor> outs) {
                   const Tensor &x = c.args.tensor(0), &y = c.args.tensor(1);
                   KILN_CHECK(x.is_contiguous() && y.is_contiguous(), value,
                              "contiguous inputs only");
                   double alpha = c.args.f64(2);
                   for (int64_t i = 0; i < x.numel(); ++i)
                     outs[0].data<float>()[i] =
                         x.data<float>()[i] + static_cast<float>(alpha) * y.data<float>()[i];
                 }});
  NamedTensors ref = load_safetensors(kCorpus + std::string("custom_op.safetensors"));
  ExportedProgram p = load_pt2(archive("custom_op"));
  expect_outputs(ref, p.run(reference_inputs(ref)), "custom_op");
}

// (E3, I2) A custom op that writes two buffers (torch.library mutates_args), in both
// dialects: the training IR calls it in place, the core-ATen dialect through
// higher_order.auto_functionalized_v2 and buffer_mutation outputs. Both run as the kiln
// extension op of the same name (Note [Extension ops that write several arguments]),
// with PyTorch's output and buffers, twice in a row.
TEST(Pt2, CustomOpsThatWriteSeveralArgumentsInBothDialects) {
  testing::expect_error([&] { read_pt2(archive("custom_op_mutating_core")); },
                        ErrorKind::unsupported,
                        "kilntest.step2.default (node 'auto_functionalized_v2') (through "
                        "higher_order.auto_functionalized_v2)");
  define_op({.schema = "kilntest::step2(Tensor(a!) x, Tensor(b!) y, Tensor z) -> Tensor",
             .meta =
                 [](const ops::OpCall& c, ops::MetaOut& out) {
                   out.fresh(c.args.tensor(2).shape(), c.args.tensor(2).dtype());
                 },
             .library = "the pt2 test",
             .cpu =
                 [](const ops::OpCall& c, std::span<Tensor> outs) {
                   const Tensor &x = c.args.tensor(0), &y = c.args.tensor(1), &z = c.args.tensor(2);
                   KILN_CHECK(x.is_contiguous() && y.is_contiguous() && z.is_contiguous(), value,
                              "contiguous inputs only");
                   for (int64_t i = 0; i < z.numel(); ++i) {
                     x.data<float>()[i] += z.data<float>()[i];
                     y.data<float>()[i] *= z.data<float>()[i];
                     outs[0].data<float>()[i] = x.data<float>()[i] + y.data<float>()[i];
                   }
                 },
             .differentiable = false});
  // The same op writing views of buffers: slices of one, strided columns of another
  // (auto_functionalized_v2 scatters each new value into its base).
  for (std::string name : {"custom_op_views", "custom_op_views_core"}) {
    SCOPED_TRACE(name);
    NamedTensors ref = load_safetensors(kCorpus + name + ".safetensors");
    ExportedProgram p = load_pt2(archive(name));
    expect_outputs(ref, p.run(reference_inputs(ref)), name);
    for (std::string buffer : {"flat", "grid"}) {
      const Tensor* t = state_of(p, buffer);
      ASSERT_TRUE(t) << buffer;
      EXPECT_TRUE(all_close(*t, values(reference(ref, "state." + buffer)), 1e-6, 1e-6)) << buffer;
    }
  }
  for (std::string name : {"custom_op_mutating", "custom_op_mutating_core"}) {
    SCOPED_TRACE(name);
    NamedTensors ref = load_safetensors(kCorpus + name + ".safetensors");
    ExportedProgram p = load_pt2(archive(name));
    std::vector<std::string> written;
    for (const OutputSpec& o : p.signature.outputs)
      if (o.kind == OutputSpec::Kind::buffer_mutation) written.push_back(o.target);
    std::sort(written.begin(), written.end());
    EXPECT_EQ(written, (std::vector<std::string>{"scale", "total"}));
    expect_outputs(ref, p.run(reference_inputs(ref)), name);
    for (std::string buffer : {"total", "scale"}) {
      const Tensor* t = state_of(p, buffer);
      ASSERT_TRUE(t) << buffer;
      EXPECT_TRUE(all_close(*t, values(reference(ref, "state." + buffer)), 1e-6, 1e-6)) << buffer;
    }
    // A second run starts from the written buffers, as a second call of the module would.
    Tensor z = reference_inputs(ref)[0];
    std::vector<double> total = values(*state_of(p, "total")),
                        scale = values(*state_of(p, "scale"));
    std::vector<double> zt = values(tanh(z));
    p.run({z});
    for (size_t i = 0; i < zt.size(); ++i) {
      total[i] += zt[i];
      scale[i] *= zt[i];
    }
    EXPECT_TRUE(all_close(*state_of(p, "total"), total, 1e-6, 1e-6));
    EXPECT_TRUE(all_close(*state_of(p, "scale"), scale, 1e-6, 1e-6));
  }
}

// ---- bad input: each a one-line error naming the file and what is wrong (I1) ----------

// The corpus' mlp_bn_train archive with `edit` applied to the entry whose name ends with
// `suffix`.
std::string crafted(const std::string& name, const std::string& suffix,
                    const std::function<void(std::string&)>& edit) {
  std::string out = tmp(name + ".pt2");
  testing::rewrite_zip(
      archive("mlp_bn_train"), out, [&](const std::string& entry, std::string& bytes) {
        if (entry.size() >= suffix.size() &&
            entry.compare(entry.size() - suffix.size(), suffix.size(), suffix) == 0)
          edit(bytes);
        return true;
      });
  return out;
}
std::string crafted_json(const std::string& name, const std::string& suffix,
                         const std::function<void(nlohmann::json&)>& edit) {
  return crafted(name, suffix, [&](std::string& bytes) {
    nlohmann::json j = nlohmann::json::parse(bytes);
    edit(j);
    bytes = j.dump();
  });
}

// (I2) Regions PyTorch exports as higher-order ops are inlined (Corpus/regions: autocast
// off, grad mode off); one that switches autocast on is refused, naming the node.
TEST(Pt2Errors, AnAutocastRegionIsRefusedNamingIt) {
  std::string out = tmp("autocast_on.pt2");
  testing::rewrite_zip(archive("regions"), out, [&](const std::string& entry, std::string& bytes) {
    if (entry.ends_with("models/model.json")) {
      nlohmann::json j = nlohmann::json::parse(bytes);
      for (auto& node : j["graph_module"]["graph"]["nodes"])
        if (node["target"] == "torch.ops.higher_order.wrap_with_autocast")
          node["inputs"][2]["arg"]["as_bool"] = true;
      bytes = j.dump();
    }
    return true;
  });
  testing::expect_error([&] { read_pt2(out); }, ErrorKind::unsupported,
                        "an autocast region (torch.autocast enabled) is not supported");
}

TEST(Pt2Errors, CraftedArchivesAreOneClearError) {
  // the rewritten archive itself still imports (the writer is not what fails below)
  EXPECT_NO_THROW(read_pt2(crafted("unchanged", "archive_format", [](std::string&) {})));
  testing::expect_error(
      [&] { read_pt2(crafted("format", "archive_format", [](std::string& b) { b = "zip"; })); },
      ErrorKind::format, "archive_format is 'zip', not 'pt2'");
  testing::expect_error(
      [&] {
        read_pt2(crafted_json("major", "models/model.json",
                              [](nlohmann::json& j) { j["schema_version"]["major"] = 9; }));
      },
      ErrorKind::format, "schema version 9.20; kiln reads version 8.x");
  testing::expect_error(
      [&] {
        read_pt2(crafted_json("pickle", "model_weights_config.json", [](nlohmann::json& j) {
          j["config"]["fc.weight"]["use_pickle"] = true;
        }));
      },
      ErrorKind::unsupported,
      "'fc.weight' in data/weights/ is a pickled payload; kiln never unpickles");
  testing::expect_error(
      [&] {
        read_pt2(crafted_json("past_storage", "model_weights_config.json", [](nlohmann::json& j) {
          j["config"]["fc.bias"]["tensor_meta"]["storage_offset"] = {{"as_int", 3}};
        }));
      },
      ErrorKind::format,
      "'fc.bias' in data/weights/: sizes [5] and strides [1] at offset 3 reach past its storage of "
      "5");
  testing::expect_error(
      [&] {
        read_pt2(crafted_json("escape", "model_weights_config.json", [](nlohmann::json& j) {
          j["config"]["fc.bias"]["path_name"] = "../models/model.json";
        }));
      },
      ErrorKind::format, "leaves its folder");
  // an op kiln lacks: every one is listed, with its node and module path
  testing::expect_error(
      [&] {
        read_pt2(crafted_json("unknown_op", "models/model.json", [](nlohmann::json& j) {
          for (auto& n : j["graph_module"]["graph"]["nodes"]) {
            if (n["target"] == "torch.ops.aten.relu.default")
              n["target"] = "torch.ops.aten.frobnicate.default";
            if (n["target"] == "torch.ops.aten.linear.default")
              n["target"] = "torch.ops.aten.linear.fancy";
          }
        }));
      },
      ErrorKind::unsupported,
      "2 ops kiln does not map: aten.linear.fancy (node 'linear', module 'fc'); "
      "aten.frobnicate.default (node "
      "'relu') (the table is kiln/interop/ops.cpp");
  testing::expect_error(
      [&] {
        read_pt2(crafted_json("bad_arg", "models/model.json", [](nlohmann::json& j) {
          for (auto& n : j["graph_module"]["graph"]["nodes"])
            if (n["target"] == "torch.ops.aten.relu.default")
              n["inputs"].push_back({{"name", "inplace_mode"}, {"arg", {{"as_int", 2}}}});
        }));
      },
      ErrorKind::unsupported, "argument inplace_mode of aten.relu.default is not supported");
  // an error while interpreting names the node, its module and the user's source line
  testing::expect_error(
      [&] {
        read_pt2(crafted_json("bad_weight", "models/model.json", [](nlohmann::json& j) {
          for (auto& n : j["graph_module"]["graph"]["nodes"])
            if (n["target"] == "torch.ops.aten.linear.default")
              n["inputs"][1]["arg"] = {
                  {"as_tensor", {{"name", "p_bn_weight"}}}};  // a weight of the wrong shape
        }));
      },
      ErrorKind::shape, "aten.linear.default (node 'linear', module 'fc', File \"");
  testing::expect_error(
      [&] {
        read_pt2(crafted_json("dangling", "models/model.json", [](nlohmann::json& j) {
          j["graph_module"]["graph"]["nodes"][0]["inputs"][0]["arg"] = {
              {"as_tensor", {{"name", "nowhere"}}}};
        }));
      },
      ErrorKind::format, "'nowhere' is not a value defined before this node");
}

TEST(Pt2Errors, DamagedZipsAreFormatErrors) {
  std::string text = tmp("text.pt2");
  testing::write_all(text, "not a zip at all");
  testing::expect_error([&] { read_pt2(text); }, ErrorKind::format, "not a zip archive");
  testing::expect_error([&] { read_pt2(::testing::TempDir()); }, ErrorKind::format,
                        "is not a regular file");
  // an entry whose recorded size reaches past the end of the file
  std::string bytes = testing::read_all(archive("mlp_bn_train"));
  std::string past = tmp("past_end.pt2");
  {
    // the central directory record of the first weight: sizes at offsets 20 (compressed)
    // and 24 (uncompressed), its name at 46 (the archive holds other zips' records too:
    // torch.save's sample inputs)
    const std::string name = "mlp_bn_train/data/weights/weight_0";
    size_t cd = 0;
    while ((cd = bytes.find(std::string("PK\x01\x02", 4), cd + 1)) != std::string::npos)
      if (bytes.compare(cd + 46, name.size(), name) == 0) break;
    ASSERT_NE(cd, std::string::npos);
    uint32_t huge = 0x7fffffff;
    std::memcpy(&bytes[cd + 20], &huge, 4);
    std::memcpy(&bytes[cd + 24], &huge, 4);
    testing::write_all(past, bytes);
  }
  testing::expect_error(
      [&] { read_pt2(past); }, ErrorKind::format,
      "entry 'mlp_bn_train/data/weights/weight_0' reaches past the end of the file");
  // truncated: the central directory is gone
  std::string cut = tmp("truncated.pt2");
  testing::write_all(cut, testing::read_all(archive("mlp_bn_train")).substr(0, 5000));
  testing::expect_error([&] { read_pt2(cut); }, ErrorKind::format, "not a zip archive");
}

// Bytes in memory take the same path (what the fuzzer drives).
TEST(Pt2Errors, BytesInMemoryImportAsTheFileDoes) {
  std::string bytes = testing::read_all(archive("encoder"));
  ImportedProgram p = read_pt2(
      std::span(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()), "mem");
  EXPECT_EQ(p.program.state.size(), read_pt2(archive("encoder")).program.state.size());
}

}  // namespace
}  // namespace kiln
