/* Conformance test of actorcc's libnccl.so.2, written as an NCCL user writes: C, compiled against
 * the CUDA toolkit's real nccl.h (so the struct layouts and enum values are NCCL's own) and
 * linked against our library. Runs on the CPU-only mode (ACTORCC_BACKEND=cpu) over host buffers.
 *
 *   nccl_abi_test api                  version, error strings, config sizes, refusals, properties,
 *                                      nccl*Config calls, parameters, encryption, teams (1 rank)
 *   nccl_abi_test procs WORLD          WORLD processes: matrix, p2p, split, nonblocking init
 *   nccl_abi_test threads WORLD        WORLD ranks in one process: group init from one thread,
 *                                      matrix on one thread per rank, group-driven calls, InitAll
 *   nccl_abi_test abort                a rank's wait ended by ncclCommAbort from another thread
 *   nccl_abi_test kill                 a SIGKILLed rank seen through ncclCommGetAsyncError
 *   nccl_abi_test mismatch             ranks that disagree on a call's count or dtype
 *   nccl_abi_test stall                a rank that stops calling
 *   nccl_abi_test elastic              4 processes: planned shrink, a SIGKILLed rank and
 *                                      NCCL_SHRINK_ABORT, revoke, grow back with new processes
 *   nccl_abi_test group_release        ncclCommDestroy/ncclCommAbort inside a group (1 rank)
 *   nccl_abi_test refuse               3 processes: a bad argument to split, grow or send on one
 *                                      rank fails the others within seconds, naming it
 *   nccl_abi_test shrinkref            3 processes: shrink refusals without side effects (its
 *                                      caller excluded, a concurrent second shrink)
 * (`worker MODE RANK WORLD IDHEX` is what every mode but `api` and `threads` starts: one process
 * per rank.) With NCCL_ABI_TEST_GPU=1 (CUDA builds, the device machine) they run on the CUDA
 * backend, ranks sharing a GPU where one is lent (`threads` needs a GPU per rank).
 * Inputs are fresh each run (seeded from the unique id's random bytes), outputs are poisoned
 * before every call, and results are checked exactly (floats: against a float64 reference). */
#define _GNU_SOURCE
#include <nccl.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <math.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

/* ncclCommGetUniqueId and ncclCommGrow are NCCL 2.29's; the toolkit's nccl.h may be older. Their
 * prototypes as 2.29.2's nccl.h declares them. */
#if NCCL_VERSION_CODE < 22902
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                          ncclConfig_t* config);
#endif

/* ncclTimeout is 2.30.3's (its nccl.h: ncclTimeout = 8, ncclNumResults = 9); the toolkit's nccl.h
 * may be older. */
#if NCCL_VERSION_CODE < 23003
#define ncclTimeout ((ncclResult_t)8)
#endif
#define kNumResults 9

/* ncclCommQueryProperties' struct in each layout, member for member as NCCL's device header
 * (nccl_device/core.h) of the tag declares it; the toolkit's nccl.h (2.28) has none. The 2.31.2
 * layout is the one NVIDIA's nccl4py bindings generated from that release declare. */
struct props_v22902 { /* v2.29.2-1 (and 2.29.3): ginType a uint8_t enum */
  size_t size; unsigned int magic; unsigned int version;
  int rank, nRanks, cudaDev, nvmlDev;
  _Bool deviceApiSupport, multimemSupport; uint8_t ginType;
};
struct props_v22907 { /* v2.29.7-1 to v2.30.7-1 */
  size_t size; unsigned int magic; unsigned int version;
  int rank, nRanks, cudaDev, nvmlDev;
  _Bool deviceApiSupport, multimemSupport; int ginType;
  int nLsaTeams; _Bool hostRmaSupport; int railedGinType;
};
struct props_v23102 { /* 2.31.2 */
  size_t size; unsigned int magic; unsigned int version;
  int rank, nRanks, cudaDev, nvmlDev;
  _Bool deviceApiSupport, multimemSupport; int ginType;
  int nLsaTeams; _Bool hostRmaSupport; int railedGinType;
  uint64_t commHash; int ginMinStride; int ginConnectionType; uint8_t ginSupport[64];
  size_t devCommRuntimeVersionSize;
};
_Static_assert(sizeof(struct props_v22902) == 40 && sizeof(struct props_v22907) == 56 &&
                   sizeof(struct props_v23102) == 144, "property layouts");
ncclResult_t ncclCommQueryProperties(ncclComm_t comm, void* props);

/* ncclCollConfig_t of 2.32.3's nccl.h (NVIDIA/nccl 12df1a1, NCCL 2.32.3); 2.31.2's ends after
 * userProfilerTag (64 bytes). */
#if NCCL_VERSION_CODE < 23100
typedef struct {
  size_t size; unsigned int magic; unsigned int version;
  void* ext;
  int minCTAs, maxCTAs, nvlsCTAs, cgaClusterSize;
  const char* algSelection;
  int forceAlgSelection, CTAPolicy;
  uint64_t userProfilerTag;
  void* launchCompletionEvent;
} ncclCollConfig_t;
#define NCCL_COLLCONFIG_INITIALIZER                                                                  \
  {sizeof(ncclCollConfig_t), 0xcafebeef, 23203, NULL, INT_MIN, INT_MIN, INT_MIN, INT_MIN, NULL, 1, INT_MIN, 0, \
   NULL}
ncclResult_t ncclAllReduceConfig(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t,
                                 const ncclCollConfig_t*);
ncclResult_t ncclBroadcastConfig(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t,
                                 const ncclCollConfig_t*);
ncclResult_t ncclReduceConfig(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t,
                              const ncclCollConfig_t*);
ncclResult_t ncclAllGatherConfig(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t,
                                 const ncclCollConfig_t*);
ncclResult_t ncclReduceScatterConfig(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                     cudaStream_t, const ncclCollConfig_t*);
ncclResult_t ncclAlltoAllConfig(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t,
                                const ncclCollConfig_t*);
ncclResult_t ncclGatherConfig(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t,
                              const ncclCollConfig_t*);
ncclResult_t ncclScatterConfig(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t,
                               const ncclCollConfig_t*);
#endif
_Static_assert(sizeof(ncclCollConfig_t) == 72, "2.32.3's ncclCollConfig_t");

/* The parameter API as 2.30.4's nccl.h declares it. */
#if NCCL_VERSION_CODE < 23004
typedef struct ncclParamHandle* ncclParamHandle_t;
ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key);
ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t* out);
ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out);
ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);
ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen);
ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen);
void ncclParamDumpAll(void);
#endif

/* 2.32.3's ncclSetEncryption and the device API's host helpers, as nccl4py 0.6.0's bindings
 * declare them (the toolkit's nccl.h has neither). */
typedef struct { size_t size; unsigned int magic; unsigned int version; int mode; const char* psk; } enc_config_v23203;
ncclResult_t ncclSetEncryption(const enc_config_v23203* config);
typedef struct { int nRanks, rank, stride; } team_t;
team_t ncclTeamWorld(ncclComm_t comm);
team_t ncclTeamLsa(ncclComm_t comm);
int ncclTeamRankToWorld(ncclComm_t comm, team_t team, int rank);
int ncclTeamRankToLsa(ncclComm_t comm, team_t team, int rank);
ncclResult_t ncclGetPeerDeviceLeInfo(ncclWindow_t window, size_t offset, int peerWorld, uint32_t* leId, size_t* leOffset);
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, void* outHandle, void* outReq);

/* GPU mode (NCCL_ABI_TEST_GPU=1, builds with CUDA): the same checks on the CUDA backend. Buffers
 * are managed memory (the host code fills and checks them as before), each rank has its own
 * non-blocking stream, and every call is followed by a wait on that stream. */
#ifdef NCCL_ABI_TEST_CUDA
static int g_gpu = 0;
static void* xalloc(size_t n) {
  if (!g_gpu) return malloc(n);
  void* p = NULL;
  if (cudaMallocManaged(&p, n, cudaMemAttachGlobal) != cudaSuccess) {
    fprintf(stderr, "FAIL: cudaMallocManaged(%zu)\n", n);
    exit(1);
  }
  return p;
}
static void xfree(void* p) {
  if (g_gpu) cudaFree(p);
  else free(p);
}
static cudaStream_t xstream(void) {
  cudaStream_t s = NULL;
  if (g_gpu && cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) exit(1);
  return s;
}
static void xsync(cudaStream_t s) {
  if (g_gpu && cudaStreamSynchronize(s) != cudaSuccess) {
    fprintf(stderr, "FAIL: cudaStreamSynchronize\n");
    exit(1);
  }
}
static void xstream_free(cudaStream_t s) {
  if (g_gpu) cudaStreamDestroy(s);
}
/* A wait that may end in an error (a kernel that gave up): 1 when the stream finished cleanly. */
static int xwait(cudaStream_t s) { return !g_gpu || cudaStreamSynchronize(s) == cudaSuccess; }
#else
static int g_gpu = 0;
static void* xalloc(size_t n) { return malloc(n); }
static void xfree(void* p) { free(p); }
static cudaStream_t xstream(void) { return NULL; }
static void xsync(cudaStream_t s) { (void)s; }
static void xstream_free(cudaStream_t s) { (void)s; }
static int xwait(cudaStream_t s) { (void)s; return 1; }
#endif

static int g_fail = 0;
#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);            \
      fprintf(stderr, __VA_ARGS__);                                   \
      fprintf(stderr, "\n");                                          \
      __sync_fetch_and_add(&g_fail, 1);                               \
    }                                                                 \
  } while (0)
