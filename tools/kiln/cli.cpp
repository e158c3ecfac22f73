// The kiln command: demo, export, show, run, train. See `kiln --help` and README.md.
// A library (kiln::cli) so that an extension can build the command with its ops in it.
#include "kiln/cli.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "kiln/kiln.h"

extern const char kViewerHtml[];  // viewer_html.cpp, generated from viewer.html

namespace {

using namespace kiln;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// "cuda:0=cpu:1,cuda:1=cpu:2": every entry OLD=NEW, none empty (a stray comma is a typo,
// not an entry to skip), no device mapped twice.
DeviceMap parse_device_map(const std::string& text) {
  DeviceMap map;
  if (text.empty()) return map;
  for (size_t at = 0;;) {
    size_t comma = std::min(text.find(',', at), text.size());
    std::string item = text.substr(at, comma - at);
    size_t eq = item.find('=');
    KILN_CHECK(!item.empty(), value, "--device-map '{}' has an empty entry (a stray comma?)", text);
    KILN_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < item.size(), value,
               "--device-map entry '{}' is not OLD=NEW (e.g. cuda:0=cpu:0)", item);
    Device from(std::string_view(item).substr(0, eq)), to(std::string_view(item).substr(eq + 1));
    for (const auto& [seen, target] : map)
      KILN_CHECK(seen != from, value, "--device-map maps {} twice", from);
    map.emplace_back(from, to);
    if (comma == text.size()) break;
    at = comma + 1;
  }
  return map;
}

// A whole number in [lo, hi], said plainly when it is not (CLI11's own range check prints
// its bounds as doubles, 309 digits for the largest).
CLI::Validator whole_number(int64_t lo, int64_t hi) {
  std::string what = hi == INT64_MAX ? fmt::format("a whole number >= {}", lo)
                                     : fmt::format("a whole number in {}..{}", lo, hi);
  return CLI::Validator(
      [=](std::string& v) -> std::string {
        int64_t n = 0;
        auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
        if (ec != std::errc() || end != v.data() + v.size() || n < lo || n > hi)
          return fmt::format("'{}' is not {}", v, what);
        return "";
      },
      what.substr(2));
}

// "key=value" settings of a reference model.
nn::ModelConfig parse_settings(const std::vector<std::string>& sets) {
  nn::ModelConfig c;
  for (const std::string& s : sets) {
    size_t eq = s.find('=');
    KILN_CHECK(eq != std::string::npos, value, "--set '{}' is not key=value", s);
    try {
      c[s.substr(0, eq)] = std::stoll(s.substr(eq + 1));
    } catch (const std::exception&) {
      fail(ErrorKind::value, "--set '{}': the value must be an integer", s);
    }
  }
  return c;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (b >= 1024 && u < 3) b /= 1024, ++u;
  return fmt::format("{:.1f} {}", b, units[u]);
}

int64_t bytes_of(const NamedTensors& ts) {
  int64_t n = 0;
  for (const auto& [name, t] : ts) n += t.numel() * static_cast<int64_t>(t.itemsize());
  return n;
}

// Seeded inputs matching the program's user inputs (integers in [0, 8): valid ids).
TensorList random_inputs(const ExportedProgram& p, uint64_t seed) {
  manual_seed(seed);
  TensorList out;
  std::vector<ir::Node*> nodes = p.graph.inputs();
  for (size_t i = 0; i < p.signature.inputs.size(); ++i) {
    if (p.signature.inputs[i].kind != InputSpec::Kind::user_input) continue;
    const ir::ValueMeta& m = nodes[i]->meta()[0];
    TensorOptions o{.device = m.device};
    Tensor t = is_floating(m.dtype)   ? to(randn(m.shape.vec(), o), m.dtype)
               : m.dtype == DType::b8 ? gt(rand(m.shape.vec(), o), 0.5)
                                      : to(mul(rand(m.shape.vec(), o), 8.0), m.dtype);
    out.push_back(t);
  }
  return out;
}

// Run times in constant memory: exact count, min and max, and a uniform reservoir of at
// most kKeep samples (Vitter's algorithm R) for the median and p90.
class Timings {
 public:
  void add(double ms) {
    ++n_;
    lo_ = std::min(lo_, ms);
    hi_ = std::max(hi_, ms);
    if (kept_.size() < kKeep) {
      kept_.push_back(ms);
    } else if (uint64_t j = rng_() % static_cast<uint64_t>(n_); j < kKeep) {
      kept_[j] = ms;
    }
  }
  int64_t count() const { return n_; }
  double min() const { return lo_; }
  double max() const { return hi_; }
  double quantile(double q) const {
    std::vector<double> v = kept_;
    size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
  }

 private:
  static constexpr size_t kKeep = 4096;
  std::vector<double> kept_;
  std::mt19937_64 rng_{12345};
  int64_t n_ = 0;
  double lo_ = INFINITY, hi_ = -INFINITY;
};

// "Models and their --set keys (defaults): ..." for `kiln export --help`.
std::string models_help() {
  std::string s = "Models and their --set keys (defaults):\n";
  for (const nn::ReferenceModelInfo& m : nn::reference_models()) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : m.defaults) keys.push_back(fmt::format("{}={}", k, v));
    s += fmt::format("  {:<7} {}\n          {}\n", m.name, m.about, fmt::join(keys, " "));
  }
  return s;
}

// ---- kiln show ---------------------------------------------------------------------

// The summary (size, devices, state, signature) first, then the graph.
std::string show_text(const ExportedProgram& p) {
  std::string s = fmt::format("program: {} nodes\ndevices:", p.graph.size());
  for (Device d : p.devices()) s += " " + d.str();
  s += fmt::format("\nstate: {} tensors, {}\nconstants: {} tensors, {}\nworkspaces: {}\n",
                   p.state.size(), human_bytes(double(bytes_of(p.state))), p.constants.size(),
                   human_bytes(double(bytes_of(p.constants))), p.workspaces.size());
  std::vector<std::string_view> extensions;  // (E3) ops from outside kiln's table
  for (ir::Node* n : p.graph.nodes())
    if (n->opcode() == ir::Opcode::call && !ops::is_builtin(n->op()) &&
        std::find(extensions.begin(), extensions.end(), ops::op_name(n->op())) == extensions.end())
      extensions.push_back(ops::op_name(n->op()));
  if (!extensions.empty()) s += fmt::format("extension ops: {}\n", fmt::join(extensions, " "));
  // What a caller passes: the names --inputs and --data files use, with their shapes.
  std::string users;
  std::vector<ir::Node*> nodes = p.graph.inputs();
  for (size_t i = 0; i < p.signature.inputs.size() && i < nodes.size(); ++i)
    if (p.signature.inputs[i].kind == InputSpec::Kind::user_input)
      users += fmt::format("  {} : {}\n", p.signature.inputs[i].target, nodes[i]->meta()[0].str());
  if (!users.empty()) s += "user inputs (kiln run --inputs, kiln train --data):\n" + users;
  return s + p.signature_str() + "graph:\n" + p.graph.str();
}

