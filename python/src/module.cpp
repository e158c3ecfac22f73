// kiln's Python module (`kiln._kiln`): a thin skin over the public C++ API. Tensors cross
// as DLPack / buffer-protocol views in both directions without copies; programs load,
// run (without the GIL), show and save as in C++; kiln::Error becomes a Python exception
// whose class says its kind. The Python package (python/kiln/__init__.py) adds only the
// conversion of results back to the kind of tensors the caller passed.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <mutex>
#include <thread>

#include "kiln/cli.h"
#include "kiln/kiln.h"
#include "kiln/runtime/executor.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace kiln::python {
namespace {

// ---- dtypes and devices across DLPack -------------------------------------------------

nb::dlpack::dtype dl_dtype(DType d) {
  using nb::dlpack::dtype_code;
  auto make = [](dtype_code c, int bits) {
    nb::dlpack::dtype t;
    t.code = static_cast<uint8_t>(c);
    t.bits = static_cast<uint8_t>(bits);
    t.lanes = 1;
    return t;
  };
  switch (d) {
    case DType::f32: return make(dtype_code::Float, 32);
    case DType::f64: return make(dtype_code::Float, 64);
    case DType::f16: return make(dtype_code::Float, 16);
    case DType::bf16: return make(dtype_code::Bfloat, 16);
    case DType::i64: return make(dtype_code::Int, 64);
    case DType::i32: return make(dtype_code::Int, 32);
    case DType::i16: return make(dtype_code::Int, 16);
    case DType::i8: return make(dtype_code::Int, 8);
    case DType::u8: return make(dtype_code::UInt, 8);
    case DType::b8: return make(dtype_code::Bool, 8);
  }
  fail(ErrorKind::internal, "unknown dtype");
}

DType kiln_dtype(nb::dlpack::dtype t) {
  using nb::dlpack::dtype_code;
  auto code = static_cast<dtype_code>(t.code);
  if (t.lanes == 1) {
    if (code == dtype_code::Float && t.bits == 32) return DType::f32;
    if (code == dtype_code::Float && t.bits == 64) return DType::f64;
    if (code == dtype_code::Float && t.bits == 16) return DType::f16;
    if (code == dtype_code::Bfloat && t.bits == 16) return DType::bf16;
    if (code == dtype_code::Int && t.bits == 64) return DType::i64;
    if (code == dtype_code::Int && t.bits == 32) return DType::i32;
    if (code == dtype_code::Int && t.bits == 16) return DType::i16;
    if (code == dtype_code::Int && t.bits == 8) return DType::i8;
    if (code == dtype_code::UInt && t.bits == 8) return DType::u8;
    if (code == dtype_code::Bool && t.bits == 8) return DType::b8;
  }
  fail(ErrorKind::dtype,
       "[from_dlpack] a DLPack dtype (code {}, {} bits, {} lanes) kiln has no counterpart for",
       static_cast<int>(t.code), static_cast<int>(t.bits), static_cast<int>(t.lanes));
}

// A kiln tensor as an ndarray over the same memory; the capsule keeps the tensor (and so
// its storage) alive for as long as any consumer holds the view.
nb::ndarray<> view_of(const Tensor& t) {
  KILN_CHECK(t.defined(), value, "[dlpack] an undefined tensor");
  KILN_CHECK(t.device().type != DeviceType::meta, device, "[dlpack] a meta tensor has no data");
  auto* keep = new Tensor(t);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape;
  std::vector<int64_t> strides;
  for (int64_t d = 0; d < t.dim(); ++d) {
    shape.push_back(static_cast<size_t>(t.size(d)));
    strides.push_back(t.stride(d));
  }
  int device_type =
      t.device().type == DeviceType::cuda ? nb::device::cuda::value : nb::device::cpu::value;
  int device_id = t.device().type == DeviceType::cuda ? t.device().index : 0;
  return nb::ndarray<>(t.numel() ? t.raw_data() : nullptr, shape.size(), shape.data(), owner,
                       strides.data(), dl_dtype(t.dtype()), device_type, device_id);
}

// An ndarray (NumPy, PyTorch, anything with __dlpack__ or the buffer protocol) as a kiln
// tensor over the same memory. The storage holds the ndarray, released under the GIL.
Tensor from_array(const nb::ndarray<>& a, std::optional<std::string> device) {
  DType dtype = kiln_dtype(a.dtype());
  Device where(DeviceType::cpu, 0);
  if (a.device_type() == nb::device::cuda::value)
    where = Device(DeviceType::cuda, a.device_id());
  else
    KILN_CHECK(a.device_type() == nb::device::cpu::value, device,
               "[from_dlpack] memory on DLPack device type {}", a.device_type());
  if (device) {  // a CPU array may be given to a virtual CPU device: the memory is the same host
                 // memory
    Device wanted{std::string_view(*device)};
    KILN_CHECK(wanted.type == where.type, device,
               "[from_dlpack] {} memory cannot be a {} tensor without a copy", where.str(),
               wanted.str());
    where = wanted;
  }
  auto impl = std::make_shared<TensorImpl>();
  std::vector<int64_t> shape, strides;
  int64_t extent = 1;  // elements from the first to one past the last reachable
  bool empty = false;
  for (size_t d = 0; d < a.ndim(); ++d) {
    shape.push_back(static_cast<int64_t>(a.shape(d)));
    strides.push_back(a.stride(d));
    KILN_CHECK(a.stride(d) >= 0, value,
               "[from_dlpack] negative strides (a reversed view): make it contiguous first");
    if (a.shape(d) == 0)
      empty = true;
    else
      extent += (static_cast<int64_t>(a.shape(d)) - 1) * a.stride(d);
  }
  impl->shape = Dims(shape);
  impl->strides = Dims(strides);
  impl->dtype = dtype;
  impl->device = where;
  size_t nbytes = empty ? 0 : static_cast<size_t>(extent) * itemsize(dtype);
  impl->storage =
      std::make_shared<StorageImpl>(const_cast<void*>(a.data()), nbytes, where, nullptr, false);
  auto* held = new nb::ndarray<>(a);
  impl->storage->owner = std::shared_ptr<void>(held, [](void* p) {
    nb::gil_scoped_acquire gil;
    delete static_cast<nb::ndarray<>*>(p);
  });
  return Tensor(std::move(impl));
}

// ---- errors ----------------------------------------------------------------------------

// One Python class per ErrorKind, all under kiln.Error, each also under the built-in
// exception a Python user would catch for it (a device error is a ValueError).
std::map<ErrorKind, PyObject*> g_error_classes;
PyObject* g_error_base = nullptr;

void make_errors(nb::module_& m) {
  g_error_base = PyErr_NewException("kiln.Error", PyExc_RuntimeError, nullptr);
  m.attr("Error") = nb::handle(g_error_base);
  struct Spec {
    ErrorKind kind;
    const char* name;
    PyObject* builtin;
  };
  const Spec specs[] = {
      {ErrorKind::value, "InvalidValueError", PyExc_ValueError},
      {ErrorKind::device_mismatch, "DeviceMismatchError", PyExc_ValueError},
      {ErrorKind::device, "DeviceError", PyExc_ValueError},
      {ErrorKind::shape, "ShapeError", PyExc_ValueError},
      {ErrorKind::dtype, "DTypeError", PyExc_TypeError},
      {ErrorKind::index, "IndexError", PyExc_IndexError},
      {ErrorKind::unsupported, "UnsupportedError", PyExc_NotImplementedError},
      {ErrorKind::data_dependent, "DataDependentError", PyExc_RuntimeError},
      {ErrorKind::constraint, "ConstraintError", PyExc_ValueError},
      {ErrorKind::frozen_mutation, "FrozenMutationError", PyExc_RuntimeError},
      {ErrorKind::format, "FormatError", PyExc_ValueError},
      {ErrorKind::invalid_graph, "InvalidGraphError", PyExc_ValueError},
      {ErrorKind::internal, "InternalError", PyExc_RuntimeError},
      {ErrorKind::out_of_memory, "OutOfMemoryError", PyExc_MemoryError},
      {ErrorKind::backend, "BackendError", PyExc_RuntimeError},
  };
  for (const Spec& s : specs) {
    PyObject* bases = PyTuple_Pack(2, g_error_base, s.builtin);
    PyObject* cls = PyErr_NewException((std::string("kiln.") + s.name).c_str(), bases, nullptr);
    Py_DECREF(bases);
    m.attr(s.name) = nb::handle(cls);
    g_error_classes[s.kind] = cls;
  }
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      auto it = g_error_classes.find(e.kind());
      PyErr_SetString(it == g_error_classes.end() ? g_error_base : it->second, e.what());
    }
  });
}

