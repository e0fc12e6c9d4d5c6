// The Python exception hierarchy, mirroring include/actorcc/error.hpp:
//
//   actorcc.Error(RuntimeError)                    every error raised by actorcc
//     InvalidArgumentError(Error, ValueError)      bad input, raised before any data moves
//     TimeoutError(Error, builtins.TimeoutError)   a deadline expired (message names the ranks)
//     RemoteError(Error)                           another rank failed/aborted/vanished; .rank = culprit
//     SystemCallError(Error, OSError)              an OS call failed (socket, shm, ...)
//     CudaError(Error)                             a CUDA call failed
//     UnsupportedError(Error, NotImplementedError) not possible here (no GPU, backend mismatch)
//     InternalError(Error)                         a bug in actorcc
//
// Every instance carries .code (str), .rank (the culprit for RemoteError, else the rank that
// raised it; -1 when unknown), .observer_rank (the rank that raised it) and .culprit (the rank
// at fault when known: the one a timed-out wait waited for, the one that died, left, refused or
// disagreed, even when a third rank reported it; -1 when unknown) and .culprits (every rank
// known lost when it was raised, ascending, the culprit included: two ranks killed together are
// both listed once the root reported both; a list, or an empty tuple by default). The classes are
// created with __module__ "actorcc" so they pickle by reference (Ray forwards them intact).
#include <Python.h>

#include <string>

#include "actorcc/error.hpp"
#include "bindings.hpp"

namespace actorcc::py {
namespace {

PyObject* g_error = nullptr;
PyObject* g_invalid = nullptr;
PyObject* g_timeout = nullptr;
PyObject* g_remote = nullptr;
PyObject* g_system = nullptr;
PyObject* g_cuda = nullptr;
PyObject* g_unsupported = nullptr;
PyObject* g_internal = nullptr;

// `code`: the class's default .code. Every class also defaults .rank, .observer_rank and
// .culprit to -1, so an error the Python layer raises itself (no C++ error behind it) still
// has every attribute the hierarchy promises.
PyObject* make_type(nb::module_& m, const char* name, const char* doc, PyObject* bases, const char* code) {
  std::string qual = std::string("actorcc.") + name;
  nb::dict defaults;
  defaults["code"] = nb::str(code);
  defaults["rank"] = -1;
  defaults["observer_rank"] = -1;
  defaults["culprit"] = -1;
  defaults["culprits"] = nb::tuple();
  PyObject* t = PyErr_NewExceptionWithDoc(qual.c_str(), doc, bases, defaults.ptr());
  if (!t) throw nb::python_error();
  m.attr(name) = nb::borrow(t);  // the module keeps a reference; so does the global (never freed)
  return t;
}

PyObject* tuple2(PyObject* a, PyObject* b) { return PyTuple_Pack(2, a, b); }

void raise_as(PyObject* type, const Error& e, int rank) {
  nb::object exc = nb::steal(PyObject_CallOneArg(type, nb::str(e.what()).ptr()));
  if (!exc.is_valid()) return;  // constructor failed: its Python error stays set
  exc.attr("code") = nb::str(to_string(e.code()));
  exc.attr("observer_rank") = e.rank();
  exc.attr("rank") = rank;
  exc.attr("culprit") = e.culprit();
  nb::list culprits;
  for (int r : e.culprits()) culprits.append(r);
  exc.attr("culprits") = culprits;
  PyErr_SetObject(type, exc.ptr());
}

}  // namespace

void throw_invalid(const std::string& message, int rank) {
  throw InvalidArgument(message, rank);
}

void bind_errors(nb::module_& m) {
  g_error = make_type(m, "Error", "Base class of every actorcc error.", PyExc_RuntimeError, "error");
  g_invalid = make_type(m, "InvalidArgumentError", "Bad input; raised before any data moves.",
                        tuple2(g_error, PyExc_ValueError), to_string(ErrorCode::InvalidArgument));
  g_timeout = make_type(m, "TimeoutError", "A bounded wait expired; the message names the ranks not heard from.",
                        tuple2(g_error, PyExc_TimeoutError), to_string(ErrorCode::Timeout));
  g_remote = make_type(m, "RemoteError", "Another rank failed, aborted or vanished; .rank is that rank (-1: the root).",
                       g_error, to_string(ErrorCode::Remote));
  g_system = make_type(m, "SystemCallError", "An OS call failed (socket, shared memory, ...).",
                       tuple2(g_error, PyExc_OSError), to_string(ErrorCode::System));
  g_cuda = make_type(m, "CudaError", "A CUDA call failed.", g_error, to_string(ErrorCode::Cuda));
  g_unsupported = make_type(m, "UnsupportedError", "Not possible in this setting (no GPU, backend mismatch, ...).",
                            tuple2(g_error, PyExc_NotImplementedError), to_string(ErrorCode::Unsupported));
  g_internal = make_type(m, "InternalError", "An internal error in actorcc (a bug).", g_error, to_string(ErrorCode::Internal));

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const RemoteError& e) {
      raise_as(g_remote, e, e.culprit());
    } catch (const Error& e) {
      PyObject* t = g_error;
      switch (e.code()) {
        case ErrorCode::InvalidArgument: t = g_invalid; break;
        case ErrorCode::Timeout: t = g_timeout; break;
        case ErrorCode::Remote: t = g_remote; break;
        case ErrorCode::System: t = g_system; break;
        case ErrorCode::Cuda: t = g_cuda; break;
        case ErrorCode::Unsupported: t = g_unsupported; break;
        case ErrorCode::Internal: t = g_internal; break;
      }
      raise_as(t, e, e.rank());
    }
  });
}

}  // namespace actorcc::py