json show_json(const ExportedProgram& p) {
  // The file's own JSON (docs/program-format.md) gives the signature and the nodes.
  json stored = json::parse(program_json(p));
  json j;
  json devices = json::array();
  for (Device d : p.devices()) devices.push_back(d.str());
  j["devices"] = devices;
  j["signature"] = stored["signature"];
  auto tensors = [](const NamedTensors& ts) {
    json a = json::array();
    for (const auto& [name, t] : ts)
      a.push_back({{"name", name},
                   {"dtype", to_string(t.dtype())},
                   {"shape", t.shape().vec()},
                   {"bytes", t.numel() * static_cast<int64_t>(t.itemsize())}});
    return a;
  };
  j["state"] = tensors(p.state);
  j["constants"] = tensors(p.constants);
  json ws = json::array();
  for (const WorkspaceRecipe& w : p.workspaces)
    ws.push_back({{"name", w.name}, {"shape", w.shape.vec()}, {"dtype", to_string(w.dtype)}});
  j["workspaces"] = ws;
  json nodes = json::array();
  std::string text = p.graph.str();
  for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
    nodes.push_back(text.substr(at, nl - at));
  j["graph"] = nodes;  // the printed graph, a line per node
  // Structured nodes as the file stores them: op, target, arguments, output metadata
  // with devices as slots of "device_table", scope.
  j["nodes"] = stored["graph"];
  j["extension_ops"] = stored.value("extension_ops", json::array());
  j["device_table"] = stored["devices"];
  j["num_nodes"] = p.graph.size();
  return j;
}

// One self-contained page (tools/kiln/viewer.html) with the program's JSON in it.
std::string show_html(const json& program) {
  // Every '<' as the JSON escape \u003c ('<' only occurs inside strings): no name can close
  // the <script> holding the data ("</script>") or open a comment there ("<!--").
  std::string data;
  for (char c : program.dump()) {
    if (c == '<')
      data += "\\u003c";
    else
      data += c;
  }
  std::string page = kViewerHtml;
  const std::string slot = "/*KILN_PROGRAM_JSON*/";
  page.replace(page.find(slot), slot.size(), data);
  return page;
}

// The module a node belongs to: its scope; for a parameter, buffer or other state
// input, the path of the module that owns it ("blocks.0.ln1" for blocks.0.ln1.weight).
std::string module_of(const ExportedProgram& p, const ir::Node* n) {
  if (!n->scope().empty() || n->opcode() != ir::Opcode::input) return n->scope();
  for (const InputSpec& s : p.signature.inputs)
    if (s.name == n->name() && s.kind != InputSpec::Kind::user_input) {
      size_t dot = s.target.rfind('.');
      return dot == std::string::npos ? "" : s.target.substr(0, dot);
    }
  return "";
}

// A name inside a DOT double-quoted string: its quotes and backslashes escaped.
std::string dot_escape(std::string_view name) {
  std::string s;
  for (char c : name) {
    if (c == '"' || c == '\\') s += '\\';
    s += c;
  }
  return s;
}

// Graphviz: nodes in nested clusters by module, filled by device slot (the HTML
// viewer's colours), edges after all clusters.
std::string show_dot(const ExportedProgram& p) {
  static constexpr const char* kPalette[] = {"#b2d7ff", "#ffd8a8", "#b2f2bb", "#ffc9c9",
                                             "#d0bfff", "#fff3bf", "#c3fae8", "#eebefa"};
  std::vector<Device> devices = p.devices();
  std::map<std::string, std::vector<const ir::Node*>> direct;  // module path -> its own nodes
  for (const ir::Node* n : p.graph.nodes()) {
    std::string path = module_of(p, n);
    direct[path].push_back(n);
    for (size_t dot = path.rfind('.'); dot != std::string::npos; dot = path.rfind('.', dot - 1)) {
      direct[path.substr(0, dot)];  // every ancestor is a cluster, even without nodes of its own
      if (dot == 0) break;
    }
  }
  auto node_line = [&](const ir::Node* n, const std::string& indent) {
    std::string label = n->opcode() == ir::Opcode::call       ? std::string(ops::op_name(n->op()))
                        : n->opcode() == ir::Opcode::input    ? "input"
                        : n->opcode() == ir::Opcode::constant ? "constant"
                                                              : "output";
    std::string meta = n->meta().empty() ? "" : "\\n" + n->meta()[0].str();
    size_t slot = 0;
    if (!n->meta().empty())
      slot = std::find(devices.begin(), devices.end(), n->meta()[0].device) - devices.begin();
    return fmt::format("{}\"{}\" [label=\"%{}\\n{}{}\", fillcolor=\"{}\"];\n", indent,
                       dot_escape(n->name()), dot_escape(n->name()), label, meta,
                       n->meta().empty() ? "#e9ecef" : kPalette[slot % std::size(kPalette)]);
  };
  std::string s =
      "digraph kiln {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", "
      "fontname=monospace];\n";
  // Clusters nest by path: a module's children are the paths one component longer.
  std::function<void(const std::string&, const std::string&)> emit =
      [&](const std::string& path, const std::string& indent) {
        for (const ir::Node* n : direct[path]) s += node_line(n, indent);
        for (const auto& [child, nodes] : direct) {
          bool is_child = path.empty()
                              ? !child.empty() && child.find('.') == std::string::npos
                              : child.size() > path.size() + 1 && child.starts_with(path + ".") &&
                                    child.find('.', path.size() + 1) == std::string::npos;
          if (!is_child) continue;
          s += fmt::format("{}subgraph \"cluster_{}\" {{\n{}  label=\"{}\"; style=dashed;\n",
                           indent, dot_escape(child), indent, dot_escape(child));
          emit(child, indent + "  ");
          s += indent + "}\n";
        }
      };
  emit("", "  ");
  for (const ir::Node* n : p.graph.nodes())
    for (const ir::Ref& r : n->inputs())
      s += fmt::format("  \"{}\" -> \"{}\";\n", dot_escape(r.node->name()), dot_escape(n->name()));
  return s + "}\n";
}

// ---- training ---------------------------------------------------------------------

// The loss a reference model trains with, and a target batch for its example inputs:
// next-token cross-entropy for the GPT (targets in [0, vocab)), mean squared error
// against a seeded random target otherwise.
struct Task {
  LossFn loss;
  TensorList batch;  // example inputs + target
};
Task reference_task(const std::string& model, nn::ReferenceModel& ref, uint64_t seed) {
  manual_seed(seed + 1);
  Task t;
  t.batch = ref.example_inputs;
  if (model == "gpt") {
    auto* gpt = dynamic_cast<nn::GPT*>(ref.module.get());
    int64_t vocab = gpt->config.vocab;
    const Tensor& ids = ref.example_inputs[0];
    t.batch.push_back(to(
        mul(rand(ids.shape().vec(), {.device = ids.device()}), static_cast<double>(vocab)), i64));
    t.loss = [vocab](nn::Module& m, const TensorList& b) {
      return nn::cross_entropy(reshape(m(b[0]), {-1, vocab}), reshape(b[1], {-1}));
    };
  } else {
    Tensor out;
    {
      autograd::NoGradGuard no_grad;
      out = (*ref.module)(ref.example_inputs)[0];
    }
    t.batch.push_back(randn_like(out));
    t.loss = [](nn::Module& m, const TensorList& b) {
      TensorList in(b.begin(), b.end() - 1);
      return nn::mse_loss(m(in)[0], b.back());
    };
  }
  return t;
}

