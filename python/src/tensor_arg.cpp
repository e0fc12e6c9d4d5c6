#include "tensor_arg.hpp"

#include <Python.h>

#include <cstdint>
#include <string>

namespace actorcc::py {
namespace {

// The DLPack (code, bits) of each DataType the library reduces.
struct DlpackDtype {
  nb::dlpack::dtype_code code;
  uint8_t bits;
  DataType dtype;
};
constexpr DlpackDtype kDlpackDtypes[] = {
    {nb::dlpack::dtype_code::Float, 32, DataType::Float32}, {nb::dlpack::dtype_code::Float, 16, DataType::Float16},
    {nb::dlpack::dtype_code::Float, 64, DataType::Float64}, {nb::dlpack::dtype_code::Bfloat, 16, DataType::BFloat16},
    {nb::dlpack::dtype_code::Int, 8, DataType::Int8},       {nb::dlpack::dtype_code::Int, 32, DataType::Int32},
    {nb::dlpack::dtype_code::Int, 64, DataType::Int64},     {nb::dlpack::dtype_code::UInt, 8, DataType::UInt8},
};

bool map_dlpack_dtype(nb::dlpack::dtype t, DataType& out) {
  if (t.lanes != 1) return false;
  for (const auto& d : kDlpackDtypes)
    if (t.code == static_cast<uint8_t>(d.code) && t.bits == d.bits) {
      out = d.dtype;
      return true;
    }
  return false;
}

std::string dlpack_dtype_name(nb::dlpack::dtype t) {
  static const char* names[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  std::string n = t.code < 7 ? names[t.code] : "code" + std::to_string(t.code);
  // DLPack's bool is one byte; frameworks call it "bool", not "bool8".
  if (!(t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Bool) && t.bits == 8)) n += std::to_string(t.bits);
  if (t.lanes != 1) n += "x" + std::to_string(t.lanes);
  return n;
}

const char* kSupported = "float32, float16, bfloat16, float64, int8, uint8, int32, int64";

}  // namespace

std::string device_name(int type, int id) {
  switch (type) {
    case kDevCPU: return "cpu";
    case kDevCUDA: return "cuda:" + std::to_string(id);
    case kDevCUDAHost: return "cuda_host (pinned)";
    case kDevCUDAManaged: return "cuda_managed:" + std::to_string(id);
    default: return "dlpack device type " + std::to_string(type);
  }
}

Buf get_buf(nb::handle h, bool writable, const char* what, int rank, int dtype_override) {
  Buf b;
  if (PyTuple_Check(h.ptr())) {  // raw descriptor from the Python fast path (already checked there)
    auto t = nb::borrow<nb::tuple>(h);
    if (t.size() != 5) throw_invalid(std::string(what) + ": bad tensor descriptor", rank);
    b.ptr = reinterpret_cast<void*>(nb::cast<uintptr_t>(t[0]));
    b.count = nb::cast<size_t>(t[1]);
    int dt = nb::cast<int>(t[2]);
    if (dt < 0 || dt >= kNumDataTypes) throw_invalid(std::string(what) + ": unsupported dtype code", rank);
    b.dtype = static_cast<DataType>(dt);
    b.dev_type = nb::cast<int>(t[3]);
    b.dev_id = nb::cast<int>(t[4]);
    return b;
  }
  bool ok;
  if (writable) {
    nb::ndarray<> w;
    ok = nb::try_cast(h, w, /*convert=*/false);
    if (ok) {
      b.keep = nb::ndarray<nb::ro>(w);
    } else if (nb::try_cast(h, b.keep, false)) {
      throw_invalid(std::string(what) + " is read-only (it is written to)", rank);
    }
  } else {
    ok = nb::try_cast(h, b.keep, false);
  }
  if (!ok) {
    // An array type DLPack cannot describe (numpy object, datetime, string, structured) is
    // still an array: name its dtype, not only its type, so the user sees what to change.
    // (The failed import may leave the exporter's BufferError set: clear it first.)
    PyErr_Clear();
    if (nb::hasattr(h, "dtype") && nb::hasattr(h, "shape")) {
      nb::object dtype = h.attr("dtype");
      nb::object text = nb::steal(PyObject_Str(dtype.ptr()));
      const char* name = text.is_valid() ? PyUnicode_AsUTF8(text.ptr()) : nullptr;
      if (!name) PyErr_Clear();
      throw_invalid(std::string(what) + " has unsupported dtype " + (name ? name : "?") + " (" +
                        nb::type_name(h.type()).c_str() + "; supported: " + kSupported + ")",
                    rank);
    }
    throw_invalid(std::string(what) + ": expected a tensor/array supporting DLPack or the buffer protocol, got " +
                      nb::type_name(h.type()).c_str(),
                  rank);
  }
  const auto& a = b.keep;
  // C-contiguous (any strides on dimensions of size 1; anything with <= 1 element).
  if (a.size() > 1 && a.stride_ptr() != nullptr) {
    int64_t expect = 1;
    for (int64_t i = static_cast<int64_t>(a.ndim()) - 1; i >= 0; --i) {
      if (a.shape(i) != 1 && a.stride(i) != expect)
        throw_invalid(std::string(what) + " is not contiguous (strides do not describe a dense C-order array); "
                                          "pass a contiguous tensor (e.g. .contiguous() / numpy.ascontiguousarray)",
                      rank);
      expect *= a.shape(i);
    }
  }
  if (dtype_override >= 0) {
    if (dtype_override >= kNumDataTypes) throw_invalid(std::string(what) + ": bad dtype override", rank);
    b.dtype = static_cast<DataType>(dtype_override);
    if (dtype_size(b.dtype) * 8 != a.dtype().bits) throw_invalid(std::string(what) + ": dtype override size mismatch", rank);
  } else if (!map_dlpack_dtype(a.dtype(), b.dtype)) {
    throw_invalid(std::string(what) + " has unsupported dtype " + dlpack_dtype_name(a.dtype()) + " (supported: " +
                      kSupported + ")",
                  rank);
  }
  b.ptr = const_cast<void*>(a.data());
  b.count = a.size();
  b.dev_type = a.device_type();
  b.dev_id = a.device_id();
  return b;
}

}  // namespace actorcc::py