#define NCCLOK(call)                                                                         \
  do {                                                                                       \
    ncclResult_t r_ = (call);                                                                \
    if (r_ != ncclSuccess) {                                                                 \
      fprintf(stderr, "FAIL %s:%d: %s -> %d (%s): %s\n", __FILE__, __LINE__, #call, (int)r_, \
              ncclGetErrorString(r_), ncclGetLastError(NULL));                               \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Polls ncclCommGetAsyncError until it leaves ncclSuccess, for at most `limit_s`. */
static ncclResult_t wait_async_error(ncclComm_t comm, double limit_s) {
  ncclResult_t s = ncclSuccess;
  const double t0 = now_s();
  while (s == ncclSuccess && now_s() - t0 < limit_s) {
    NCCLOK(ncclCommGetAsyncError(comm, &s));
    if (s == ncclSuccess) usleep(10000);
  }
  return s;
}

/* ---- deterministic randomness shared by all ranks ------------------------------------------ */
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
static uint64_t seed_of(const ncclUniqueId* id) {
  uint64_t s = 0;
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i) s = mix(s ^ (unsigned char)id->internal[i]);
  return s;
}

/* ---- element access for every dtype -------------------------------------------------------- */
static size_t dsize(int t) {
  static const size_t s[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return s[t];
}
static uint16_t f2h(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 0xff, m = x & 0x7fffff;
  if (e == 0) return (uint16_t)sign;
  int ne = (int)e - 127 + 15;
  if (ne >= 31) return (uint16_t)(sign | 0x7c00);
  if (ne <= 0) return (uint16_t)sign; /* our values never go subnormal */
  uint32_t hm = m >> 13, rest = m & 0x1fff;
  uint32_t h = sign | ((uint32_t)ne << 10) | hm;
  if (rest > 0x1000 || (rest == 0x1000 && (hm & 1))) h++;
  return (uint16_t)h;
}
static float h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
  if (e == 0) x = sign; /* zero (no subnormals in our data) */
  else if (e == 31) x = sign | 0x7f800000 | (m << 13);
  else x = sign | ((e - 15 + 127) << 23) | (m << 13);
  float f;
  memcpy(&f, &x, 4);
  return f;
}
static uint16_t f2bf(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}
static float bf2f(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}
static void store(void* p, size_t i, int t, double v) {
  switch (t) {
    case ncclInt8: ((int8_t*)p)[i] = (int8_t)v; break;
    case ncclUint8: ((uint8_t*)p)[i] = (uint8_t)v; break;
    case ncclInt32: ((int32_t*)p)[i] = (int32_t)v; break;
    case ncclUint32: ((uint32_t*)p)[i] = (uint32_t)v; break;
    case ncclInt64: ((int64_t*)p)[i] = (int64_t)v; break;
    case ncclUint64: ((uint64_t*)p)[i] = (uint64_t)v; break;
    case ncclFloat16: ((uint16_t*)p)[i] = f2h((float)v); break;
    case ncclFloat32: ((float*)p)[i] = (float)v; break;
    case ncclFloat64: ((double*)p)[i] = v; break;
    case ncclBfloat16: ((uint16_t*)p)[i] = f2bf((float)v); break;
    default: ((uint8_t*)p)[i] = (uint8_t)v; break; /* fp8: raw bytes */
  }
}
static double load(const void* p, size_t i, int t) {
  switch (t) {
    case ncclInt8: return ((const int8_t*)p)[i];
    case ncclUint8: return ((const uint8_t*)p)[i];
    case ncclInt32: return ((const int32_t*)p)[i];
    case ncclUint32: return ((const uint32_t*)p)[i];
    case ncclInt64: return (double)((const int64_t*)p)[i];
    case ncclUint64: return (double)((const uint64_t*)p)[i];
    case ncclFloat16: return h2f(((const uint16_t*)p)[i]);
    case ncclFloat32: return ((const float*)p)[i];
    case ncclFloat64: return ((const double*)p)[i];
    case ncclBfloat16: return bf2f(((const uint16_t*)p)[i]);
    default: return ((const uint8_t*)p)[i];
  }
}
static int is_float(int t) { return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16; }
static int is_unsigned(int t) { return t == ncclUint8 || t == ncclUint32 || t == ncclUint64 || t >= ncclFloat8e4m3; }

/* Rank r's input element i of call `call`: small integers, exact in every type and every sum. */
static double input(uint64_t seed, int call, int rank, size_t i, int t, int op) {
  uint64_t x = mix(seed ^ mix(((uint64_t)call << 40) ^ ((uint64_t)rank << 32) ^ i));
  if (t >= ncclFloat8e4m3) return (double)(x & 0xff);
  if (op == ncclProd) {
    static const int sv[] = {-2, -1, 1, 2}, uv[] = {1, 2, 3, 1};
    return is_unsigned(t) ? uv[x & 3] : sv[x & 3];
  }
  return is_unsigned(t) ? (double)(x % 9) : (double)((int)(x % 9) - 4);
}
static double reduce_ref(uint64_t seed, int call, int world, size_t i, int t, int op) {
  double acc = input(seed, call, 0, i, t, op);
  for (int r = 1; r < world; ++r) {
    double v = input(seed, call, r, i, t, op);
    if (op == ncclSum || op == ncclAvg) acc += v;
    else if (op == ncclProd) acc *= v;
    else if (op == ncclMax) acc = v > acc ? v : acc;
    else acc = v < acc ? v : acc;
  }
  if (op == ncclAvg) acc = is_float(t) ? acc / world : (double)(long long)(acc / world); /* ints truncate */
  return acc;
}
static int close_enough(double got, double want, int t, int op) {
  if (op != ncclAvg || !is_float(t)) return got == want;
  double tol = t == ncclFloat64 ? 1e-12 : t == ncclFloat32 ? 1e-6 : t == ncclFloat16 ? 2e-3 : 1e-2;
  return fabs(got - want) <= tol * (fabs(want) + 1);
}
static void poison(void* p, size_t bytes) { memset(p, 0xA5, bytes); }

static const int kNative[] = {ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64,
                              ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16};
static int native_op(int t, int op) { return !(t == ncclUint32 || t == ncclUint64) || op <= ncclProd; }

/* ---- the collective matrix on one rank ----------------------------------------------------- */
static void matrix(ncclComm_t comm, uint64_t seed) {
  cudaStream_t st = xstream();
  int rank, world;
  NCCLOK(ncclCommUserRank(comm, &rank));
  NCCLOK(ncclCommCount(comm, &world));
  int call = 0;
  for (size_t ti = 0; ti < sizeof kNative / sizeof kNative[0]; ++ti) {
    const int t = kNative[ti];
    const size_t es = dsize(t);
    for (int op = 0; op < ncclNumOps; ++op) {
      if (!native_op(t, op)) continue;
      for (int kind = 0; kind < 3; ++kind, ++call) { /* all-reduce, reduce-scatter, reduce */
        const size_t n = 1 + mix(seed + call) % 700;  /* odd sizes, the same on every rank */
        const size_t in_n = kind == 1 ? n * world : n, out_n = n;
        const int root = (int)(mix(seed ^ call) % world);
        char* in = xalloc(in_n * es);
        char* out = xalloc(out_n * es + 64);
        for (size_t i = 0; i < in_n; ++i) store(in, i, t, input(seed, call, rank, i, t, op));
        poison(out, out_n * es + 64);
        ncclResult_t r;
        if (kind == 0) r = ncclAllReduce(in, out, n, t, op, comm, st);
        else if (kind == 1) r = ncclReduceScatter(in, out, n, t, op, comm, st);
        else r = ncclReduce(in, out, n, t, op, root, comm, st);
        xsync(st);
        CHECK(r == ncclSuccess, "rank %d kind %d dtype %d op %d: %s", rank, kind, t, op, ncclGetLastError(comm));
        if (r != ncclSuccess) exit(1);
        if (kind != 2 || rank == root) {
          size_t bad = 0;
          for (size_t i = 0; i < out_n; ++i) {
            const size_t gi = kind == 1 ? rank * n + i : i;
            const double want = reduce_ref(seed, call, world, gi, t, op), got = load(out, i, t);
            if (!close_enough(got, want, t, op) && bad++ < 3)
              fprintf(stderr, "FAIL rank %d kind %d dtype %d op %d n %zu [%zu]: got %g want %g\n", rank, kind, t, op,
                      n, i, got, want);
          }
          CHECK(bad == 0, "rank %d: %zu wrong elements (kind %d dtype %d op %d)", rank, bad, kind, t, op);
          const unsigned char* tail = (const unsigned char*)out + out_n * es;
          for (int k = 0; k < 64; ++k) CHECK(tail[k] == 0xA5, "rank %d kind %d wrote past the output", rank, kind);
        }
        xfree(in);
        xfree(out);
      }
    }
  }
  /* Byte movers, every dtype (fp8 included). */
  for (int t = 0; t < ncclNumTypes; ++t, call += 6) {
    const size_t es = dsize(t), n = 1 + mix(seed + call) % 500;
    const int root = (int)(mix(seed ^ call) % world);
    char* in = xalloc(n * world * es);
    char* out = xalloc(n * world * es);
    /* all-gather */
    for (size_t i = 0; i < n; ++i) store(in, i, t, input(seed, call, rank, i, t, ncclSum));
    poison(out, n * world * es);
    NCCLOK(ncclAllGather(in, out, n, t, comm, st));
    xsync(st);
    for (int r = 0; r < world; ++r)
      for (size_t i = 0; i < n; ++i)
        CHECK(load(out, r * n + i, t) == input(seed, call, r, i, t, ncclSum), "allgather dtype %d rank %d", t, rank);
    /* broadcast, then the in-place ncclBcast */
    for (size_t i = 0; i < n; ++i) store(in, i, t, input(seed, call + 1, rank, i, t, ncclSum));
    poison(out, n * es);
    NCCLOK(ncclBroadcast(in, out, n, t, root, comm, st));
    xsync(st);
    for (size_t i = 0; i < n; ++i)
      CHECK(load(out, i, t) == input(seed, call + 1, root, i, t, ncclSum), "broadcast dtype %d rank %d", t, rank);
    for (size_t i = 0; i < n; ++i) store(out, i, t, rank == root ? input(seed, call + 2, root, i, t, ncclSum) : 0);
    if (rank != root) poison(out, n * es);
    NCCLOK(ncclBcast(out, n, t, root, comm, st));
    xsync(st);
    for (size_t i = 0; i < n; ++i)
      CHECK(load(out, i, t) == input(seed, call + 2, root, i, t, ncclSum), "bcast dtype %d rank %d", t, rank);
    /* all-to-all: block k of rank r goes to rank k's block r */
    for (int k = 0; k < world; ++k)
      for (size_t i = 0; i < n; ++i) store(in, k * n + i, t, input(seed, call + 3, rank, k * n + i, t, ncclSum));
    poison(out, n * world * es);
    NCCLOK(ncclAlltoAll(in, out, n, t, comm, st));
    xsync(st);
    for (int r = 0; r < world; ++r)
      for (size_t i = 0; i < n; ++i)
        CHECK(load(out, r * n + i, t) == input(seed, call + 3, r, rank * n + i, t, ncclSum), "alltoall dtype %d", t);
    /* gather to root */
    for (size_t i = 0; i < n; ++i) store(in, i, t, input(seed, call + 4, rank, i, t, ncclSum));
    poison(out, n * world * es);
    NCCLOK(ncclGather(in, out, n, t, root, comm, st));
    xsync(st);
    if (rank == root)
      for (int r = 0; r < world; ++r)
        for (size_t i = 0; i < n; ++i)
          CHECK(load(out, r * n + i, t) == input(seed, call + 4, r, i, t, ncclSum), "gather dtype %d", t);
    /* scatter from root */
    for (size_t i = 0; i < n * world; ++i) store(in, i, t, input(seed, call + 5, rank, i, t, ncclSum));
    poison(out, n * es);
    NCCLOK(ncclScatter(in, out, n, t, root, comm, st));
    xsync(st);
    for (size_t i = 0; i < n; ++i)
      CHECK(load(out, i, t) == input(seed, call + 5, root, rank * n + i, t, ncclSum), "scatter dtype %d", t);
    xfree(in);
    xfree(out);
  }
  xstream_free(st);
}

/* A ring in one group (send right, receive from the left), then a pairwise exchange with a
 * different count per pair (torch's uneven all_to_all), each as one batch. */
static void p2p(ncclComm_t comm, uint64_t seed) {
  cudaStream_t st = xstream();
  int rank, world;
  NCCLOK(ncclCommUserRank(comm, &rank));
  NCCLOK(ncclCommCount(comm, &world));
  const size_t n = 1 + mix(seed ^ 77) % 999;
  float* s = xalloc(n * 4);
  float* r = xalloc(n * 4);
  for (size_t i = 0; i < n; ++i) s[i] = (float)input(seed, 900, rank, i, ncclFloat32, ncclSum);
  poison(r, n * 4);
  NCCLOK(ncclGroupStart());
  NCCLOK(ncclSend(s, n, ncclFloat32, (rank + 1) % world, comm, st));
  NCCLOK(ncclRecv(r, n, ncclFloat32, (rank + world - 1) % world, comm, st));
  NCCLOK(ncclGroupEnd());
  xsync(st);
  for (size_t i = 0; i < n; ++i)
    CHECK(r[i] == (float)input(seed, 900, (rank + world - 1) % world, i, ncclFloat32, ncclSum), "ring rank %d", rank);
  xfree(s);
  xfree(r);
  int64_t* bufs[2 * 16];
  NCCLOK(ncclGroupStart());
  for (int k = 0; k < world; ++k) {
    const size_t ns = 1 + (rank * 7 + k * 3) % 11, nr = 1 + (k * 7 + rank * 3) % 11;
    bufs[2 * k] = xalloc(ns * 8);
    bufs[2 * k + 1] = xalloc(nr * 8);
    for (size_t i = 0; i < ns; ++i) bufs[2 * k][i] = (int64_t)(rank * 1000 + k * 100 + i);
    poison(bufs[2 * k + 1], nr * 8);
    NCCLOK(ncclSend(bufs[2 * k], ns, ncclInt64, k, comm, st));
    NCCLOK(ncclRecv(bufs[2 * k + 1], nr, ncclInt64, k, comm, st));
  }
  NCCLOK(ncclGroupEnd());
  xsync(st);
  for (int k = 0; k < world; ++k) {
    const size_t nr = 1 + (k * 7 + rank * 3) % 11;
    for (size_t i = 0; i < nr; ++i)
      CHECK(bufs[2 * k + 1][i] == (int64_t)(k * 1000 + rank * 100 + i), "pairwise rank %d from %d", rank, k);
    xfree(bufs[2 * k]);
    xfree(bufs[2 * k + 1]);
  }
  xstream_free(st);
}

/* 2.31's nccl*Config collectives across ranks: each rank contributes rank+1; exact results. */
static void coll_config_ranks(ncclComm_t comm, int rank, int world) {
  ncclCollConfig_t cfg = NCCL_COLLCONFIG_INITIALIZER;
  cfg.algSelection = "tree";
  cfg.forceAlgSelection = 0;
  cudaStream_t st = xstream();
  float* x = (float*)xalloc(sizeof(float) * world);
  float* y = (float*)xalloc(sizeof(float) * world);
  for (int i = 0; i < world; ++i) x[i] = (float)(rank + 1);
  poison(y, sizeof(float) * world);
  NCCLOK(ncclAllReduceConfig(x, y, 1, ncclFloat32, ncclSum, comm, st, &cfg));
  xsync(st);
  CHECK(y[0] == world * (world + 1) / 2.0f, "ncclAllReduceConfig across %d ranks: %g", world, y[0]);
  poison(y, sizeof(float) * world);
  NCCLOK(ncclGroupStart());
  NCCLOK(ncclAllGatherConfig(x, y, 1, ncclFloat32, comm, st, &cfg));
  NCCLOK(ncclGroupEnd());
  xsync(st);
  for (int i = 0; i < world; ++i) CHECK(y[i] == i + 1, "ncclAllGatherConfig: slot %d is %g", i, y[i]);
  xfree(x);
  xfree(y);
  xstream_free(st);
}

static void wait_ready(ncclComm_t comm);

/* Split by parity, keys reversed, the last rank NOCOLOR; then an all-reduce inside each part. */
static void split(ncclComm_t comm) {
  cudaStream_t st = xstream();
  int rank, world;
  NCCLOK(ncclCommUserRank(comm, &rank));
  NCCLOK(ncclCommCount(comm, &world));
  const int color = rank == world - 1 ? NCCL_SPLIT_NOCOLOR : rank % 2;
  ncclComm_t sub = (ncclComm_t)0x1;
  /* A NULL config inherits the parent's: a nonblocking parent makes a nonblocking child. */
  const ncclResult_t r = ncclCommSplit(comm, color, world - rank, &sub, NULL);
  CHECK(r == ncclSuccess || r == ncclInProgress, "split rank %d: %d (%s)", rank, (int)r, ncclGetLastError(comm));
  if (sub && color != NCCL_SPLIT_NOCOLOR) wait_ready(sub);
  if (color == NCCL_SPLIT_NOCOLOR) {
    CHECK(sub == NULL, "NOCOLOR rank %d got a communicator", rank);
    return;
  }
  int members = 0, expect_rank = 0;
  for (int r = 0; r < world - 1; ++r)
    if (r % 2 == color) {
      ++members;
      if (r > rank) ++expect_rank; /* keys reversed: higher parent ranks come first */
    }
  int n = -1, me = -1;
  NCCLOK(ncclCommCount(sub, &n));
  NCCLOK(ncclCommUserRank(sub, &me));
  CHECK(n == members && me == expect_rank, "split rank %d: got %d of %d, want %d of %d", rank, me, n, expect_rank,
        members);
  int64_t* v = xalloc(16);
  int64_t want = 0;
  v[0] = rank;
  v[1] = -1;
  for (int r = 0; r < world - 1; ++r)
    if (r % 2 == color) want += r;
  NCCLOK(ncclAllReduce(v, v + 1, 1, ncclInt64, ncclSum, sub, st));
  xsync(st);
  CHECK(v[1] == want, "split all-reduce rank %d: %lld, want %lld", rank, (long long)v[1], (long long)want);
  NCCLOK(ncclCommFinalize(sub));
  NCCLOK(ncclCommDestroy(sub));
  xfree(v);
  xstream_free(st);
}

static void wait_ready(ncclComm_t comm) {
  ncclResult_t s = ncclInProgress;
  const double t0 = now_s();
  while (s == ncclInProgress && now_s() - t0 < 30) {
    NCCLOK(ncclCommGetAsyncError(comm, &s));
    if (s == ncclInProgress) usleep(1000);
  }
  CHECK(s == ncclSuccess, "nonblocking init ended in %d: %s", (int)s, ncclGetLastError(comm));
}

/* ---- modes --------------------------------------------------------------------------------- */
static void hex_id(const ncclUniqueId* id, char* out) {
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i) sprintf(out + 2 * i, "%02x", (unsigned char)id->internal[i]);
}
static void unhex_id(const char* s, ncclUniqueId* id) {
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i) {
    unsigned v;
    sscanf(s + 2 * i, "%2x", &v);
    id->internal[i] = (char)v;
  }
}