OptimizerConfig optimizer_config(const std::string& name) {
  if (name == "adamw") return nn::AdamWOptions{.lr = 1e-3};
  if (name == "adam") return nn::AdamOptions{.lr = 1e-3};
  if (name == "rmsprop") return nn::RMSpropOptions{.lr = 1e-3};
  if (name == "adagrad") return nn::AdagradOptions{.lr = 1e-2};
  return nn::SGDOptions{.lr = 0.05, .momentum = 0.9};
}

// The position of the loss among a train-step program's returned outputs.
size_t loss_index(const ExportedProgram& p) {
  size_t k = 0;
  for (const OutputSpec& s : p.signature.outputs) {
    if (s.is_mutation()) continue;
    if (s.kind == OutputSpec::Kind::loss_output) return k;
    ++k;
  }
  fail(ErrorKind::value,
       "[train] the program has no loss output: export it with --train OPTIMIZER");
}

// ---- commands -----------------------------------------------------------------------

// The demo's training leg (J4, J5): a whole AdamW train step traced for `trace_device`,
// saved, loaded onto `target`, run 20 times, and compared with 20 eager steps there.
bool demo_training(const std::string& model, const std::string& trace_device, Device target,
                   uint64_t seed, const std::filesystem::path& dir) {
  const int steps = 20;
  nn::AdamWOptions adamw{.lr = 3e-3};
  nn::ReferenceModel ref = nn::make_reference_model(model, {}, seed);
  Task task = reference_task(model, ref, seed);
  auto t0 = Clock::now();
  ExportedProgram p = export_train_step(*ref.module, task.loss, task.batch,
                                        {.optimizer = adamw, .device = Device(trace_device)});
  std::string path = (dir / (model + "_train.kiln")).string();
  save(p, path);
  DeviceMap map;
  for (Device d : p.devices())
    if (d != target) map.emplace_back(d, target);
  ExportedProgram q = load_program(path, map);
  std::printf(
      "  train   export a train step (forward, loss, backward, AdamW) traced for %s: %zu nodes, "
      "saved, loaded onto %s   %.1f ms\n",
      trace_device.c_str(), q.graph.size(), target.str().c_str(), ms_since(t0));
  TensorList batch;
  for (const Tensor& t : task.batch) batch.push_back(to(t, target));
  runtime::Executor exec(q);
  size_t li = loss_index(q);
  std::string losses;
  t0 = Clock::now();
  for (int s = 1; s <= steps; ++s) {
    double loss = item<double>(exec.run(batch)[li]);
    if (s == 1 || s % 5 == 0) losses += fmt::format("{}{:.3f}", losses.empty() ? "" : " -> ", loss);
  }
  std::printf("  steps   %d program steps on %s, loss %s   %.2f ms/step\n", steps,
              target.str().c_str(), losses.c_str(), ms_since(t0) / steps);

  nn::ReferenceModel eager = nn::make_reference_model(model, {}, seed);  // the same weights
  eager.module->to(target);
  TensorList params;
  for (auto& [name, t] : eager.module->named_parameters()) params.push_back(t);
  nn::AdamW opt(params, adamw);
  for (int s = 1; s <= steps; ++s) {
    opt.zero_grad();
    task.loss(*eager.module, batch).backward();
    opt.step();
  }
  double diff = 0;
  NamedTensors trained = trained_parameters(q);
  auto named = eager.module->named_parameters();
  for (size_t i = 0; i < trained.size() && i < named.size(); ++i)
    diff = std::max(diff,
                    item<double>(amax(abs(to(trained[i].second, f64) - to(named[i].second, f64)))));
  bool ok = trained.size() == named.size() && diff <= 1e-5;
  std::printf("  check   max |program - eager| over the parameters after %d steps = %.3g -> %s\n",
              steps, diff, ok ? "OK" : "MISMATCH");
  return ok;
}

int cmd_demo(const std::string& model, const std::string& trace_device, const std::string& device,
             uint64_t seed) {
  Device target = resolve_device(Device(device));
  KILN_CHECK(
      target.type == DeviceType::meta || target.index < device_count(target.type), device,
      "[demo] cannot run on {}: this machine has {} {} device(s); run on a local device, e.g. "
      "--device cpu:0 (KILN_CPU_DEVICES=N gives cpu:0..cpu:N-1)",
      target, device_count(target.type), to_string(target.type));
  std::printf("kiln demo: export %s traced for %s, save, load, retarget to %s, run, compare\n",
              model.c_str(), trace_device.c_str(), target.str().c_str());
  nn::ReferenceModel ref = nn::make_reference_model(model, {}, seed);
  ref.module->eval();

  auto t0 = Clock::now();
  ExportedProgram p =
      export_program(*ref.module, ref.example_inputs, {.device = Device(trace_device)});
  double t_export = ms_since(t0);
  size_t kinds[6] = {};
  for (const InputSpec& s : p.signature.inputs) ++kinds[static_cast<int>(s.kind)];
  std::printf(
      "  export  %zu nodes; inputs: %zu parameters, %zu buffers, %zu user; %zu output(s); "
      "%zu constants   %.1f ms\n",
      p.graph.size(), kinds[0], kinds[1], kinds[4], p.signature.outputs.size(), p.constants.size(),
      t_export);

  auto dir = std::filesystem::temp_directory_path() / ("kiln-demo-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  struct RemoveDir {  // on every way out, errors included
    std::filesystem::path dir;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};
  std::string path = (dir / (model + ".kiln")).string();
  t0 = Clock::now();
  save(p, path);
  std::printf("  save    %s (%s)   %.1f ms\n", path.c_str(),
              human_bytes(double(std::filesystem::file_size(path))).c_str(), ms_since(t0));

  t0 = Clock::now();
  ExportedProgram peek = read_program(path);
  DeviceMap map;
  std::string devices;
  for (Device d : peek.devices()) {
    devices += (devices.empty() ? "" : ", ") + d.str();
    if (d != target) map.emplace_back(d, target);
  }
  ExportedProgram q = load_program(path, map);
  std::printf("  load    devices in the file: %s -> all mapped to %s   %.1f ms\n", devices.c_str(),
              target.str().c_str(), ms_since(t0));

  runtime::Executor exec(q);
  TensorList in;
  for (const Tensor& t : ref.example_inputs) in.push_back(to(t, target));
  exec.run(in);  // warm-up
  t0 = Clock::now();
  TensorList got = exec.run(in);
  double t_run = ms_since(t0);
  std::printf(
      "  run     executor on %s: %d planned values in %d buffers (%s); output %s   %.2f ms\n",
      target.str().c_str(), exec.stats().planned_values, exec.stats().buffers,
      human_bytes(double(exec.stats().planned_bytes)).c_str(), got[0].meta_str().c_str(), t_run);

  ref.module->to(target);
  t0 = Clock::now();
  TensorList want = (*ref.module)(in);
  double t_eager = ms_since(t0);
  double err = item<double>(amax(abs(to(got[0], f64) - to(want[0], f64))));
  bool ok = err <= 1e-4;
  std::printf("  eager   module forward on %s   %.2f ms\n", target.str().c_str(), t_eager);
  std::printf("  check   max |program - eager| = %.3g -> %s\n", err, ok ? "OK" : "MISMATCH");
  return ok && demo_training(model, trace_device, target, seed, dir) ? 0 : 1;
}

