/* A fake HIP runtime (libamdhip64) for the probe tests: the entry points the probe binds, with the signatures,
 * types, struct layouts and enum numbering of include/hip/hip_runtime_api.h of ROCm 6.2.2 (ROCm/HIP tag
 * rocm-6.2.2). hipDeviceAttribute_t is declared in the header's order with its implicit numbering, so the
 * C compiler, not a hand count, gives each attribute its value.
 *
 * Two devices: "AMD Instinct MI300X" (gfx942) and "AMD Radeon RX 7900 XTX" (gfx1100). hipDeviceGet hands out
 * 0x200 + ordinal, so a probe passing an ordinal where a hipDevice_t belongs (or the reverse) gets
 * hipErrorInvalidDevice. Environment: FAKE_HIP_INIT_RESULT=<code> makes hipInit return it;
 * FAKE_HIP_DEVICES=<n> reports n (0..2) devices. -DNO_R0600 leaves out hipGetDevicePropertiesR0600 (a ROCm 5
 * runtime); -DFAKE_DECLARATIONS_ONLY keeps only the declarations, for the layout test.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int hipDevice_t;

typedef enum hipError_t {
    hipSuccess = 0,
    hipErrorInvalidValue = 1,
    hipErrorOutOfMemory = 2,
    hipErrorNotInitialized = 3,
    hipErrorDeinitialized = 4,
    hipErrorInsufficientDriver = 35,
    hipErrorNoDevice = 100,
    hipErrorInvalidDevice = 101,
    hipErrorOperatingSystem = 304,
    hipErrorCooperativeLaunchTooLarge = 720,
    hipErrorNotSupported = 801,
    hipErrorUnknown = 999,
    hipErrorRuntimeMemory = 1052,
    hipErrorRuntimeOther = 1053
} hipError_t;

typedef struct hipUUID_t {
    char bytes[16];
} hipUUID;

typedef struct {
    unsigned hasGlobalInt32Atomics : 1;
    unsigned hasGlobalFloatAtomicExch : 1;
    unsigned hasSharedInt32Atomics : 1;
    unsigned hasSharedFloatAtomicExch : 1;
    unsigned hasFloatAtomicAdd : 1;
    unsigned hasGlobalInt64Atomics : 1;
    unsigned hasSharedInt64Atomics : 1;
    unsigned hasDoubles : 1;
    unsigned hasWarpVote : 1;
    unsigned hasWarpBallot : 1;
    unsigned hasWarpShuffle : 1;
    unsigned hasFunnelShift : 1;
    unsigned hasThreadFenceSystem : 1;
    unsigned hasSyncThreadsExt : 1;
    unsigned hasSurfaceFuncs : 1;
    unsigned has3dGrid : 1;
    unsigned hasDynamicParallelism : 1;
} hipDeviceArch_t;

typedef struct hipDeviceProp_tR0600 {
    char name[256];
    hipUUID uuid;
    char luid[8];
    unsigned int luidDeviceNodeMask;
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int regsPerBlock;
    int warpSize;
    size_t memPitch;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int clockRate;
    size_t totalConstMem;
    int major;
    int minor;
    size_t textureAlignment;
    size_t texturePitchAlignment;
    int deviceOverlap;
    int multiProcessorCount;
    int kernelExecTimeoutEnabled;
    int integrated;
    int canMapHostMemory;
    int computeMode;
    int maxTexture1D;
    int maxTexture1DMipmap;
    int maxTexture1DLinear;
    int maxTexture2D[2];
    int maxTexture2DMipmap[2];
    int maxTexture2DLinear[3];
    int maxTexture2DGather[2];
    int maxTexture3D[3];
    int maxTexture3DAlt[3];
    int maxTextureCubemap;
    int maxTexture1DLayered[2];
    int maxTexture2DLayered[3];
    int maxTextureCubemapLayered[2];
    int maxSurface1D;
    int maxSurface2D[2];
    int maxSurface3D[3];
    int maxSurface1DLayered[2];
    int maxSurface2DLayered[3];
    int maxSurfaceCubemap;
    int maxSurfaceCubemapLayered[2];
    size_t surfaceAlignment;
    int concurrentKernels;
    int ECCEnabled;
    int pciBusID;
    int pciDeviceID;
    int pciDomainID;
    int tccDriver;
    int asyncEngineCount;
    int unifiedAddressing;
    int memoryClockRate;
    int memoryBusWidth;
    int l2CacheSize;
    int persistingL2CacheMaxSize;
    int maxThreadsPerMultiProcessor;
    int streamPrioritiesSupported;
    int globalL1CacheSupported;
    int localL1CacheSupported;
    size_t sharedMemPerMultiprocessor;
    int regsPerMultiprocessor;
    int managedMemory;
    int isMultiGpuBoard;
    int multiGpuBoardGroupID;
    int hostNativeAtomicSupported;
    int singleToDoublePrecisionPerfRatio;
    int pageableMemoryAccess;
    int concurrentManagedAccess;
    int computePreemptionSupported;
    int canUseHostPointerForRegisteredMem;
    int cooperativeLaunch;
    int cooperativeMultiDeviceLaunch;
    size_t sharedMemPerBlockOptin;
    int pageableMemoryAccessUsesHostPageTables;
    int directManagedMemAccessFromHost;
    int maxBlocksPerMultiProcessor;
    int accessPolicyMaxWindowSize;
    size_t reservedSharedMemPerBlock;
    int hostRegisterSupported;
    int sparseHipArraySupported;
    int hostRegisterReadOnlySupported;
    int timelineSemaphoreInteropSupported;
    int memoryPoolsSupported;
    int gpuDirectRDMASupported;
    unsigned int gpuDirectRDMAFlushWritesOptions;
    int gpuDirectRDMAWritesOrdering;
    unsigned int memoryPoolSupportedHandleTypes;
    int deferredMappingHipArraySupported;
    int ipcEventSupported;
    int clusterLaunch;
    int unifiedFunctionPointers;
    int reserved[63];
    int hipReserved[32];
    char gcnArchName[256];
    size_t maxSharedMemoryPerMultiProcessor;
    int clockInstructionRate;
    hipDeviceArch_t arch;
    unsigned int *hdpMemFlushCntl;
    unsigned int *hdpRegFlushCntl;
    int cooperativeMultiDeviceUnmatchedFunc;
    int cooperativeMultiDeviceUnmatchedGridDim;
    int cooperativeMultiDeviceUnmatchedBlockDim;
    int cooperativeMultiDeviceUnmatchedSharedMem;
    int isLargeBar;
    int asicRevision;
} hipDeviceProp_tR0600;

/* Header order; values implicit, as in the header. */
typedef enum hipDeviceAttribute_t {
    hipDeviceAttributeCudaCompatibleBegin = 0,
    hipDeviceAttributeEccEnabled = hipDeviceAttributeCudaCompatibleBegin,
    hipDeviceAttributeAccessPolicyMaxWindowSize, hipDeviceAttributeAsyncEngineCount,
    hipDeviceAttributeCanMapHostMemory, hipDeviceAttributeCanUseHostPointerForRegisteredMem,
    hipDeviceAttributeClockRate, hipDeviceAttributeComputeMode, hipDeviceAttributeComputePreemptionSupported,
    hipDeviceAttributeConcurrentKernels, hipDeviceAttributeConcurrentManagedAccess,
    hipDeviceAttributeCooperativeLaunch, hipDeviceAttributeCooperativeMultiDeviceLaunch,
    hipDeviceAttributeDeviceOverlap, hipDeviceAttributeDirectManagedMemAccessFromHost,
    hipDeviceAttributeGlobalL1CacheSupported, hipDeviceAttributeHostNativeAtomicSupported,
    hipDeviceAttributeIntegrated, hipDeviceAttributeIsMultiGpuBoard, hipDeviceAttributeKernelExecTimeout,
    hipDeviceAttributeL2CacheSize, hipDeviceAttributeLocalL1CacheSupported, hipDeviceAttributeLuid,
    hipDeviceAttributeLuidDeviceNodeMask, hipDeviceAttributeComputeCapabilityMajor,
    hipDeviceAttributeManagedMemory, hipDeviceAttributeMaxBlocksPerMultiProcessor,
    hipDeviceAttributeMaxBlockDimX, hipDeviceAttributeMaxBlockDimY, hipDeviceAttributeMaxBlockDimZ,
    hipDeviceAttributeMaxGridDimX, hipDeviceAttributeMaxGridDimY, hipDeviceAttributeMaxGridDimZ,
    hipDeviceAttributeMaxSurface1D, hipDeviceAttributeMaxSurface1DLayered, hipDeviceAttributeMaxSurface2D,
    hipDeviceAttributeMaxSurface2DLayered, hipDeviceAttributeMaxSurface3D, hipDeviceAttributeMaxSurfaceCubemap,
    hipDeviceAttributeMaxSurfaceCubemapLayered, hipDeviceAttributeMaxTexture1DWidth,
    hipDeviceAttributeMaxTexture1DLayered, hipDeviceAttributeMaxTexture1DLinear,
    hipDeviceAttributeMaxTexture1DMipmap, hipDeviceAttributeMaxTexture2DWidth,
    hipDeviceAttributeMaxTexture2DHeight, hipDeviceAttributeMaxTexture2DGather,
    hipDeviceAttributeMaxTexture2DLayered, hipDeviceAttributeMaxTexture2DLinear,
    hipDeviceAttributeMaxTexture2DMipmap, hipDeviceAttributeMaxTexture3DWidth,
    hipDeviceAttributeMaxTexture3DHeight, hipDeviceAttributeMaxTexture3DDepth, hipDeviceAttributeMaxTexture3DAlt,
    hipDeviceAttributeMaxTextureCubemap, hipDeviceAttributeMaxTextureCubemapLayered,
    hipDeviceAttributeMaxThreadsDim, hipDeviceAttributeMaxThreadsPerBlock,
    hipDeviceAttributeMaxThreadsPerMultiProcessor, hipDeviceAttributeMaxPitch, hipDeviceAttributeMemoryBusWidth,
    hipDeviceAttributeMemoryClockRate, hipDeviceAttributeComputeCapabilityMinor,
    hipDeviceAttributeMultiGpuBoardGroupID, hipDeviceAttributeMultiprocessorCount, hipDeviceAttributeUnused1,
    hipDeviceAttributePageableMemoryAccess, hipDeviceAttributePageableMemoryAccessUsesHostPageTables,
    hipDeviceAttributePciBusId, hipDeviceAttributePciDeviceId, hipDeviceAttributePciDomainID,
    hipDeviceAttributePersistingL2CacheMaxSize, hipDeviceAttributeMaxRegistersPerBlock,
    hipDeviceAttributeMaxRegistersPerMultiprocessor, hipDeviceAttributeReservedSharedMemPerBlock,
    hipDeviceAttributeMaxSharedMemoryPerBlock, hipDeviceAttributeSharedMemPerBlockOptin,
    hipDeviceAttributeSharedMemPerMultiprocessor, hipDeviceAttributeSingleToDoublePrecisionPerfRatio,
    hipDeviceAttributeStreamPrioritiesSupported, hipDeviceAttributeSurfaceAlignment, hipDeviceAttributeTccDriver,
    hipDeviceAttributeTextureAlignment, hipDeviceAttributeTexturePitchAlignment,
    hipDeviceAttributeTotalConstantMemory, hipDeviceAttributeTotalGlobalMem, hipDeviceAttributeUnifiedAddressing,
    hipDeviceAttributeUnused2, hipDeviceAttributeWarpSize, hipDeviceAttributeMemoryPoolsSupported,
    hipDeviceAttributeVirtualMemoryManagementSupported, hipDeviceAttributeHostRegisterSupported,
    hipDeviceAttributeMemoryPoolSupportedHandleTypes,
    hipDeviceAttributeCudaCompatibleEnd = 9999,
    hipDeviceAttributeAmdSpecificBegin = 10000,
    hipDeviceAttributeClockInstructionRate = hipDeviceAttributeAmdSpecificBegin,
    hipDeviceAttributeUnused3, hipDeviceAttributeMaxSharedMemoryPerMultiprocessor, hipDeviceAttributeUnused4,
    hipDeviceAttributeUnused5, hipDeviceAttributeHdpMemFlushCntl, hipDeviceAttributeHdpRegFlushCntl,
    hipDeviceAttributeCooperativeMultiDeviceUnmatchedFunc, hipDeviceAttributeCooperativeMultiDeviceUnmatchedGridDim,
    hipDeviceAttributeCooperativeMultiDeviceUnmatchedBlockDim,
    hipDeviceAttributeCooperativeMultiDeviceUnmatchedSharedMem, hipDeviceAttributeIsLargeBar,
    hipDeviceAttributeAsicRevision, hipDeviceAttributeCanUseStreamWaitValue, hipDeviceAttributeImageSupport,
    hipDeviceAttributePhysicalMultiProcessorCount, hipDeviceAttributeFineGrainSupport,
    hipDeviceAttributeWallClockRate,
    hipDeviceAttributeAmdSpecificEnd = 19999,
    hipDeviceAttributeVendorSpecificBegin = 20000
} hipDeviceAttribute_t;

