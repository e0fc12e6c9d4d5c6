// actorcc._actorcc: the compiled half of the Python package. The pure-Python layer
// (python/actorcc/*.py) adds framework detection, default streams, allocation of outputs,
// async work handles and the Ray integration on top of it.
#include <nanobind/stl/string.h>

#include <cstdint>

#include <string>

#include "actorcc/actorcc.hpp"
#include "bindings.hpp"

namespace {

// {name: code} of an actorcc enum, as to_string names its values (codes from 0 until the first
// "invalid"): the Python layer reads these instead of keeping copies of include/actorcc/types.hpp.
template <typename E>
nanobind::dict enum_codes() {
  nanobind::dict d;
  for (unsigned i = 0; i < 256; ++i) {
    const auto name = actorcc::to_string(static_cast<E>(i));
    if (name == "invalid") break;
    d[nanobind::str(name.data(), name.size())] = i;
  }
  return d;
}

}  // namespace

NB_MODULE(_actorcc, m) {
  m.doc() = "actorcc C++ bindings (use the `actorcc` package, not this module directly)";
  actorcc::py::bind_errors(m);
  actorcc::py::bind_unique_id(m);
  actorcc::py::bind_communicator(m);
  m.def("version", [] { return std::string(actorcc::version()); }, "Version of the loaded libactorcc.");
  m.attr("__version__") = ACTORCC_PY_VERSION;
  m.attr("DTYPE_CODES") = enum_codes<actorcc::DataType>();
  m.attr("OP_CODES") = enum_codes<actorcc::RedOp>();
  m.attr("COLLECTIVE_CODES") = enum_codes<actorcc::Collective>();
#ifdef ACTORCC_WITH_CUDA
  m.attr("built_with_cuda") = true;
#else
  m.attr("built_with_cuda") = false;
#endif
}