int cmd_export(const std::string& model, const std::vector<std::string>& sets,
               const std::string& trace_device, uint64_t seed, bool train,
               const std::string& optimizer, const std::string& out) {
  nn::ReferenceModel ref = nn::make_reference_model(model, parse_settings(sets), seed);
  ref.module->train(train);
  bool tty = ::isatty(2);
  if (tty) std::fprintf(stderr, "exporting %s ...", model.c_str());
  auto t0 = Clock::now();
  std::optional<Device> device;
  if (!trace_device.empty()) device = Device(trace_device);
  ExportedProgram p;
  if (optimizer.empty()) {
    p = export_program(*ref.module, ref.example_inputs, {.device = device});
  } else {  // (J4) a whole train step; the batch is the example inputs and a target
    Task task = reference_task(model, ref, seed);
    p = export_train_step(*ref.module, task.loss, task.batch,
                          {.optimizer = optimizer_config(optimizer), .device = device});
  }
  save(p, out);
  if (tty) std::fprintf(stderr, "\r");
  std::printf("exported %s: %zu nodes, %zu state tensors (%s), devices", model.c_str(),
              p.graph.size(), p.state.size(), human_bytes(double(bytes_of(p.state))).c_str());
  for (Device d : p.devices()) std::printf(" %s", d.str().c_str());
  std::printf(" -> %s (%.1f ms)\n", out.c_str(), ms_since(t0));
  return 0;
}

// Writes `text` to `path` through a temporary file and a rename: an existing file is
// replaced whole or not at all.
void write_atomically(const std::string& path, const std::string& text) {
  std::string tmp = fmt::format("{}.kiln-tmp.{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    out.close();
    if (!out) {
      std::filesystem::remove(tmp);
      fail(ErrorKind::value, "[show] cannot write {}", path);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    fail(ErrorKind::value, "[show] cannot write {}: {}", path, ec.message());
  }
}

// (S5) What a distributed program file says of its layout: the mesh it was saved for and
// each state tensor's placements (the shards themselves are not read).
std::string distribution_text(const json& d) {
  std::string s =
      fmt::format("distributed: saved by {} rank(s) on a mesh of shape {} with axes {}\n",
                  d.value("world", json()).dump(), d["mesh"].value("shape", json()).dump(),
                  d["mesh"].value("names", json()).dump());
  if (d.contains("placements") && d["placements"].is_object())
    for (const auto& [name, placements] : d["placements"].items())
      s += fmt::format("  {} : {}\n", name, placements.dump());
  return s;
}

// A .pt2 archive imported, with what the import decided printed as notes on stderr.
ImportedProgram read_pt2_noting(const std::string& file) {
  ImportedProgram imported = read_pt2(file);
  for (const std::string& note : imported.notes)
    std::fprintf(stderr, "kiln: note: %s\n", note.c_str());
  return imported;
}

// A kiln program file or a .pt2 archive (imported), its devices bound through `map`.
ExportedProgram load_any(const std::string& file, const DeviceMap& map) {
  if (!is_pt2_file(file)) return load_program(file, map);
  ExportedProgram p = read_pt2_noting(file).program;
  bind_devices(p, map, file);
  return p;
}

int cmd_import(const std::string& file, const std::string& out) {
  KILN_CHECK(is_pt2_file(file), value,
             "[import] {} is not a .pt2 archive (a zip torch.export.save writes)", file);
  std::error_code ec;
  KILN_CHECK(!std::filesystem::equivalent(file, out, ec), value,
             "[import] -o {} is the archive itself", out);
  ExportedProgram p = read_pt2_noting(file).program;
  save(p, out);
  std::printf("imported %s -> %s (%zu nodes, %zu state tensors, %zu constants)\n", file.c_str(),
              out.c_str(), p.graph.nodes().size(), p.state.size(), p.constants.size());
  return 0;
}

int cmd_show(const std::string& file, const std::string& format, const std::string& out) {
  // Showing needs no kernel: extension ops this process lacks are shown from their
  // stored schemas.
  ReadOptions read{.unregistered_extension_ops = ReadOptions::Unregistered::show};
  ExportedProgram p;
  json distribution;
  if (is_pt2_file(file)) {
    p = read_pt2_noting(file).program;
  } else if (dist::saved_mesh(file)) {
    std::string d;
    p = read_graph(file, d, read);
    distribution = json::parse(d);
  } else {
    p = read_program(file, read);
  }
  std::string text;
  if (format == "json" || format == "html") {
    json j = show_json(p);
    if (!distribution.is_null()) j["distribution"] = distribution;
    text = format == "json" ? j.dump(1) + "\n" : show_html(j);
  } else if (format == "dot") {
    text = show_dot(p);
  } else {
    text = show_text(p);
    if (!distribution.is_null()) text = distribution_text(distribution) + text;
  }
  if (out.empty())
    std::cout << text;
  else
    write_atomically(out, text);
  return 0;
}

// The profiled runs' time per op (--profile), per run, the most expensive first.
void print_profile(const runtime::Executor& exec, int runs, bool by_shapes) {
  std::vector<runtime::OpTime> table = exec.profile(by_shapes);
  double total = 0;
  for (const runtime::OpTime& t : table) total += t.seconds;
  std::printf("  time per op (%d profiled run(s); per run):\n", runs);
  std::printf("    %-30s %7s %10s %10s %7s\n", "op", "calls", "ms", "us/call", "share");
  for (const runtime::OpTime& t : table)
    std::printf("    %-30s %7lld %10.3f %10.2f %6.1f%%%s%s\n", t.op.c_str(),
                static_cast<long long>(t.calls / runs), t.seconds * 1e3 / runs,
                t.seconds * 1e6 / static_cast<double>(t.calls),
                100.0 * t.seconds / std::max(total, 1e-12), t.inputs.empty() ? "" : "  ",
                t.inputs.c_str());
  std::printf("    %-30s %7s %10.3f\n", "total", "", total * 1e3 / runs);
}

// ---- kiln train ----------------------------------------------------------------------

// Whether `path` holds a kiln program (a safetensors file whose metadata has one): what
// `--save` must never overwrite.
bool is_program_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  if (!in.read(reinterpret_cast<char*>(&n), 8) || n > (64u << 20)) return false;
  std::string header(n, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(n))) return false;
  json h = json::parse(header, nullptr, /*allow_exceptions=*/false);
  return h.is_object() && h.contains("__metadata__") && h["__metadata__"].is_object() &&
         h["__metadata__"].contains("kiln.program");
}

// The state entry `target` of a program, or null.
Tensor* state_entry(ExportedProgram& p, const std::string& target) {
  for (auto& [name, t] : p.state)
    if (name == target) return &t;
  return nullptr;
}

