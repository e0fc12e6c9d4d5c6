// NCCL's C ABI as this library implements it: the enum values, struct layouts and function
// signatures of NCCL 2.32.3 (the release whose API we claim: kNcclVersionCode), with the layouts
// of every older release a caller may pass (read by size and version). Declared here in
// our own words; the conformance tests in tests/nccl compile against the toolkit's real nccl.h
// and link against this library, which is what proves that the layouts agree.
#pragma once
#include <climits>
#include <cstddef>
#include <cstdint>

// The newest NCCL whose whole API this library serves, every function of that nccl.h either
// implemented or refused with the reason docs/nccl.md gives (2.32.3: nccl4py 0.6.0's release).
// The one place it is set: ncclGetVersion returns it and the ELF note (note.cpp) names it.
#define ACTORCC_NCCL_VERSION_CODE 23203
inline constexpr int kNcclVersionCode = ACTORCC_NCCL_VERSION_CODE;

extern "C" {

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
typedef struct CUstream_st* cudaStream_t;  // the same opaque type cuda_runtime.h names

typedef struct {
  char internal[128];
} ncclUniqueId;

// The enums have int as their fixed underlying type (NCCL's ABI passes them as int): a caller's
// out-of-range value (a dtype 99) is then a value the library may read and refuse, not undefined
// behaviour in C++ (an enum without one only holds the values its enumerators' bits span).
typedef enum : int {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8,  // 2.30.3: a call that ran out of time
  ncclNumResults = 9
} ncclResult_t;

typedef enum : int {
  ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32 = 3, ncclInt64 = 4, ncclUint64 = 5,
  ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10, ncclFloat8e5m2 = 11, ncclNumTypes = 12
} ncclDataType_t;

// Values >= ncclNumOps are PreMulSum handles (ncclRedOpCreatePreMulSum). The enum is an int in
// NCCL's ABI (its largest member is 0x7fffffff).
typedef enum : int { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4, ncclNumOps = 5,
               ncclMaxRedOp = 0x7fffffff } ncclRedOp_t;

typedef enum : int { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

inline constexpr int kNcclConfigUndefInt = INT_MIN;
inline constexpr int kNcclSplitNoColor = -1;
inline constexpr int kNcclShrinkDefault = 0x00;  // ncclCommShrink's flags (2.27)
inline constexpr int kNcclShrinkAbort = 0x01;
inline constexpr int kNcclRevokeDefault = 0x00;  // ncclCommRevoke's only flag (2.28.7)
inline constexpr unsigned kNcclConfigMagic = 0xcafebeef;
inline constexpr unsigned kNcclSimInfoMagic = 0x74685283;

// ncclConfig_t, the newest layout we know (2.32: 120 bytes on x86-64). Callers pass the layout of
// the header they were built with; config.cpp reads it by its `size` and `version`.
typedef struct ncclConfig_v23203 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;             // from 2.14 (2.18-2.26: 48 bytes, ending after splitShare)
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;         // 2.27: 72 bytes, ending after nvlsCTAs
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;  // 2.28: 80 bytes
  int nvlinkCentricSched;
  // Fields this library does not read, by the release that added them: 2.29 graphUsageMode,
  // numRmaCtx (88 bytes); 2.30 maxP2pPeers, graphStreamOrdering (96); 2.31.0 launchOrderImplicit,
  // numRmaSig, rmaEagerInit and 2.31.1 hostCftMode (112); 2.32 nvlsHostMode (120).
  int fields_v2290[2];
  int fields_v2300[2];
  int fields_v2310[4];
  int fields_v2320[1];
} ncclConfig_t;
static_assert(sizeof(ncclConfig_t) == 120, "ncclConfig_t is 2.32's 120 bytes");

typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

typedef struct CUevent_st* cudaEvent_t;

// 2.32's ncclSetEncryption (encryption.cpp): 32 bytes; mode NONE (0) is plaintext.
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int mode;
  const char* psk;
} ncclEncryptionConfig_t;
static_assert(sizeof(ncclEncryptionConfig_t) == 32, "ncclEncryptionConfig_t is 2.32's 32 bytes");

// The device API's host-side helpers (NCCL's device header; device_api.cpp), as nccl4py 0.6.0
// binds them: teams are passed and returned by value.
typedef struct {
  int nRanks;
  int rank;
  int stride;
} ncclTeam_t;
typedef uint32_t ncclCftLeId;
typedef struct { uint32_t bufHandle; int nBarriers; } ncclLsaBarrierHandle_t;
typedef struct { uint32_t signal0; uint32_t unused; } ncclGinBarrierHandle_t;
typedef struct { uint32_t bufHandle; uint32_t nSlots; } ncclLLA2AHandle_t;
struct ncclDevResourceRequirements;