#ifndef FAKE_DECLARATIONS_ONLY

#define FAKE_HANDLE_BASE 0x200
#define FAKE_MAX_DEVICES 2

typedef struct {
    const char *name, *arch_name, *uuid;
    size_t total_mem;
    int cc_major, cc_minor, cus, clock_khz;
    int cooperative, managed, map_host, concurrent, pools, ecc, integrated, large_bar, asic_revision;
    int mem_clock_khz, bus_width, l2_bytes;
    int pci_domain, pci_bus, pci_device;
} FakeDevice;

static const FakeDevice devices[FAKE_MAX_DEVICES] = {
    {"AMD Instinct MI300X", "gfx942:sramecc+:xnack-", "2f3e1a7c9b8d6e50", 205822885888ull, 9, 4, 304, 2100000,
     1, 1, 1, 1, 1, 1, 0, 1, 1, 1300000, 8192, 4194304, 0, 0x0c, 0},
    {"AMD Radeon RX 7900 XTX", "gfx1100", NULL, 25753026560ull, 11, 0, 48, 2482000,
     0, 1, 1, 1, 0, 0, 0, 0, 0, 1249000, 384, 6291456, 0, 0x03, 0},
};

static int initialized;

static int env_int(const char *name, int fallback) {
    const char *text = getenv(name);
    return text && *text ? atoi(text) : fallback;
}