struct abort_arg {
  ncclComm_t comm;
  ncclResult_t result;
  double took;
};
static void* blocked_call(void* p) {
  struct abort_arg* a = p;
  float* x = xalloc(32);
  for (int i = 0; i < 4; ++i) x[i] = (float)i;
  cudaStream_t st = xstream();
  const double t0 = now_s();
  a->result = ncclAllReduce(x, x + 4, 4, ncclFloat32, ncclSum, a->comm, st);
  /* On a GPU the call returns once enqueued; its kernel is what waits (until the abort). */
  if (a->result == ncclSuccess && !xwait(st)) a->result = ncclUnhandledCudaError;
  a->took = now_s() - t0;
  xfree(x);
  xstream_free(st);
  return NULL;
}
/* ---- elastic membership (ncclCommShrink, ncclCommRevoke, ncclCommGetUniqueId, ncclCommGrow) - */
/* Rank 0's seed, so that ranks that never saw the first id (new ranks) draw the same inputs. */
static uint64_t agree_seed(ncclComm_t comm, uint64_t mine) {
  cudaStream_t st = xstream();
  uint64_t* v = xalloc(8);
  v[0] = mine;
  NCCLOK(ncclBroadcast(v, v, 1, ncclUint64, 0, comm, st));
  xsync(st);
  const uint64_t s = v[0];
  xfree(v);
  xstream_free(st);
  return s;
}
static void expect_member(ncclComm_t comm, int rank, int world, const char* what) {
  int n = -1, me = -1;
  NCCLOK(ncclCommCount(comm, &n));
  NCCLOK(ncclCommUserRank(comm, &me));
  CHECK(n == world && me == rank, "%s: rank %d of %d, want %d of %d", what, me, n, rank, world);
}
static void exact_calls(ncclComm_t comm, uint64_t seed) {
  const uint64_t s = agree_seed(comm, seed);
  matrix(comm, s);
  p2p(comm, s);
}
/* One all-reduce on `comm` of ranks 0..world-1; its result, and in *right whether an accepted
 * call's output holds the exact sum. */
static ncclResult_t try_rank_sum(ncclComm_t comm, int rank, int world, int* right) {
  cudaStream_t st = xstream();
  double* v = xalloc(16);
  v[0] = rank;
  v[1] = -1;
  ncclResult_t r = ncclAllReduce(v, v + 1, 1, ncclFloat64, ncclSum, comm, st);
  if (r == ncclSuccess && !xwait(st)) r = ncclUnhandledCudaError;
  *right = r == ncclSuccess && v[1] == world * (world - 1) / 2.0;
  if (r == ncclSuccess && !*right) fprintf(stderr, "rank %d: sum %g\n", rank, v[1]);
  xfree(v);
  xstream_free(st);
  return r;
}
/* The same, where the call must be right if accepted: ncclSuccess with the exact sum, or the error. */
static ncclResult_t rank_sum(ncclComm_t comm, int rank, int world) {
  int right = 0;
  const ncclResult_t r = try_rank_sum(comm, rank, world, &right);
  CHECK(r != ncclSuccess || right, "rank %d: an accepted all-reduce is wrong", rank);
  return r;
}

/* A new process of the grown group (2.29: comm NULL, the coordinator's id, its rank). */
static int elastic_newcomer(int rank, int world, const ncclUniqueId* gid) {
  ncclComm_t g = NULL;
  const double t0 = now_s();
  NCCLOK(ncclCommGrow(NULL, world, gid, rank, &g, NULL));
  CHECK(rank_sum(g, rank, world) == ncclSuccess, "new rank %d: first all-reduce", rank);
  fprintf(stderr, "elastic: new rank %d: grow and first correct all-reduce in %.3f s\n", rank, now_s() - t0);
  expect_member(g, rank, world, "grown group (new rank)");
  exact_calls(g, 0);
  NCCLOK(ncclCommDestroy(g));
  return g_fail ? 1 : 0;
}

static pid_t spawn_worker(const char* mode, int rank, int world, const ncclUniqueId* id) {
  char idhex[2 * NCCL_UNIQUE_ID_BYTES + 1], rs[16], ws[16];
  hex_id(id, idhex);
  snprintf(rs, sizeof rs, "%d", rank);
  snprintf(ws, sizeof ws, "%d", world);
  char* argv[] = {"/proc/self/exe", "worker", (char*)mode, rs, ws, idhex, NULL};
  pid_t pid = -1;
  if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) != 0) {
    perror("posix_spawn");
    exit(1);
  }
  return pid;
}

/* WORLD processes. 1: a planned shrink (NCCL_SHRINK_DEFAULT) without the last rank, which stays
 * alive and learns that its comm was revoked; the collective matrix on the survivors. 2: rank
 * WORLD-2 is SIGKILLed; the others' call fails, ncclCommGetAsyncError names it, and
 * ncclCommShrink(NCCL_SHRINK_ABORT) goes on without it; the matrix again. 3: ncclCommRevoke ends
 * a call waiting in a duplicate comm; the peer hears of it; both destroy it. 4: the coordinator
 * (rank 0) makes a grow id and starts new processes; everyone grows back to WORLD (existing ranks
 * keep theirs, rank -1; new ranks pass comm NULL) and runs the matrix. */
static int elastic_worker(int rank, int world, const ncclUniqueId* id) {
  const uint64_t seed = seed_of(id);
  ncclComm_t comm = NULL;
  NCCLOK(ncclCommInitRank(&comm, world, *id, rank));
  const int left_out = world - 1;
  if (rank == left_out) {
    const ncclResult_t s = wait_async_error(comm, 20);
    CHECK(s == ncclRemoteError && strstr(ncclGetLastError(comm), "revoked"),
          "the rank left out of the shrink: async state %d: %s", (int)s, ncclGetLastError(comm));
    fprintf(stderr, "elastic: rank %d (excluded, alive): %s\n", rank, ncclGetLastError(comm));
    NCCLOK(ncclCommDestroy(comm));
    return g_fail ? 1 : 0;
  }
  ncclComm_t s1 = NULL;
  NCCLOK(ncclCommShrink(comm, (int*)&left_out, 1, &s1, NULL, NCCL_SHRINK_DEFAULT));
  expect_member(s1, rank, world - 1, "planned shrink");
  exact_calls(s1, seed ^ 1);
  CHECK(rank_sum(comm, rank, world) != ncclSuccess, "rank %d: a call on the shrunk parent succeeded", rank);
  NCCLOK(ncclCommDestroy(comm));

  const int victim = world - 2; /* the same number in s1 */
  if (rank == victim) raise(SIGKILL);
  const double t0 = now_s();
  /* NCCL's contract: a call made before the death is known may be accepted (on the GPU its
   * kernel learns of it later and ends without the output); the error then comes through
   * ncclCommGetAsyncError, checked next. The CPU backend's call fails itself. It is never right. */
  int right = 0;
  const ncclResult_t dead = try_rank_sum(s1, rank, world - 1, &right);
  CHECK((dead != ncclSuccess || g_gpu) && !right, "rank %d: an all-reduce with a dead rank: %d, %s", rank, (int)dead,
        right ? "the full sum" : "no sum");
  const ncclResult_t s = wait_async_error(s1, 20);
  char why[512];
  snprintf(why, sizeof why, "%s", ncclGetLastError(s1));
  char victim_name[32];
  snprintf(victim_name, sizeof victim_name, "rank %d", victim);
  CHECK(s == ncclRemoteError && strstr(why, victim_name), "rank %d: async state %d does not name %s: %s", rank, (int)s,
        victim_name, why);
  ncclComm_t s2 = NULL;
  NCCLOK(ncclCommShrink(s1, (int*)&victim, 1, &s2, NULL, NCCL_SHRINK_ABORT));
  CHECK(rank_sum(s2, rank, world - 2) == ncclSuccess, "rank %d: the first all-reduce after the shrink", rank);
  fprintf(stderr, "elastic: rank %d: failed call -> first correct all-reduce of the shrunk group: %.3f s (%s)\n", rank,
          now_s() - t0, why);
  expect_member(s2, rank, world - 2, "shrink after a kill");
  exact_calls(s2, seed ^ 2);
  NCCLOK(ncclCommDestroy(s1));

  ncclComm_t dup = NULL;
  NCCLOK(ncclCommSplit(s2, 0, rank, &dup, NULL));
  if (rank == 0) {
    struct abort_arg a = {dup, ncclSuccess, 0};
    pthread_t th;
    pthread_create(&th, NULL, blocked_call, &a);
    usleep(200 * 1000);
    NCCLOK(ncclCommRevoke(dup, NCCL_REVOKE_DEFAULT));
    pthread_join(th, NULL);
    CHECK(g_gpu || a.result != ncclSuccess, "the revoked all-reduce succeeded");
    CHECK(a.took < 3, "the revoked all-reduce took %.2f s (the revoke did not end it; the timeout is 5 s)", a.took);
    CHECK(rank_sum(dup, rank, world - 2) == ncclInvalidUsage, "a call after revoke: %s", ncclGetLastError(dup));
    ncclResult_t st = ncclInternalError;
    NCCLOK(ncclCommGetAsyncError(dup, &st));
    CHECK(st == ncclSuccess, "a revoked comm's async state: %d", (int)st);
  } else {
    const ncclResult_t st = wait_async_error(dup, 10);
    CHECK(st == ncclRemoteError && strstr(ncclGetLastError(dup), "rank 0"), "the peer of a revoke: %d: %s", (int)st,
          ncclGetLastError(dup));
    NCCLOK(ncclCommRevoke(dup, NCCL_REVOKE_DEFAULT));
  }
  NCCLOK(ncclCommDestroy(dup));

  ncclUniqueId gid;
  pid_t kids[16];
  const int old = world - 2;
  if (rank == 0) {
    NCCLOK(ncclCommGetUniqueId(s2, &gid));
    for (int r = old; r < world; ++r) kids[r] = spawn_worker("elastic_new", r, world, &gid);
  }
  ncclComm_t g = NULL;
  NCCLOK(ncclCommGrow(s2, world, rank == 0 ? &gid : NULL, -1, &g, NULL));
  CHECK(rank_sum(g, rank, world) == ncclSuccess, "rank %d: the grown group's first all-reduce", rank);
  expect_member(g, rank, world, "grown group (existing rank)");
  exact_calls(g, seed ^ 3);
  NCCLOK(ncclCommDestroy(s2));
  NCCLOK(ncclCommDestroy(g));
  if (rank == 0)
    for (int r = old; r < world; ++r) {
      int st = 0;
      const double w0 = now_s();
      while (waitpid(kids[r], &st, WNOHANG) == 0) {
        if (now_s() - w0 > 30) {
          fprintf(stderr, "FAIL elastic: new rank %d still running; killing it\n", r);
          kill(kids[r], SIGKILL);
          waitpid(kids[r], &st, 0);
          break;
        }
        usleep(5000);
      }
      CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "new rank %d ended with status 0x%x", r, st);
    }
  return g_fail ? 1 : 0;
}

/* The abort, mismatch and stall cases run one process per rank (`launch`), so they run the same
 * on the CPU backend and on one GPU that the ranks share (the CUDA backend refuses two ranks of
 * one process on one GPU). */

/* Rank 0 waits in an all-reduce that rank 1 never joins; another thread aborts rank 0. Rank 1
 * hears of it: its error state names rank 0. */
