/* A fake Level Zero loader (libze_loader) for the probe tests: the entry points the probe binds, with the
 * signatures, struct layouts and constant values of include/ze_api.h of the Level Zero loader v1.32.0
 * (oneapi-src/level-zero, spec v1.17-r1.17.24).
 *
 * Two drivers: the first with an "Intel(R) Data Center GPU Max 1550" and an "Intel(R) Arc(TM) A770 Graphics",
 * the second with an NPU ("Intel(R) AI Boost", ZE_DEVICE_TYPE_VPU) that has no module, memory or PCI
 * properties. Every *Properties call insists on the right stype (else ZE_RESULT_ERROR_INVALID_ARGUMENT), as a
 * validation layer would. Environment: FAKE_ZE_INIT_RESULT=<code> (0x... accepted) makes zeInit return it;
 * FAKE_ZE_DEVICES=0 gives every driver zero devices. -DFAKE_DECLARATIONS_ONLY keeps the declarations only.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum _ze_result_t {
    ZE_RESULT_SUCCESS = 0,
    ZE_RESULT_ERROR_DEVICE_LOST = 0x70000001,
    ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY = 0x70000002,
    ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY = 0x70000003,
    ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET = 0x70000006,
    ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE = 0x70000007,
    ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS = 0x70010000,
    ZE_RESULT_ERROR_NOT_AVAILABLE = 0x70010001,
    ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE = 0x70020000,
    ZE_RESULT_ERROR_UNINITIALIZED = 0x78000001,
    ZE_RESULT_ERROR_UNSUPPORTED_VERSION = 0x78000002,
    ZE_RESULT_ERROR_UNSUPPORTED_FEATURE = 0x78000003,
    ZE_RESULT_ERROR_INVALID_ARGUMENT = 0x78000004,
    ZE_RESULT_ERROR_INVALID_NULL_HANDLE = 0x78000005,
    ZE_RESULT_ERROR_INVALID_NULL_POINTER = 0x78000007,
    ZE_RESULT_ERROR_INVALID_ENUMERATION = 0x7800000c,
    ZE_RESULT_ERROR_UNKNOWN = 0x7ffffffe,
    ZE_RESULT_FORCE_UINT32 = 0x7fffffff
} ze_result_t;

typedef enum _ze_structure_type_t {
    ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES = 0x1,
    ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES = 0x3,
    ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES = 0x5,
    ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES = 0x7,
    ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES = 0x10008,
    ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES_1_2 = 0x00020006,
    ZE_STRUCTURE_TYPE_FORCE_UINT32 = 0x7fffffff
} ze_structure_type_t;

typedef enum _ze_device_type_t {
    ZE_DEVICE_TYPE_GPU = 1,
    ZE_DEVICE_TYPE_CPU = 2,
    ZE_DEVICE_TYPE_FPGA = 3,
    ZE_DEVICE_TYPE_MCA = 4,
    ZE_DEVICE_TYPE_VPU = 5,
    ZE_DEVICE_TYPE_FORCE_UINT32 = 0x7fffffff
} ze_device_type_t;

#define ZE_BIT(_i) (1 << _i)
#define ZE_MAKE_VERSION(_major, _minor) ((_major << 16) | (_minor & 0x0000ffff))
#define ZE_MAX_DRIVER_UUID_SIZE 16
#define ZE_MAX_DEVICE_UUID_SIZE 16
#define ZE_MAX_NATIVE_KERNEL_UUID_SIZE 16
#define ZE_MAX_DEVICE_NAME 256

typedef uint32_t ze_init_flags_t;
typedef uint32_t ze_device_property_flags_t;
enum {
    ZE_DEVICE_PROPERTY_FLAG_INTEGRATED = ZE_BIT(0),
    ZE_DEVICE_PROPERTY_FLAG_SUBDEVICE = ZE_BIT(1),
    ZE_DEVICE_PROPERTY_FLAG_ECC = ZE_BIT(2),
    ZE_DEVICE_PROPERTY_FLAG_ONDEMANDPAGING = ZE_BIT(3)
};
typedef uint32_t ze_device_module_flags_t;
enum {
    ZE_DEVICE_MODULE_FLAG_FP16 = ZE_BIT(0),
    ZE_DEVICE_MODULE_FLAG_FP64 = ZE_BIT(1),
    ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS = ZE_BIT(2),
    ZE_DEVICE_MODULE_FLAG_DP4A = ZE_BIT(3)
};
typedef uint32_t ze_device_fp_flags_t;
enum {
    ZE_DEVICE_FP_FLAG_DENORM = ZE_BIT(0),
    ZE_DEVICE_FP_FLAG_INF_NAN = ZE_BIT(1),
    ZE_DEVICE_FP_FLAG_ROUND_TO_NEAREST = ZE_BIT(2),
    ZE_DEVICE_FP_FLAG_ROUND_TO_ZERO = ZE_BIT(3),
    ZE_DEVICE_FP_FLAG_ROUND_TO_INF = ZE_BIT(4),
    ZE_DEVICE_FP_FLAG_FMA = ZE_BIT(5),
    ZE_DEVICE_FP_FLAG_ROUNDED_DIVIDE_SQRT = ZE_BIT(6),
    ZE_DEVICE_FP_FLAG_SOFT_FLOAT = ZE_BIT(7)
};
typedef uint32_t ze_device_memory_property_flags_t;
typedef uint32_t ze_api_version_t;

typedef struct _ze_driver_handle_t *ze_driver_handle_t;
typedef struct _ze_device_handle_t *ze_device_handle_t;

typedef struct _ze_driver_uuid_t {
    uint8_t id[ZE_MAX_DRIVER_UUID_SIZE];
} ze_driver_uuid_t;

typedef struct _ze_driver_properties_t {
    ze_structure_type_t stype;
    void *pNext;
    ze_driver_uuid_t uuid;
    uint32_t driverVersion;
} ze_driver_properties_t;

typedef struct _ze_device_uuid_t {
    uint8_t id[ZE_MAX_DEVICE_UUID_SIZE];
} ze_device_uuid_t;

typedef struct _ze_device_properties_t {
    ze_structure_type_t stype;
    void *pNext;
    ze_device_type_t type;
    uint32_t vendorId;
    uint32_t deviceId;
    ze_device_property_flags_t flags;
    uint32_t subdeviceId;
    uint32_t coreClockRate;
    uint64_t maxMemAllocSize;
    uint32_t maxHardwareContexts;
    uint32_t maxCommandQueuePriority;
    uint32_t numThreadsPerEU;
    uint32_t physicalEUSimdWidth;
    uint32_t numEUsPerSubslice;
    uint32_t numSubslicesPerSlice;
    uint32_t numSlices;
    uint64_t timerResolution;
    uint32_t timestampValidBits;
    uint32_t kernelTimestampValidBits;
    ze_device_uuid_t uuid;
    char name[ZE_MAX_DEVICE_NAME];
} ze_device_properties_t;

typedef struct _ze_device_memory_properties_t {
    ze_structure_type_t stype;
    void *pNext;
    ze_device_memory_property_flags_t flags;
    uint32_t maxClockRate;
    uint32_t maxBusWidth;
    uint64_t totalSize;
    char name[ZE_MAX_DEVICE_NAME];
} ze_device_memory_properties_t;

typedef struct _ze_native_kernel_uuid_t {
    uint8_t id[ZE_MAX_NATIVE_KERNEL_UUID_SIZE];
} ze_native_kernel_uuid_t;

typedef struct _ze_device_module_properties_t {
    ze_structure_type_t stype;
    void *pNext;
    uint32_t spirvVersionSupported;
    ze_device_module_flags_t flags;
    ze_device_fp_flags_t fp16flags;
    ze_device_fp_flags_t fp32flags;
    ze_device_fp_flags_t fp64flags;
    uint32_t maxArgumentsSize;
    uint32_t printfBufferSize;
    ze_native_kernel_uuid_t nativeKernelSupported;
} ze_device_module_properties_t;

typedef struct _ze_pci_address_ext_t {
    uint32_t domain;
    uint32_t bus;
    uint32_t device;
    uint32_t function;
} ze_pci_address_ext_t;

typedef struct _ze_pci_speed_ext_t {
    int32_t genVersion;
    int32_t width;
    int64_t maxBandwidth;
} ze_pci_speed_ext_t;

typedef struct _ze_pci_ext_properties_t {
    ze_structure_type_t stype;
    void *pNext;
    ze_pci_address_ext_t address;
    ze_pci_speed_ext_t maxSpeed;
} ze_pci_ext_properties_t;

#ifndef FAKE_DECLARATIONS_ONLY

#define GIB (1ull << 30)
#define FP_FULL                                                                                                   \
    (ZE_DEVICE_FP_FLAG_DENORM | ZE_DEVICE_FP_FLAG_INF_NAN | ZE_DEVICE_FP_FLAG_ROUND_TO_NEAREST |                 \
     ZE_DEVICE_FP_FLAG_ROUND_TO_ZERO | ZE_DEVICE_FP_FLAG_ROUND_TO_INF | ZE_DEVICE_FP_FLAG_FMA)

struct _ze_device_handle_t {
    ze_device_type_t type;
    const char *name;
    uint32_t device_id, flags, clock, slices, subslices, eus, threads, simd;
    uint64_t max_alloc;
    uint64_t memories[2]; /* local memories; 0 ends the list */
    int has_module;       /* 0: zeDeviceGetModuleProperties says UNSUPPORTED_FEATURE */
    ze_device_module_flags_t module_flags;
    ze_device_fp_flags_t fp16, fp32, fp64;
    int has_pci;
    uint32_t pci_bus;
};

