// The kiln command, run as a user would: export -> show -> run, device maps, errors.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "kiln/kiln.h"
#include "program_file.h"
#include "test_util.h"

namespace {

struct Result {
  int code;
  std::string out;  // stdout and stderr
};

// Runs a shell command; its exit status and what it printed (stdout and stderr).
Result shell(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  Result r{-1, ""};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

Result kiln_cmd(const std::string& args, const std::string& env = "KILN_CPU_DEVICES=2") {
  return shell(env + " " + KILN_CLI + " " + args);
}

std::string tmp(const std::string& name) { return ::testing::TempDir() + "cli_" + name; }

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Cli, ExportShowRunEveryReferenceModel) {
  for (const std::string model : {"mlp", "gpt", "bn_mlp"}) {
    SCOPED_TRACE(model);
    std::string file = tmp(model + ".kiln");
    Result e = kiln_cmd("export --model " + model + " --set batch=4 -o " + file);
    ASSERT_EQ(e.code, 0) << e.out;
    EXPECT_TRUE(has(e.out, "exported " + model)) << e.out;
    Result s = kiln_cmd("show " + file);
    ASSERT_EQ(s.code, 0) << s.out;
    EXPECT_TRUE(has(s.out, "signature:")) << s.out;
    EXPECT_TRUE(has(s.out, "user_input input_0")) << s.out;
    Result r = kiln_cmd("run " + file + " --repeat 3 --outputs " + file + ".out");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(has(r.out, "3 run(s), median")) << r.out;
    kiln::NamedTensors outs = kiln::load_safetensors(file + ".out");
    ASSERT_EQ(outs.size(), 1u);
    EXPECT_EQ(outs[0].first, "output_0");
    EXPECT_EQ(outs[0].second.size(0), 4);
  }
}

// (I1-I4) .pt2 archives: kiln show and kiln run read them, kiln import writes a program
// file that runs without the importer; the results are PyTorch's (tests/pt2).
TEST(Cli, ImportShowAndRunPt2Archives) {
  std::string corpus = std::string(KILN_TEST_DATA) + "/pt2/";
  Result s = kiln_cmd("show " + corpus + "cnn.pt2 --format html -o " + tmp("cnn.html"));
  ASSERT_EQ(s.code, 0) << s.out;
  std::string file = tmp("encoder.kiln"), out = tmp("encoder_out.safetensors");
  Result i = kiln_cmd("import " + corpus + "encoder.pt2 -o " + file);
  ASSERT_EQ(i.code, 0) << i.out;
  EXPECT_TRUE(has(i.out, "imported")) << i.out;
  Result r =
      kiln_cmd("run " + file + " --inputs " + corpus + "encoder.safetensors --outputs " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  kiln::Tensor want =
      kiln::load_safetensors(corpus + "encoder.safetensors").at(2).second;  // output_0
  std::vector<float> got = kiln::to_vector<float>(kiln::load_safetensors(out)[0].second),
                     ref = kiln::to_vector<float>(want);
  ASSERT_EQ(got.size(), ref.size());
  for (size_t k = 0; k < got.size(); ++k)
    EXPECT_NEAR(got[k], ref[k], 1e-5 + 1e-5 * std::abs(ref[k]));
  // a program exported on cuda:0, run directly from the archive on a virtual CPU
  Result c = kiln_cmd("run " + corpus + "mlp_cuda0.pt2 --device-map cuda:0=cpu:1 --inputs " +
                      corpus + "mlp_cuda0.safetensors");
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_TRUE(has(c.out, "kiln: note: input_0.shape[0] (s77) is symbolic: s0 in [1, 64]"))
      << c.out;  // (Y1)
  EXPECT_TRUE(has(c.out, "on cpu:1")) << c.out;
  // a damaged archive: exit 1, one line
  std::string bad = tmp("bad.pt2");
  { std::ofstream(bad, std::ios::binary) << "PK\x03\x04 and then nothing"; }
  Result b = kiln_cmd("run " + bad);
  EXPECT_EQ(b.code, 1) << b.out;
  EXPECT_EQ(std::count(b.out.begin(), b.out.end(), '\n'), 1) << b.out;
  EXPECT_TRUE(has(b.out, "kiln: error: [import]")) << b.out;
  // import refuses to write over its own archive
  EXPECT_EQ(kiln_cmd("import " + bad + " -o " + bad).code, 1);
}

TEST(Cli, RunWithInputsMatchesTheLibrary) {
  std::string file = tmp("mlp_io.kiln"), in = tmp("mlp_in.safetensors"),
              out = tmp("mlp_out.safetensors");
  ASSERT_EQ(
      kiln_cmd("export --model mlp --set batch=2 --set width=16 --set layers=2 --seed 5 -o " + file)
          .code,
      0);
  kiln::Tensor x = kiln::randn({2, 16});
  kiln::save_safetensors({{"input_0", x}}, in);
  Result r = kiln_cmd("run " + file + " --inputs " + in + " --outputs " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  kiln::ExportedProgram p = kiln::load_program(file);
  kiln::Tensor want = p.run({x})[0];
  EXPECT_EQ(kiln::to_vector<float>(kiln::load_safetensors(out)[0].second),
            kiln::to_vector<float>(want));
}

TEST(Cli, DeviceMapRetargets) {
  std::string file = tmp("gpt_cuda.kiln");
  ASSERT_EQ(kiln_cmd("export --model gpt --trace-device cuda:0 -o " + file).code, 0);
  Result missing = kiln_cmd("run " + file);
  EXPECT_EQ(missing.code, 1);
  EXPECT_TRUE(has(missing.out, "kiln: error: [load]")) << missing.out;
  EXPECT_TRUE(has(missing.out, "the program's devices: cuda:0)"))
      << missing.out;  // numbers name no device
  EXPECT_TRUE(has(missing.out, "--device-map cuda:0=cpu:0")) << missing.out;
  Result r = kiln_cmd("run " + file + " --device-map cuda:0=cpu:1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "output_0: f32[2, 32, 256]@cpu:1")) << r.out;
  Result bad = kiln_cmd("run " + file + " --device-map cuda:0=cpu:5");
  EXPECT_EQ(bad.code, 1);
  EXPECT_TRUE(has(bad.out, "needs cuda:0 (mapped to cpu:5)")) << bad.out;
  Result malformed = kiln_cmd("run " + file + " --device-map cuda:0");
  EXPECT_EQ(malformed.code, 1);
  EXPECT_TRUE(has(malformed.out, "--device-map entry 'cuda:0' is not OLD=NEW")) << malformed.out;
  Result by_type = kiln_cmd("run " + file + " --device-map cuda=cpu:1");  // (X3) a type key
  ASSERT_EQ(by_type.code, 0) << by_type.out;
  EXPECT_TRUE(has(by_type.out, "output_0: f32[2, 32, 256]@cpu:1")) << by_type.out;
  Result typo = kiln_cmd("run " + file + " --device-map cuda:1=cpu:1");
  EXPECT_EQ(typo.code, 1);
  EXPECT_TRUE(has(typo.out, "'cuda:1' matches no device of the program (its devices: cuda:0)"))
      << typo.out;
  Result bad_device = kiln_cmd("run " + file + " --device-map cuda:0=gpu:1");
  EXPECT_EQ(bad_device.code, 1);
  EXPECT_TRUE(has(bad_device.out, "unknown device type 'gpu'")) << bad_device.out;
}

TEST(Cli, ShowJsonMatchesTheProgram) {
  std::string file = tmp("bn.kiln");
  ASSERT_EQ(kiln_cmd("export --model bn_mlp --train -o " + file).code, 0);
  Result s = kiln_cmd("show " + file + " --format json");
  ASSERT_EQ(s.code, 0) << s.out;
  nlohmann::json j = nlohmann::json::parse(s.out);
  kiln::ExportedProgram p = kiln::read_program(file);
  EXPECT_EQ(j["num_nodes"].get<size_t>(), p.graph.size());
  EXPECT_EQ(j["signature"]["inputs"].size(), p.signature.inputs.size());
  EXPECT_EQ(j["signature"]["outputs"][0]["kind"], "buffer_mutation");  // running stats, train mode
  EXPECT_EQ(j["state"].size(), p.state.size());
  Result dot = kiln_cmd("show " + file + " --format dot");
  EXPECT_TRUE(has(dot.out, "digraph kiln {")) << dot.out;
}

// ---- kiln show --format html: the viewer page, and the page in a real browser ----

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The program JSON embedded in a viewer page.
nlohmann::json embedded_program(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"program\">";
  size_t at = page.find(open);
  EXPECT_NE(at, std::string::npos);
  at += open.size();
  std::string data = page.substr(at, page.find("</script>", at) - at);
  for (size_t i = 0; (i = data.find("<\\/", i)) != std::string::npos;) data.erase(i + 1, 1);
  return nlohmann::json::parse(data);
}

TEST(CliShowHtml, OneSelfContainedPage) {
  std::string file = tmp("html_gpt.kiln"), page = tmp("html_gpt.html");
  ASSERT_EQ(kiln_cmd("export --model gpt -o " + file).code, 0);
  Result r = kiln_cmd("show " + file + " --format html -o " + page);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "");  // the page went to the file
  std::string html = read_file(page);
  for (const char* outside : {"http:", "https:", "<link", "src=", "@import", "url("})
    EXPECT_FALSE(has(html, outside)) << "the page refers to something outside it: " << outside;
  nlohmann::json j = embedded_program(html);
  kiln::ExportedProgram p = kiln::read_program(file);
  EXPECT_EQ(j["nodes"].size(), p.graph.size());
  EXPECT_EQ(j["state"].size(), p.state.size());
  Result bad = kiln_cmd("show " + tmp("absent.kiln") + " --format html -o " + page);
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(read_file(page), html) << "a failed show must leave the file as it was";
}

TEST(CliShowHtml, DotHasModuleClustersAndDeviceColours) {
  std::string file = tmp("dot_gpt.kiln");
  ASSERT_EQ(kiln_cmd("export --model gpt -o " + file).code, 0);
  Result dot = kiln_cmd("show " + file + " --format dot");
  ASSERT_EQ(dot.code, 0) << dot.out;
  EXPECT_TRUE(has(dot.out, "subgraph \"cluster_blocks\" {")) << dot.out;
  EXPECT_TRUE(has(dot.out, "subgraph \"cluster_blocks.0.attn\" {")) << dot.out;
  EXPECT_TRUE(has(dot.out, "fillcolor=\"#b2d7ff\"")) << dot.out;  // slot 0
  // a parameter sits in its module's cluster
  size_t cluster = dot.out.find("subgraph \"cluster_blocks.0.ln1\""),
         param = dot.out.find("\"p_blocks_0_ln1_weight\" [");
  EXPECT_LT(cluster, param);
}

// The page in a headless Chromium: `#selftest` makes the page count its nodes and
// modules, expand a module, click a node, search, render everything, and write what it
// saw into the DOM, which --dump-dom prints. A screenshot is kept next to the test.
TEST(CliShowHtml, WorksInABrowser) {
  if (std::system("command -v chromium >/dev/null 2>&1") != 0)
    GTEST_SKIP()
        << "chromium is not installed: KILN_WITH_BROWSER=1 scripts/install-deps.sh installs it";
  for (const std::string layers : {"2", "12"}) {
    SCOPED_TRACE("layers=" + layers);
    std::string file = tmp("browser_gpt" + layers + ".kiln"),
                page = tmp("browser_gpt" + layers + ".html");
    ASSERT_EQ(kiln_cmd("export --model gpt --set layers=" + layers + " -o " + file).code, 0);
    ASSERT_EQ(kiln_cmd("show " + file + " --format html -o " + page).code, 0);
    std::string url = "file://" + std::filesystem::absolute(page).string() + "#selftest";
    std::string browser =
        "timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars "
        "--window-size=1400,900 --virtual-time-budget=10000 ";
    Result dom = shell(browser + "--dump-dom '" + url + "' 2>/dev/null");
    ASSERT_EQ(dom.code, 0) << dom.out;
    const std::string open = "<pre id=\"selftest-result\">";
    size_t at = dom.out.find(open);
    ASSERT_NE(at, std::string::npos) << "the page did not run its self-test:\n"
                                     << dom.out.substr(0, 2000);
    at += open.size();
    nlohmann::json r = nlohmann::json::parse(dom.out.substr(at, dom.out.find("</pre>", at) - at));
    kiln::ExportedProgram p = kiln::read_program(file);
    int blocks = std::stoi(layers);
    EXPECT_EQ(r["nodes"].get<size_t>(), p.graph.size());
    // wte, wpe, blocks, ln_f, head, and per block: itself, ln1, ln2, attn, attn.qkv,
    // attn.proj, fc, proj
    EXPECT_EQ(r["modules"].get<int>(), 5 + 8 * blocks) << r;
    EXPECT_LT(r["units_collapsed"].get<int>(), 12) << r;  // the top-level modules, folded
    EXPECT_EQ(r["expanded"], "blocks") << r;
    EXPECT_EQ(r["units_expanded"].get<int>(), r["units_collapsed"].get<int>() - 1 + blocks) << r;
    EXPECT_EQ(r["panel_title"], "%" + r["clicked"].get<std::string>()) << r;
    EXPECT_EQ(r["search_hits"].get<int>(), 1) << r;  // the parameter wte.weight
    EXPECT_EQ(r["state_rows"].get<size_t>(), p.state.size()) << r;
    EXPECT_EQ(r["units_all"].get<size_t>(), p.graph.size()) << r;  // all expanded: every node
    EXPECT_LT(r["full_render_ms"].get<double>(), 1000) << r;
    EXPECT_LT(r["page_ms"].get<double>(), 1000) << r;
    // The screenshot stays in the test's working directory (build/tests) as an artifact.
    std::string shot = std::filesystem::absolute("kiln_viewer_gpt" + layers + ".png").string();
    std::filesystem::remove(shot);
    Result s = shell(browser + "--screenshot=" + shot + " '" + url + "'");
    ASSERT_EQ(s.code, 0) << s.out;
    EXPECT_GT(std::filesystem::file_size(shot), 10000u) << "screenshot " << shot;
    std::printf("screenshot of the viewer: %s\n", shot.c_str());
  }
}

TEST(Cli, ErrorsAreOneLineWithNonZeroExit) {
  Result no_file = kiln_cmd("show " + tmp("absent.kiln"));
  EXPECT_EQ(no_file.code, 1);
  EXPECT_TRUE(has(no_file.out, "kiln: error: [load] cannot open")) << no_file.out;
  std::string junk = tmp("junk.kiln");
  FILE* f = std::fopen(junk.c_str(), "wb");
  std::fputs("not a program", f);
  std::fclose(f);
  Result bad = kiln_cmd("show " + junk);
  EXPECT_EQ(bad.code, 1);
  EXPECT_TRUE(has(bad.out, "truncated")) << bad.out;
  Result model = kiln_cmd("export --model resnet -o " + tmp("x.kiln"));
  EXPECT_EQ(model.code, 1);
  EXPECT_TRUE(has(model.out, "unknown reference model 'resnet'")) << model.out;
  Result usage = kiln_cmd("frobnicate");
  EXPECT_NE(usage.code, 0);
  EXPECT_EQ(usage.code, 2);
  // A malformed environment is an error on first use, never a crash.
  for (const char* cmd : {"demo", "export --model mlp -o /dev/null"}) {
    Result env = kiln_cmd(cmd, "KILN_CPU_DEVICES=abc");
    EXPECT_EQ(env.code, 1) << cmd;
    EXPECT_TRUE(
        has(env.out, "kiln: error: KILN_CPU_DEVICES must be an integer in 1..1024, got 'abc'"))
        << env.out;
  }
  // So are the CPU backend's switches (Note [Intra-op threads], [oneDNN for f32 GEMM],
  // [Portable kernels]): reported at the first CPU kernel, nothing written.
  for (const auto& [env, message] : std::vector<std::pair<std::string, std::string>>{
           {"KILN_NUM_THREADS=0", "KILN_NUM_THREADS must be an integer in 1.."},
           {"KILN_NUM_THREADS=4096", "KILN_NUM_THREADS must be an integer in 1.."},
           {"KILN_NUM_THREADS=two", "KILN_NUM_THREADS must be an integer in 1.."},
           {"KILN_GEMM=mkl", "KILN_GEMM must be 'openblas' or 'onednn', got 'mkl'"},
           {"KILN_CPU_ISA=sse9", "KILN_CPU_ISA must be 'base', 'avx2' or 'avx512', got 'sse9'"}}) {
    std::string out = tmp("env.kiln");
    std::remove(out.c_str());
    Result r = kiln_cmd("export --model mlp -o " + out, "KILN_CPU_DEVICES=2 " + env);
    EXPECT_EQ(r.code, 1) << env;
    EXPECT_TRUE(has(r.out, "kiln: error: " + message)) << r.out;
    if (has(env, "4096")) {
      EXPECT_TRUE(has(r.out, "(the CPUs this process may run on), got '4096'")) << r.out;
    }
    EXPECT_FALSE(std::filesystem::exists(out)) << env;
  }
}

TEST(Cli, DemoPerformsTheMainJob) {
  Result d = kiln_cmd("demo");
  ASSERT_EQ(d.code, 0) << d.out;
  EXPECT_TRUE(has(d.out, "export")) << d.out;
  EXPECT_TRUE(has(d.out, "-> all mapped to cpu:0")) << d.out;
  EXPECT_TRUE(has(d.out, "-> OK")) << d.out;
}

// The first hour: exit codes, --version, what export can build, a summary before the
// graph, structured JSON nodes, and errors that say what to do.
TEST(Cli, FirstHour) {
  EXPECT_EQ(kiln_cmd("frobnicate").code, 2);  // usage errors are 2, failures 1
  EXPECT_EQ(kiln_cmd("run").code, 2);
  Result version = kiln_cmd("--version");
  EXPECT_EQ(version.code, 0);
  EXPECT_EQ(version.out, std::string("kiln ") + kiln::version() + "\n");  // kiln/version.h
  Result help = kiln_cmd("export --help");
  EXPECT_EQ(help.code, 0);
  for (const kiln::nn::ReferenceModelInfo& m : kiln::nn::reference_models()) {
    EXPECT_TRUE(has(help.out, m.name)) << help.out;
    for (const auto& [key, value] : m.defaults)
      EXPECT_TRUE(has(help.out, key + "=" + std::to_string(value)));
  }
  Result key = kiln_cmd("export --model mlp --set depth=3 -o " + tmp("k.kiln"));
  EXPECT_EQ(key.code, 1);
  EXPECT_TRUE(has(key.out,
                  "'mlp' has no setting 'depth'; its settings: batch (default 64), layers "
                  "(default 8), width (default 512)"))
      << key.out;

  std::string file = tmp("first.kiln");
  ASSERT_EQ(kiln_cmd("export --model mlp --set batch=2 --set layers=1 -o " + file).code, 0);
  Result show = kiln_cmd("show " + file);
  ASSERT_EQ(show.code, 0) << show.out;
  EXPECT_EQ(show.out.find("program: 6 nodes\ndevices: cpu:0\nstate: 2 tensors"), 0u) << show.out;
  EXPECT_LT(show.out.find("signature:"), show.out.find("graph:")) << show.out;
  nlohmann::json j = nlohmann::json::parse(kiln_cmd("show " + file + " --format json").out);
  ASSERT_EQ(j["nodes"].size(), 6u);  // 2 parameters, the input, linear, relu, output
  EXPECT_EQ(j["nodes"][3]["target"], "linear");
  EXPECT_EQ(j["nodes"][3]["meta"][0]["shape"], nlohmann::json({2, 512}));
  EXPECT_EQ(j["device_table"], nlohmann::json({"cpu:0"}));

  Result more = kiln_cmd("run " + file + " --device-map cpu:0=cpu:7");
  EXPECT_EQ(more.code, 1);
  EXPECT_TRUE(has(more.out, "or set KILN_CPU_DEVICES=8 for virtual CPU devices cpu:0..cpu:7"))
      << more.out;
  Result warm = kiln_cmd("run " + file + " --warmup 3 --repeat 2");
  EXPECT_EQ(warm.code, 0) << warm.out;
  EXPECT_TRUE(has(warm.out, ": 2 run(s), median")) << warm.out;
  if (kiln::device_count(kiln::DeviceType::cuda) == 0) {  // fails before exporting anything
    Result gpu = kiln_cmd("demo --device cuda:0");
    EXPECT_EQ(gpu.code, 1);
    EXPECT_EQ(
        gpu.out.find("kiln: error: [demo] cannot run on cuda:0: this machine has 0 cuda device(s); "
                     "run on a local device, e.g. --device cpu:0"),
        0u)
        << gpu.out;
  }
}

// Sizes no machine can hold are one-line errors with exit 1, never a hang, a crash or an
// escaped std::bad_alloc.
TEST(Cli, ImpossibleSizesAreOneLineErrors) {
  Result wide =
      kiln_cmd("export --model mlp --set width=4294967296 --set batch=1 --set layers=1 -o " +
               tmp("wide.kiln"));
  EXPECT_EQ(wide.code, 1) << wide.out;
  EXPECT_TRUE(has(wide.out,
                  "kiln: error: [rand] size [4294967296, 4294967296] has more elements "
                  "than int64 can hold"))
      << wide.out;
  Result oom =
      kiln_cmd("export --model mlp --set width=100000000 --set layers=1 -o " + tmp("oom.kiln"));
  EXPECT_EQ(oom.code, 1) << oom.out;
  EXPECT_TRUE(has(oom.out, "kiln: error: [alloc] cpu:0 is out of memory")) << oom.out;
  // One line from kiln (sanitizer builds may add their own warnings before it).
  EXPECT_EQ(oom.out.find("kiln: error"), oom.out.rfind("kiln: error")) << oom.out;
}

TEST(Cli, RunReportsMedianAndP90) {
  std::string file = tmp("timed.kiln");
  ASSERT_EQ(kiln_cmd("export --model mlp --set batch=2 -o " + file).code, 0);
  Result r = kiln_cmd("run " + file + " --repeat 50");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, ": 50 run(s), median ")) << r.out;
  EXPECT_TRUE(has(r.out, " ms, p90 ")) << r.out;
}

TEST(Cli, ProfileListsTheTimePerOp) {
  std::string file = tmp("profiled.kiln");
  ASSERT_EQ(kiln_cmd("export --model mlp --set batch=2 --set layers=2 -o " + file).code, 0);
  Result r = kiln_cmd("run " + file + " --repeat 3 --profile");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "time per op (3 profiled run(s); per run):")) << r.out;
  // calls per run; each relu is its linear's epilogue (Note [Product epilogues])
  EXPECT_TRUE(has(r.out, "\n    linear+relu                          2 ")) << r.out;
  Result shapes = kiln_cmd("run " + file + " --profile-shapes");
  EXPECT_EQ(shapes.code, 0) << shapes.out;
  EXPECT_TRUE(has(shapes.out, "%  f32[2, 512], f32[512, 512], f32[512]")) << shapes.out;
  std::string train = tmp("profiled_train.kiln");
  ASSERT_EQ(
      kiln_cmd("export --model mlp --set batch=2 --set layers=2 --train sgd -o " + train).code, 0);
  Result t = kiln_cmd("train " + train + " --steps 2 --profile");
  EXPECT_EQ(t.code, 0) << t.out;
  EXPECT_TRUE(has(t.out, "time per op (2 profiled run(s); per run):")) << t.out;
  EXPECT_TRUE(has(t.out, "\n    linear_backward ")) << t.out;
}