// 2.30.4's parameter API: a handle names one parameter (params.cpp's table; never freed).
typedef struct ncclParamHandle* ncclParamHandle_t;  // the same opaque type cuda_runtime.h names

// 2.31's vendor options, chained from ncclCollConfig_t.ext (NCCL ignores them all; so do we).
typedef struct ncclConfigExt {
  struct ncclConfigExt* next;
  struct {
    int vendorId;
    int optionId;
  } key;
  union {
    int i;
    const char* s;
    void* raw;
  } val;
} ncclConfigExt_t;

// The per-call config of 2.31's nccl*Config collectives, newest layout (2.32.3: 72 bytes; 2.31.2's
// ends after userProfilerTag, 64 bytes). coll_config.cpp reads it by size and version.
typedef struct ncclCollConfig_v23200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  ncclConfigExt_t* ext;
  int minCTAs;
  int maxCTAs;
  int nvlsCTAs;
  int cgaClusterSize;
  const char* algSelection;
  int forceAlgSelection;  // NCCL_COLLCONFIG_INITIALIZER: 1
  int CTAPolicy;          // NCCL_CTA_POLICY_* bits (EFFICIENCY 1, ZERO 2), or unset
  uint64_t userProfilerTag;
  cudaEvent_t launchCompletionEvent;  // 2.32
} ncclCollConfig_t;
static_assert(sizeof(ncclCollConfig_t) == 72, "ncclCollConfig_t is 2.32's 72 bytes");

// ncclCommQueryProperties' struct (NCCL's device header, nccl_device/core.h), newest layout we
// know: 2.31.2's, 144 bytes. Layouts by release: 2.29.2-2.29.3 end after ginType, a uint8_t at
// offset 34 (40 bytes); 2.29.7-2.30 make ginType an int enum at 36 and end after railedGinType
// (56 bytes); 2.31 adds commHash ... devCommRuntimeVersionSize. properties.cpp writes a field only
// inside the caller's size and not newer than its version.
typedef struct ncclCommProperties_v23102 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int rank;
  int nRanks;
  int cudaDev;
  int nvmlDev;
  bool deviceApiSupport;
  bool multimemSupport;
  int ginType;  // ncclGinType_t: NCCL_GIN_TYPE_NONE 0
  int nLsaTeams;
  bool hostRmaSupport;
  int railedGinType;
  uint64_t commHash;  // 2.31
  int ginMinStride;
  int ginConnectionType;  // ncclGinConnectionType_t: NCCL_GIN_CONNECTION_NONE 0
  uint8_t ginSupport[64];
  size_t devCommRuntimeVersionSize;
} ncclCommProperties_t;
static_assert(offsetof(ncclCommProperties_t, ginType) == 36 && offsetof(ncclCommProperties_t, commHash) == 56 &&
                  sizeof(ncclCommProperties_t) == 144,
              "ncclCommProperties_t is 2.31.2's layout");

// Opaque here: declared in NCCL's device header; we only refuse them. The functions after
// ncclDevCommDestroy are 2.29/2.30's (suspend/resume, memory statistics, one-sided signals, the
// device API's window pointers) that newer torch builds import. ncclCommMemStat_t is an enum
// (an int here) and ncclMultimemHandle_t a struct of one pointer passed by value (passed as a
// pointer is: a void* here); ncclWaitSignalDesc_t is only pointed to.
struct ncclDevComm;
struct ncclDevCommRequirements;

// 2.31's per-call-config collectives: each plain collective's arguments, then the config.
#define ACTORCC_NCCL_COLL_CONFIG_LIST(X)                                                                \
  X(ncclResult_t, ncclAllReduceConfig,                                                                 \
    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,      \
     ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config))                            \
  X(ncclResult_t, ncclBroadcastConfig,                                                                 \
    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, \
     cudaStream_t stream, const ncclCollConfig_t* config))                                             \
  X(ncclResult_t, ncclReduceConfig,                                                                    \
    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root, \
     ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config))                            \
  X(ncclResult_t, ncclAllGatherConfig,                                                                 \
    (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm, \
     cudaStream_t stream, const ncclCollConfig_t* config))                                             \
  X(ncclResult_t, ncclReduceScatterConfig,                                                             \
    (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,  \
     ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config))                            \
  X(ncclResult_t, ncclAlltoAllConfig,                                                                  \
    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,     \
     cudaStream_t stream, const ncclCollConfig_t* config))                                             \
  X(ncclResult_t, ncclGatherConfig,                                                                    \
    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, \
     cudaStream_t stream, const ncclCollConfig_t* config))                                             \
  X(ncclResult_t, ncclScatterConfig,                                                                   \
    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, \
     cudaStream_t stream, const ncclCollConfig_t* config))

