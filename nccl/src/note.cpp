// The ELF note that tells actorcc's libnccl.so.2 from NVIDIA's without loading it: the doctor
// and `python -m actorcc.nccl --check` read section .note.actorcc (owner "actorcc") from the
// file (python/actorcc/nccl.py, read_note). Its text: actorcc's version and the NCCL version
// code served (abi.h's, the one place it is set).
#include <cstdint>

#include "abi.h"

#define ACTORCC_NCCL_STR2(x) #x
#define ACTORCC_NCCL_STR(x) ACTORCC_NCCL_STR2(x)

namespace {

struct ActorccNote {
  uint32_t namesz, descsz, type;
  char name[8];   // "actorcc" and its NUL, padded to 4 bytes
  char desc[48];  // NUL-terminated text, padded
};

// `used` and `retain` keep it through the link; the section's name makes it a note section
// (SHT_NOTE) that readelf -n lists.
[[gnu::section(".note.actorcc"), gnu::used, gnu::retain, gnu::aligned(4)]]
const ActorccNote kNote = {8, 48, 1, "actorcc", "actorcc " ACTORCC_NCCL_NOTE_VERSION " nccl-abi " ACTORCC_NCCL_STR(ACTORCC_NCCL_VERSION_CODE)};

}  // namespace
