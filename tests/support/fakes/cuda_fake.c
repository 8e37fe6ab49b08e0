/* A fake CUDA driver (libcuda) for the probe tests: the driver-API entry points the probe binds, with the
 * signatures, types and constant values of cuda.h from CUDA Toolkit 12.6 (CUDA_VERSION 12060).
 *
 * Two devices: an "NVIDIA H200" (sm_90) and an "NVIDIA GeForce RTX 3060" (sm_86). Device handles are
 * 0x100 + ordinal, so a probe that passes an ordinal where a CUdevice belongs gets CUDA_ERROR_INVALID_DEVICE.
 * Environment: FAKE_CUDA_INIT_RESULT=<code> makes cuInit return that code; FAKE_CUDA_DEVICES=<n> reports
 * n (0..2) devices. Compiled with -DFAKE_DECLARATIONS_ONLY it is only the header's declarations, which the
 * layout test includes to compare against the ctypes model.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUdevice;

typedef enum cudaError_enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_DEVICE_NOT_LICENSED = 102,
    CUDA_ERROR_OPERATING_SYSTEM = 304,
    CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720,
    CUDA_ERROR_NOT_PERMITTED = 800,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_SYSTEM_NOT_READY = 802,
    CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
    CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
    CUDA_ERROR_UNKNOWN = 999
} CUresult;

typedef struct CUuuid_st {
    char bytes[16];
} CUuuid;

typedef enum CUdevice_attribute_enum {
    CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,
    CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
    CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS = 31,
    CU_DEVICE_ATTRIBUTE_ECC_ENABLED = 32,
    CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
    CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
    CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
    CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
    CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
    CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
    CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 83,
    CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD = 84,
    CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH = 95,
    CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115
} CUdevice_attribute;

#ifndef FAKE_DECLARATIONS_ONLY

#define FAKE_HANDLE_BASE 0x100
#define FAKE_MAX_DEVICES 2

typedef struct {
    const char *name;
    size_t total_mem;
    int cc_major, cc_minor, sms, clock_khz; /* clock_khz < 0: the attribute is rejected */
    int cooperative, managed, map_host, concurrent, pools, ecc, integrated, unified, multi_board;
    int mem_clock_khz, bus_width, l2_bytes;
    int pci_domain, pci_bus, pci_device;
} FakeDevice;

static const FakeDevice devices[FAKE_MAX_DEVICES] = {
    {"NVIDIA H200", 150754820096ull, 9, 0, 132, 1980000, 1, 1, 1, 1, 1, 1, 0, 1, 0, 3201000, 6144, 52428800,
     0, 0x1b, 0},
    {"NVIDIA GeForce RTX 3060", 12622168064ull, 8, 6, 28, -1, 0, 1, 1, 1, 0, 0, 0, 1, 0, 7501000, 192, 2359296,
     0, 0x65, 0},
};

static int initialized;

static int env_int(const char *name, int fallback) {
    const char *text = getenv(name);
    return text && *text ? atoi(text) : fallback;
}

static int device_count(void) {
    int n = env_int("FAKE_CUDA_DEVICES", FAKE_MAX_DEVICES);
    return n < 0 ? 0 : (n > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : n);
}

/* The device behind a handle, or NULL. */
static const FakeDevice *lookup(CUdevice dev) {
    int index = dev - FAKE_HANDLE_BASE;
    return index >= 0 && index < device_count() ? &devices[index] : NULL;
}

CUresult cuInit(unsigned int flags) {
    int forced = env_int("FAKE_CUDA_INIT_RESULT", 0);
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    initialized = forced == 0;
    return (CUresult)forced;
}

CUresult cuDriverGetVersion(int *version) {
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    *version = 12080; /* callable before cuInit, as the header allows */
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count) {
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = device_count();
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
    *device = FAKE_HANDLE_BASE + ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    const FakeDevice *d = lookup(dev);
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!d) return CUDA_ERROR_INVALID_DEVICE;
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", d->name);
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    const FakeDevice *d = lookup(dev);
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!d) return CUDA_ERROR_INVALID_DEVICE;
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    *bytes = d->total_mem;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
    const FakeDevice *d = lookup(dev);
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!d) return CUDA_ERROR_INVALID_DEVICE;
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    for (int k = 0; k < 16; k++) uuid->bytes[k] = (char)(0xa0 + 16 * (dev - FAKE_HANDLE_BASE) + k);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
    const FakeDevice *d = lookup(dev);
    int value;
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!d) return CUDA_ERROR_INVALID_DEVICE;
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
        if (d->clock_khz < 0) return CUDA_ERROR_INVALID_VALUE;
        value = d->clock_khz;
        break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: value = d->sms; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: value = d->integrated; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: value = d->map_host; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: value = d->concurrent; break;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: value = d->ecc; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: value = d->pci_bus; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: value = d->pci_device; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: value = d->pci_domain; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: value = d->mem_clock_khz; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: value = d->bus_width; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: value = d->l2_bytes; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: value = d->unified; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: value = d->cc_major; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: value = d->cc_minor; break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: value = d->managed; break;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD: value = d->multi_board; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: value = d->cooperative; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: value = d->pools; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    *pi = value;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev) {
    const FakeDevice *d = lookup(dev);
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!d) return CUDA_ERROR_INVALID_DEVICE;
    if (!pciBusId || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    snprintf(pciBusId, (size_t)len, "%04X:%02X:%02X.0", d->pci_domain, d->pci_bus, d->pci_device);
    return CUDA_SUCCESS;
}

/* Device 0 can reach device 1; not the other way round. */
CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev) {
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!lookup(dev) || !lookup(peerDev)) return CUDA_ERROR_INVALID_DEVICE;
    if (!canAccessPeer) return CUDA_ERROR_INVALID_VALUE;
    *canAccessPeer = dev == FAKE_HANDLE_BASE && peerDev == FAKE_HANDLE_BASE + 1;
    return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char **pStr) {
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    if (error == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) {
        *pStr = "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE";
        return CUDA_SUCCESS;
    }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

/* Present so the probe sees a driver with the graph API; discovery never calls it. */
CUresult cuGraphCreate(void **phGraph, unsigned int flags) {
    (void)phGraph;
    (void)flags;
    return CUDA_ERROR_NOT_SUPPORTED;
}

#endif /* FAKE_DECLARATIONS_ONLY */
