// Shared declarations of the actorcc._actorcc extension (nanobind).
#pragma once
#include <nanobind/nanobind.h>

namespace nb = nanobind;

namespace actorcc::py {

// errors.cpp: creates actorcc.Error and its subclasses on `m` and registers the translator
// from actorcc::Error (and its C++ subclasses) to them.
void bind_errors(nb::module_& m);
// Raises the Python InvalidArgumentError (used by the binding's own checks).
[[noreturn]] void throw_invalid(const std::string& message, int rank = -1);

void bind_unique_id(nb::module_& m);
void bind_communicator(nb::module_& m);

}  // namespace actorcc::py