struct _ze_driver_handle_t {
    uint32_t version, api_version, ndevices;
    struct _ze_device_handle_t *devices[2];
};

static struct _ze_device_handle_t max1550 = {
    ZE_DEVICE_TYPE_GPU, "Intel(R) Data Center GPU Max 1550", 0x0bd5,
    ZE_DEVICE_PROPERTY_FLAG_ECC | ZE_DEVICE_PROPERTY_FLAG_ONDEMANDPAGING, 1600, 2, 64, 8, 8, 16, 64 * GIB,
    {64 * GIB, 64 * GIB}, 1,
    ZE_DEVICE_MODULE_FLAG_FP16 | ZE_DEVICE_MODULE_FLAG_FP64 | ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS |
        ZE_DEVICE_MODULE_FLAG_DP4A,
    FP_FULL, FP_FULL | ZE_DEVICE_FP_FLAG_ROUNDED_DIVIDE_SQRT, FP_FULL, 1, 0x3a};
/* FP64 only in software on this one: the probe must not claim it. */
static struct _ze_device_handle_t a770 = {
    ZE_DEVICE_TYPE_GPU, "Intel(R) Arc(TM) A770 Graphics", 0x56a0, 0, 2400, 8, 4, 16, 8, 8, 4 * GIB,
    {16 * GIB, 0}, 1,
    ZE_DEVICE_MODULE_FLAG_FP16 | ZE_DEVICE_MODULE_FLAG_FP64 | ZE_DEVICE_MODULE_FLAG_DP4A,
    FP_FULL, FP_FULL, FP_FULL | ZE_DEVICE_FP_FLAG_SOFT_FLOAT, 1, 0x03};
