// The kiln command, run as a user would: export -> show -> run, device maps, errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <array>
#include <cstdio>

#include "kiln/kiln.h"

namespace {

struct Result {
  int code;
  std::string out;  // stdout and stderr
};

Result kiln_cmd(const std::string& args, const std::string& env = "KILN_CPU_DEVICES=2") {
  std::string cmd = env + " " + KILN_CLI + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  Result r{-1, ""};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string tmp(const std::string& name) { return ::testing::TempDir() + "cli_" + name; }

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

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

TEST(Cli, RunWithInputsMatchesTheLibrary) {
  std::string file = tmp("mlp_io.kiln"), in = tmp("mlp_in.safetensors"), out = tmp("mlp_out.safetensors");
  ASSERT_EQ(kiln_cmd("export --model mlp --set batch=2 --set width=16 --set layers=2 --seed 5 -o " + file).code, 0);
  kiln::Tensor x = kiln::randn({2, 16});
  kiln::save_safetensors({{"input_0", x}}, in);
  Result r = kiln_cmd("run " + file + " --inputs " + in + " --outputs " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  kiln::ExportedProgram p = kiln::load_program(file);
  kiln::Tensor want = p.run({x})[0];
  EXPECT_EQ(kiln::to_vector<float>(kiln::load_safetensors(out)[0].second), kiln::to_vector<float>(want));
}

TEST(Cli, DeviceMapRetargets) {
  std::string file = tmp("gpt_cuda.kiln");
  ASSERT_EQ(kiln_cmd("export --model gpt --trace-device cuda:0 -o " + file).code, 0);
  Result missing = kiln_cmd("run " + file);
  EXPECT_EQ(missing.code, 1);
  EXPECT_TRUE(has(missing.out, "kiln: error: [load]")) << missing.out;
  EXPECT_TRUE(has(missing.out, "the program's devices: cuda:0, cpu:0")) << missing.out;
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
  // A malformed environment is an error on first use, never a crash.
  for (const char* cmd : {"demo", "export --model mlp -o /dev/null"}) {
    Result env = kiln_cmd(cmd, "KILN_CPU_DEVICES=abc");
    EXPECT_EQ(env.code, 1) << cmd;
    EXPECT_TRUE(has(env.out, "kiln: error: KILN_CPU_DEVICES must be an integer in 1..1024, got 'abc'"))
        << env.out;
  }
}

TEST(Cli, DemoPerformsTheMainJob) {
  Result d = kiln_cmd("demo");
  ASSERT_EQ(d.code, 0) << d.out;
  EXPECT_TRUE(has(d.out, "export")) << d.out;
  EXPECT_TRUE(has(d.out, "-> all mapped to cpu:0")) << d.out;
  EXPECT_TRUE(has(d.out, "-> OK")) << d.out;
}

}  // namespace
