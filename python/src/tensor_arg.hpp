// A tensor argument of the extension, resolved: any DLPack / buffer-protocol object (imported
// through nb::ndarray without conversion: nothing is copied behind the caller's back) or the raw
// descriptor tuple (ptr, count, dtype, dlpack_device_type, device_id) of the Python layer's fast
// path. get_buf() checks what one tensor can be checked for alone (writable, C-contiguous, a
// supported dtype) and raises InvalidArgumentError naming `what` and the rank.
#pragma once
#include <nanobind/ndarray.h>

#include <cstddef>
#include <string>

#include "actorcc/types.hpp"
#include "bindings.hpp"

namespace actorcc::py {

// DLPack device types the extension tells apart.
inline constexpr int kDevCPU = 1, kDevCUDA = 2, kDevCUDAHost = 3, kDevCUDAManaged = 13;

// "cpu", "cuda:1", ...: how error messages name a device.
std::string device_name(int type, int id);

// One tensor argument, resolved.
struct Buf {
  void* ptr = nullptr;
  size_t count = 0;
  DataType dtype = DataType::Float32;
  int dev_type = kDevCPU;
  int dev_id = 0;
  nb::ndarray<nb::ro> keep;  // holds the DLPack import alive while the call runs
};

// `dtype_override` >= 0 reinterprets the elements (the Python layer uses it for numpy arrays
// of ml_dtypes.bfloat16, which DLPack cannot describe; it passes a uint16 view).
Buf get_buf(nb::handle h, bool writable, const char* what, int rank, int dtype_override);

}  // namespace actorcc::py