static int device_count(void) {
    int n = env_int("FAKE_HIP_DEVICES", FAKE_MAX_DEVICES);
    return n < 0 ? 0 : (n > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : n);
}

static const FakeDevice *by_ordinal(int ordinal) {
    return ordinal >= 0 && ordinal < device_count() ? &devices[ordinal] : NULL;
}

static const FakeDevice *by_handle(hipDevice_t dev) { return by_ordinal(dev - FAKE_HANDLE_BASE); }

hipError_t hipInit(unsigned int flags) {
    int forced = env_int("FAKE_HIP_INIT_RESULT", 0);
    if (flags != 0) return hipErrorInvalidValue;
    initialized = forced == 0;
    return (hipError_t)forced;
}

hipError_t hipDriverGetVersion(int *driverVersion) {
    if (!driverVersion) return hipErrorInvalidValue;
    *driverVersion = 60342134;
    return hipSuccess;
}

hipError_t hipRuntimeGetVersion(int *runtimeVersion) {
    if (!runtimeVersion) return hipErrorInvalidValue;
    *runtimeVersion = 60342134;
    return hipSuccess;
}

hipError_t hipGetDeviceCount(int *count) {
    if (!initialized) return hipErrorNotInitialized;
    if (!count) return hipErrorInvalidValue;
    *count = device_count();
    return device_count() ? hipSuccess : hipErrorNoDevice;
}