// kill -9 at random moments of a save: the file is always the complete old or the
// complete new program, and the temporaries killed saves leave are removed by the next
// save to the same path.
TEST(Cli, KilledSavesNeverCorruptTheFile) {
  using namespace kiln;
  namespace fs = std::filesystem;
  fs::path dir = fs::path(::testing::TempDir()) / "kiln_crash";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string a = (dir / "a.kiln").string(), b = (dir / "b.kiln").string(),
              target = (dir / "target.kiln").string();
  for (int seed : {1, 2}) {
    nn::ReferenceModel ref = nn::make_reference_model("mlp", {{"width", 512}, {"layers", 4}}, seed);
    save(export_program(*ref.module, ref.example_inputs), seed == 1 ? a : b);
  }
  auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string bytes_a = read(a), bytes_b = read(b);
  ASSERT_NE(bytes_a, bytes_b);
  fs::copy_file(a, target);
  std::mt19937 rng(2024);
  int saw_b = 0;
  for (int trial = 0; trial < 60; ++trial) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t pid = ::fork();
    if (pid == 0) {  // the child only execs: no library state crosses the fork
      ::dup2(ready[1], 1);
      ::execl(KILN_SAVE_LOOP, KILN_SAVE_LOOP, a.c_str(), b.c_str(), target.c_str(), nullptr);
      ::_exit(127);
    }
    ::close(ready[1]);
    char buf[8];
    ASSERT_GT(::read(ready[0], buf, sizeof buf), 0);  // both programs loaded; saving starts
    ::close(ready[0]);
    ::usleep(static_cast<useconds_t>(rng() % 30000));
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    std::string now = read(target);
    ASSERT_TRUE(now == bytes_a || now == bytes_b)
        << "trial " << trial << ": " << now.size() << " bytes";
    saw_b += now == bytes_b;
    EXPECT_NO_THROW(load_program(target));
  }
  EXPECT_GT(saw_b, 0);  // the saves did land
  save(read_program(a), target);
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find("kiln-tmp"), std::string::npos) << e.path();
}

}  // namespace