// Every function below is exported twice, as ncclX and as its profiling alias pncclX
// (exports.cpp defines the aliases).
#define ACTORCC_NCCL_API_LIST(X)                                                                        \
  X(ncclResult_t, ncclGetVersion, (int* version))                                                      \
  X(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId))                                          \
  X(ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank))     \
  X(ncclResult_t, ncclCommInitRankConfig,                                                              \
    (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config))              \
  X(ncclResult_t, ncclCommInitRankScalable,                                                            \
    (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds, ncclConfig_t* config)) \
  X(ncclResult_t, ncclCommInitAll, (ncclComm_t * comms, int ndev, const int* devlist))                 \
  X(ncclResult_t, ncclCommFinalize, (ncclComm_t comm))                                                 \
  X(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))                                                  \
  X(ncclResult_t, ncclCommAbort, (ncclComm_t comm))                                                    \
  X(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags))                                  \
  X(ncclResult_t, ncclCommSplit, (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config)) \
  X(ncclResult_t, ncclCommShrink,                                                                      \
    (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm, ncclConfig_t* config, \
     int shrinkFlags))                                                                                 \
  X(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t comm, ncclUniqueId * uniqueId))                     \
  X(ncclResult_t, ncclCommGrow,                                                                        \
    (ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm, ncclConfig_t* config)) \
  X(const char*, ncclGetErrorString, (ncclResult_t result))                                            \
  X(const char*, ncclGetLastError, (ncclComm_t comm))                                                  \
  X(void, ncclResetDebugInit, ())                                                                      \
  X(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t * asyncError))                 \
  X(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count))                                  \
  X(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device))                              \
  X(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank))                                \
  X(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size))                                             \
  X(ncclResult_t, ncclMemFree, (void* ptr))                                                            \
  X(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle))   \
  X(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle))                           \
  X(ncclResult_t, ncclCommWindowRegister,                                                              \
    (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags))                       \
  X(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win))                       \
  X(ncclResult_t, ncclRedOpCreatePreMulSum,                                                            \
    (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm)) \
  X(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm))                                 \
  X(ncclResult_t, ncclReduce,                                                                          \
    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root, \
     ncclComm_t comm, cudaStream_t stream))                                                            \
  X(ncclResult_t, ncclBcast,                                                                           \
    (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)) \
  X(ncclResult_t, ncclBroadcast,                                                                       \
    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, \
     cudaStream_t stream))                                                                             \
  X(ncclResult_t, ncclAllReduce,                                                                       \
    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,      \
     ncclComm_t comm, cudaStream_t stream))                                                            \
  X(ncclResult_t, ncclReduceScatter,                                                                   \
    (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,  \
     ncclComm_t comm, cudaStream_t stream))                                                            \
  X(ncclResult_t, ncclAllGather,                                                                       \
    (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm, \
     cudaStream_t stream))                                                                             \
  X(ncclResult_t, ncclAlltoAll,                                                                        \
    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,     \
     cudaStream_t stream))                                                                             \
  X(ncclResult_t, ncclGather,                                                                          \
    (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, int root,        \
     ncclComm_t comm, cudaStream_t stream))                                                            \
  X(ncclResult_t, ncclScatter,                                                                         \
    (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, int root,        \
     ncclComm_t comm, cudaStream_t stream))                                                            \
  X(ncclResult_t, ncclSend,                                                                            \
    (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream)) \
  X(ncclResult_t, ncclRecv,                                                                            \
    (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream)) \
  X(ncclResult_t, ncclGroupStart, ())                                                                  \
  X(ncclResult_t, ncclGroupEnd, ())                                                                    \
  X(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo))                                     \
  X(ncclResult_t, ncclDevCommCreate,                                                                   \
    (ncclComm_t comm, const ncclDevCommRequirements* reqs, ncclDevComm* outDevComm))                   \
  X(ncclResult_t, ncclDevCommDestroy, (ncclComm_t comm, const ncclDevComm* devComm))                   \
  X(ncclResult_t, ncclCommSuspend, (ncclComm_t comm, int flags))                                       \
  X(ncclResult_t, ncclCommResume, (ncclComm_t comm))                                                   \
  X(ncclResult_t, ncclCommMemStats, (ncclComm_t comm, int stat, uint64_t* value))                      \
  X(ncclResult_t, ncclWinGetUserPtr, (ncclComm_t comm, ncclWindow_t win, void** outUserPtr))           \
  X(ncclResult_t, ncclPutSignal,                                                                       \
    (const void* localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,     \
     size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream)) \
  X(ncclResult_t, ncclSignal, (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream)) \
  X(ncclResult_t, ncclWaitSignal, (int nDesc, void* signalDescs, ncclComm_t comm, cudaStream_t stream)) \
  X(ncclResult_t, ncclGetLsaMultimemDevicePointer, (ncclWindow_t window, size_t offset, void** outPtr)) \
  X(ncclResult_t, ncclGetMultimemDevicePointer, (ncclWindow_t window, size_t offset, void* multimem, void** outPtr)) \
  X(ncclResult_t, ncclGetLsaDevicePointer, (ncclWindow_t window, size_t offset, int lsaRank, void** outPtr)) \
  X(ncclResult_t, ncclGetPeerDevicePointer, (ncclWindow_t window, size_t offset, int peer, void** outPtr)) \
  X(ncclResult_t, ncclCommQueryProperties, (ncclComm_t comm, ncclCommProperties_t * props))            \
  ACTORCC_NCCL_COLL_CONFIG_LIST(X)                                                                      \
  X(ncclResult_t, ncclParamBind, (ncclParamHandle_t * out, const char* key))                           \
  X(ncclResult_t, ncclParamGetI8, (ncclParamHandle_t h, int8_t* out))                                  \
  X(ncclResult_t, ncclParamGetI16, (ncclParamHandle_t h, int16_t* out))                                \
  X(ncclResult_t, ncclParamGetI32, (ncclParamHandle_t h, int32_t* out))                                \
  X(ncclResult_t, ncclParamGetI64, (ncclParamHandle_t h, int64_t* out))                                \
  X(ncclResult_t, ncclParamGetU8, (ncclParamHandle_t h, uint8_t* out))                                 \
  X(ncclResult_t, ncclParamGetU16, (ncclParamHandle_t h, uint16_t* out))                               \
  X(ncclResult_t, ncclParamGetU32, (ncclParamHandle_t h, uint32_t* out))                               \
  X(ncclResult_t, ncclParamGetU64, (ncclParamHandle_t h, uint64_t* out))                               \
  X(ncclResult_t, ncclParamGetStr, (ncclParamHandle_t h, const char** out))                            \
  X(ncclResult_t, ncclParamGet, (ncclParamHandle_t h, void* out, int maxLen, int* len))                \
  X(ncclResult_t, ncclParamGetParameter, (const char* key, const char** value, int* valueLen))         \
  X(ncclResult_t, ncclParamGetAllParameterKeys, (const char*** table, int* tableLen))                  \
  X(void, ncclParamDumpAll, ())                                                                        \
  X(ncclResult_t, ncclSetEncryption, (const ncclEncryptionConfig_t* config))                           \
  X(ncclTeam_t, ncclTeamWorld, (ncclComm_t comm))                                                      \
  X(ncclTeam_t, ncclTeamLsa, (ncclComm_t comm))                                                        \
  X(ncclTeam_t, ncclTeamRail, (ncclComm_t comm))                                                       \
  X(ncclTeam_t, ncclTeamCft, (ncclComm_t comm, int mode))                                              \
  X(ncclTeam_t, ncclTeamCftMultimem, (ncclComm_t comm))                                                \
  X(int, ncclTeamRankToWorld, (ncclComm_t comm, ncclTeam_t team, int rank))                            \
  X(int, ncclTeamRankToLsa, (ncclComm_t comm, ncclTeam_t team, int rank))                              \
  X(ncclResult_t, ncclGetMultimemDeviceLeInfo,                                                         \
    (ncclWindow_t window, size_t offset, ncclCftLeId* leId, size_t* leOffset))                         \
  X(ncclResult_t, ncclGetCftDeviceLeInfo,                                                              \
    (ncclWindow_t window, size_t offset, int peerCft, ncclTeam_t cftTeam, ncclCftLeId* leId, size_t* leOffset)) \
  X(ncclResult_t, ncclGetPeerDeviceLeInfo,                                                             \
    (ncclWindow_t window, size_t offset, int peerWorld, ncclCftLeId* leId, size_t* leOffset))          \
  X(ncclResult_t, ncclLsaBarrierCreateRequirement,                                                     \
    (ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle, ncclDevResourceRequirements* outReq)) \
  X(ncclResult_t, ncclGinBarrierCreateRequirement,                                                     \
    (ncclComm_t comm, ncclTeam_t team, int nBarriers, ncclGinBarrierHandle_t* outHandle,               \
     ncclDevResourceRequirements* outReq))                                                             \
  X(ncclResult_t, ncclLLA2ACreateRequirement,                                                          \
    (int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle, ncclDevResourceRequirements* outReq))      \
  X(int, ncclLLA2ACalcSlots, (int maxElts, int maxEltSize))                                            \
  X(const char*, ncclActorccVersion, ())

#define ACTORCC_NCCL_DECLARE(ret, name, args) __attribute__((visibility("default"))) ret name args;
ACTORCC_NCCL_API_LIST(ACTORCC_NCCL_DECLARE)
#undef ACTORCC_NCCL_DECLARE

}  // extern "C"