hipError_t hipDeviceGet(hipDevice_t *device, int ordinal) {
    if (!initialized) return hipErrorNotInitialized;
    if (!device) return hipErrorInvalidValue;
    if (!by_ordinal(ordinal)) return hipErrorInvalidDevice;
    *device = FAKE_HANDLE_BASE + ordinal;
    return hipSuccess;
}

hipError_t hipDeviceGetName(char *name, int len, hipDevice_t device) {
    const FakeDevice *d = by_handle(device);
    if (!d) return hipErrorInvalidDevice;
    if (!name || len <= 0) return hipErrorInvalidValue;
    snprintf(name, (size_t)len, "%s", d->name);
    return hipSuccess;
}

hipError_t hipDeviceTotalMem(size_t *bytes, hipDevice_t device) {
    const FakeDevice *d = by_handle(device);
    if (!d) return hipErrorInvalidDevice;
    if (!bytes) return hipErrorInvalidValue;
    *bytes = d->total_mem;
    return hipSuccess;
}

/* Like ROCm, the UUID bytes are the ASCII unique id; a device without one answers all zeros. */
hipError_t hipDeviceGetUuid(hipUUID *uuid, hipDevice_t device) {
    const FakeDevice *d = by_handle(device);
    if (!d) return hipErrorInvalidDevice;
    if (!uuid) return hipErrorInvalidValue;
    memset(uuid->bytes, 0, sizeof uuid->bytes);
    if (d->uuid) memcpy(uuid->bytes, d->uuid, sizeof uuid->bytes);
    return hipSuccess;
}