// The batches a run iterates: each user input's examples (a leading dimension of any
// length, cut into the program's batch size) or, for a directory, one file per batch.
struct Dataset {
  std::vector<std::string> targets;  // the user inputs, input_0, input_1, ...
  TensorList examples;               // per user input: all examples (a file)
  std::vector<std::string> files;    // or: one batch per file (a directory)
  int64_t batch = 0, count = 0;      // examples per batch; examples (or files)
  int64_t batches() const { return files.empty() ? count / batch : count; }
};

Dataset load_dataset(const ExportedProgram& p, const std::string& path) {
  Dataset d;
  std::vector<ir::Node*> nodes = p.graph.inputs();
  std::vector<ir::ValueMeta> metas;
  for (size_t i = 0; i < p.signature.inputs.size(); ++i)
    if (p.signature.inputs[i].kind == InputSpec::Kind::user_input) {
      d.targets.push_back(p.signature.inputs[i].target);
      metas.push_back(nodes[i]->meta()[0]);
    }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    for (const auto& e : std::filesystem::directory_iterator(path))
      if (e.path().extension() == ".safetensors") d.files.push_back(e.path().string());
    std::sort(d.files.begin(), d.files.end());
    KILN_CHECK(!d.files.empty(), value,
               "[train] --data {}: the directory has no .safetensors batch file", path);
    d.count = static_cast<int64_t>(d.files.size());
    return d;
  }
  NamedTensors given = load_safetensors(path);
  for (size_t k = 0; k < d.targets.size(); ++k) {
    auto it = std::find_if(given.begin(), given.end(),
                           [&](const auto& e) { return e.first == d.targets[k]; });
    const ir::ValueMeta& m = metas[k];
    KILN_CHECK(it != given.end(), value,
               "[train] --data {} has no tensor '{}' (the program's user input {}: {}{})", path,
               d.targets[k], k, to_string(m.dtype), m.shape.str());
    const Tensor& t = it->second;
    bool fits = m.shape.size() > 0 && t.dim() == static_cast<int64_t>(m.shape.size()) &&
                t.dtype() == m.dtype;
    for (size_t i = 1; fits && i < m.shape.size(); ++i)
      fits = t.size(static_cast<int64_t>(i)) == m.shape[i];
    KILN_CHECK(fits && t.size(0) >= m.shape[0], value,
               "[train] --data {}: '{}' is {}, but the program takes {}{} batches of it: give N >= "
               "{} examples "
               "along the first dimension, each {}{}",
               path, d.targets[k], t.meta_str(), to_string(m.dtype), m.shape.str(),
               m.shape.size() ? m.shape[0] : 0, to_string(m.dtype),
               Dims(std::vector<int64_t>(m.shape.begin() + (m.shape.size() ? 1 : 0), m.shape.end()))
                   .str());
    KILN_CHECK(k == 0 || t.size(0) == d.count, value,
               "[train] --data {}: '{}' has {} examples, '{}' {}", path, d.targets[k], t.size(0),
               d.targets[0], d.count);
    d.count = t.size(0);
    d.batch = m.shape[0];
    d.examples.push_back(t);
  }
  return d;
}

// Batch `b` of epoch order `order`, on the program's devices.
TensorList batch_of(const ExportedProgram& p, const Dataset& d, const std::vector<int64_t>& order,
                    int64_t b) {
  if (!d.files.empty())
    return load_inputs(p, d.files[static_cast<size_t>(order[static_cast<size_t>(b)])]);
  std::vector<int64_t> rows(order.begin() + b * d.batch, order.begin() + (b + 1) * d.batch);
  Tensor index = from_vector(rows);
  TensorList out;
  std::vector<ir::Node*> nodes = p.graph.inputs();
  size_t k = 0;
  for (size_t i = 0; i < p.signature.inputs.size(); ++i)
    if (p.signature.inputs[i].kind == InputSpec::Kind::user_input)
      out.push_back(to(index_select(d.examples[k++], 0, index), nodes[i]->meta()[0].device));
  return out;
}

// The checkpoint key holding (epochs done, steps done) next to the state.
constexpr const char* kProgressKey = "__kiln_progress__";

struct TrainArgs {
  std::string file, device_map, data, save_path, resume;
  int steps = 20, epochs = 1, warmup = 0;
  uint64_t seed = 0;
  bool shuffle = false, allow_nonfinite = false, profile = false, by_shapes = false;
  std::optional<double> lr, weight_decay;
  std::string schedule = "constant";
};