static struct _ze_device_handle_t npu = {
    ZE_DEVICE_TYPE_VPU, "Intel(R) AI Boost", 0x7d1d, ZE_DEVICE_PROPERTY_FLAG_INTEGRATED, 1400, 0, 0, 0, 0, 0,
    1 * GIB, {0, 0}, 0, 0, 0, 0, 0, 0, 0};

static struct _ze_driver_handle_t gpu_driver = {16929350, ZE_MAKE_VERSION(1, 17), 2, {&max1550, &a770}};
static struct _ze_driver_handle_t npu_driver = {1688, ZE_MAKE_VERSION(1, 13), 1, {&npu, NULL}};
static struct _ze_driver_handle_t *drivers[2] = {&gpu_driver, &npu_driver};

static int initialized;

static ze_result_t fill_handles(uint32_t available, void *const *from, uint32_t *pCount, void **out) {
    if (!pCount) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (*pCount == 0 || *pCount > available) *pCount = available;
    if (out)
        for (uint32_t i = 0; i < *pCount; i++) out[i] = from[i];
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeInit(ze_init_flags_t flags) {
    const char *forced = getenv("FAKE_ZE_INIT_RESULT");
    long code = forced && *forced ? strtol(forced, NULL, 0) : 0;
    if (flags > 0x3) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
    initialized = code == 0;
    return (ze_result_t)code;
}

ze_result_t zeDriverGet(uint32_t *pCount, ze_driver_handle_t *phDrivers) {
    if (!initialized) return ZE_RESULT_ERROR_UNINITIALIZED;
    return fill_handles(2, (void *const *)drivers, pCount, (void **)phDrivers);
}

ze_result_t zeDriverGetProperties(ze_driver_handle_t hDriver, ze_driver_properties_t *pDriverProperties) {
    if (!hDriver) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!pDriverProperties) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (pDriverProperties->stype != ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    for (int k = 0; k < ZE_MAX_DRIVER_UUID_SIZE; k++)
        pDriverProperties->uuid.id[k] = (uint8_t)(hDriver == &gpu_driver ? 0x10 + k : 0x20 + k);
    pDriverProperties->driverVersion = hDriver->version;
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeDriverGetApiVersion(ze_driver_handle_t hDriver, ze_api_version_t *version) {
    if (!hDriver) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!version) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    *version = hDriver->api_version;
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGet(ze_driver_handle_t hDriver, uint32_t *pCount, ze_device_handle_t *phDevices) {
    const char *forced = getenv("FAKE_ZE_DEVICES");
    if (!initialized) return ZE_RESULT_ERROR_UNINITIALIZED;
    if (!hDriver) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (forced && *forced && atoi(forced) == 0) return fill_handles(0, NULL, pCount, NULL);
    return fill_handles(hDriver->ndevices, (void *const *)hDriver->devices, pCount, (void **)phDevices);
}

ze_result_t zeDeviceGetProperties(ze_device_handle_t hDevice, ze_device_properties_t *p) {
    if (!hDevice) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!p) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (p->stype != ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES || p->pNext) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    p->type = hDevice->type;
    p->vendorId = 0x8086;
    p->deviceId = hDevice->device_id;
    p->flags = hDevice->flags;
    p->subdeviceId = 0;
    p->coreClockRate = hDevice->clock;
    p->maxMemAllocSize = hDevice->max_alloc;
    p->maxHardwareContexts = 65536;
    p->maxCommandQueuePriority = 0;
    p->numThreadsPerEU = hDevice->threads;
    p->physicalEUSimdWidth = hDevice->simd;
    p->numEUsPerSubslice = hDevice->eus;
    p->numSubslicesPerSlice = hDevice->subslices;
    p->numSlices = hDevice->slices;
    p->timerResolution = 52;
    p->timestampValidBits = 64;
    p->kernelTimestampValidBits = 32;
    for (int k = 0; k < ZE_MAX_DEVICE_UUID_SIZE; k++) p->uuid.id[k] = (uint8_t)(hDevice->device_id + k);
    snprintf(p->name, sizeof p->name, "%s", hDevice->name);
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGetMemoryProperties(ze_device_handle_t hDevice, uint32_t *pCount,
                                        ze_device_memory_properties_t *pMemProperties) {
    uint32_t available = 0;
    if (!hDevice) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!pCount) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    while (available < 2 && hDevice->memories[available]) available++;
    if (*pCount == 0 || *pCount > available) *pCount = available;
    if (!pMemProperties) return ZE_RESULT_SUCCESS;
    for (uint32_t i = 0; i < *pCount; i++)
        if (pMemProperties[i].stype != ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    for (uint32_t i = 0; i < *pCount; i++) {
        pMemProperties[i].flags = 0;
        pMemProperties[i].maxClockRate = 3200;
        pMemProperties[i].maxBusWidth = 4096;
        pMemProperties[i].totalSize = hDevice->memories[i];
        snprintf(pMemProperties[i].name, sizeof pMemProperties[i].name, "HBM");
    }
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGetModuleProperties(ze_device_handle_t hDevice, ze_device_module_properties_t *p) {
    if (!hDevice) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!p) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (p->stype != ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (!hDevice->has_module) return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
    p->spirvVersionSupported = ZE_MAKE_VERSION(1, 4);
    p->flags = hDevice->module_flags;
    p->fp16flags = hDevice->fp16;
    p->fp32flags = hDevice->fp32;
    p->fp64flags = hDevice->fp64;
    p->maxArgumentsSize = 2048;
    p->printfBufferSize = 4 << 20;
    memset(p->nativeKernelSupported.id, 0x77, sizeof p->nativeKernelSupported.id);
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeDevicePciGetPropertiesExt(ze_device_handle_t hDevice, ze_pci_ext_properties_t *p) {
    if (!hDevice) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!p) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (p->stype != ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (!hDevice->has_pci) return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
    p->address.domain = 0;
    p->address.bus = hDevice->pci_bus;
    p->address.device = 0;
    p->address.function = 0;
    p->maxSpeed.genVersion = 4;
    p->maxSpeed.width = 16;
    p->maxSpeed.maxBandwidth = 31500000000ll;
    return ZE_RESULT_SUCCESS;
}

#endif /* FAKE_DECLARATIONS_ONLY */