static int abort_worker(ncclComm_t comm, int rank) {
  if (rank == 1) {
    const ncclResult_t s = wait_async_error(comm, 10);
    CHECK(s == ncclRemoteError, "rank 1's async error after rank 0's abort: %d", (int)s);
    CHECK(strstr(ncclGetLastError(comm), "rank 0") != NULL, "rank 1's error does not name rank 0: %s",
          ncclGetLastError(comm));
    NCCLOK(ncclCommDestroy(comm));
    return g_fail ? 1 : 0;
  }
  struct abort_arg a = {comm, ncclSuccess, 0};
  pthread_t th;
  pthread_create(&th, NULL, blocked_call, &a);
  usleep(300 * 1000);
  const double t0 = now_s();
  NCCLOK(ncclCommAbort(comm));
  const double abort_took = now_s() - t0;
  pthread_join(th, NULL);
  CHECK(g_gpu || a.result != ncclSuccess, "the all-reduce that was aborted returned success");
  CHECK(a.took < 5, "the aborted all-reduce took %.2f s (the abort did not end it; the timeout is 60 s)", a.took);
  CHECK(abort_took < 5, "ncclCommAbort took %.2f s", abort_took);
  fprintf(stderr, "abort: the waiting call returned %d after %.2f s\n", (int)a.result, a.took);
  return g_fail ? 1 : 0;
}

/* Ranks that disagree on a call (what 0: the count, 1: the dtype): both calls fail, both comms'
 * async errors say so, in bounded time. */
static int mismatch_worker(ncclComm_t comm, int rank, int what) {
  const char* name = what ? "dtype" : "count";
  cudaStream_t st = xstream();
  float* x = xalloc(64 * 4);
  for (int i = 0; i < 64; ++i) x[i] = 1;
  const size_t n = what == 0 ? 10 + rank : 10;
  const ncclDataType_t t = what == 1 && rank == 1 ? ncclInt32 : ncclFloat32;
  ncclResult_t r = ncclAllReduce(x, x + 32, n, t, ncclSum, comm, st);
  if (r == ncclSuccess && !xwait(st)) r = ncclUnhandledCudaError;
  const ncclResult_t async = wait_async_error(comm, 10);
  CHECK(g_gpu || r != ncclSuccess, "%s mismatch: rank %d's call succeeded", name, rank);
  CHECK(async != ncclSuccess, "%s mismatch: rank %d's async error stayed success", name, rank);
  fprintf(stderr, "mismatch %s rank %d: %d/%d: %s\n", name, rank, (int)r, (int)async, ncclGetLastError(comm));
  NCCLOK(ncclCommAbort(comm));
  xstream_free(st);
  return g_fail ? 1 : 0;
}

/* A rank that stops calling: rank 0's call fails at the timeout (2 s, set by mode "stall")
 * naming rank 1; rank 1 hears that rank 0 gave up. */
static int stall_worker(ncclComm_t comm, int rank) {
  if (rank == 1) {
    const ncclResult_t s = wait_async_error(comm, 15);
    CHECK(s != ncclSuccess, "the stalled rank's async state stayed success");
    NCCLOK(ncclCommAbort(comm));
    return g_fail ? 1 : 0;
  }
  struct abort_arg a = {comm, ncclSuccess, 0};
  blocked_call(&a);
  const ncclResult_t s = wait_async_error(comm, 10);
  /* The rank that waited ran out of time: ncclTimeout (2.30.3), in the call and the async state. */
  CHECK(g_gpu || a.result == ncclTimeout, "the stalled call returned %d", (int)a.result);
  CHECK(a.took < 8, "the stalled call took %.2f s (timeout 2 s)", a.took);
  CHECK(s == ncclTimeout, "async error after the stall: %d", (int)s);
  CHECK(strstr(ncclGetLastError(comm), "rank 1") || strstr(ncclGetLastError(comm), "rank(s) 1"),
        "the stall error does not name rank 1: %s", ncclGetLastError(comm));
  fprintf(stderr, "stall: %.2f s: %s\n", a.took, ncclGetLastError(comm));
  NCCLOK(ncclCommAbort(comm));
  return g_fail ? 1 : 0;
}

/* ---- refusals that must reach the other ranks (refuse) and shrink's own (shrinkref) --------- */
/* A fresh communicator of every rank for one case: a refusal aborts its group, not the base's. */
static ncclComm_t fresh_dup(ncclComm_t base, int rank) {
  ncclComm_t dup = NULL;
  NCCLOK(ncclCommSplit(base, 0, rank, &dup, NULL));
  return dup;
}
/* A rank that waited in the call a bad argument on rank `bad` refused: its call failed within
 * seconds (the call timeout is 60 s in these modes) and names that rank. */
static void expect_told(ncclComm_t comm, ncclResult_t r, double took, int bad, const char* what) {
  char name[16];
  snprintf(name, sizeof name, "rank %d", bad);
  CHECK(r != ncclSuccess && r != ncclInProgress, "%s: the peer's call returned %d", what, (int)r);
  CHECK(took < 5, "%s: the peer's call took %.2f s (the call timeout is 60 s)", what, took);
  CHECK(strstr(ncclGetLastError(comm), name) && strstr(ncclGetLastError(comm), "bad argument"),
        "%s: the peer's error does not name %s's refusal: %s", what, name, ncclGetLastError(comm));
}

/* Each case on a fresh comm of 3 ranks: rank 1 passes a bad argument to a call that is collective
 * over the comm's group, the others make the same call correctly; rank 1 is refused at once and
 * the others' calls fail within seconds naming rank 1 (or, for a rank not in the call, its comm's
 * async error does). */
static int refuse_worker(ncclComm_t base, int rank, int world) {
  const int bad = 1;
  ncclConfig_t wrong = NCCL_CONFIG_INITIALIZER;
  wrong.magic = 0xdeadbeef;
  for (int c = 0; c < 7; ++c) {
    static const char* names[] = {"split color", "split config", "split newcomm", "grow rank", "grow config",
                                  "send dtype", "shrink flags"};
    ncclComm_t dup = fresh_dup(base, rank), out = NULL;
    ncclUniqueId gid;
    if (c == 3 || c == 4) {
      if (rank == 0) NCCLOK(ncclCommGetUniqueId(dup, &gid));
    }
    float* v = xalloc(4 * sizeof(float));
    const double t0 = now_s();
    ncclResult_t r;
    if (rank == bad) {
      switch (c) {
        case 0: r = ncclCommSplit(dup, -5, rank, &out, NULL); break;
        case 1: r = ncclCommSplit(dup, 0, rank, &out, &wrong); break;
        case 2: r = ncclCommSplit(dup, 0, rank, NULL, NULL); break;
        case 3: r = ncclCommGrow(dup, world + 1, NULL, 0, &out, NULL); break;
        case 4: r = ncclCommGrow(dup, world + 1, NULL, -1, &out, &wrong); break;
        case 5: r = ncclSend(v, 4, (ncclDataType_t)99, 0, dup, NULL); break;
        default: r = ncclCommShrink(dup, NULL, 0, &out, NULL, 7); break;
      }
      CHECK(r == ncclInvalidArgument, "%s: rank %d's bad call returned %d", names[c], rank, (int)r);
      CHECK(strstr(ncclGetLastError(dup), "rank 1"), "%s: the refusal does not name the rank: %s", names[c],
            ncclGetLastError(dup));
    } else if ((c == 5 && rank != 0) || c == 6) {
      /* Not part of the send: its comm's group is aborted all the same. A survivor already
       * inside its own shrink would wait for the join timeout (the shrunk group's join does not
       * watch the parent), so here the others only watch the parent. */
      r = wait_async_error(dup, 10);
      expect_told(dup, r, now_s() - t0, bad, names[c]);
    } else {
      switch (c) {
        case 0: case 1: case 2: r = ncclCommSplit(dup, 0, rank, &out, NULL); break;
        case 3: case 4: r = ncclCommGrow(dup, world + 1, rank == 0 ? &gid : NULL, -1, &out, NULL); break;
        default: r = ncclRecv(v, 4, ncclFloat32, bad, dup, NULL); break;
      }
      expect_told(dup, r, now_s() - t0, bad, names[c]);
      if (r == ncclSuccess && out) NCCLOK(ncclCommDestroy(out));
    }
    fprintf(stderr, "refuse: %s: rank %d: %d after %.2f s: %s\n", names[c], rank, (int)r, now_s() - t0,
            ncclGetLastError(dup));
    /* Every rank is done with the case before the refused rank lets go of its comm (which would
     * end the others' wait by itself). */
    CHECK(rank_sum(base, rank, world) == ncclSuccess, "rank %d: the base comm after case %s", rank, names[c]);
    NCCLOK(ncclCommAbort(dup));
    xfree(v);
  }
  NCCLOK(ncclCommDestroy(base));
  return g_fail ? 1 : 0;
}

struct shrink_arg {
  ncclComm_t comm, out;
  int exclude;
  int started; /* __atomic */
  ncclResult_t result;
};
static void* shrink_call(void* p) {
  struct shrink_arg* a = p;
  __atomic_store_n(&a->started, 1, __ATOMIC_RELEASE);
  a->result = ncclCommShrink(a->comm, &a->exclude, 1, &a->out, NULL, NCCL_SHRINK_DEFAULT);
  return NULL;
}

/* 3 ranks. 1: rank 1 names itself in NCCL_SHRINK_ABORT's exclude list: refused at once, and the
 * parent is untouched (an all-reduce of all 3 ranks on it is exact). 2: ranks 0 and 1 shrink
 * without rank 2; each tries a second shrink while its first is under way (rank 0 from another
 * thread while the first waits for rank 1, rank 1 inside a group before its first has run): both
 * refused with ncclInvalidUsage, the first shrinks go on to an exact all-reduce; a shrink of the
 * shrunk parent is refused too. Rank 2 learns that its comm was revoked. */
static int shrinkref_worker(ncclComm_t base, int rank, int world) {
  ncclComm_t dup = fresh_dup(base, rank), out = (ncclComm_t)0x1;
  if (rank == 1) {
    const double t0 = now_s();
    const int self = rank;
    const ncclResult_t r = ncclCommShrink(dup, (int*)&self, 1, &out, NULL, NCCL_SHRINK_ABORT);
    CHECK(r == ncclInvalidArgument && out == NULL, "a shrink that excludes its caller returned %d", (int)r);
    CHECK(strstr(ncclGetLastError(dup), "exclude list") && now_s() - t0 < 5, "self-exclusion: %.2f s: %s",
          now_s() - t0, ncclGetLastError(dup));
  }
  CHECK(rank_sum(dup, rank, world) == ncclSuccess, "rank %d: the parent of a refused shrink: %s", rank,
        ncclGetLastError(dup));
  NCCLOK(ncclCommDestroy(dup));

  dup = fresh_dup(base, rank);
  const int left_out = world - 1;
  if (rank == left_out) {
    const ncclResult_t s = wait_async_error(dup, 20);
    CHECK(s == ncclRemoteError && strstr(ncclGetLastError(dup), "revoked"), "the rank left out: %d: %s", (int)s,
          ncclGetLastError(dup));
    NCCLOK(ncclCommDestroy(dup));
    NCCLOK(ncclCommDestroy(base));
    return g_fail ? 1 : 0;
  }
  ncclComm_t shrunk = NULL, second = (ncclComm_t)0x1;
  int ex = left_out;
  if (rank == 0) {
    struct shrink_arg a = {dup, NULL, left_out, 0, ncclInternalError};
    pthread_t th;
    pthread_create(&th, NULL, shrink_call, &a);
    while (!__atomic_load_n(&a.started, __ATOMIC_ACQUIRE)) usleep(1000);
    usleep(200 * 1000); /* the thread's shrink is inside, waiting for rank 1 (which starts 2 s late) */
    const ncclResult_t r = ncclCommShrink(dup, &ex, 1, &second, NULL, NCCL_SHRINK_DEFAULT);
    const char* why = ncclGetLastError(dup);
    pthread_join(th, NULL);
    /* Whichever came second (this call, unless the thread was held up for the 200 ms) is refused
     * at once; the other shrinks. */
    const int thread_first = r == ncclInvalidUsage && a.result == ncclSuccess;
    CHECK(thread_first || (r == ncclSuccess && a.result == ncclInvalidUsage),
          "two concurrent shrinks returned %d and %d (one must be refused, the other succeed)", (int)a.result, (int)r);
    CHECK(!thread_first || (strstr(why, "in progress") && second == NULL), "concurrent shrink: %s", why);
    shrunk = thread_first ? a.out : second;
  } else {
    usleep(2000 * 1000);
    NCCLOK(ncclGroupStart());
    NCCLOK(ncclCommShrink(dup, &ex, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT));
    const ncclResult_t r = ncclCommShrink(dup, &ex, 1, &second, NULL, NCCL_SHRINK_DEFAULT);
    CHECK(r == ncclInvalidUsage && second == NULL, "a second shrink in the group returned %d", (int)r);
    NCCLOK(ncclGroupEnd());
  }
  if (shrunk) {
    expect_member(shrunk, rank, world - 1, "the first shrink");
    CHECK(rank_sum(shrunk, rank, world - 1) == ncclSuccess, "rank %d: all-reduce after the shrink", rank);
    NCCLOK(ncclCommDestroy(shrunk));
  }
  second = (ncclComm_t)0x1;
  CHECK(ncclCommShrink(dup, &ex, 1, &second, NULL, NCCL_SHRINK_ABORT) == ncclInvalidArgument && second == NULL,
        "a shrink of a shrunk parent");
  CHECK(strstr(ncclGetLastError(dup), "shrunk already"), "shrunk-parent text: %s", ncclGetLastError(dup));
  NCCLOK(ncclCommDestroy(dup));
  NCCLOK(ncclCommDestroy(base));
  return g_fail ? 1 : 0;
}