namespace kiln {
namespace {

// (J4) `kiln export --train sgd|adamw` writes a train-step program; `kiln train` runs it
// (here on cpu:1 although it was traced for cuda:0) and saves the trained parameters.
TEST(CliTrain, ExportTrainAndSave) {
  std::string file = tmp("mlp_train.kiln"), weights = tmp("mlp_weights.safetensors");
  Result e = kiln_cmd(
      "export --model mlp --set width=32 --set layers=2 --train sgd --trace-device cuda:0 -o " +
      file);
  ASSERT_EQ(e.code, 0) << e.out;
  ExportedProgram p = read_program(file);
  EXPECT_EQ(p.signature.outputs.back().kind, OutputSpec::Kind::gradient_to_parameter);
  Result t = kiln_cmd("train " + file + " --steps 25 --device-map cuda:0=cpu:1 --save " + weights);
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_TRUE(has(t.out, "25 step(s), loss")) << t.out;
  NamedTensors saved = load_safetensors(weights);  // parameters, SGD momentum, lr, progress
  ASSERT_EQ(saved.size(), 4u + 4u + 1u + 1u);
  std::map<std::string, Tensor> by_name(saved.begin(), saved.end());
  EXPECT_TRUE(by_name.count("optimizer.0.weight.momentum_buffer"));
  EXPECT_TRUE(by_name.count("optimizer.lr"));
  ASSERT_TRUE(by_name.count("0.weight"));
  EXPECT_EQ(by_name["0.weight"].shape(), Dims({32, 32}));
  EXPECT_EQ(by_name["2.bias"].shape(), Dims({32}));
  // The loss falls on the synthetic batch.
  double first = std::stod(t.out.substr(t.out.find("loss ") + 5));
  double last = std::stod(t.out.substr(t.out.find("-> ") + 3));
  EXPECT_LT(last, first) << t.out;
}

TEST(CliTrain, BadInputIsAClearErrorAndWritesNothing) {
  std::string fwd = tmp("fwd.kiln"), file = tmp("train_bad.kiln"),
              weights = tmp("never.safetensors");
  ASSERT_EQ(kiln_cmd("export --model mlp --set width=16 --set layers=1 -o " + fwd).code, 0);
  Result no_loss = kiln_cmd("train " + fwd + " --save " + weights);
  EXPECT_EQ(no_loss.code, 1);
  EXPECT_TRUE(has(no_loss.out, "has no loss output")) << no_loss.out;
  ASSERT_EQ(
      kiln_cmd("export --model mlp --set width=16 --set layers=1 --train adamw -o " + file).code,
      0);
  std::string data = tmp("bad_batch.safetensors");
  save_safetensors({{"input_0", zeros({3, 16})}, {"input_1", zeros({64, 16})}}, data);
  Result bad = kiln_cmd("train " + file + " --data " + data + " --save " + weights);
  EXPECT_EQ(bad.code, 1);
  EXPECT_TRUE(has(bad.out,
                  "'input_0' is f32[3, 16]@cpu:0, but the program takes f32[64, 16] batches of it"))
      << bad.out;
  EXPECT_FALSE(std::filesystem::exists(weights));
  Result bad_opt = kiln_cmd("export --model mlp --train lbfgs -o " + file);
  EXPECT_EQ(bad_opt.code, 2) << bad_opt.out;
}

}  // namespace
}  // namespace kiln