// ---- programs --------------------------------------------------------------------------

// A loaded program and its executors: one per calling thread (an Executor serves one run
// at a time), so Python threads run it concurrently without the GIL. Programs that write
// their own state still queue on the program's run lock (Note [Programs across threads]).
class Program {
 public:
  explicit Program(ExportedProgram p) : program_(std::make_shared<ExportedProgram>(std::move(p))) {}

  TensorList run(const TensorList& inputs) {
    runtime::Executor* exec;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& slot = executors_[std::this_thread::get_id()];
      if (!slot) slot = std::make_unique<runtime::Executor>(*program_);
      exec = slot.get();
    }
    return exec->run(inputs);
  }
  ExportedProgram& get() { return *program_; }
  std::optional<size_t> loss_index() const {
    size_t k = 0;
    for (const OutputSpec& s : program_->signature.outputs) {
      if (s.is_mutation()) continue;
      if (s.kind == OutputSpec::Kind::loss_output) return k;
      ++k;
    }
    return std::nullopt;
  }
  Tensor& state_entry(const std::string& name) {
    for (auto& [n, t] : program_->state)
      if (n == name) return t;
    fail(ErrorKind::value,
         "[program] no state entry '{}' (a train step exported by kiln has optimizer.lr)", name);
  }

 private:
  std::shared_ptr<ExportedProgram> program_;
  std::mutex mutex_;
  std::map<std::thread::id, std::unique_ptr<runtime::Executor>> executors_;
};

