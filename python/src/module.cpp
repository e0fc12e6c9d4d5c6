// actorcc._actorcc: the compiled half of the Python package. The pure-Python layer
// (python/actorcc/*.py) adds framework detection, default streams, allocation of outputs,
// async work handles and the Ray integration on top of it.
#include <nanobind/stl/string.h>

#include <string>

#include "actorcc/actorcc.hpp"
#include "bindings.hpp"

NB_MODULE(_actorcc, m) {
  m.doc() = "actorcc C++ bindings (use the `actorcc` package, not this module directly)";
  actorcc::py::bind_errors(m);
  actorcc::py::bind_unique_id(m);
  actorcc::py::bind_communicator(m);
  m.def("version", [] { return std::string(actorcc::version()); }, "Version of the loaded libactorcc.");
  m.attr("__version__") = ACTORCC_PY_VERSION;
#ifdef ACTORCC_WITH_CUDA
  m.attr("built_with_cuda") = true;
#else
  m.attr("built_with_cuda") = false;
#endif
}