#ifdef KILN_MPIEXEC
namespace kiln {
namespace {
// (C2) `kiln run` under mpirun: the program's groups bound to the MPI world, rank 0
// alone prints the summary.
TEST(CliMpi, RunUnderMpirunPrintsRankZerosSummaryOnly) {
  std::string file = tmp("dp.kiln");
  ASSERT_EQ(kiln_cmd("export --model dp_linear --trace-device cuda:0 -o " + file).code, 0);
  // (Under ASan: OpenMPI keeps memory until exit, which LeakSanitizer would report.)
  std::string cmd = std::string("KILN_CPU_DEVICES=2 ASAN_OPTIONS=detect_leaks=0 ") + KILN_MPIEXEC +
                    " -np 2 --allow-run-as-root --oversubscribe " + KILN_CLI + " run " + file +
                    " --device-map cuda:0=cpu:0 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[512];
  while (size_t got = fread(buf, 1, sizeof buf, pipe)) out.append(buf, got);
  int status = pclose(pipe);
  EXPECT_EQ(status, 0) << out;
  size_t summaries = 0;
  for (size_t at = out.find("ran "); at != std::string::npos; at = out.find("ran ", at + 1))
    ++summaries;
  EXPECT_EQ(summaries, 1u) << out;
  EXPECT_TRUE(has(out, "output_0: f32[4, 4]@cpu:0")) << out;
}

// (S5) Shard files carry the id of the save that wrote them: a shard of another save (of
// the same program saved again, or another program) is refused, never loaded as a mix.
TEST(CliMpi, ShardsOfAnotherSaveAreRefused) {
  std::string a = tmp("tp_a.kiln"), b = tmp("tp_b.kiln");
  std::string mpi = std::string("KILN_CPU_DEVICES=4 ASAN_OPTIONS=detect_leaks=0 timeout 120 ") +
                    KILN_MPIEXEC + " --allow-run-as-root --oversubscribe -np 2 ";
  for (const std::string& f : {a, b}) {
    Result saved = shell(mpi + KILN_MPI_SAVE_TP + " " + f);
    ASSERT_EQ(saved.code, 0) << saved.out;
  }
  ASSERT_EQ(shell(mpi + KILN_CLI + " run " + b).code, 0);
  std::filesystem::copy_file(a + ".shard-1-of-2", b + ".shard-1-of-2",
                             std::filesystem::copy_options::overwrite_existing);
  Result mixed = shell(mpi + KILN_CLI + " run " + b);
  EXPECT_NE(mixed.code, 0) << mixed.out;
  EXPECT_TRUE(has(mixed.out, "was not written by the save of " + b)) << mixed.out;
  Result show = kiln_cmd("show " + b);
  EXPECT_EQ(show.code, 0) << show.out;  // showing reads the global graph only
  EXPECT_TRUE(
      has(show.out, "distributed: saved by 2 rank(s) on a mesh of shape [2] with axes [\"tp\"]"))
      << show.out;
  EXPECT_TRUE(has(show.out, "blocks.0.attn.qkv.weight : [\"S(0)\"]")) << show.out;
  EXPECT_TRUE(has(show.out, "graph:")) << show.out;
}

// (C4) One rank runs a program with collectives, the other a program without: every rank
// joins the MPI world under mpirun, so the job ends with the collective's timeout error,
// never a hang in MPI's start-up (it hung in some tries before).
TEST(CliMpi, ARankThatNeverJoinsTheCollectivesEndsTheJob) {
  std::string dp = tmp("mix_dp.kiln"), mlp = tmp("mix_mlp.kiln");
  ASSERT_EQ(kiln_cmd("export --model dp_linear -o " + dp).code, 0);
  ASSERT_EQ(kiln_cmd("export --model mlp -o " + mlp).code, 0);
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto t0 = std::chrono::steady_clock::now();
    Result r = shell(std::string("KILN_CPU_DEVICES=2 KILN_COLLECTIVE_TIMEOUT=5 "
                                 "ASAN_OPTIONS=detect_leaks=0 timeout 60 ") +
                     KILN_MPIEXEC + " --allow-run-as-root --oversubscribe -np 1 " + KILN_CLI +
                     " run " + dp + " : -np 1 " + KILN_CLI + " run " + mlp);
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_NE(r.code, 124) << "the job hung: " << r.out;
    EXPECT_TRUE(has(r.out, "did not complete within 5 s (KILN_COLLECTIVE_TIMEOUT)")) << r.out;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(40)) << r.out;
  }
}