Tensor as_tensor(nb::handle h) {
  if (nb::isinstance<Tensor>(h)) return nb::cast<Tensor>(h);
  return from_array(nb::cast<nb::ndarray<>>(h), std::nullopt);
}

// What kind of tensors a caller passed (the first argument decides), and the outputs
// in that kind: kiln in, kiln out; NumPy in, NumPy out; PyTorch in, PyTorch out.
enum class Kind { kiln, numpy, torch };

Kind kind_of(const nb::args& args) {
  if (args.size() == 0 || nb::isinstance<Tensor>(args[0])) return Kind::kiln;
  nb::str module = nb::borrow<nb::str>(
      nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(args[0].ptr()))).attr("__module__"));
  std::string_view name = module.c_str();
  if (name.rfind("torch", 0) == 0) return Kind::torch;
  if (name.rfind("numpy", 0) == 0) return Kind::numpy;
  return Kind::kiln;
}

nb::object as_kind(const Tensor& t, Kind kind) {
  switch (kind) {
    case Kind::numpy: return nb::cast(nb::ndarray<nb::numpy>(view_of(t)));
    case Kind::torch: return nb::cast(nb::ndarray<nb::pytorch>(view_of(t)));
    case Kind::kiln: break;
  }
  return nb::cast(t);
}

// Runs `p` on the call's arguments without the GIL; the outputs as kiln tensors.
template <typename P>
TensorList run_args(P& p, const nb::args& args) {
  TensorList inputs;
  inputs.reserve(args.size());
  for (nb::handle h : args) inputs.push_back(as_tensor(h));
  nb::gil_scoped_release no_gil;
  return p.run(inputs);
}

DeviceMap device_map_of(const std::optional<std::map<std::string, std::string>>& m) {
  DeviceMap map;
  if (m)
    for (const auto& [from, to] : *m)
      map.emplace_back(Device(std::string_view(from)), Device(std::string_view(to)));
  return map;
}