int cmd_train(const TrainArgs& a) {
  KILN_CHECK(a.save_path.empty() || !is_program_file(a.save_path), value,
             "[train] --save {} is a program file: the checkpoint would overwrite it; save to "
             "another file",
             a.save_path);
  ExportedProgram p = load_program(a.file, parse_device_map(a.device_map));
  size_t li = loss_index(p);
  Tensor* lr = state_entry(p, "optimizer.lr");
  Tensor* wd = state_entry(p, "optimizer.weight_decay");
  KILN_CHECK(lr, value,
             "[train] {} has no learning-rate input (exported by an older kiln): export it again",
             a.file);
  KILN_CHECK(!a.weight_decay || wd, value,
             "[train] {} was exported without weight decay: --weight-decay cannot add the term; "
             "export with it",
             a.file);
  if (a.weight_decay) fill_(*wd, *a.weight_decay);
  int64_t epochs_done = 0, steps_done = 0;
  if (!a.resume.empty()) {  // the whole state and the progress, checked before anything changes
    NamedTensors ckpt = load_safetensors(a.resume);
    for (auto& entry : p.state) {
      const std::string& name =
          entry.first;  // (a named reference: clang 14 cannot capture bindings)
      const Tensor& t = entry.second;
      auto it =
          std::find_if(ckpt.begin(), ckpt.end(), [&](const auto& e) { return e.first == name; });
      KILN_CHECK(it != ckpt.end(), value, "[train] --resume {} has no '{}' of the program's state",
                 a.resume, name);
      KILN_CHECK(it->second.shape() == t.shape() && it->second.dtype() == t.dtype(), value,
                 "[train] --resume {}: '{}' is {}, the program's is {}", a.resume, name,
                 it->second.meta_str(), t.meta_str());
    }
    for (auto& [name, t] : p.state)
      for (const auto& [key, value] : ckpt)
        if (key == name) copy_(t, value);
    for (const auto& [key, value] : ckpt)
      if (key == kProgressKey && value.numel() == 2 && value.dtype() == DType::i64) {
        std::vector<int64_t> v = to_vector<int64_t>(value);
        epochs_done = v[0], steps_done = v[1];
      }
  }
  double base_lr = a.lr ? *a.lr : item<double>(*lr);
  LrSchedule schedule{.kind = a.schedule == "cosine"   ? LrSchedule::Kind::cosine
                              : a.schedule == "linear" ? LrSchedule::Kind::linear
                                                       : LrSchedule::Kind::constant,
                      .warmup = a.warmup};

  // The batches: a dataset, or one seeded synthetic batch fitted --steps times.
  std::optional<Dataset> data;
  TensorList fixed;
  int64_t per_epoch = a.steps, epochs = 1;
  if (!a.data.empty()) {
    data = load_dataset(p, a.data);
    per_epoch = data->batches();
    epochs = a.epochs;
    KILN_CHECK(epochs > epochs_done, value,
               "[train] --resume {} has done {} epoch(s) already; ask for more with --epochs",
               a.resume, epochs_done);
  } else {
    fixed = random_inputs(p, a.seed);
    std::vector<ir::Node*> nodes = p.graph.inputs();
    size_t u = 0;
    for (size_t i = 0; i < p.signature.inputs.size(); ++i) {
      if (p.signature.inputs[i].kind != InputSpec::Kind::user_input) continue;
      const ir::ValueMeta& m = nodes[i]->meta()[0];
      if (!is_floating(m.dtype) && m.dtype != DType::b8)  // class ids / tokens: in [0, 8)
        fixed[u] = to(mul(rand(m.shape.vec(), {.device = m.device}), 8.0), m.dtype);
      ++u;
    }
    epochs_done = 0;
  }
  int64_t total = epochs * per_epoch;
  KILN_CHECK(schedule.warmup < total, value, "[train] --warmup {} is not below the run's {} steps",
             schedule.warmup, total);

  runtime::Executor exec(p);
  exec.set_profiling(a.profile);
  bool tty = ::isatty(2);
  double first = NAN, last = NAN;
  int64_t run_steps = 0;
  auto t0 = Clock::now();
  for (int64_t e = epochs_done; e < epochs; ++e) {
    std::vector<int64_t> order;
    if (data)
      order =
          epoch_order(data->files.empty() ? data->count : data->batches(), a.shuffle, a.seed, e);
    for (int64_t b = 0; b < per_epoch; ++b) {
      int64_t step = e * per_epoch + b;
      fill_(*lr, scheduled_lr(schedule, base_lr, step, total));
      TensorList out = exec.run(data ? batch_of(p, *data, order, b) : fixed);
      last = item<double>(out[li]);
      if (run_steps++ == 0) first = last;
      KILN_CHECK(std::isfinite(last) || a.allow_nonfinite, value,
                 "[train] the loss is {} at step {} (epoch {}, batch {}): stopped, nothing saved "
                 "(--allow-nonfinite goes on)",
                 last, step + 1, e + 1, b + 1);
      if (tty) {
        double secs = ms_since(t0) / 1e3;
        std::fprintf(stderr,
                     "\repoch %lld/%lld step %lld/%lld  loss %.4f  lr %.3g  %.1f steps/s   ",
                     static_cast<long long>(e + 1), static_cast<long long>(epochs),
                     static_cast<long long>(step + 1), static_cast<long long>(total), last,
                     item<double>(*lr), run_steps / std::max(secs, 1e-9));
      }
    }
    steps_done = (e + 1) * per_epoch;
  }
  double secs = ms_since(t0) / 1e3;
  if (tty) std::fprintf(stderr, "\n");
  std::printf("trained %s on", a.file.c_str());
  for (Device d : p.devices()) std::printf(" %s", d.str().c_str());
  std::printf(": %lld step(s)", static_cast<long long>(run_steps));
  if (data)
    std::printf(" (%lld epoch(s) of %lld batches)", static_cast<long long>(epochs - epochs_done),
                static_cast<long long>(per_epoch));
  std::printf(", loss %.4f -> %.4f, %.1f steps/s\n", first, last,
              static_cast<double>(run_steps) / std::max(secs, 1e-9));
  if (a.profile) print_profile(exec, static_cast<int>(run_steps), a.by_shapes);
  if (!a.save_path.empty()) {  // the whole state (parameters, buffers, optimizer) and the progress
    NamedTensors ckpt = p.state;
    ckpt.emplace_back(kProgressKey, from_vector(std::vector<int64_t>{
                                        data ? epochs : 0, data ? steps_done : run_steps}));
    save_safetensors(ckpt, a.save_path);  // atomic: never a partial file
    std::printf("  saved a checkpoint (parameters, buffers, optimizer state) to %s\n",
                a.save_path.c_str());
  }
  return 0;
}

// `kiln run --weights`: the program's parameters and persistent buffers from a
// checkpoint (or any safetensors file of them by module name); every one must be there.
void load_weights(ExportedProgram& p, const std::string& path) {
  NamedTensors given = load_safetensors(path);
  std::vector<std::string> missing;
  for (const InputSpec& s : p.signature.inputs) {
    if (s.kind != InputSpec::Kind::parameter &&
        !(s.kind == InputSpec::Kind::buffer && s.persistent))
      continue;
    Tensor* t = state_entry(p, s.target);
    auto it = std::find_if(given.begin(), given.end(),
                           [&](const auto& e) { return e.first == s.target; });
    if (!t) continue;
    if (it == given.end()) {
      missing.push_back(s.target);
      continue;
    }
    KILN_CHECK(it->second.shape() == t->shape() && it->second.dtype() == t->dtype(), value,
               "[run] --weights {}: '{}' is {}, the program's is {}", path, s.target,
               it->second.meta_str(), t->meta_str());
    copy_(*t, it->second);
  }
  KILN_CHECK(missing.empty(), value, "[run] --weights {} lacks {} of the program's weights: {}",
             path, missing.size(), fmt::join(missing, ", "));
}

// (C2) A program's collectives name their groups (mesh axes); bind each to the MPI world
// when launched by mpirun, else to this process alone. Returns this process's rank.
int bind_program_groups(const ExportedProgram& p) {
  std::set<std::string> names;
  for (ir::Node* n : p.graph.nodes()) {
    if (n->opcode() != ir::Opcode::call) continue;
    const auto& specs = ops::op_info(n->op()).schema.args;
    for (size_t i = 0; i < n->args().size() && i < specs.size(); ++i)
      if (specs[i].name == "group")
        if (auto* s = std::get_if<Str>(&n->args()[i])) names.insert(std::string(s->view()));
  }
  bool mpirun =
      std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("PMI_SIZE");
  // Under a launcher every rank joins the MPI world, collectives or not: a rank that never
  // did left the others waiting in MPI's start-up, where no collective deadline applies
  // (C4); joined, they reach their collectives and time out with an error naming them.
  if (mpirun && dist::mpi_available()) dist::mpi_world();
  if (names.empty()) return 0;
  auto group = mpirun && dist::mpi_available() ? dist::mpi_world() : dist::local_group();
  for (const std::string& name : names) dist::bind_group(name, group);
  return group->rank();
}