// A malformed KILN_COLLECTIVE_TIMEOUT is an error at the first collective, as every other
// KILN_* variable is, not a silent 300 s.
TEST(CliMpi, MalformedCollectiveTimeoutIsAnError) {
  std::string file = tmp("dp_timeout.kiln");
  ASSERT_EQ(kiln_cmd("export --model dp_linear --trace-device cuda:0 -o " + file).code, 0);
  Result r = shell(std::string("KILN_CPU_DEVICES=2 KILN_COLLECTIVE_TIMEOUT=abc "
                               "ASAN_OPTIONS=detect_leaks=0 timeout 120 ") +
                   KILN_MPIEXEC + " -np 2 --allow-run-as-root --oversubscribe " + KILN_CLI +
                   " run " + file + " --device-map cuda:0=cpu:0");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(
      has(r.out, "KILN_COLLECTIVE_TIMEOUT must be a number of seconds in (0, 1e6], got 'abc'"))
      << r.out;
}

// (S5) A tensor-parallel GPT saved by 2 ranks runs under `mpirun kiln run` at 2 and at
// 4 ranks (resharded on load), rank 0 printing one summary.
TEST(CliMpi, DistributedProgramRunsAtAnotherWorldSize) {
  std::string file = tmp("tp_gpt.kiln");
  std::string mpi = std::string("KILN_CPU_DEVICES=4 ASAN_OPTIONS=detect_leaks=0 timeout 120 ") +
                    KILN_MPIEXEC + " --allow-run-as-root --oversubscribe -np ";
  Result saved = shell(mpi + "2 " + KILN_MPI_SAVE_TP + " " + file);
  ASSERT_EQ(saved.code, 0) << saved.out;
  for (const char* np : {"2", "4"}) {
    Result r = shell(mpi + np + " " + KILN_CLI + " run " + file + " --repeat 2");
    EXPECT_EQ(r.code, 0) << r.out;
    size_t summaries = 0;
    for (size_t at = r.out.find("ran "); at != std::string::npos; at = r.out.find("ran ", at + 1))
      ++summaries;
    EXPECT_EQ(summaries, 1u) << r.out;
    EXPECT_TRUE(
        has(r.out, std::string("on ") + np + " ranks (DeviceMesh((" + np + ",), names=('tp',)))"))
        << r.out;
    EXPECT_TRUE(has(r.out, "output_0 (rank 0's shard): f32[2, 8, 32]@cpu:0")) << r.out;
  }
  // Outside mpirun: one rank (MPI's singleton), still resharded. (OpenMPI keeps memory
  // until exit, which LeakSanitizer would report.)
  Result plain = kiln_cmd("run " + file, "KILN_CPU_DEVICES=2 ASAN_OPTIONS=detect_leaks=0");
  EXPECT_EQ(plain.code, 0) << plain.out;
}