/* NCCL 2.29's suspend/resume (this nccl.h may predate it: NCCL's declarations, copied as facts). */
#ifndef NCCL_SUSPEND_MEM
#define NCCL_SUSPEND_MEM 0x01
typedef enum {
  ncclStatGpuMemSuspend = 0,
  ncclStatGpuMemSuspended = 1,
  ncclStatGpuMemPersist = 2,
  ncclStatGpuMemTotal = 3
} ncclCommMemStat_t;
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);
#endif

static uint64_t mem_stat(ncclComm_t comm, int stat) {
  uint64_t v = ~0ull;
  NCCLOK(ncclCommMemStats(comm, (ncclCommMemStat_t)stat, &v));
  return v;
}

static int shm_mappings(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  char line[512];
  int n = 0;
  while (f && fgets(line, sizeof line, f)) n += strstr(line, "/dev/shm/actorcc-") != NULL;
  if (f) fclose(f);
  return n;
}

/* ncclCommSuspend / Resume / MemStats with NCCL's flags and answers: 20 cycles with exact
   all-reduces, the memory released while suspended (CPU mode: the shared segment unmapped),
   calls refused with ncclInvalidUsage naming the suspension, a second suspend or resume
   refused, and the watchdog's poll (ncclCommGetAsyncError) still reporting success. */
static int suspend_worker(ncclComm_t comm, int rank, int world) {
  const size_t n = 100003;
  float* x = xalloc(n * sizeof(float));
  cudaStream_t st = xstream();
  const uint64_t active = mem_stat(comm, ncclStatGpuMemSuspend);
  CHECK(active > 0 && mem_stat(comm, ncclStatGpuMemSuspended) == 0, "rank %d: active stats %llu", rank,
        (unsigned long long)active);
  CHECK(mem_stat(comm, ncclStatGpuMemTotal) == active + mem_stat(comm, ncclStatGpuMemPersist), "rank %d: total", rank);
  uint64_t v = 0;
  CHECK(ncclCommMemStats(comm, (ncclCommMemStat_t)7, &v) == ncclInvalidArgument, "rank %d: stat 7 accepted", rank);
  CHECK(ncclCommMemStats(comm, ncclStatGpuMemTotal, NULL) == ncclInvalidArgument, "rank %d: NULL value", rank);
  NCCLOK(ncclCommSuspend(comm, 0)); /* no NCCL_SUSPEND_MEM: nothing is released */
  CHECK(mem_stat(comm, ncclStatGpuMemSuspended) == 0, "rank %d: flags 0 suspended the memory", rank);
  for (int k = 0; k < 20; ++k) {
    for (size_t i = 0; i < n; ++i) x[i] = (float)(rank * 1000 + k + (int)(i % 13));
    NCCLOK(ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, st));
    xsync(st);
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i)
      bad += x[i] != (float)(1000 * world * (world - 1) / 2 + world * (k + (int)(i % 13)));
    CHECK(bad == 0, "rank %d cycle %d: %zu wrong elements", rank, k, bad);
    NCCLOK(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
    CHECK(mem_stat(comm, ncclStatGpuMemSuspended) == 1 && mem_stat(comm, ncclStatGpuMemSuspend) == 0,
          "rank %d cycle %d: stats while suspended", rank, k);
    CHECK(shm_mappings() == 0, "rank %d cycle %d: the segment is mapped while suspended", rank, k);
    const double t0 = now_s();
    ncclResult_t r = ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, st);
    CHECK(r == ncclInvalidUsage && strstr(ncclGetLastError(comm), "suspended") != NULL && now_s() - t0 < 1.0,
          "rank %d cycle %d: all-reduce while suspended gave %d: %s", rank, k, (int)r, ncclGetLastError(comm));
    ncclResult_t async = ncclInternalError;
    NCCLOK(ncclCommGetAsyncError(comm, &async));
    CHECK(async == ncclSuccess, "rank %d cycle %d: async error %d while suspended", rank, k, (int)async);
    if (k == 0) {
      r = ncclCommSuspend(comm, NCCL_SUSPEND_MEM);
      CHECK(r == ncclInvalidUsage, "rank %d: a second suspend gave %d", rank, (int)r);
    }
    NCCLOK(ncclCommResume(comm));
    CHECK(mem_stat(comm, ncclStatGpuMemSuspend) == active && mem_stat(comm, ncclStatGpuMemSuspended) == 0,
          "rank %d cycle %d: stats after resume", rank, k);
  }
  ncclResult_t r = ncclCommResume(comm);
  CHECK(r == ncclInvalidUsage, "rank %d: resuming an active comm gave %d", rank, (int)r);
  x[0] = 1.0f;
  NCCLOK(ncclAllReduce(x, x, 1, ncclFloat32, ncclSum, comm, st));
  xsync(st);
  CHECK(x[0] == (float)world, "rank %d: after the cycles %g", rank, x[0]);
  xfree(x);
  xstream_free(st);
  NCCLOK(ncclCommDestroy(comm));
  return g_fail ? 1 : 0;
}

static int worker(const char* mode, int rank, int world, const char* idhex) {
  ncclUniqueId id;
  unhex_id(idhex, &id);
  const uint64_t seed = seed_of(&id);
  ncclComm_t comm;
  if (strcmp(mode, "procs") == 0) {
    /* nonblocking init: ncclInProgress, then ncclCommGetAsyncError until ready */
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&comm, world, id, rank, &cfg);
    CHECK(r == ncclInProgress || r == ncclSuccess, "nonblocking init returned %d", (int)r);
    /* Rank 0 calls at once: a call on a comm whose init still runs waits for it. */
    if (rank != 0) wait_ready(comm);
    matrix(comm, seed);
    p2p(comm, seed);
    coll_config_ranks(comm, rank, world);
    split(comm);
    NCCLOK(ncclCommFinalize(comm));
    NCCLOK(ncclCommDestroy(comm));
    return g_fail ? 1 : 0;
  }
  if (strcmp(mode, "kill") == 0) {
    NCCLOK(ncclCommInitRank(&comm, world, id, rank));
    if (rank == 1) raise(SIGKILL);
    const double t0 = now_s();
    float* xy = xalloc(8);
    xy[0] = 1;
    cudaStream_t st = xstream();
    ncclResult_t r = ncclAllReduce(xy, xy + 1, 1, ncclFloat32, ncclSum, comm, st);
    if (r == ncclSuccess) (void)xwait(st); /* on a GPU the kernel ends when the group aborts */
    CHECK(r == ncclRemoteError || (g_gpu && r == ncclSuccess), "all-reduce with a killed peer returned %d", (int)r);
    const ncclResult_t s = wait_async_error(comm, 20);
    const char* text = ncclGetLastError(comm);
    CHECK(s == ncclRemoteError, "ncclCommGetAsyncError gave %d", (int)s);
    CHECK(strstr(text, "rank 1") != NULL, "the error does not name rank 1: %s", text);
    fprintf(stderr, "kill: rank 0 saw it after %.2f s: %s\n", now_s() - t0, text);
    NCCLOK(ncclCommAbort(comm));
    return g_fail ? 1 : 0;
  }
  if (strcmp(mode, "abort") == 0 || strcmp(mode, "stall") == 0 || strncmp(mode, "mismatch", 8) == 0 ||
      strcmp(mode, "refuse") == 0 || strcmp(mode, "shrinkref") == 0 || strcmp(mode, "suspend") == 0) {
    NCCLOK(ncclCommInitRank(&comm, world, id, rank));
    if (strcmp(mode, "refuse") == 0) return refuse_worker(comm, rank, world);
    if (strcmp(mode, "suspend") == 0) return suspend_worker(comm, rank, world);
    if (strcmp(mode, "shrinkref") == 0) return shrinkref_worker(comm, rank, world);
    if (strcmp(mode, "abort") == 0) return abort_worker(comm, rank);
    if (strcmp(mode, "stall") == 0) return stall_worker(comm, rank);
    return mismatch_worker(comm, rank, strcmp(mode, "mismatch_dtype") == 0);
  }
  if (strcmp(mode, "elastic") == 0) return elastic_worker(rank, world, &id);
  if (strcmp(mode, "elastic_new") == 0) return elastic_newcomer(rank, world, &id);
  fprintf(stderr, "unknown worker mode %s\n", mode);
  return 2;
}

/* Starts `world` workers of `mode` (this binary), waits for them within `limit_s`. */
static int launch(const char* mode, int world, double limit_s, int expect_killed) {
  ncclUniqueId id;
  NCCLOK(ncclGetUniqueId(&id));
  pid_t pids[16];
  for (int r = 0; r < world; ++r) pids[r] = spawn_worker(mode, r, world, &id);
  int failed = 0, left = world;
  const double t0 = now_s();
  while (left > 0) {
    for (int r = 0; r < world; ++r) {
      if (pids[r] <= 0) continue;
      int st;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        const int killed = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
        const int ok = (expect_killed == r) ? killed : (WIFEXITED(st) && WEXITSTATUS(st) == 0);
        if (!ok) {
          fprintf(stderr, "FAIL %s: rank %d ended with status 0x%x\n", mode, r, st);
          failed = 1;
        }
        pids[r] = 0;
        --left;
      }
    }
    if (now_s() - t0 > limit_s) {
      fprintf(stderr, "FAIL %s: workers still running after %.0f s; killing them\n", mode, limit_s);
      for (int r = 0; r < world; ++r)
        if (pids[r] > 0) kill(pids[r], SIGKILL), waitpid(pids[r], NULL, 0);
      return 1;
    }
    usleep(5000);
  }
  return failed;
}

/* Several ranks in this process. */
struct rank_arg {
  ncclComm_t comm;
  uint64_t seed;
};
static void* rank_thread(void* p) {
  struct rank_arg* a = p;
  matrix(a->comm, a->seed);
  p2p(a->comm, a->seed);
  return NULL;
}
static void run_threads(ncclComm_t* comms, int world, uint64_t seed) {
  pthread_t th[16];
  struct rank_arg args[16];
  for (int r = 0; r < world; ++r) {
    args[r].comm = comms[r];
    args[r].seed = seed;
    pthread_create(&th[r], NULL, rank_thread, &args[r]);
  }
  for (int r = 0; r < world; ++r) pthread_join(th[r], NULL);
}

static int mode_threads(int world) {
  ncclUniqueId id;
  NCCLOK(ncclGetUniqueId(&id));
  const uint64_t seed = seed_of(&id);
  ncclComm_t comms[16];
  /* nccl-tests' init: one thread, one group, one InitRankConfig per rank. */
  NCCLOK(ncclGroupStart());
  for (int r = 0; r < world; ++r) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    NCCLOK(ncclCommInitRankConfig(&comms[r], world, id, r, &cfg));
  }
  NCCLOK(ncclGroupEnd());
  for (int r = 0; r < world; ++r) {
    int dev = 0;
    NCCLOK(ncclCommCuDevice(comms[r], &dev));
    CHECK(g_gpu ? dev >= 0 : dev == -1, "ncclCommCuDevice gave %d", dev);
  }
  run_threads(comms, world, seed);
  /* One thread drives every rank: grouped all-reduces (two per rank) and a grouped ring. */
  double(*in)[64] = xalloc(sizeof(double[16][64]));
  double(*out)[2][64] = xalloc(sizeof(double[16][2][64]));
  cudaStream_t sts[16];
  for (int r = 0; r < world; ++r) sts[r] = xstream();
  NCCLOK(ncclGroupStart());
  for (int r = 0; r < world; ++r) {
    for (int i = 0; i < 64; ++i) in[r][i] = r * 64 + i;
    poison(out[r], sizeof out[r]);
    NCCLOK(ncclAllReduce(in[r], out[r][0], 64, ncclFloat64, ncclSum, comms[r], sts[r]));
    NCCLOK(ncclAllReduce(in[r], out[r][1], 64, ncclFloat64, ncclMax, comms[r], sts[r]));
  }
  NCCLOK(ncclGroupEnd());
  for (int r = 0; r < world; ++r) xsync(sts[r]);
  for (int r = 0; r < world; ++r)
    for (int i = 0; i < 64; ++i) {
      double sum = 0;
      for (int k = 0; k < world; ++k) sum += k * 64 + i;
      CHECK(out[r][0][i] == sum && out[r][1][i] == (world - 1) * 64 + i, "grouped all-reduce rank %d [%d]", r, i);
    }
  NCCLOK(ncclGroupStart());
  for (int r = 0; r < world; ++r) {
    NCCLOK(ncclSend(in[r], 64, ncclFloat64, (r + 1) % world, comms[r], sts[r]));
    NCCLOK(ncclRecv(out[r][0], 64, ncclFloat64, (r + world - 1) % world, comms[r], sts[r]));
  }
  NCCLOK(ncclGroupEnd());
  for (int r = 0; r < world; ++r) xsync(sts[r]);
  for (int r = 0; r < world; ++r)
    for (int i = 0; i < 64; ++i) CHECK(out[r][0][i] == in[(r + world - 1) % world][i], "grouped ring rank %d", r);
  /* Split from one thread inside a group, NOCOLOR for rank 0. */
  ncclComm_t subs[16];
  NCCLOK(ncclGroupStart());
  for (int r = 0; r < world; ++r) NCCLOK(ncclCommSplit(comms[r], r == 0 ? NCCL_SPLIT_NOCOLOR : 5, r, &subs[r], NULL));
  NCCLOK(ncclGroupEnd());
  CHECK(subs[0] == NULL, "grouped split: NOCOLOR got a communicator");
  for (int r = 1; r < world; ++r) {
    int n = 0, me = -1;
    NCCLOK(ncclCommCount(subs[r], &n));
    NCCLOK(ncclCommUserRank(subs[r], &me));
    CHECK(n == world - 1 && me == r - 1, "grouped split rank %d: %d of %d", r, me, n);
  }
  for (int r = 1; r < world; ++r) NCCLOK(ncclCommDestroy(subs[r]));
  for (int r = 0; r < world; ++r) xstream_free(sts[r]);
  xfree(in);
  xfree(out);
  for (int r = 0; r < world; ++r) NCCLOK(ncclCommFinalize(comms[r]));
  for (int r = 0; r < world; ++r) NCCLOK(ncclCommDestroy(comms[r]));

  /* Nonblocking init inside a group: ncclGroupEnd says ncclInProgress. */
  NCCLOK(ncclGetUniqueId(&id));
  NCCLOK(ncclGroupStart());
  for (int r = 0; r < world; ++r) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t rr = ncclCommInitRankConfig(&comms[r], world, id, r, &cfg);
    CHECK(rr == ncclSuccess || rr == ncclInProgress, "grouped nonblocking init: %d", (int)rr);
  }
  ncclResult_t ge = ncclGroupEnd();
  CHECK(ge == ncclInProgress || ge == ncclSuccess, "grouped nonblocking init: ncclGroupEnd gave %d", (int)ge);
  for (int r = 0; r < world; ++r) wait_ready(comms[r]);
  for (int r = 0; r < world; ++r) NCCLOK(ncclCommDestroy(comms[r]));

  /* ncclCommInitRankScalable with two ids (the first serves; the second's root is stopped). */
  ncclUniqueId ids[2];
  NCCLOK(ncclGetUniqueId(&ids[0]));
  NCCLOK(ncclGetUniqueId(&ids[1]));
  NCCLOK(ncclGroupStart());
  for (int r = 0; r < world; ++r) NCCLOK(ncclCommInitRankScalable(&comms[r], world, r, 2, ids, NULL));
  NCCLOK(ncclGroupEnd());
  for (int r = 0; r < world; ++r) {
    int n = 0;
    NCCLOK(ncclCommCount(comms[r], &n));
    CHECK(n == world, "scalable init: %d ranks", n);
    NCCLOK(ncclCommDestroy(comms[r]));
  }

  /* ncclCommInitAll. */
  /* On a GPU every rank takes the current device (ranks share it: ACTORCC_CUDA_SHARE_GPU=1). */
  int devs[16] = {0};
  NCCLOK(ncclCommInitAll(comms, world, g_gpu ? devs : NULL));
  run_threads(comms, world, seed ^ 0x5555);
  for (int r = 0; r < world; ++r) NCCLOK(ncclCommDestroy(comms[r]));
  return g_fail ? 1 : 0;
}

