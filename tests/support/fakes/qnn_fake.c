/* A fake QNN backend library: QnnInterface_getProviders over QnnInterface_t laid out as QnnInterface.h
 * (QNN SDK v2.13.0, core API 2.7.2) declares it, function table inline in the union.
 *
 * Default build: an HTP provider, a NULL list entry (skipped by the probe) and a GPU provider without a name.
 * -DFAKE_CPU_ONLY: a single CPU provider (a second backend library). */
#include <stddef.h>
#include <stdint.h>

typedef uint64_t Qnn_ErrorHandle_t;
typedef struct { uint32_t major, minor, patch; } Qnn_Version_t;
typedef struct { Qnn_Version_t coreApiVersion; Qnn_Version_t backendApiVersion; } Qnn_ApiVersion_t;
typedef Qnn_ErrorHandle_t (*Fn)(void);

/* QnnInterface_ImplementationV2_7_t: 45 function pointers in header order. */
typedef struct {
  Fn propertyHasCapability;
  Fn backendCreate, backendGetApiVersion, backendGetBuildId, backendRegisterOpPackage,
      backendGetSupportedOperations, backendValidateOpConfig, backendFree;
  Fn contextCreate, contextSetConfig, contextGetBinarySize, contextGetBinary, contextCreateFromBinary, contextFree;
  Fn graphCreate, graphSetConfig, graphAddNode, graphFinalize, graphRetrieve, graphExecute, graphExecuteAsync;
  Fn tensorCreateContextTensor, tensorCreateGraphTensor;
  Fn logCreate, logSetLogLevel, logFree;
  Fn profileCreate, profileGetEvents, profileGetSubEvents, profileGetEventData, profileFree;
  Fn memRegister, memDeRegister;
  Fn deviceGetPlatformInfo, deviceFreePlatformInfo, deviceGetInfrastructure, deviceCreate, deviceSetConfig,
      deviceGetInfo, deviceFree;
  Fn signalCreate, signalSetConfig, signalTrigger, signalFree;
} QnnInterface_ImplementationV2_7_t;

typedef struct {
  uint32_t backendId;
  const char* providerName;
  Qnn_ApiVersion_t apiVersion;
  union {
    QnnInterface_ImplementationV2_7_t v2_7;
  };
} QnnInterface_t;

static int table_calls;
static Qnn_ErrorHandle_t trap(void) { table_calls++; return 1000; }

static uint64_t status;
static int calls;

#ifdef FAKE_CPU_ONLY
static QnnInterface_t cpu = {3, "CPU_QTI_AISW", {{2, 7, 2}, {1, 1, 0}}, {{trap}}};
static const QnnInterface_t* providers[] = {&cpu};
#else
static QnnInterface_t htp = {6, "HTP_QTI_AISW", {{2, 7, 2}, {5, 13, 0}}, {{trap, trap, trap, trap}}};
static QnnInterface_t gpu = {4, NULL, {{2, 7, 2}, {3, 2, 0}}, {{trap}}};
static const QnnInterface_t* providers[] = {&htp, NULL, &gpu};
#endif

Qnn_ErrorHandle_t QnnInterface_getProviders(const QnnInterface_t*** providerList, uint32_t* numProviders) {
  calls++;
  if (!providerList || !numProviders) return 60000 + 1004;
  if (status) return status;
  *providerList = providers;
  *numProviders = sizeof providers / sizeof providers[0];
  return 0;
}

/* Test controls. */
void fake_set_status(uint64_t s) { status = s; }
int fake_calls(void) { return calls; }
int fake_table_calls(void) { return table_calls; }
void fake_reset(void) { status = 0; calls = 0; table_calls = 0; }
