/* A fake libtpu.so: GetPjrtApi returning a PJRT_Api whose prefix is laid out as openxla/xla
 * xla/pjrt/c/pjrt_c_api.h (PJRT_API_MAJOR 0) declares it; version 0.61. No client functions work. */
#include <stddef.h>
#include <stdint.h>

typedef enum { PJRT_Extension_Type_Gpu_Custom_Call = 0 } PJRT_Extension_Type;
typedef struct PJRT_Extension_Base {
  size_t struct_size;
  PJRT_Extension_Type type;
  struct PJRT_Extension_Base* next;
} PJRT_Extension_Base;

typedef struct PJRT_Api_Version {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  int major_version;
  int minor_version;
} PJRT_Api_Version;

typedef void* (*AnyFn)(void*);
typedef struct PJRT_Api {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Api_Version pjrt_api_version;
  AnyFn PJRT_Error_Destroy, PJRT_Error_Message, PJRT_Error_GetCode, PJRT_Plugin_Initialize,
      PJRT_Plugin_Attributes, PJRT_Event_Destroy, PJRT_Event_IsReady, PJRT_Event_Error, PJRT_Event_Await,
      PJRT_Event_OnReady, PJRT_Client_Create;
} PJRT_Api;

static int client_creates;
static void* client_create(void* args) { (void)args; client_creates++; return (void*)1; }

static PJRT_Api api = {
    sizeof(PJRT_Api), NULL, {offsetof(PJRT_Api_Version, minor_version) + sizeof(int), NULL, 0, 61},
    .PJRT_Client_Create = client_create,
};
static int return_null, calls;

const PJRT_Api* GetPjrtApi(void) {
  calls++;
  return return_null ? NULL : &api;
}

/* Test controls. */
void fake_reset(void) {
  return_null = calls = client_creates = 0;
  api.struct_size = sizeof(PJRT_Api);
  api.pjrt_api_version.major_version = 0;
  api.pjrt_api_version.minor_version = 61;
}
void fake_set_null(int v) { return_null = v; }
void fake_set_struct_size(size_t n) { api.struct_size = n; }
int fake_calls(void) { return calls; }
int fake_client_creates(void) { return client_creates; }