/* A config of `size` bytes (NCCL's layouts 48-96) from a caller built with `version`. */
static ncclResult_t init_with_config(ncclComm_t* comm, size_t size, unsigned version, unsigned magic, int blocking) {
  unsigned char buf[128];
  memset(buf, 0xEE, sizeof buf); /* bytes past the caller's struct are garbage */
  ncclConfig_t base = NCCL_CONFIG_INITIALIZER;
  memcpy(buf, &base, size < sizeof base ? size : sizeof base);
  ncclConfig_t* cfg = (ncclConfig_t*)buf;
  cfg->size = size;
  cfg->magic = magic;
  cfg->version = version;
  cfg->blocking = blocking;
  ncclUniqueId id;
  NCCLOK(ncclGetUniqueId(&id));
  return ncclCommInitRankConfig(comm, 1, id, 0, cfg);
}

/* Elastic calls on one rank: their argument checks (each naming the rank), one grow id at a
 * time, and a revoked comm (calls refused, quiescent, destroyable). */
static void elastic_api(void) {
  ncclUniqueId id, gid;
  ncclComm_t comm = NULL, nc = (ncclComm_t)0x1;
  NCCLOK(ncclGetUniqueId(&id));
  NCCLOK(ncclCommInitRank(&comm, 1, id, 0));
  int self = 0;
  CHECK(ncclCommShrink(comm, &self, 1, &nc, NULL, 7) == ncclInvalidArgument && nc == NULL, "shrink flags 7");
  CHECK(strstr(ncclGetLastError(comm), "rank 0") && strstr(ncclGetLastError(comm), "shrinkFlags"), "flags text: %s",
        ncclGetLastError(comm));
  nc = (ncclComm_t)0x1;
  CHECK(ncclCommShrink(comm, &self, 1, &nc, NULL, NCCL_SHRINK_DEFAULT) == ncclInvalidArgument && nc == NULL,
        "a rank that excludes itself was shrunk");
  CHECK(strstr(ncclGetLastError(comm), "exclude list"), "self-exclusion text: %s", ncclGetLastError(comm));
  CHECK(ncclCommShrink(comm, NULL, 1, &nc, NULL, 0) == ncclInvalidArgument, "a NULL exclude list of 1 rank");
  CHECK(ncclCommGrow(comm, 2, NULL, 0, &nc, NULL) == ncclInvalidArgument, "an existing rank passed rank 0 to grow");
  CHECK(strstr(ncclGetLastError(comm), "-1"), "grow rank text: %s", ncclGetLastError(comm));
  CHECK(ncclCommGrow(comm, 1, NULL, -1, &nc, NULL) == ncclInvalidArgument, "grow to the same size");
  CHECK(ncclCommGrow(NULL, 2, NULL, 1, &nc, NULL) == ncclInvalidArgument, "a new rank without an id");
  NCCLOK(ncclCommGetUniqueId(comm, &gid));
  CHECK(ncclCommGetUniqueId(comm, &id) == ncclInvalidUsage, "a second grow id while the first is unconsumed");
  /* A size beyond 1..65536 is refused before anything is sized by it (it sized a vector of nRanks
   * ints first: 8 GiB for INT_MAX), on an existing rank and on a new one. */
  struct rusage ru0, ru1;
  getrusage(RUSAGE_SELF, &ru0);
  const double t0 = now_s();
  CHECK(ncclCommGrow(comm, INT_MAX, &gid, -1, &nc, NULL) == ncclInvalidArgument && nc == NULL, "grow to INT_MAX");
  CHECK(strstr(ncclGetLastError(comm), "1..65536"), "grow size text: %s", ncclGetLastError(comm));
  CHECK(ncclCommGrow(NULL, INT_MAX, &gid, 1, &nc, NULL) == ncclInvalidArgument, "a new rank of a grow to INT_MAX");
  /* A blocking init that failed returns its comm for ncclGetLastError; the caller destroys it. */
  if (nc) NCCLOK(ncclCommDestroy(nc));
  nc = NULL;
  getrusage(RUSAGE_SELF, &ru1);
  CHECK(now_s() - t0 < 5.0, "the refusals took %.1f s", now_s() - t0);
  CHECK(ru1.ru_maxrss - ru0.ru_maxrss < 256 * 1024, "the refusals grew the peak RSS by %ld KiB",
        ru1.ru_maxrss - ru0.ru_maxrss);
  NCCLOK(ncclCommGetUniqueId(comm, &gid));  /* the refused grow consumed the first */
  CHECK(ncclCommRevoke(comm, 1) == ncclInvalidArgument, "revoke flags 1");
  /* Revoked: later calls refused with ncclInvalidUsage, the state quiescent, destroy works
   * (and stops the unconsumed grow id's root). */
  NCCLOK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
  float x = 1, y = 0;
  CHECK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL) == ncclInvalidUsage, "a call on a revoked comm");
  CHECK(strstr(ncclGetLastError(comm), "revoked"), "revoked text: %s", ncclGetLastError(comm));
  ncclResult_t s = ncclInternalError;
  NCCLOK(ncclCommGetAsyncError(comm, &s));
  CHECK(s == ncclSuccess, "a revoked comm's async state: %d", (int)s);
  CHECK(ncclCommRevoke(comm, 0) == ncclInvalidArgument, "a second revoke");
  CHECK(ncclCommRevoke(NULL, 0) == ncclSuccess, "revoke(NULL)");
  NCCLOK(ncclCommDestroy(comm));
}

/* ncclCommDestroy and ncclCommAbort inside a group take effect at the group's end, after its
 * deferred inits and calls, which still use the comm (NCCL queues them there too); a second
 * release of the same comm in the group is refused. One process, 1-rank comms; CI runs it under
 * AddressSanitizer too (scripts/fuzz.sh), where any use of a freed comm fails it. */
static ncclComm_t one_rank(void) {
  ncclUniqueId id;
  ncclComm_t c = NULL;
  NCCLOK(ncclGetUniqueId(&id));
  NCCLOK(ncclCommInitRank(&c, 1, id, 0));
  return c;
}
static int mode_group_release(void) {
  float x[4] = {1, 2, 3, 4}, y[4];
  ncclUniqueId id;
  ncclComm_t c = NULL, sub = NULL;
  /* a deferred init, destroyed in its group */
  NCCLOK(ncclGetUniqueId(&id));
  NCCLOK(ncclGroupStart());
  NCCLOK(ncclCommInitRank(&c, 1, id, 0));
  NCCLOK(ncclCommDestroy(c));
  NCCLOK(ncclGroupEnd());
  /* a deferred all-reduce (nested groups: the outermost end runs it, then frees the comm) */
  c = one_rank();
  poison(y, sizeof y);
  NCCLOK(ncclGroupStart());
  NCCLOK(ncclGroupStart());
  NCCLOK(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, c, NULL));
  NCCLOK(ncclCommDestroy(c));
  NCCLOK(ncclGroupEnd());
  CHECK(memcmp(x, y, sizeof x) != 0, "the inner group's end ran the all-reduce");
  ncclResult_t r = ncclGroupEnd();
  CHECK(r == ncclSuccess && memcmp(x, y, sizeof x) == 0, "a comm destroyed in the group of its all-reduce: %d (%s)",
        (int)r, ncclGetLastError(NULL));
  /* a grouped split whose parent is destroyed (twice: refused) in the same group */
  c = one_rank();
  NCCLOK(ncclGroupStart());
  NCCLOK(ncclCommSplit(c, 0, 0, &sub, NULL));
  NCCLOK(ncclCommDestroy(c));
  CHECK(ncclCommDestroy(c) == ncclInvalidArgument, "a second destroy in the group");
  CHECK(strstr(ncclGetLastError(c), "already destroyed"), "second destroy text: %s", ncclGetLastError(c));
  CHECK(ncclCommAbort(c) == ncclInvalidArgument, "an abort after a destroy in the group");
  NCCLOK(ncclGroupEnd());
  poison(y, sizeof y);
  NCCLOK(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, sub, NULL));
  CHECK(memcmp(x, y, sizeof x) == 0, "the split child of a parent destroyed in the group");
  NCCLOK(ncclCommDestroy(sub));
  /* an abort in a group: its deferred call is not run, the group's end says so, the comm is freed */
  c = one_rank();
  poison(y, sizeof y);
  NCCLOK(ncclGroupStart());
  NCCLOK(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, c, NULL));
  NCCLOK(ncclCommAbort(c));
  r = ncclGroupEnd();
  CHECK(r == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "aborted"), "a call of a comm aborted in its group: %d (%s)",
        (int)r, ncclGetLastError(NULL));
  /* an aborted deferred init, a destroyed nonblocking one */
  NCCLOK(ncclGetUniqueId(&id));
  NCCLOK(ncclGroupStart());
  NCCLOK(ncclCommInitRank(&c, 1, id, 0));
  NCCLOK(ncclCommAbort(c));
  NCCLOK(ncclGroupEnd());
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  NCCLOK(ncclGetUniqueId(&id));
  NCCLOK(ncclGroupStart());
  r = ncclCommInitRankConfig(&c, 1, id, 0, &cfg);
  CHECK(r == ncclSuccess || r == ncclInProgress, "grouped nonblocking init: %d", (int)r);
  NCCLOK(ncclCommDestroy(c));
  r = ncclGroupEnd();
  CHECK(r == ncclSuccess || r == ncclInProgress, "a nonblocking init destroyed in its group: %d", (int)r);
  /* ncclGroupSimulateEnd drops the calls, frees the released comm; a shrink it dropped gave its
   * claim on the parent back */
  c = one_rank();
  ncclSimInfo_t si = NCCL_SIM_INFO_INITIALIZER;
  NCCLOK(ncclGroupStart());
  NCCLOK(ncclCommShrink(c, NULL, 0, &sub, NULL, NCCL_SHRINK_DEFAULT));
  CHECK(ncclGroupSimulateEnd(&si) == ncclInvalidUsage, "simulate");
  NCCLOK(ncclCommDestroy(sub)); /* its init never ran */
  NCCLOK(ncclCommShrink(c, NULL, 0, &sub, NULL, NCCL_SHRINK_DEFAULT));
  NCCLOK(ncclCommDestroy(sub));
  NCCLOK(ncclGroupStart());
  NCCLOK(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, c, NULL));
  NCCLOK(ncclCommDestroy(c));
  CHECK(ncclGroupSimulateEnd(&si) == ncclInvalidUsage, "simulate");
  return g_fail ? 1 : 0;
}

/* ncclCommQueryProperties in each layout: honest values (the device API is not served), written
 * only inside the caller's size; a struct not made by the initializer is refused. */