// (C4) A rank that dies, or leaves, while another waits in a collective: the job ends
// with an error naming what happened, within the deadline, never a hang.
struct Job {
  int status;
  double seconds;
  std::string out;
};
Job run_dead_rank(const std::string& mode) {
  std::string cmd =
      std::string("KILN_COLLECTIVE_TIMEOUT=3 ASAN_OPTIONS=detect_leaks=0 timeout 120 ") +
      KILN_MPIEXEC + " -np 2 --allow-run-as-root --oversubscribe " + KILN_MPI_DEAD_RANK + " " +
      mode + " 2>&1";
  auto t0 = std::chrono::steady_clock::now();
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[512];
  while (size_t got = fread(buf, 1, sizeof buf, pipe)) out.append(buf, got);
  int status = pclose(pipe);
  return {status, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
          out};
}

TEST(CliMpi, DeadRankEndsTheJobWithAClearError) {
  Job died = run_dead_rank("die");
  EXPECT_NE(died.status, 0) << died.out;
  EXPECT_LT(died.seconds, 60) << died.out;
  EXPECT_TRUE(has(died.out, "exited with non-zero status") ||
              has(died.out, "did not complete within"))
      << died.out;
  Job left = run_dead_rank("leave");
  EXPECT_NE(left.status, 0) << left.out;
  EXPECT_LT(left.seconds, 60) << left.out;
  EXPECT_TRUE(has(left.out, "[all_reduce(sum) #1] did not complete within 3 s")) << left.out;
  Job blocked = run_dead_rank("leave-blocking");
  EXPECT_NE(blocked.status, 0) << blocked.out;
  EXPECT_LT(blocked.seconds, 60) << blocked.out;
  EXPECT_TRUE(has(blocked.out, "[all_reduce(sum) #1] did not complete within 3 s")) << blocked.out;
}
}  // namespace
}  // namespace kiln
#endif

