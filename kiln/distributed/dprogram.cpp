#include "kiln/distributed/dprogram.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "kiln/autograd/autograd.h"
#include "kiln/fake/fake_mode.h"
#include "kiln/ir/interpreter.h"
#include "kiln/nn/module.h"
#include "kiln/passes/functionalize.h"

namespace kiln::dist {

using json = nlohmann::json;

namespace {

std::string shard_path(const std::string& path, int64_t rank, int64_t n) {
  return fmt::format("{}.shard-{}-of-{}", path, rank, n);
}

// The key of the tensor that ties a shard file to the save that wrote it.
constexpr const char* kSaveIdKey = "__kiln_save_id__";

// One id for this save, the same on every rank: each rank draws one and the largest wins
// (a max-reduction along every mesh dim in turn). A shard file from another save -- of
// another program, or a stale one an interrupted save left -- carries another id.
int64_t agree_on_save_id(const DeviceMesh& m) {
  std::random_device rd;
  int64_t mine =
      static_cast<int64_t>((uint64_t{rd()} << 20 ^ rd()) & ((uint64_t{1} << 52) - 1)) + 1;
  Tensor id = full({1}, static_cast<double>(mine), {.dtype = DType::f64, .device = m.device()});
  for (int64_t i = 0; i < m.ndim(); ++i) m.group(i)->all_reduce(id, ReduceOp::max)->wait();
  return static_cast<int64_t>(item<double>(id));  // exact: below 2^53
}

// This rank's index in the mesh (row-major over its coordinates).
int64_t mesh_rank(const DeviceMesh& mesh) {
  int64_t r = 0;
  for (int64_t i = 0; i < mesh.ndim(); ++i) r = r * mesh.size(i) + mesh.coordinate(i);
  return r;
}

Placement parse_placement(const std::string& s, const std::string& where) {
  if (s == "R") return Replicate();
  if (s.rfind("S(", 0) == 0 && s.back() == ')') {
    int64_t d = -1;
    auto [end, ec] = std::from_chars(s.data() + 2, s.data() + s.size() - 1, d);
    if (ec == std::errc() && end == s.data() + s.size() - 1 && d >= 0) return Shard(d);
  }
  if (s.rfind("P(", 0) == 0 && s.back() == ')')
    return Partial(reduce_op_from_name(s.substr(2, s.size() - 3)));
  fail(ErrorKind::format, "[load_distributed] {}: bad placement '{}'", where, s);
}

json placements_json(const Placements& p) {
  json a = json::array();
  for (const Placement& x : p) a.push_back(x.str());
  return a;
}

Placements placements_of(const json& a, const DeviceMesh& mesh, int64_t ndim,
                         const std::string& where) {
  KILN_CHECK(a.is_array() && static_cast<int64_t>(a.size()) == mesh.ndim(), format,
             "[load_distributed] {}: expected {} placements", where, mesh.ndim());
  Placements p;
  for (const json& x : a) {
    KILN_CHECK(x.is_string(), format, "[load_distributed] {}: placements are strings", where);
    p.push_back(parse_placement(x.get<std::string>(), where));
    KILN_CHECK(!p.back().is_shard() || p.back().dim < ndim, format,
               "[load_distributed] {}: placement {} of a {}-d tensor", where, p.back().str(), ndim);
  }
  return p;
}

// Restores a module's tensor slots when it dies (the global trace swaps them).
struct SlotRestore {
  std::vector<std::pair<Tensor*, Tensor>> saved;
  ~SlotRestore() {
    for (auto& [slot, value] : saved) *slot = value;
  }
};

}  // namespace

void save_distributed(nn::Module& module, const TensorList& example_inputs, const std::string& path,
                      const std::vector<InputDims>& dynamic_shapes) {
  std::vector<nn::NamedTensor> named = module.named_tensors();
  const DeviceMesh* mesh = nullptr;
  for (const nn::NamedTensor& t : named)
    if (t.tensor->is_dtensor()) {
      mesh = &dtensor_state(*t.tensor).mesh;
      break;
    }
  KILN_CHECK(mesh, value,
             "[save_distributed] the module has no DTensor (use parallelize_module first)");
  DeviceMesh m = *mesh;
  json placements = json::object();
  for (const nn::NamedTensor& t : named) {
    KILN_CHECK(t.tensor->is_dtensor() && dtensor_state(*t.tensor).mesh == m, value,
               "[save_distributed] '{}' is not a DTensor on the module's mesh {}", t.name, m.str());
    placements[t.name] = placements_json(dtensor_state(*t.tensor).placements);
  }
  json inputs = json::array();
  for (const Tensor& x : example_inputs)
    inputs.push_back(placements_json(x.is_dtensor()
                                         ? dtensor_state(x).placements
                                         : Placements(static_cast<size_t>(m.ndim()), Replicate())));
  // Note [Distributed programs with dynamic dims]: only dims no placement shards.
  for (size_t i = 0; i < dynamic_shapes.size() && i < example_inputs.size(); ++i) {
    if (!example_inputs[i].is_dtensor()) continue;
    for (const Placement& p : dtensor_state(example_inputs[i]).placements)
      KILN_CHECK(!p.is_shard() || !dynamic_shapes[i].count(p.dim), unsupported,
                 "[save_distributed] input {} dim {} is sharded ({}), so it cannot be dynamic: "
                 "make it static, or replicate the input along that dim",
                 i, p.dim, p.str());
  }

  // The global graph: the module traced on plain fake tensors of the global shapes.
  ExportedProgram global;
  {
    FakeMode fake;
    SlotRestore restore;
    for (const nn::NamedTensor& t : named) {
      restore.saved.emplace_back(t.tensor, *t.tensor);
      bool grad = t.tensor->requires_grad();
      *t.tensor =
          empty(t.tensor->shape().vec(), {.dtype = t.tensor->dtype(), .device = m.device()});
      if (grad) t.tensor->set_requires_grad(true);
    }
    TensorList globals;
    for (const Tensor& x : example_inputs)
      globals.push_back(empty(x.shape().vec(), {.dtype = x.dtype(), .device = m.device()}));
    global = export_program(module, globals, {.dynamic_shapes = dynamic_shapes});
  }
  int64_t n = m.size(), me = mesh_rank(m);
  int64_t save_id = agree_on_save_id(m);
  json distribution = {{"mesh", {{"shape", m.shape()}, {"names", m.names()}}},
                       {"world", n},
                       {"save_id", save_id},
                       {"placements", placements},
                       {"inputs", inputs}};
  if (me == 0) save_graph(global, path, distribution.dump());

  // This rank's shards, with their global offsets; a replicated shard only from the
  // ranks at coordinate 0 of the dims it is replicated along; partial values reduced.
  NamedTensors shards;
  autograd::NoGradGuard no_grad;  // reading the values to save: no history
  for (const nn::NamedTensor& t : named) {
    const DTensorState& s = dtensor_state(*t.tensor);
    Placements whole = replicate_partials(s.placements);
    Tensor local = whole == s.placements ? s.local(*t.tensor->impl())
                                         : to_local(redistribute(*t.tensor, whole));
    bool owner = true;
    std::vector<int64_t> offsets(static_cast<size_t>(t.tensor->dim()), 0);
    for (int64_t i = 0; i < m.ndim(); ++i) {
      const Placement& p = whole[static_cast<size_t>(i)];
      if (p.is_shard())
        offsets[p.dim] = chunk_of(t.tensor->size(p.dim), m.size(i), m.coordinate(i)).first;
      else
        owner = owner && m.coordinate(i) == 0;
    }
    if (!owner || local.numel() == 0) continue;
    std::string key = t.name + "@";
    for (size_t d = 0; d < offsets.size(); ++d) {
      if (d) key += ',';
      key += std::to_string(offsets[d]);
    }
    shards.emplace_back(key, contiguous(local.detach_descriptor()));
  }
  shards.emplace_back(kSaveIdKey, full({1}, save_id, {.dtype = DType::i64}));
  save_safetensors(shards, shard_path(path, me, n));
  // Every file is written when any rank returns (a barrier along each mesh dim in turn
  // orders every rank after every other's writes).
  for (int64_t i = 0; i < m.ndim(); ++i) m.group(i)->barrier();
}

std::optional<SavedMesh> saved_mesh(const std::string& path) {
  std::string text;
  try {
    read_graph(path, text);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::format &&
        std::string_view(e.what()).find("no 'distribution'") != std::string_view::npos)
      return std::nullopt;
    throw;
  }
  json d = json::parse(text);
  SavedMesh m;
  KILN_CHECK(d.is_object() && d.contains("mesh") && d["mesh"].is_object() &&
                 d["mesh"].contains("shape") && d["mesh"]["shape"].is_array() &&
                 d["mesh"].contains("names") && d["mesh"]["names"].is_array(),
             format, "[load_distributed] {}: malformed distribution", path);
  for (const json& x : d["mesh"]["shape"])
    m.shape.push_back(x.is_number_integer() ? x.get<int64_t>() : 0);
  for (const json& x : d["mesh"]["names"])
    m.names.push_back(x.is_string() ? x.get<std::string>() : "");
  return m;
}