static void properties_api(ncclComm_t comm) {
  unsigned char buf[256];
  struct { size_t size; unsigned version; } layouts[] = {{40, 22902}, {56, 22907}, {56, 23007}, {144, 23102}};
  for (int i = 0; i < 4; ++i) {
    memset(buf, 0x5A, sizeof buf); /* the caller's bytes, and a canary past its struct */
    memset(buf, 0, layouts[i].size);
    struct props_v23102* p = (struct props_v23102*)buf;
    p->size = layouts[i].size;
    p->magic = 0xcafebeef;
    p->version = layouts[i].version;
    p->rank = p->nRanks = p->cudaDev = p->nvmlDev = 77;
    NCCLOK(ncclCommQueryProperties(comm, buf));
    CHECK(p->rank == 0 && p->nRanks == 1 && p->cudaDev == -1, "props %u: rank %d nRanks %d cudaDev %d",
          layouts[i].version, p->rank, p->nRanks, p->cudaDev);
    CHECK(!p->deviceApiSupport && !p->multimemSupport, "props %u: device API claimed", layouts[i].version);
    if (layouts[i].version < 22907) {
      CHECK(((struct props_v22902*)buf)->ginType == 0, "props 22902: ginType");
    } else {
      struct props_v22907* q = (struct props_v22907*)buf;
      CHECK(q->ginType == 0 && q->nLsaTeams == 0 && !q->hostRmaSupport && q->railedGinType == 0,
            "props %u: ginType %d nLsaTeams %d railed %d", layouts[i].version, q->ginType, q->nLsaTeams,
            q->railedGinType);
    }
    if (layouts[i].version >= 23100) {
      int zero = 1;
      for (int k = 0; k < 64; ++k) zero &= p->ginSupport[k] == 0;
      CHECK(p->commHash == 0 && p->ginMinStride == INT_MAX && p->ginConnectionType == 0 && zero &&
                p->devCommRuntimeVersionSize == 0,
            "props 23102: stride %d connection %d", p->ginMinStride, p->ginConnectionType);
    }
    for (size_t k = layouts[i].size; k < sizeof buf; ++k)
      if (buf[k] != 0x5A) {
        CHECK(0, "props %u (%zu bytes) wrote byte %zu", layouts[i].version, layouts[i].size, k);
        break;
      }
  }
  struct props_v22907 bad = {sizeof bad, 0xdeadbeef, 22907};
  CHECK(ncclCommQueryProperties(comm, &bad) == ncclInvalidUsage, "props with a wrong magic");
  CHECK(strstr(ncclGetLastError(comm), "NCCL_COMM_PROPERTIES_INITIALIZER"), "wrong magic: %s", ncclGetLastError(comm));
  struct props_v22907 old = {sizeof old, 0xcafebeef, 22809};
  CHECK(ncclCommQueryProperties(comm, &old) == ncclInvalidUsage, "props of a release before 2.29.2");
  CHECK(ncclCommQueryProperties(comm, NULL) == ncclInvalidArgument, "NULL props");
  CHECK(ncclCommQueryProperties(NULL, &bad) == ncclInvalidArgument, "NULL comm");
}

/* 2.31's nccl*Config collectives on one rank: each is its plain collective (2.31.2's 64-byte and
 * 2.32.3's 72-byte struct, and NULL); a bad config is refused on the caller alone, naming the
 * field, and leaves the comm and an open group as they were. */
static void coll_config_api(ncclComm_t comm) {
  ncclCollConfig_t full = NCCL_COLLCONFIG_INITIALIZER;
  ncclCollConfig_t v2312 = NCCL_COLLCONFIG_INITIALIZER;
  v2312.size = 64;
  v2312.version = 23102;
  v2312.launchCompletionEvent = (void*)0x1; /* outside a 2.31 caller's struct: never read */
  full.algSelection = "ring";
  full.maxCTAs = 4;
  const ncclCollConfig_t* cfgs[] = {&full, &v2312, NULL};
  for (int i = 0; i < 3; ++i) {
    float x[2] = {1.5f, 2.5f}, y[2] = {0, 0};
    NCCLOK(ncclAllReduceConfig(x, y, 2, ncclFloat32, ncclSum, comm, NULL, cfgs[i]));
    CHECK(y[0] == 1.5f && y[1] == 2.5f, "ncclAllReduceConfig %d", i);
    y[0] = y[1] = 0;
    NCCLOK(ncclBroadcastConfig(x, y, 2, ncclFloat32, 0, comm, NULL, cfgs[i]));
    CHECK(y[1] == 2.5f, "ncclBroadcastConfig %d", i);
    y[0] = y[1] = 0;
    NCCLOK(ncclReduceConfig(x, y, 2, ncclFloat32, ncclMax, 0, comm, NULL, cfgs[i]));
    CHECK(y[1] == 2.5f, "ncclReduceConfig %d", i);
    y[0] = y[1] = 0;
    NCCLOK(ncclAllGatherConfig(x, y, 2, ncclFloat32, comm, NULL, cfgs[i]));
    CHECK(y[1] == 2.5f, "ncclAllGatherConfig %d", i);
    y[0] = y[1] = 0;
    NCCLOK(ncclReduceScatterConfig(x, y, 2, ncclFloat32, ncclSum, comm, NULL, cfgs[i]));
    CHECK(y[1] == 2.5f, "ncclReduceScatterConfig %d", i);
    y[0] = y[1] = 0;
    NCCLOK(ncclAlltoAllConfig(x, y, 2, ncclFloat32, comm, NULL, cfgs[i]));
    CHECK(y[1] == 2.5f, "ncclAlltoAllConfig %d", i);
    y[0] = y[1] = 0;
    NCCLOK(ncclGatherConfig(x, y, 2, ncclFloat32, 0, comm, NULL, cfgs[i]));
    CHECK(y[1] == 2.5f, "ncclGatherConfig %d", i);
    y[0] = y[1] = 0;
    NCCLOK(ncclScatterConfig(x, y, 2, ncclFloat32, 0, comm, NULL, cfgs[i]));
    CHECK(y[1] == 2.5f, "ncclScatterConfig %d", i);
  }
  struct { const char* what; const char* text; size_t size; unsigned magic; int force, policy; } bad[] = {
      {"size 32", "size 32", 32, 0xcafebeef, 1, INT_MIN},
      {"wrong magic", "magic", 72, 0xdeadbeef, 1, INT_MIN},
      {"forceAlgSelection 2", "forceAlgSelection", 72, 0xcafebeef, 2, INT_MIN},
      {"CTAPolicy 9", "CTAPolicy", 72, 0xcafebeef, 1, 9},
  };
  float x = 4, y = 0;
  NCCLOK(ncclGroupStart());
  NCCLOK(ncclAllReduceConfig(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL, &full));
  for (int i = 0; i < 4; ++i) {
    ncclCollConfig_t c = NCCL_COLLCONFIG_INITIALIZER;
    c.size = bad[i].size;
    c.magic = bad[i].magic;
    c.forceAlgSelection = bad[i].force;
    c.CTAPolicy = bad[i].policy;
    float z = 0;
    CHECK(ncclAllReduceConfig(&x, &z, 1, ncclFloat32, ncclSum, comm, NULL, &c) == ncclInvalidArgument,
          "config with %s accepted", bad[i].what);
    CHECK(strstr(ncclGetLastError(comm), bad[i].text) && strstr(ncclGetLastError(comm), "ncclAllReduceConfig"),
          "%s: %s", bad[i].what, ncclGetLastError(comm));
  }
  NCCLOK(ncclGroupEnd());
  CHECK(y == 4, "the group's configured all-reduce gave %g", y);
#ifndef NCCL_ABI_TEST_CUDA
  /* A build without CUDA cannot record a CUDA event: refused, not skipped. */
  full.launchCompletionEvent = (void*)0x1;
  CHECK(ncclAllReduceConfig(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL, &full) == ncclInvalidArgument,
        "a launchCompletionEvent was accepted without CUDA");
#endif
}

/* ncclParam*: actorcc's settings (and the NCCL names that mean the same) by key, typed and as text,
 * the values the library runs with; every other key is unknown. */
static void params_api(void) {
  const char** keys = NULL;
  int nkeys = 0;
  NCCLOK(ncclParamGetAllParameterKeys(&keys, &nkeys));
  int timeout = 0, algo = 0;
  for (int i = 0; i < nkeys; ++i) {
    timeout |= strcmp(keys[i], "ACTORCC_TIMEOUT_S") == 0;
    algo |= strcmp(keys[i], "NCCL_ALGO") == 0;
  }
  CHECK(nkeys >= 9 && timeout && algo, "parameter keys: %d", nkeys);
  ncclParamHandle_t h = NULL, t = NULL;
  CHECK(ncclParamBind(&h, "NCCL_IB_HCA") == ncclInvalidArgument, "an NCCL transport key was bound");
  CHECK(strstr(ncclGetLastError(NULL), "unknown parameter 'NCCL_IB_HCA'"), "unknown key: %s", ncclGetLastError(NULL));
  CHECK(ncclParamBind(NULL, "ACTORCC_TIMEOUT_S") == ncclInvalidArgument, "NULL out");
  NCCLOK(ncclParamBind(&t, "ACTORCC_TIMEOUT_S"));
  setenv("ACTORCC_TIMEOUT_S", "7", 1);
  int32_t i32 = 0;
  int8_t i8 = 0;
  NCCLOK(ncclParamGetI32(t, &i32));
  NCCLOK(ncclParamGetI8(t, &i8));
  CHECK(i32 == 7 && i8 == 7, "ACTORCC_TIMEOUT_S=7 read as %d / %d", (int)i32, (int)i8);
  double d = 0;
  int len = 0;
  NCCLOK(ncclParamGet(t, &d, sizeof d, &len));
  CHECK(len == 8 && d == 7.0, "raw ACTORCC_TIMEOUT_S: %d bytes, %g", len, d);
  CHECK(ncclParamGet(t, &d, 4, &len) == ncclInvalidArgument && len == 8, "a 4-byte buffer took %d bytes", len);
  const char* str = NULL;
  CHECK(ncclParamGetStr(t, &str) == ncclInvalidArgument, "GetStr of a number");
  setenv("ACTORCC_TIMEOUT_S", "2.5", 1);
  CHECK(ncclParamGetI32(t, &i32) == ncclInvalidArgument, "2.5 s read as an integer");
  NCCLOK(ncclParamGetParameter("ACTORCC_TIMEOUT_S", &str, &len));
  CHECK(strcmp(str, "2.5") == 0 && len == 3, "ACTORCC_TIMEOUT_S as text: '%s' (%d)", str, len);
  setenv("ACTORCC_TIMEOUT_S", "5", 1);
  /* Unset: the default the library runs with. */
  const char* join = getenv("ACTORCC_JOIN_TIMEOUT_S");
  char saved[64];
  snprintf(saved, sizeof saved, "%s", join ? join : "");
  unsetenv("ACTORCC_JOIN_TIMEOUT_S");
  NCCLOK(ncclParamGetParameter("ACTORCC_JOIN_TIMEOUT_S", &str, &len));
  CHECK(strcmp(str, "600") == 0, "default join timeout: '%s'", str);
  if (join) setenv("ACTORCC_JOIN_TIMEOUT_S", saved, 1);
  /* Integer widths, and a malformed value named. */
  NCCLOK(ncclParamBind(&h, "ACTORCC_WORKSPACE_BYTES"));
  setenv("ACTORCC_WORKSPACE_BYTES", "300", 1);
  uint8_t u8 = 0;
  uint16_t u16 = 0;
  CHECK(ncclParamGetU8(h, &u8) == ncclInvalidArgument, "300 fit a uint8_t");
  NCCLOK(ncclParamGetU16(h, &u16));
  CHECK(u16 == 300, "ACTORCC_WORKSPACE_BYTES=300 read as %u", (unsigned)u16);
  setenv("ACTORCC_WORKSPACE_BYTES", "lots", 1);
  int64_t i64 = 0;
  CHECK(ncclParamGetI64(h, &i64) == ncclInvalidArgument, "a malformed value was read");
  CHECK(strstr(ncclGetLastError(NULL), "ACTORCC_WORKSPACE_BYTES"), "malformed value: %s", ncclGetLastError(NULL));
  unsetenv("ACTORCC_WORKSPACE_BYTES");
  /* An NCCL name with an actorcc meaning, bound with or without its prefix. */
  ncclParamHandle_t a = NULL, a2 = NULL;
  NCCLOK(ncclParamBind(&a, "ALGO"));
  NCCLOK(ncclParamBind(&a2, "NCCL_ALGO"));
  CHECK(a == a2, "ALGO and NCCL_ALGO are different parameters");
  setenv("ACTORCC_ALGO", "oneshot", 1);
  NCCLOK(ncclParamGetStr(a, &str));
  CHECK(strcmp(str, "oneshot") == 0, "NCCL_ALGO: '%s'", str);
  CHECK(ncclParamGetI32(a, &i32) == ncclInvalidArgument, "text read as a number");
  unsetenv("ACTORCC_ALGO");
  NCCLOK(ncclParamGetStr(a, &str));
  CHECK(strcmp(str, "") == 0, "NCCL_ALGO unset: '%s'", str);
  CHECK(ncclParamGetI32((ncclParamHandle_t)&len, &i32) == ncclInvalidArgument, "a foreign handle was read");
  CHECK(ncclParamGetI32(t, NULL) == ncclInvalidArgument, "NULL out");
  ncclParamDumpAll();
}