namespace {

// Names are the file's: whatever they hold, `kiln show` escapes them for HTML and DOT, and a
// control character (a newline forging a graph line, an ANSI escape) makes the file malformed.
TEST(CliShow, NamesCannotBreakThePageTheGraphOrTheTerminal) {
  std::string file = tmp("names.kiln"), page = tmp("names.html");
  ASSERT_EQ(kiln_cmd("export --model mlp --set layers=2 -o " + file).code, 0);
  auto scope_all = [&](const std::string& scope) {
    kiln::testing::edit_program(file, [&](nlohmann::json& p) {
      for (nlohmann::json& n : p["graph"])
        if (n["op"] == "call") n["scope"] = scope;
    });
  };
  scope_all("<!--<script>\"x\\");
  Result html = kiln_cmd("show " + file + " --format html -o " + page);
  ASSERT_EQ(html.code, 0) << html.out;
  std::string text = read_file(page);
  std::string data = text.substr(text.find("id=\"program\">"));
  data = data.substr(0, data.find("</script>"));
  EXPECT_FALSE(has(data, "<")) << "a '<' inside the embedded data";
  int scoped = 0;  // the page still reads the names as they are
  nlohmann::json shown = embedded_program(text);
  for (const nlohmann::json& n : shown["nodes"])
    scoped += n.value("scope", std::string()) == "<!--<script>\"x\\";
  EXPECT_GT(scoped, 0);
  Result dot = kiln_cmd("show " + file + " --format dot");
  ASSERT_EQ(dot.code, 0) << dot.out;
  EXPECT_TRUE(has(dot.out, "subgraph \"cluster_<!--<script>\\\"x\\\\\" {")) << dot.out;
  for (const char* bad : {"a\nb", "\x1b[2J"}) {
    scope_all(bad);
    Result r = kiln_cmd("show " + file);
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(has(r.out, "holds a control character")) << r.out;
    EXPECT_FALSE(has(r.out, "\x1b")) << "the escape reached the terminal";
  }
}

// (E3) Showing needs no kernel: a program calling an extension op this process never
// registered is shown from the schema the file stores; running it is still refused.
TEST(CliShow, ExtensionOpsThisProcessLacksAreShownFromTheirSchemas) {
  std::string file = tmp("ext_show.kiln");
  ASSERT_EQ(kiln_cmd("export --model mlp --set layers=2 -o " + file).code, 0);
  kiln::testing::edit_program(file, [](nlohmann::json& p) {
    for (nlohmann::json& n : p["graph"])
      if (n["target"] == "relu") n["target"] = "kshow::my_relu";
    p["extension_ops"] = {{{"name", "kshow::my_relu"},
                           {"schema", "kshow::my_relu(Tensor x) -> Tensor"},
                           {"library", "libmy_relu.so"}}};
  });
  Result shown = kiln_cmd("show " + file);
  ASSERT_EQ(shown.code, 0) << shown.out;
  EXPECT_TRUE(has(shown.out, "extension ops: kshow::my_relu")) << shown.out;
  EXPECT_TRUE(has(shown.out, "kshow::my_relu(%linear)")) << shown.out;
  for (const char* format : {"json", "dot", "html"})
    EXPECT_EQ(kiln_cmd("show " + file + " --format " + format + " -o " + tmp("ext_show.out")).code,
              0)
        << format;
  Result run = kiln_cmd("run " + file);
  EXPECT_EQ(run.code, 1);
  EXPECT_TRUE(
      has(run.out,
          "uses the extension op 'kshow::my_relu' (from libmy_relu.so), which is not registered"))
      << run.out;
}

// A malformed number in a program is a format error prefixed with the file, saying what
// was wrong (it said "malformed file: stod").
TEST(CliShow, MalformedNumbersNameTheFile) {
  std::string file = tmp("bad_number.kiln");
  ASSERT_EQ(kiln_cmd("export --model block -o " + file).code, 0);
  for (const char* kind : {"float", "scalar"}) {
    kiln::testing::edit_program(file, [&](nlohmann::json& p) {
      for (nlohmann::json& n : p["graph"])
        for (nlohmann::json& a : n["args"]) {
          if (std::string(kind) == "float" && a.contains("float")) a["float"] = "abc";
          if (std::string(kind) == "scalar" && a.contains("scalar") && a["scalar"].contains("f"))
            a["scalar"]["f"] = "1e";
        }
    });
    Result r = kiln_cmd("show " + file);
    EXPECT_EQ(r.code, 1) << kind;
    EXPECT_TRUE(has(r.out, "kiln: error: [load] " + file +
                               ": malformed file: a number written as a string must be "
                               "inf, -inf or nan, got '"))
        << r.out;
    EXPECT_FALSE(has(r.out, "stod")) << r.out;
  }
}

// Only regular files are read: a FIFO (or a directory) is refused at once, never waited on.
TEST(CliShow, OnlyRegularFilesAreOpened) {
  std::string fifo = tmp("fifo.kiln");
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto t0 = std::chrono::steady_clock::now();
  Result show = shell("timeout 20 " + std::string(KILN_CLI) + " show " + fifo);
  EXPECT_EQ(show.code, 1) << show.out;
  EXPECT_TRUE(has(show.out, "is not a regular file")) << show.out;
  std::string file = tmp("fifo_in.kiln");
  ASSERT_EQ(kiln_cmd("export --model mlp -o " + file).code, 0);
  Result run = shell("timeout 20 " + std::string(KILN_CLI) + " run " + file + " --inputs " + fifo);
  EXPECT_EQ(run.code, 1) << run.out;
  EXPECT_TRUE(has(run.out, "is not a regular file")) << run.out;
  EXPECT_TRUE(has(kiln_cmd("show " + ::testing::TempDir()).out, "is not a regular file"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(15));
  std::remove(fifo.c_str());
}

// Options are parsed strictly, with plain messages; usage names the program, not its path.
TEST(Cli, StrictOptionsAndPlainMessages) {
  std::string file = tmp("strict.kiln");
  ASSERT_EQ(kiln_cmd("export --model mlp --trace-device cuda:0 -o " + file).code, 0);
  for (const char* map :
       {"cuda:0=cpu:0,", ",cuda:0=cpu:0", "cuda:0=cpu:0,,cuda:0=cpu:1", "=cpu:0", "cuda:0="}) {
    Result r = kiln_cmd("run " + file + " --device-map '" + map + "'");
    EXPECT_EQ(r.code, 1) << map << ": " << r.out;
    EXPECT_TRUE(has(r.out, "--device-map")) << r.out;
  }
  Result twice = kiln_cmd("run " + file + " --device-map cuda:0=cpu:0,cuda:0=cpu:1");
  EXPECT_TRUE(has(twice.out, "--device-map maps cuda:0 twice")) << twice.out;
  Result seed = kiln_cmd("export --model mlp --seed -1 -o " + tmp("seed.kiln"));
  EXPECT_EQ(seed.code, 2) << seed.out;
  EXPECT_TRUE(has(seed.out, "--seed: '-1' is not a whole number >= 0")) << seed.out;
  Result steps = kiln_cmd("train " + file + " --steps 0");
  EXPECT_EQ(steps.code, 2) << steps.out;
  EXPECT_TRUE(has(steps.out, "'0' is not a whole number in 1..2147483647")) << steps.out;
  EXPECT_LT(steps.out.size(), 400u) << steps.out;
  Result repeat = kiln_cmd("run " + file + " --repeat 1.5");
  EXPECT_EQ(repeat.code, 2) << repeat.out;
  Result usage = kiln_cmd("run --help");
  EXPECT_TRUE(has(usage.out, "Usage: kiln run")) << usage.out;
  EXPECT_FALSE(has(usage.out, KILN_CLI)) << usage.out;
  // a load error says what to type, without C++
  Result missing = kiln_cmd("run " + file);
  EXPECT_EQ(missing.code, 1);
  EXPECT_TRUE(has(missing.out, "--device-map cuda:0=cpu:0")) << missing.out;
  EXPECT_FALSE(has(missing.out, "load_program(")) << missing.out;
  EXPECT_FALSE(has(missing.out, "{\"")) << missing.out;
}

}  // namespace

namespace {

using namespace kiln;

// `kiln train` as a tool: a dataset of many batches, epochs with shuffling, a learning
// rate and a schedule chosen at train time (no new export), a checkpoint that resumes
// training and loads into `kiln run --weights` -- the parameters bitwise those of an
// eager run of the same schedule over the same batches.
TEST(CliTrain, DatasetEpochsScheduleCheckpointResumeLikeEager) {
  const std::string sets = " --set layers=2 --set batch=4 --set width=8 --seed 7";
  std::string step = tmp("tool_step.kiln"), fwd = tmp("tool_fwd.kiln"),
              data = tmp("tool_data.safetensors");
  std::string ck1 = tmp("tool_ck1.safetensors"), ck2 = tmp("tool_ck2.safetensors");
  ASSERT_EQ(kiln_cmd("export --model mlp" + sets + " --train adamw -o " + step).code, 0);
  ASSERT_EQ(kiln_cmd("export --model mlp" + sets + " -o " + fwd).code, 0);
  manual_seed(11);
  const int64_t n = 10, batch = 4;  // two batches an epoch; the last two examples dropped
  Tensor xs = randn({n, 8}), ys = randn({n, 8});
  save_safetensors({{"input_0", xs}, {"input_1", ys}}, data);
  Result first = kiln_cmd(
      "train " + step + " --data " + data +
      " --epochs 2 --shuffle --seed 3 --lr 0.01 --schedule cosine --warmup 2 --save " + ck1);
  ASSERT_EQ(first.code, 0) << first.out;
  EXPECT_TRUE(has(first.out, "4 step(s) (2 epoch(s) of 2 batches)")) << first.out;
  Result more =
      kiln_cmd("train " + step + " --data " + data +
               " --epochs 3 --shuffle --seed 3 --lr 0.005 --resume " + ck1 + " --save " + ck2);
  ASSERT_EQ(more.code, 0) << more.out;
  EXPECT_TRUE(has(more.out, "2 step(s) (1 epoch(s) of 2 batches)")) << more.out;

  // Eager: the same model, AdamW with the rate as a tensor, the same batches and rates.
  nn::ReferenceModel ref =
      nn::make_reference_model("mlp", {{"layers", 2}, {"batch", 4}, {"width", 8}}, 7);
  TensorList params;
  for (auto& [name, t] : ref.module->named_parameters()) params.push_back(t);
  nn::AdamW opt(params, nn::AdamWOptions{.lr = 1e-3});
  Tensor lr = full({}, 0.0, {.dtype = f64});
  opt.set_hyperparameter("lr", lr);
  for (int64_t e = 0; e < 3; ++e) {
    std::vector<int64_t> order = epoch_order(n, true, 3, e);
    for (int64_t b = 0; b < n / batch; ++b) {
      int64_t s = e * 2 + b;
      fill_(lr, e < 2 ? scheduled_lr({.kind = LrSchedule::Kind::cosine, .warmup = 2}, 0.01, s, 4)
                      : 0.005);
      Tensor rows = from_vector(
          std::vector<int64_t>(order.begin() + b * batch, order.begin() + (b + 1) * batch));
      opt.zero_grad();
      nn::mse_loss((*ref.module)(TensorList{index_select(xs, 0, rows)})[0],
                   index_select(ys, 0, rows))
          .backward();
      opt.step();
    }
  }
  std::map<std::string, Tensor> saved;
  for (auto& [name, t] : load_safetensors(ck2)) saved[name] = t;
  for (auto& [name, t] : ref.module->named_parameters()) {
    ASSERT_TRUE(saved.count(name)) << name;
    EXPECT_TRUE(kiln::testing::all_close(saved[name], to_vector<double>(t), 0, 0)) << name;
  }
  std::vector<int64_t> progress = to_vector<int64_t>(saved["__kiln_progress__"]);
  EXPECT_EQ(progress, (std::vector<int64_t>{3, 6}));

  // The checkpoint runs as the forward program's weights.
  std::string in = tmp("tool_in.safetensors"), out = tmp("tool_out.safetensors");
  Tensor x = randn({4, 8});
  save_safetensors({{"input_0", x}}, in);
  Result run =
      kiln_cmd("run " + fwd + " --weights " + ck2 + " --inputs " + in + " --outputs " + out);
  ASSERT_EQ(run.code, 0) << run.out;
  Tensor want = (*ref.module)(TensorList{x})[0];
  EXPECT_TRUE(kiln::testing::all_close(load_safetensors(out)[0].second, to_vector<double>(want),
                                       1e-5, 1e-6));
  Result partial = kiln_cmd("run " + fwd + " --weights " + data);
  EXPECT_EQ(partial.code, 1);
  EXPECT_TRUE(
      has(partial.out, "lacks 4 of the program's weights: 0.weight, 0.bias, 2.weight, 2.bias"))
      << partial.out;
}

// Training never overwrites a program with a checkpoint, and a non-finite loss stops it
// with the step named (nothing saved), unless --allow-nonfinite.
TEST(CliTrain, RefusesToOverwriteProgramsAndStopsOnNonFiniteLoss) {
  std::string step = tmp("guard_step.kiln"), data = tmp("guard_nan.safetensors"),
              ck = tmp("guard_ck.safetensors");
  ASSERT_EQ(
      kiln_cmd("export --model mlp --set layers=1 --set batch=2 --set width=4 --train sgd -o " +
               step)
          .code,
      0);
  std::string before = read_file(step);
  Result over = kiln_cmd("train " + step + " --save " + step);
  EXPECT_EQ(over.code, 1);
  EXPECT_TRUE(has(over.out, "is a program file: the checkpoint would overwrite it")) << over.out;
  EXPECT_EQ(read_file(step), before);
  Tensor x = randn({6, 4});
  fill_(x, NAN);
  save_safetensors({{"input_0", x}, {"input_1", randn({6, 4})}}, data);
  std::remove(ck.c_str());
  Result nan = kiln_cmd("train " + step + " --data " + data + " --save " + ck);
  EXPECT_EQ(nan.code, 1);
  EXPECT_TRUE(has(nan.out, "the loss is nan at step 1 (epoch 1, batch 1): stopped, nothing saved"))
      << nan.out;
  EXPECT_FALSE(std::filesystem::exists(ck));
  Result on = kiln_cmd("train " + step + " --data " + data + " --allow-nonfinite --save " + ck);
  EXPECT_EQ(on.code, 0) << on.out;
  Result help = kiln_cmd("train --help");
  EXPECT_TRUE(has(help.out, "input_0, input_1")) << help.out;
  Result show = kiln_cmd("show " + step);
  EXPECT_TRUE(
      has(show.out,
          "user inputs (kiln run --inputs, kiln train --data):\n  input_0 : f32[2,4]@cpu:0\n"))
      << show.out;
}

}  // namespace