nb::dict signature_of(const ExportedProgram& p) {
  nb::list inputs, outputs;
  std::vector<ir::Node*> nodes = p.graph.inputs();
  for (size_t i = 0; i < p.signature.inputs.size(); ++i) {
    const InputSpec& s = p.signature.inputs[i];
    nb::dict d;
    d["kind"] = std::string(to_string(s.kind));
    d["name"] = s.name;
    d["target"] = s.target;
    if (i < nodes.size() && !nodes[i]->meta().empty()) {  // what a run must be given
      const ir::ValueMeta& m = nodes[i]->meta()[0];
      nb::list shape;  // (Y1) a symbolic dim by its expression ("s0")
      for (size_t k = 0; k < m.shape.size(); ++k) {
        SymInt size = m.shape.sym(k);
        if (size.is_symbolic())
          shape.append(size.str());
        else
          shape.append(size.hint());
      }
      d["shape"] = shape;
      d["dtype"] = std::string(to_string(m.dtype));
      d["device"] = m.device.str();
    }
    inputs.append(d);
  }
  for (const OutputSpec& s : p.signature.outputs) {
    nb::dict d;
    d["kind"] = std::string(to_string(s.kind));
    d["target"] = s.target;
    outputs.append(d);
  }
  nb::dict out;
  out["inputs"] = inputs;
  out["outputs"] = outputs;
  return out;
}

}  // namespace
}  // namespace kiln::python