/* ncclSetEncryption: plaintext (the initializer's mode NONE) is accepted, an encryption request is
 * refused as NCCL without TLS refuses it; the device API's helpers answer without a device API. */
static void encryption_and_teams(ncclComm_t comm) {
  enc_config_v23203 e = {sizeof e, 0xcafebeef, 23203, 0, NULL};
  NCCLOK(ncclSetEncryption(&e));
  e.mode = 1;
  e.psk = "0123456789abcdef0123456789abcdef";
  CHECK(ncclSetEncryption(&e) == ncclInvalidUsage, "an encryption request was accepted");
  CHECK(strstr(ncclGetLastError(NULL), "not encrypted"), "encryption refusal: %s", ncclGetLastError(NULL));
  e.magic = 0;
  CHECK(ncclSetEncryption(&e) == ncclInvalidArgument && ncclSetEncryption(NULL) == ncclInvalidArgument,
        "a bad encryption config");
  team_t w = ncclTeamWorld(comm), l = ncclTeamLsa(comm);
  CHECK(w.nRanks == 1 && w.rank == 0 && w.stride == 1, "world team %d %d %d", w.nRanks, w.rank, w.stride);
  CHECK(l.nRanks == 1 && l.rank == 0 && l.stride == 1, "LSA team %d %d %d", l.nRanks, l.rank, l.stride);
  CHECK(ncclTeamRankToWorld(comm, w, 0) == 0 && ncclTeamRankToLsa(comm, w, 0) == 0, "team rank maps");
  CHECK(ncclTeamWorld(NULL).nRanks == 0 && ncclTeamRankToWorld(NULL, w, 0) == -1, "a NULL comm's team");
  uint32_t le = 7;
  size_t off = 7;
  CHECK(ncclGetPeerDeviceLeInfo(NULL, 0, 0, &le, &off) == ncclInvalidUsage && le == 0 && off == 0,
        "ncclGetPeerDeviceLeInfo");
  CHECK(strstr(ncclGetLastError(NULL), "device API"), "device API refusal: %s", ncclGetLastError(NULL));
  uint64_t handle = 7;
  CHECK(ncclLLA2ACreateRequirement(1, 1, &handle, NULL) == ncclInvalidUsage && handle == 0, "LLA2A requirement");
}

static int mode_api(void) {
  /* The library linked is actorcc's (an NVIDIA NCCL would also answer a version code). */
  CHECK(dlsym(RTLD_DEFAULT, "ncclActorccVersion") != NULL, "not linked against actorcc's libnccl.so.2");
  int v = 0;
  NCCLOK(ncclGetVersion(&v));
  /* 2.32.3: the newest release whose API the library serves (docs/nccl.md, "The ABI"). */
  CHECK(v == 23203, "ncclGetVersion: %d", v);
  for (int a = 0; a < kNumResults; ++a) {
    CHECK(ncclGetErrorString((ncclResult_t)a) && *ncclGetErrorString((ncclResult_t)a), "error string %d", a);
    CHECK(!strstr(ncclGetErrorString((ncclResult_t)a), "unknown"), "error %d is unknown: %s", a,
          ncclGetErrorString((ncclResult_t)a));
    for (int b = 0; b < a; ++b)
      CHECK(strcmp(ncclGetErrorString((ncclResult_t)a), ncclGetErrorString((ncclResult_t)b)) != 0, "strings %d %d", a, b);
  }
  int n;
  CHECK(ncclCommCount(NULL, &n) == ncclInvalidArgument, "ncclCommCount(NULL)");
  CHECK(strstr(ncclGetLastError(NULL), "NULL") != NULL, "last error: %s", ncclGetLastError(NULL));
  CHECK(ncclGroupEnd() == ncclInvalidUsage, "ncclGroupEnd without a group");

  /* Every layout: sizes and the release that has them (2.31.2: 112 bytes, 2.32.3: 120, from
   * nccl.h of those tags); blocking = 0 is honoured. */
  const size_t sizes[] = {48, 72, 80, 88, 96, 112, 120};
  const unsigned versions[] = {22600, 22700, 22809, 22900, 23000, 23102, 23203};
  for (int i = 0; i < 7; ++i) {
    ncclComm_t comm = NULL;
    ncclResult_t r = init_with_config(&comm, sizes[i], versions[i], 0xcafebeef, 0);
    CHECK(r == ncclInProgress, "config size %zu: nonblocking init returned %d (%s)", sizes[i], (int)r,
          ncclGetLastError(NULL));
    if (!comm) continue;
    wait_ready(comm);
    float x = 3, y = 0;
    NCCLOK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL));
    CHECK(y == 3, "config size %zu: all-reduce gave %g", sizes[i], y);
    NCCLOK(ncclCommDestroy(comm));
    /* blocking = 1 (and unset) completes inside the call. */
    r = init_with_config(&comm, sizes[i], versions[i], 0xcafebeef, 1);
    CHECK(r == ncclSuccess, "config size %zu blocking: %d", sizes[i], (int)r);
    if (r == ncclSuccess) NCCLOK(ncclCommDestroy(comm));
  }
  ncclComm_t comm = NULL;
  CHECK(init_with_config(&comm, 80, 22809, 0xdeadbeef, 1) == ncclInvalidArgument, "wrong magic accepted");
  CHECK(strstr(ncclGetLastError(NULL), "magic") != NULL, "wrong magic text: %s", ncclGetLastError(NULL));
  CHECK(init_with_config(&comm, 80, 22809, 0xcafebeef, 7) == ncclInvalidArgument, "blocking = 7 accepted");
  /* A field newer than the caller's version is unset: blocking from a 2.13 caller is ignored. */
  CHECK(init_with_config(&comm, 80, 21300, 0xcafebeef, 7) == ncclSuccess, "a 2.13 config's blocking was read");
  if (comm) NCCLOK(ncclCommDestroy(comm));

  /* Errors name the rank; refusals say why; the comm stays usable after a local refusal. */
  ncclUniqueId id;
  NCCLOK(ncclGetUniqueId(&id));
  NCCLOK(ncclCommInitRank(&comm, 1, id, 0));
  float x = 1, y = 0;
  CHECK(ncclAllReduce(&x, &y, 1, (ncclDataType_t)99, ncclSum, comm, NULL) == ncclInvalidArgument, "dtype 99");
  CHECK(strstr(ncclGetLastError(comm), "rank 0") != NULL, "no rank in: %s", ncclGetLastError(comm));
  CHECK(ncclAllReduce(&x, &y, 1, ncclFloat32, (ncclRedOp_t)77, comm, NULL) == ncclInvalidArgument, "op 77");
  ncclSimInfo_t si = NCCL_SIM_INFO_INITIALIZER;
  NCCLOK(ncclGroupStart());
  CHECK(ncclGroupSimulateEnd(&si) == ncclInvalidUsage, "simulate");
  CHECK(ncclGroupEnd() == ncclInvalidUsage, "simulate left the group open");
  NCCLOK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL));
  CHECK(y == 1, "world-1 all-reduce: %g", y);
  /* PreMulSum: served by the adapters or refused with a text, never a silent success. */
  ncclRedOp_t pm;
  float scale = 0.5f;
  ncclResult_t pr = ncclRedOpCreatePreMulSum(&pm, &scale, ncclFloat32, ncclScalarHostImmediate, comm);
  if (pr == ncclSuccess) {
    NCCLOK(ncclAllReduce(&x, &y, 1, ncclFloat32, pm, comm, NULL));
    CHECK(y == 0.5f, "PreMulSum 0.5 x 1 gave %g", y);
    NCCLOK(ncclRedOpDestroy(pm, comm));
  } else {
    CHECK(strstr(ncclGetLastError(comm), "rank 0") != NULL, "PreMulSum refusal text: %s", ncclGetLastError(comm));
  }
  /* Memory and registrations. */
  void* p = NULL;
  NCCLOK(ncclMemAlloc(&p, 4096));
  CHECK(p != NULL, "ncclMemAlloc");
  void* h = NULL;
  NCCLOK(ncclCommRegister(comm, p, 4096, &h));
  ncclWindow_t w = NULL;
  NCCLOK(ncclCommWindowRegister(comm, p, 4096, &w, NCCL_WIN_DEFAULT));
  NCCLOK(ncclAllReduce(p, p, 1024, ncclFloat32, ncclSum, comm, NULL));
  NCCLOK(ncclCommWindowDeregister(comm, w));
  NCCLOK(ncclCommDeregister(comm, h));
  CHECK(ncclCommDeregister(comm, &x) == ncclInvalidArgument, "a bogus handle was deregistered");
  CHECK(ncclCommDeregister(comm, h) == ncclInvalidArgument, "a handle was deregistered twice");
  CHECK(ncclCommWindowDeregister(comm, w) == ncclInvalidArgument, "a window was deregistered twice");
  NCCLOK(ncclCommRegister(comm, p, 4096, &h)); /* left registered: freed with the comm */
  NCCLOK(ncclMemFree(p));
  properties_api(comm);
  coll_config_api(comm);
  params_api();
  encryption_and_teams(comm);
  NCCLOK(ncclCommFinalize(comm));
  NCCLOK(ncclCommDestroy(comm));
  elastic_api();

  /* A rank that never arrives: the init fails in bounded time, naming it (nonblocking: through
   * ncclCommGetAsyncError and the comm's last error). */
  setenv("ACTORCC_JOIN_TIMEOUT_S", "1", 1);
  NCCLOK(ncclGetUniqueId(&id));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  CHECK(ncclCommInitRankConfig(&comm, 2, id, 0, &cfg) == ncclInProgress, "nonblocking init of a 2-rank group");
  ncclResult_t s = ncclInProgress;
  const double t0 = now_s();
  while (s == ncclInProgress && now_s() - t0 < 10) {
    NCCLOK(ncclCommGetAsyncError(comm, &s));
    usleep(1000);
  }
  CHECK(s == ncclTimeout, "a missing rank's init ended in %d (the join ran out of time)", (int)s);
  CHECK(strstr(ncclGetLastError(comm), "rank 1") != NULL, "the init error does not name rank 1: %s",
        ncclGetLastError(comm));
  NCCLOK(ncclCommDestroy(comm));
  return g_fail ? 1 : 0;
}

/* A crash prints its stack (library frames as file+offset) before the launcher reports the
 * signal, so a failure on the device machine says where it happened. */
static void on_fatal(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  char head[64];
  const int len = snprintf(head, sizeof head, "FATAL signal %d, stack:\n", sig);
  if (len > 0) (void)!write(2, head, (size_t)len);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

int main(int argc, char** argv) {
  signal(SIGSEGV, on_fatal);
  signal(SIGBUS, on_fatal);
  signal(SIGABRT, on_fatal);
  if (argc < 2) {
    fprintf(stderr, "usage: %s api|procs N|threads N|abort|kill|mismatch|stall|elastic|group_release|refuse|shrinkref|suspend\n",
            argv[0]);
    return 2;
  }
  const char* m = argv[1];
#ifdef NCCL_ABI_TEST_CUDA
  g_gpu = getenv("NCCL_ABI_TEST_GPU") && strcmp(getenv("NCCL_ABI_TEST_GPU"), "1") == 0;
  int ngpu = 0;
  if (g_gpu && (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 1)) {
    fprintf(stderr, "FAIL: NCCL_ABI_TEST_GPU=1 but no CUDA device is usable\n");
    return 1;
  }
#endif
  if (strcmp(m, "api") == 0 || strcmp(m, "group_release") == 0) {
    /* The API checks use host scalars and the CPU-only mode's answers (device -1, host memory). */
    g_gpu = 0;
    setenv("ACTORCC_BACKEND", "cpu", 1);
  }
  if (strcmp(m, "worker") == 0 && argc == 6) return worker(argv[2], atoi(argv[3]), atoi(argv[4]), argv[5]);
  int rc;
  if (strcmp(m, "api") == 0) rc = mode_api();
  else if (strcmp(m, "group_release") == 0) rc = mode_group_release();
  else if (strcmp(m, "procs") == 0 && argc == 3) rc = launch("procs", atoi(argv[2]), 60, -1);
  else if (strcmp(m, "threads") == 0 && argc == 3) rc = mode_threads(atoi(argv[2]));
  else if (strcmp(m, "abort") == 0) rc = launch("abort", 2, 40, -1);
  else if (strcmp(m, "mismatch") == 0) rc = launch("mismatch_count", 2, 40, -1) | launch("mismatch_dtype", 2, 40, -1);
  else if (strcmp(m, "stall") == 0) {
    setenv("ACTORCC_TIMEOUT_S", "2", 1); /* the workers' call timeout */
    rc = launch("stall", 2, 40, -1);
  }
  else if (strcmp(m, "kill") == 0) rc = launch("kill", 2, 40, 1);
  else if (strcmp(m, "suspend") == 0) rc = launch("suspend", 3, 60, -1);
  else if (strcmp(m, "refuse") == 0 || strcmp(m, "shrinkref") == 0) {
    setenv("ACTORCC_TIMEOUT_S", "60", 1); /* far longer than the few seconds the peers may take */
    rc = launch(m, 3, 80, -1);
  }
  else if (strcmp(m, "elastic") == 0) rc = launch("elastic", 4, 80, 2);
  else {
    fprintf(stderr, "unknown mode %s\n", m);
    return 2;
  }
  if (rc == 0) printf("PASS %s\n", m);
  return rc;
}