// (S5) A distributed program under mpirun: a mesh over every rank along the saved axes
// (one axis: all ranks; more: the saved sizes), the program lowered for this rank, seeded
// global inputs laid out as at export; rank 0 prints the summary and its shards.
int cmd_run_distributed(const std::string& file, const dist::SavedMesh& saved, int repeat,
                        uint64_t seed) {
  auto world = dist::mpi_world();
  std::vector<int64_t> shape = saved.shape;
  if (shape.size() == 1) shape[0] = world->size();
  Device device(DeviceType::cpu, world->rank() % device_count(DeviceType::cpu));
  dist::DeviceMesh mesh(world, shape, saved.names, device);
  dist::LoadedProgram loaded = dist::load_distributed(file, mesh);
  manual_seed(seed);
  TensorList inputs;
  for (size_t i = 0; i < loaded.input_meta.size(); ++i) {
    const ir::ValueMeta& m = loaded.input_meta[i];
    Tensor whole = is_floating(m.dtype) ? randn(m.shape.vec(), {.dtype = m.dtype})
                                        : zeros(m.shape.vec(), {.dtype = m.dtype});
    inputs.push_back(
        dist::to_local(dist::distribute_tensor(whole, mesh, loaded.input_placements[i])));
  }
  runtime::Executor exec(loaded.program);
  Timings times;
  TensorList outs;
  for (int i = 0; i < std::max(repeat, 1); ++i) {
    outs.clear();
    auto t0 = Clock::now();
    outs = exec.run(inputs);
    times.add(ms_since(t0));
  }
  if (world->rank() != 0) return 0;
  std::printf("ran %s on %lld ranks (%s): %lld run(s), median %.3f ms\n", file.c_str(),
              static_cast<long long>(world->size()), mesh.str().c_str(),
              static_cast<long long>(times.count()), times.quantile(0.5));
  for (size_t i = 0; i < outs.size(); ++i)
    std::printf("  output_%zu (rank 0's shard): %s\n", i, outs[i].meta_str().c_str());
  return 0;
}

// Resident memory (from /proc/self/statm) once every page of the program's host state
// and constants has been read: weights mapped from a file count as loaded, as a runtime
// that copies them would have them. The high-water mark restarts there, so what the runs
// add is peak - this.
double resident_mb_with_state(const ExportedProgram& p) {
  volatile unsigned char sink = 0;
  for (const NamedTensors* ts : {&p.state, &p.constants})
    for (const auto& entry : *ts) {
      const Tensor& t = entry.second;
      if (!t.defined() || t.device().type != DeviceType::cpu || !t.storage()) continue;
      const auto* bytes = static_cast<const unsigned char*>(t.storage()->data);
      for (size_t at = 0; at < t.storage()->nbytes; at += 4096) sink = sink + bytes[at];
    }
  // from here on the high-water mark counts the runs, not the import before them
  // (Linux 4.0+: "5" resets VmHWM to the current resident size)
  if (FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / 1e6;
}

// The high-water mark of this process's memory (VmHWM): unlike getrusage's ru_maxrss,
// which keeps the peak of whatever process exec'ed kiln, it starts at exec.
double peak_resident_mb() {
  double kb = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "VmHWM: %lf kB", &kb) == 1) break;
    std::fclose(f);
  }
  return kb * 1024 / 1e6;
}

int cmd_run(const std::string& file, const std::string& device_map, const std::string& inputs_path,
            const std::string& outputs_path, const std::string& weights, int repeat, int warmup,
            uint64_t seed, bool profile, bool by_shapes) {
  if (std::optional<dist::SavedMesh> saved =
          is_pt2_file(file) ? std::nullopt : dist::saved_mesh(file)) {
    KILN_CHECK(inputs_path.empty() && outputs_path.empty() && device_map.empty() &&
                   weights.empty() && !profile,
               value,
               "[run] {} is a distributed program: --inputs, --outputs, --weights, --device-map "
               "and --profile do "
               "not apply",
               file);
    return cmd_run_distributed(file, *saved, repeat, seed);
  }
  ExportedProgram p = load_any(file, parse_device_map(device_map));
  if (!weights.empty()) load_weights(p, weights);
  int rank = bind_program_groups(p);
  TensorList inputs;
  if (inputs_path.empty()) {
    inputs = random_inputs(p, seed);
  } else {
    inputs = load_inputs(p, inputs_path);
  }
  double loaded_mb = resident_mb_with_state(p);
  runtime::Executor exec(p);
  Timings times;
  TensorList outs;
  // The last run's outputs are dropped before the next run makes its own (as a caller
  // that consumes each result would), so one run's outputs are alive at a time.
  for (int i = 0; i < warmup; ++i) {
    outs.clear();
    outs = exec.run(inputs);
  }
  exec.set_profiling(profile);  // after the warm-up: the steady state
  bool tty = ::isatty(2) && rank == 0;
  for (int i = 0; i < std::max(repeat, 1); ++i) {
    auto t0 = Clock::now();
    outs = exec.run(inputs);
    times.add(ms_since(t0));
    if (tty && repeat > 1) std::fprintf(stderr, "\rrun %d/%d", i + 1, repeat);
  }
  if (tty && repeat > 1) std::fprintf(stderr, "\n");
  if (rank != 0) return 0;  // under mpirun, rank 0 speaks for all
  std::printf("ran %s on", file.c_str());
  for (Device d : p.devices()) std::printf(" %s", d.str().c_str());
  // four significant digits: a tiny program's microseconds must not print as 0.000 ms
  std::printf(": %lld run(s), median %.4g ms, p90 %.4g ms (min %.4g, max %.4g)\n",
              static_cast<long long>(times.count()), times.quantile(0.5), times.quantile(0.9),
              times.min(), times.max());
  for (size_t i = 0; i < outs.size(); ++i)
    std::printf("  output_%zu: %s\n", i, outs[i].meta_str().c_str());
  std::printf(
      "  memory: %.1f MB resident with the program loaded, peak %.1f MB (%.1f MB more while "
      "running; the memory plan %.1f MB)\n",
      loaded_mb, peak_resident_mb(), std::max(0.0, peak_resident_mb() - loaded_mb),
      static_cast<double>(exec.stats().planned_bytes) / 1e6);
  if (profile) print_profile(exec, static_cast<int>(times.count()), by_shapes);
  if (!outputs_path.empty()) {
    NamedTensors named;
    for (size_t i = 0; i < outs.size(); ++i)
      named.emplace_back("output_" + std::to_string(i), outs[i]);
    save_safetensors(named, outputs_path);
  }
  return 0;
}

}  // namespace

std::string kiln::show_program(const ExportedProgram& p, std::string_view format) {
  if (format == "json") return show_json(p).dump(1) + "\n";
  if (format == "html") return show_html(show_json(p));
  if (format == "dot") return show_dot(p);
  KILN_CHECK(format == "text", value, "[show] format '{}': text, json, dot or html", format);
  return show_text(p);
}