NB_MODULE(_kiln, m) {
  using namespace kiln;
  using kiln::python::Program;
  m.doc() = "kiln: portable tensor programs (the C++ library's Python skin)";
  python::make_errors(m);

  nb::class_<Tensor>(m, "Tensor",
                     "A kiln tensor; its memory is shared with NumPy / PyTorch through DLPack")
      .def_prop_ro("shape", [](const Tensor& t) { return t.shape().vec(); })
      .def_prop_ro("dtype", [](const Tensor& t) { return std::string(to_string(t.dtype())); })
      .def_prop_ro("device", [](const Tensor& t) { return t.device().str(); })
      .def_prop_ro("strides", [](const Tensor& t) { return t.strides().vec(); })
      .def_prop_ro("data_ptr",
                   [](const Tensor& t) {
                     return reinterpret_cast<uintptr_t>(t.numel() ? t.raw_data() : nullptr);
                   })
      .def("numel", &Tensor::numel)
      .def("dim", &Tensor::dim)
      .def(
          "to",
          [](const Tensor& t, const std::string& device) {
            return to(t, Device(std::string_view(device)));
          },
          "device"_a, "A copy on `device` (the same tensor when it is there already)")
      .def("contiguous", [](const Tensor& t) { return contiguous(t); })
      .def(
          "numpy", [](const Tensor& t) { return nb::ndarray<nb::numpy>(python::view_of(t)); },
          nb::rv_policy::reference, "A NumPy array over the same memory (CPU tensors)")
      .def("__dlpack__",
           [](const Tensor& t, nb::kwargs) {
             // an ndarray without a framework crosses as the DLPack capsule itself;
             // consumers accept it whatever max_version they asked for
             return nb::cast(python::view_of(t));
           })
      .def("__dlpack_device__",
           [](const Tensor& t) {
             return std::pair<int, int>(t.device().type == DeviceType::cuda
                                            ? nb::device::cuda::value
                                            : nb::device::cpu::value,
                                        t.device().type == DeviceType::cuda ? t.device().index : 0);
           })
      .def("__array__", [](const Tensor& t, nb::args,
                           nb::kwargs) { return nb::ndarray<nb::numpy>(python::view_of(t)); })
      .def("__repr__", [](const Tensor& t) { return "kiln.Tensor(" + t.meta_str() + ")"; })
      .def("__str__", [](const Tensor& t) { return to_string(t); });

  m.def(
      "from_dlpack",
      [](nb::ndarray<> a, std::optional<std::string> device) {
        return python::from_array(a, device);
      },
      "array"_a, "device"_a = nb::none(),
      "A kiln tensor over the memory of `array` (NumPy, PyTorch, anything with __dlpack__ or the "
      "buffer "
      "protocol), without a copy; `device` may name a virtual CPU device for CPU memory");
  m.def("set_cpu_device_count", &set_cpu_device_count, "n"_a,
        "How many virtual CPU devices cpu:0..cpu:N-1 exist");
  m.def(
      "device_count",
      [](const std::string& type) { return device_count(Device(std::string_view(type)).type); },
      "type"_a);

  nb::class_<Program>(
      m, "Program",
      "A loaded program. Call it with tensors (kiln, NumPy or PyTorch): the outputs come back in "
      "the same kind, sharing memory with kiln's; one output as it is, several as a tuple. Runs "
      "release the GIL; threads may call one program concurrently")
      .def("__call__",
           [](Program& p, nb::args args) -> nb::object {
             python::Kind kind = python::kind_of(args);
             TensorList outs = python::run_args(p, args);
             if (outs.size() == 1) return python::as_kind(outs[0], kind);
             nb::list l;
             for (const Tensor& t : outs) l.append(python::as_kind(t, kind));
             return nb::tuple(l);
           })
      .def(
          "run", [](Program& p, nb::args args) { return python::run_args(p, args); },
          "The outputs as a list of kiln tensors, whatever the inputs are")
      .def(
          "step",
          [](Program& p, nb::args args) {
            std::optional<size_t> loss = p.loss_index();
            KILN_CHECK(loss, value,
                       "[step] the program has no loss output: export it with --train OPTIMIZER");
            TensorList outs = python::run_args(p, args);
            return item<double>(to(outs.at(*loss), DType::f64));
          },
          "A train step (forward, backward, update of the program's state) on one batch; the loss")
      .def_prop_rw(
          "lr",
          [](Program& p) { return item<double>(to(p.state_entry("optimizer.lr"), DType::f64)); },
          [](Program& p, double lr) { fill_(p.state_entry("optimizer.lr"), lr); },
          "A train step's learning rate (its optimizer.lr input)")
      .def_prop_ro("signature", [](Program& p) { return python::signature_of(p.get()); })
      .def_prop_ro("state",
                   [](Program& p) {
                     nb::dict out;  // name -> the program's tensor (shared, not a copy)
                     for (const auto& [name, t] : p.get().state) out[name.c_str()] = t;
                     return out;
                   })
      .def_prop_ro("devices",
                   [](Program& p) {
                     std::vector<std::string> out;
                     for (Device d : p.get().devices()) out.push_back(d.str());
                     return out;
                   })
      .def("loss_index", &Program::loss_index, "Which output is the loss (None: not a train step)")
      .def("set_state",
           [](Program& p, const std::string& name, nb::handle value) {
             for (auto& [n, t] : p.get().state)
               if (n == name) {
                 Tensor v = python::as_tensor(value);
                 KILN_CHECK(v.shape() == t.shape(), value, "[set_state] '{}' is {}, the value {}",
                            name, t.meta_str(), v.meta_str());
                 copy_(t, v);
                 return;
               }
             fail(ErrorKind::value, "[set_state] the program has no state '{}'", name);
           })
      .def(
          "show",
          [](Program& p, const std::string& format) { return show_program(p.get(), format); },
          "format"_a = "text")
      .def(
          "save", [](Program& p, const std::string& path) { save(p.get(), path); }, "path"_a)
      .def("__repr__",
           [](Program& p) { return "kiln.Program(\n" + p.get().signature_str() + ")"; });

  m.def(
      "load",
      [](const std::string& path, std::optional<std::map<std::string, std::string>> device_map) {
        DeviceMap map = python::device_map_of(device_map);
        nb::gil_scoped_release no_gil;
        return new Program(is_pt2_file(path) ? load_pt2(path, map) : load_program(path, map));
      },
      "path"_a, "device_map"_a = nb::none(),
      "Loads a kiln program file or a .pt2 archive (torch.export.save); device_map maps the file's "
      "devices "
      "({'cuda:0': 'cpu:0'})");
  m.def(
      "import_notes", [](const std::string& path) { return read_pt2(path).notes; }, "path"_a,
      "What importing the .pt2 archive decides that a user should know (specialized sizes, tied "
      "weights)");
}
