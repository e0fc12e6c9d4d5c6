// LD_AUDIT module: points the dynamic loader's search for NCCL at actorcc's libnccl.so.2.
//
//   LD_AUDIT=<actorcc>/lib/libactorcc_nccl_audit.so python train.py
//
// Every search for "libnccl.so.2" or "libnccl.so" (a DT_NEEDED entry such as libtorch_cuda's or
// CuPy's, or a dlopen by name or by any path ending in that name) is answered with actorcc's
// library before the loader looks anywhere, so NVIDIA's copy is never mapped into the process.
// Unlike LD_PRELOAD nothing is loaded into a process that never asks for NCCL: a child that
// inherits LD_AUDIT (it is an environment variable too) maps only this small module, with no
// dependency beyond libc, and the module binds no symbols (la_objopen returns no LA_FLG_BIND*
// flags), so calls through the PLT pay nothing. docs/nccl-use.md compares the two.
//
// Searches made by actorcc's own objects (anything under the folder above the target's, i.e.
// the installed actorcc package or the build tree) are left alone: the hierarchical backend
// loads NVIDIA's NCCL for its rails by design, and that search must not come back here.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static const char kLibName[] = "libnccl.so.2";
static char target[PATH_MAX];  // actorcc's libnccl.so.2, absolute
static char exempt[PATH_MAX];  // objects under this folder (ending in '/') are actorcc's own
static size_t exempt_len;
static char exempt_tag;  // the cookie value la_objopen gives actorcc's own objects

static void warn(const char* what, const char* path) {
  char line[PATH_MAX + 160];
  int n = snprintf(line, sizeof line, "actorcc nccl audit: %s%s\n", what, path);
  if (n > 0) {
    ssize_t ignored = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    (void)ignored;
  }
}

// dirname of `path` into `out` with a trailing '/', `levels` folders up.
static void folder_of(const char* path, int levels, char* out, size_t* out_len) {
  size_t n = strlen(path);
  while (levels-- > 0) {
    while (n > 0 && path[n - 1] != '/') --n;  // drop the last component
    while (n > 1 && path[n - 1] == '/') --n;  // and the slashes before it
  }
  if (n + 2 > PATH_MAX) n = 0;
  memcpy(out, path, n);
  out[n++] = '/';
  out[n] = '\0';
  *out_len = n;
}

static void find_target(void) {
  // setting: ACTORCC_NCCL_ABI_LIB - the libnccl.so.2 that actorcc.nccl and the LD_AUDIT module point NCCL's users at (a build tree's)
  const char* env = getenv("ACTORCC_NCCL_ABI_LIB");
  char own[PATH_MAX];
  if (env && *env) {
    snprintf(own, sizeof own, "%s", env);
  } else {
    // Installed layout: this module lies beside the library (actorcc/lib/ or <build>/nccl/).
    Dl_info info;
    size_t n;
    if (!dladdr((void*)&find_target, &info) || !info.dli_fname) {
      warn("cannot tell where this module lies; set ACTORCC_NCCL_ABI_LIB", "");
      return;
    }
    folder_of(info.dli_fname, 1, own, &n);
    snprintf(own + n, sizeof own - n, "%s", kLibName);
  }
  if (!realpath(own, target)) {
    // Still redirect, so the load fails with an error naming the missing file instead of
    // silently using NVIDIA's NCCL.
    snprintf(target, sizeof target, "%s", own);
    warn("actorcc's NCCL library not found at ", own);
  }
  folder_of(target, 2, exempt, &exempt_len);
}

EXPORT unsigned int la_version(unsigned int version) {
  find_target();
  return version < LAV_CURRENT ? version : LAV_CURRENT;
}

static int is_nccl_name(const char* name) {
  const char* base = strrchr(name, '/');
  base = base ? base + 1 : name;
  return strcmp(base, "libnccl.so") == 0 || strncmp(base, "libnccl.so.", 11) == 0;
}

EXPORT unsigned int la_objopen(struct link_map* map, Lmid_t lmid, uintptr_t* cookie) {
  (void)lmid;
  char real[PATH_MAX];
  const char* name = map->l_name;
  if (exempt_len && name && *name && realpath(name, real) && strncmp(real, exempt, exempt_len) == 0)
    *cookie = (uintptr_t)&exempt_tag;
  return 0;  // no LA_FLG_BINDTO / LA_FLG_BINDFROM: no symbol binding goes through this module
}

EXPORT char* la_objsearch(const char* name, uintptr_t* cookie, unsigned int flag) {
  if (flag != LA_SER_ORIG || !target[0] || !is_nccl_name(name)) return (char*)name;
  if (cookie && *cookie == (uintptr_t)&exempt_tag) return (char*)name;  // actorcc's own search
  return target;
}