LoadedProgram load_distributed(const std::string& path, const DeviceMesh& mesh) {
  std::string text;
  ExportedProgram global = read_graph(path, text);
  move_to_device(global, mesh.device());  // traced on the saving rank's device
  json d = json::parse(text);
  KILN_CHECK(d.is_object() && d.contains("mesh") && d.contains("world") &&
                 d.contains("placements") && d.contains("inputs") &&
                 d["world"].is_number_integer() && d["mesh"].is_object() &&
                 d["mesh"].contains("names") && d["mesh"]["names"].is_array() &&
                 d["placements"].is_object() && d["inputs"].is_array(),
             format, "[load_distributed] {}: malformed distribution", path);
  std::vector<std::string> names;
  for (const json& x : d["mesh"]["names"])
    names.push_back(x.is_string() ? x.get<std::string>() : "");
  KILN_CHECK(names == mesh.names(), value,
             "[load_distributed] {} was saved for a mesh with axes {}, but the mesh given is {}",
             path, d["mesh"]["names"].dump(), mesh.str());
  int64_t saved_world = d["world"].get<int64_t>();
  KILN_CHECK(saved_world > 0 && saved_world <= 65536, format,
             "[load_distributed] {}: bad world size {}", path, saved_world);
  std::vector<NamedTensors> files;
  for (int64_t r = 0; r < saved_world; ++r) {
    std::string file = shard_path(path, r, saved_world);
    std::error_code ec;
    KILN_CHECK(
        std::filesystem::exists(file, ec), value,
        "[load_distributed] shard file {} is missing: every rank that saved the program writes one",
        file);
    files.push_back(load_safetensors(file));
    // Every shard must come from the save that wrote the program file (files saved before
    // kiln stored ids have none on either side).
    if (d.contains("save_id")) {
      KILN_CHECK(d["save_id"].is_number_integer(), format,
                 "[load_distributed] {}: malformed save_id", path);
      int64_t want = d["save_id"].get<int64_t>(), got = -1;
      NamedTensors& f = files.back();
      for (auto it = f.begin(); it != f.end(); ++it)
        if (it->first == kSaveIdKey) {
          if (it->second.numel() == 1 && it->second.dtype() == DType::i64)
            got = item<int64_t>(it->second);
          f.erase(it);
          break;
        }
      KILN_CHECK(
          got == want, format,
          "[load_distributed] shard file {} was not written by the save of {} (its save id is {}, "
          "the "
          "program's {}): a shard of another program, or left from an earlier or interrupted save",
          file, path, got < 0 ? std::string("missing") : std::to_string(got), want);
    }
  }

  // Note [Distributed programs with dynamic dims]: the saved symbols again, by name.
  ShapeEnv env;
  for (const SymbolInfo& s : global.shapes.symbols) {
    KILN_CHECK(!s.unbacked, unsupported,
               "[load_distributed] {}: data-dependent sizes ({}) in distributed programs", path,
               sym::str(s.expr));
    SymInt made = env.new_symbol(s.hint, s.min, s.max, s.source, s.dim_name, s.automatic);
    KILN_CHECK(made.expr() == s.expr, format, "[load_distributed] {}: symbol {} out of order", path,
               sym::str(s.expr));
  }
  env.scope_provider = [] { return current_scope(); };
  std::optional<ShapeEnvGuard> symbolic;
  if (!global.shapes.empty()) symbolic.emplace(&env);

  // Each tensor whole again, from shards that must cover it exactly once.
  autograd::NoGradGuard no_grad;
  std::vector<ir::Node*> graph_inputs = global.graph.inputs();
  TensorList inputs;
  LoadedProgram out;
  NamedTensors local_state, local_constants;
  for (size_t k = 0; k < global.signature.inputs.size(); ++k) {
    const InputSpec& spec = global.signature.inputs[k];
    const ir::ValueMeta& meta = graph_inputs[k]->meta()[0];
    if (spec.kind == InputSpec::Kind::user_input) {
      size_t j = static_cast<size_t>(
          std::count_if(global.signature.inputs.begin(), global.signature.inputs.begin() + k,
                        [](const InputSpec& s) { return s.kind == InputSpec::Kind::user_input; }));
      KILN_CHECK(j < d["inputs"].size(), format,
                 "[load_distributed] {}: no placements for input {}", path, j);
      out.input_placements.push_back(placements_of(
          d["inputs"][j], mesh, static_cast<int64_t>(meta.shape.size()), spec.target));
      out.input_meta.push_back(meta);
      FakeMode fake;
      inputs.push_back(
          distribute_tensor(empty(meta.shape, {.dtype = meta.dtype, .device = mesh.device()}), mesh,
                            out.input_placements.back()));
      continue;
    }
    KILN_CHECK(d["placements"].contains(spec.target), format,
               "[load_distributed] {}: no placements for '{}'", path, spec.target);
    Placements p = placements_of(d["placements"][spec.target], mesh,
                                 static_cast<int64_t>(meta.shape.size()), spec.target);
    Tensor whole = zeros(meta.shape.vec(), {.dtype = meta.dtype, .device = mesh.device()});
    if (spec.kind != InputSpec::Kind::workspace) {
      Tensor cover = zeros(meta.shape.vec(), {.dtype = DType::i32, .device = mesh.device()});
      std::string prefix = spec.target + "@";
      for (const NamedTensors& f : files)
        for (const auto& [key, shard] : f) {
          if (key.rfind(prefix, 0) != 0) continue;
          std::vector<int64_t> offsets;
          std::string rest = key.substr(prefix.size());
          for (size_t at = 0; at <= rest.size();) {
            size_t comma = std::min(rest.find(',', at), rest.size());
            int64_t o = -1;
            auto [end, ec] = std::from_chars(rest.data() + at, rest.data() + comma, o);
            KILN_CHECK(ec == std::errc() && end == rest.data() + comma && o >= 0, format,
                       "[load_distributed] shard '{}': bad offsets", key);
            offsets.push_back(o);
            at = comma + 1;
          }
          KILN_CHECK(offsets.size() == meta.shape.size() &&
                         shard.dim() == static_cast<int64_t>(offsets.size()) &&
                         shard.dtype() == meta.dtype,
                     format, "[load_distributed] shard '{}' ({}) does not fit {}{}", key,
                     shard.meta_str(), to_string(meta.dtype), meta.shape.str());
          Tensor into = whole, seen = cover;
          for (size_t q = 0; q < offsets.size(); ++q) {
            KILN_CHECK(offsets[q] <= meta.shape[q] - shard.size(static_cast<int64_t>(q)), format,
                       "[load_distributed] shard '{}' ({}) reaches past {}", key, shard.meta_str(),
                       meta.shape.str());
            into = narrow(into, static_cast<int64_t>(q), offsets[q],
                          shard.size(static_cast<int64_t>(q)));
            seen = narrow(seen, static_cast<int64_t>(q), offsets[q],
                          shard.size(static_cast<int64_t>(q)));
          }
          copy_(into, to(shard, mesh.device()));
          add_(seen, wrapped_number(1));
        }
      KILN_CHECK(whole.numel() == 0 ||
                     (item<int64_t>(amin(cover)) == 1 && item<int64_t>(amax(cover)) == 1),
                 value,
                 "[load_distributed] '{}': its shards do not cover it exactly once (a shard file "
                 "is incomplete)",
                 spec.target);
    }
    Tensor dt = distribute_tensor(whole, mesh, p);
    inputs.push_back(dt);
    bool stateful = spec.kind == InputSpec::Kind::parameter ||
                    spec.kind == InputSpec::Kind::optimizer_state ||
                    (spec.kind == InputSpec::Kind::buffer && spec.persistent);
    if (stateful)
      local_state.emplace_back(spec.target, to_local(dt));
    else if (spec.kind != InputSpec::Kind::workspace)
      local_constants.emplace_back(spec.target, to_local(dt));
  }

  // This rank's graph: the global graph through the DTensor layer, captured (S4). Its
  // collectives name the mesh's axes, bound to this mesh's groups from here on.
  mesh.bind();
  std::vector<std::string> input_names;
  for (const InputSpec& s : global.signature.inputs) input_names.push_back(s.name);
  const ir::Graph& g = global.graph;
  passes::CapturedProgram local = passes::capture(
      [&](const TensorList& in) {
        ImplicitReplication implicit;  // tensors the graph makes (positions, masks) are replicated
        TensorList outs = ir::interpret(g, in);
        // A partial output (a rowwise layer's sums, which its bias leaves partial) is
        // reduced: each rank's result is a value of the program, not a part of one.
        for (Tensor& y : outs) {
          if (!y.defined() || !y.is_dtensor()) continue;
          Placements whole = replicate_partials(dtensor_state(y).placements);
          if (!(whole == dtensor_state(y).placements)) y = redistribute(y, whole);
        }
        return outs;
      },
      inputs, {.input_names = input_names});
  out.program.graph = std::move(local.graph);
  out.program.signature = global.signature;
  if (symbolic) {  // the saved guards, and what the lowering decided on the symbols
    symbolic.reset();
    out.program.shapes = detail::settle_shapes(env);
    for (const Guard& g : global.shapes.guards)
      if (std::none_of(
              out.program.shapes.guards.begin(), out.program.shapes.guards.end(),
              [&](const Guard& h) { return h.rel == g.rel && h.lhs == g.lhs && h.rhs == g.rhs; }))
        out.program.shapes.guards.push_back(g);
  }
  out.program.state = std::move(local_state);
  out.program.constants = std::move(local_constants);
  for (ir::Node* n : out.program.graph.nodes())
    if (n->opcode() == ir::Opcode::constant)
      out.program.constants.emplace_back(n->name(), n->value());
  for (WorkspaceRecipe w : global.workspaces) {
    w.device = mesh.device();
    for (size_t k = 0; k < global.signature.inputs.size(); ++k)
      if (global.signature.inputs[k].target == w.name &&
          global.signature.inputs[k].kind == InputSpec::Kind::workspace)
        w.shape = to_local(inputs[k]).shape();
    out.program.workspaces.push_back(w);
  }
  return out;
}

}  // namespace kiln::dist