int kiln::cli_main(int argc, char** argv) {
  // named, so usage lines say `kiln`, not the path the binary was started by
  CLI::App app{"kiln: export tensor programs to portable graph files and run them on any device",
               "kiln"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kiln ") + kiln::version());
  app.footer(
      "Exit status: 0 on success, 1 when a command fails (one line on stderr), 2 for usage "
      "errors.");

  std::string model = "gpt", trace_device = "cuda:0", device = "cpu:0", out, file, format = "text",
              device_map, inputs, outputs;
  std::vector<std::string> sets;
  uint64_t seed = 0;
  int repeat = 1, warmup = 1;
  bool train = false;

  CLI::App* demo =
      app.add_subcommand("demo",
                         "The main job: export a model traced for cuda:0 (fake), "
                         "save, load, retarget to a local device, run, compare with eager");
  demo->add_option("--model", model, "reference model (see `kiln export --help`)")
      ->capture_default_str();
  demo->add_option("--trace-device", trace_device, "device to trace for")->capture_default_str();
  demo->add_option("--device", device, "device to run on")->capture_default_str();
  demo->add_option("--seed", seed, "random seed")
      ->check(whole_number(0, INT64_MAX))
      ->capture_default_str();

  CLI::App* exp = app.add_subcommand("export", "Export a reference model to a program file");
  exp->add_option("--model", model, "reference model (listed below)")->required();
  exp->add_option("--set", sets, "model setting key=value (repeatable), e.g. --set layers=4");
  exp->add_option("--trace-device", trace_device, "device to trace for (fake tensors)");
  exp->add_option("--seed", seed, "random seed of the weights and example inputs")
      ->check(whole_number(0, INT64_MAX));
  std::string optimizer;
  exp->add_option(
         "--train", optimizer,
         "without a value: export the forward in training mode (e.g. BatchNorm updates its "
         "statistics); sgd, adam, adamw, rmsprop or adagrad: export a whole train step (forward, "
         "loss, backward, update)")
      ->expected(0, 1)
      ->check(CLI::IsMember({"", "sgd", "adamw", "adam", "rmsprop", "adagrad"}));
  exp->add_option("-o,--output", out, "program file to write")->required();
  exp->footer(models_help());

  CLI::App* show = app.add_subcommand("show", "Print a program: signature, devices, sizes, graph");
  show->add_option("file", file, "program file, or a .pt2 archive (imported first)")->required();
  show->add_option("--format", format,
                   "text, json, dot or html (one self-contained page: the graph by "
                   "module, searchable)")
      ->check(CLI::IsMember({"text", "json", "dot", "html"}));
  show->add_option("-o,--output", out, "write to this file instead of stdout");

  CLI::App* trn = app.add_subcommand(
      "train", "Train with a train-step program (kiln export --train OPTIMIZER)");
  TrainArgs targs;
  std::string weights;
  trn->add_option("file", targs.file, "train-step program file")->required();
  trn->add_option(
      "--data", targs.data,
      "the dataset: a safetensors file holding each user input (input_0, input_1, ...: `kiln show` "
      "lists them with their batch shapes) with N >= batch examples along the first dimension, cut "
      "into batches (a last partial batch is dropped); or a directory of .safetensors files, one "
      "batch each. Without it: one seeded synthetic batch fitted --steps times");
  trn->add_option("--epochs", targs.epochs,
                  "passes over --data (with --resume: the total to reach)")
      ->check(whole_number(1, INT_MAX))
      ->capture_default_str();
  trn->add_flag("--shuffle", targs.shuffle,
                "a new order of the examples (or batch files) each epoch, from --seed");
  trn->add_option("--steps", targs.steps, "without --data: steps on the synthetic batch")
      ->check(whole_number(1, INT_MAX))
      ->capture_default_str();
  trn->add_option("--lr", targs.lr, "base learning rate (default: the one exported)")
      ->check(CLI::NonNegativeNumber);
  trn->add_option("--weight-decay", targs.weight_decay,
                  "weight decay (for a program exported with one)")
      ->check(CLI::NonNegativeNumber);
  trn->add_option("--schedule", targs.schedule,
                  "learning rate per step: constant, cosine (to 0) or linear (to 0)")
      ->check(CLI::IsMember({"constant", "cosine", "linear"}))
      ->capture_default_str();
  trn->add_option("--warmup", targs.warmup, "steps of linear warm-up before the schedule")
      ->check(whole_number(0, INT_MAX))
      ->capture_default_str();
  trn->add_option("--device-map", targs.device_map, "OLD=NEW[,OLD=NEW...], e.g. cuda:0=cpu:1");
  trn->add_option("--save", targs.save_path,
                  "write a checkpoint (parameters, buffers, optimizer state, progress) to this "
                  "safetensors file "
                  "(atomically; never over a program file); `kiln train --resume` and `kiln run "
                  "--weights` read it");
  trn->add_option("--resume", targs.resume, "continue from a checkpoint --save wrote");
  trn->add_flag("--allow-nonfinite", targs.allow_nonfinite,
                "go on when the loss is NaN or infinite (default: stop)");
  trn->add_flag("--profile", targs.profile,
                "print the time per op (each op timed, its device synchronized after it)");
  trn->add_flag("--profile-shapes", targs.by_shapes, "with --profile: per op and input shapes");
  trn->add_option("--seed", targs.seed, "seed of the shuffling and of the synthetic batch")
      ->check(whole_number(0, INT64_MAX));

  CLI::App* imp =
      app.add_subcommand("import",
                         "Import a PyTorch program (a .pt2 archive torch.export.save wrote) "
                         "as a kiln program file");
  imp->add_option("file", file, ".pt2 archive")->required();
  imp->add_option("-o,--output", out, "program file to write")->required();

  bool profile = false, by_shapes = false;
  CLI::App* run = app.add_subcommand("run", "Run a program on this machine's devices");
  run->add_option("file", file, "program file, or a .pt2 archive (imported first)")->required();
  run->add_option("--device-map", device_map, "OLD=NEW[,OLD=NEW...], e.g. cuda:0=cpu:1");
  run->add_option("--inputs", inputs,
                  "safetensors file with input_0, input_1, ... (`kiln show` lists them)");
  run->add_option("--weights", weights,
                  "load the parameters and buffers from a safetensors file (a `kiln train "
                  "--save` checkpoint, or tensors by module name)");
  run->add_option("--outputs", outputs,
                  "write the outputs (output_0, ...) to this safetensors file");
  run->add_option("--repeat", repeat, "number of runs to time")->check(whole_number(1, INT_MAX));
  run->add_option("--warmup", warmup, "untimed runs first")
      ->check(whole_number(0, INT_MAX))
      ->capture_default_str();
  run->add_option("--seed", seed, "seed of the generated inputs")
      ->check(whole_number(0, INT64_MAX));
  run->add_flag(
      "--profile", profile,
      "print the time per op of the timed runs (each op timed, its device synchronized after it)");
  run->add_flag("--profile-shapes", by_shapes, "with --profile: per op and input shapes");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help and --version succeed; usage errors are 2
  }
  if (exp->parsed() && trace_device == "cuda:0" && !exp->count("--trace-device"))
    trace_device.clear();
  try {
    if (demo->parsed()) return cmd_demo(model, trace_device, device, seed);
    if (exp->parsed()) {
      train = exp->count("--train") > 0 && optimizer.empty();
      return cmd_export(model, sets, trace_device, seed, train, optimizer, out);
    }
    if (trn->parsed()) {
      targs.profile = targs.profile || targs.by_shapes;
      return cmd_train(targs);
    }
    if (show->parsed()) return cmd_show(file, format, out);
    if (imp->parsed()) return cmd_import(file, out);
    if (run->parsed())
      return cmd_run(file, device_map, inputs, outputs, weights, repeat, warmup, seed,
                     profile || by_shapes, by_shapes);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {  // anything else (e.g. the OS refusing memory) too
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