hipError_t hipDeviceGetAttribute(int *pi, hipDeviceAttribute_t attr, int deviceId) {
    const FakeDevice *d = by_ordinal(deviceId);
    int value;
    if (!d) return hipErrorInvalidDevice;
    if (!pi) return hipErrorInvalidValue;
    switch (attr) {
    case hipDeviceAttributeEccEnabled: value = d->ecc; break;
    case hipDeviceAttributeCanMapHostMemory: value = d->map_host; break;
    case hipDeviceAttributeClockRate: value = d->clock_khz; break;
    case hipDeviceAttributeConcurrentKernels: value = d->concurrent; break;
    case hipDeviceAttributeCooperativeLaunch: value = d->cooperative; break;
    case hipDeviceAttributeIntegrated: value = d->integrated; break;
    case hipDeviceAttributeL2CacheSize: value = d->l2_bytes; break;
    case hipDeviceAttributeComputeCapabilityMajor: value = d->cc_major; break;
    case hipDeviceAttributeManagedMemory: value = d->managed; break;
    case hipDeviceAttributeMemoryBusWidth: value = d->bus_width; break;
    case hipDeviceAttributeMemoryClockRate: value = d->mem_clock_khz; break;
    case hipDeviceAttributeComputeCapabilityMinor: value = d->cc_minor; break;
    case hipDeviceAttributeMultiprocessorCount: value = d->cus; break;
    case hipDeviceAttributePciBusId: value = d->pci_bus; break;
    case hipDeviceAttributePciDeviceId: value = d->pci_device; break;
    case hipDeviceAttributePciDomainID: value = d->pci_domain; break;
    case hipDeviceAttributeMemoryPoolsSupported: value = d->pools; break;
    case hipDeviceAttributeIsLargeBar: value = d->large_bar; break;
    case hipDeviceAttributeAsicRevision: value = d->asic_revision; break;
    default: return hipErrorInvalidValue;
    }
    *pi = value;
    return hipSuccess;
}

hipError_t hipDeviceGetPCIBusId(char *pciBusId, int len, int device) {
    const FakeDevice *d = by_ordinal(device);
    if (!d) return hipErrorInvalidDevice;
    if (!pciBusId || len <= 0) return hipErrorInvalidValue;
    snprintf(pciBusId, (size_t)len, "%04X:%02X:%02X.0", d->pci_domain, d->pci_bus, d->pci_device);
    return hipSuccess;
}

/* Device 0 can reach device 1; not the other way round. */
hipError_t hipDeviceCanAccessPeer(int *canAccessPeer, int deviceId, int peerDeviceId) {
    if (!by_ordinal(deviceId) || !by_ordinal(peerDeviceId)) return hipErrorInvalidDevice;
    if (!canAccessPeer) return hipErrorInvalidValue;
    *canAccessPeer = deviceId == 0 && peerDeviceId == 1;
    return hipSuccess;
}

const char *hipGetErrorName(hipError_t hip_error) {
    return hip_error == hipErrorCooperativeLaunchTooLarge ? "hipErrorCooperativeLaunchTooLarge" : NULL;
}

#ifndef NO_R0600
hipError_t hipGetDevicePropertiesR0600(hipDeviceProp_tR0600 *prop, int deviceId) {
    const FakeDevice *d = by_ordinal(deviceId);
    if (!d) return hipErrorInvalidDevice;
    if (!prop) return hipErrorInvalidValue;
    memset(prop, 0x5a, sizeof *prop); /* garbage wherever the fake sets nothing */
    snprintf(prop->name, sizeof prop->name, "%s", d->name);
    prop->totalGlobalMem = d->total_mem;
    prop->major = d->cc_major;
    prop->minor = d->cc_minor;
    prop->multiProcessorCount = d->cus;
    snprintf(prop->gcnArchName, sizeof prop->gcnArchName, "%s", d->arch_name);
    memset(&prop->arch, 0, sizeof prop->arch);
    prop->arch.hasGlobalInt32Atomics = 1;
    prop->arch.hasDoubles = 1;
    prop->arch.hasDynamicParallelism = 0;
    prop->isLargeBar = d->large_bar;
    prop->asicRevision = d->asic_revision;
    return hipSuccess;
}
#endif

/* Present so the probe sees a runtime with the graph API; discovery never calls it. */
hipError_t hipGraphCreate(void **pGraph, unsigned int flags) {
    (void)pGraph;
    (void)flags;
    return hipErrorNotSupported;
}

#endif /* FAKE_DECLARATIONS_ONLY */
