/* A fake libnrt.so.1 with the signatures and structs of aws-neuron-sdk src/libnrt/include/nrt/{nrt,nrt_version,
 * nrt_status}.h: two visible of four NeuronCores on a trn1 (family 2, size 6 = 32XL).
 * -DNO_VNC leaves out the nrt_get_*_vnc_count names (older runtimes export only the *_nc_* ones). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef int NRT_STATUS;
typedef enum { NRT_FRAMEWORK_TYPE_INVALID = 0, NRT_FRAMEWORK_TYPE_NO_FW = 1 } nrt_framework_type_t;
typedef struct nrt_version {
  uint64_t rt_major, rt_minor, rt_patch, rt_maintenance;
  char rt_detail[128];
  char git_hash[64];
} nrt_version_t;
typedef struct nrt_instance_info {
  uint32_t family, size;
  char arch_name[16];
  char device_revision[8];
} nrt_instance_info_t;
typedef struct nrt_vnc_memory_stats { size_t bytes_used, bytes_limit; } nrt_vnc_memory_stats_t;

static int init_status, inited, init_calls, close_calls, last_framework, args_ok;
static uint32_t visible = 2, total = 4;
static char last_fal[64];

NRT_STATUS nrt_init(nrt_framework_type_t framework, const char* fw_version, const char* fal_version) {
  init_calls++;
  last_framework = framework;
  /* Both strings must arrive: a two-argument caller leaves garbage in the third. */
  args_ok = fw_version != NULL && fal_version != NULL && strlen(fw_version) == 0;
  if (fal_version) strncpy(last_fal, fal_version, sizeof last_fal - 1);
  if (init_status) return init_status;
  inited = 1;
  return 0;
}
void nrt_close(void) { close_calls++; inited = 0; }

NRT_STATUS nrt_get_total_nc_count(uint32_t* n) { *n = total; return 0; }
NRT_STATUS nrt_get_visible_nc_count(uint32_t* n) { *n = visible; return 0; }
#ifndef NO_VNC
NRT_STATUS nrt_get_total_vnc_count(uint32_t* n) { *n = total; return 0; }
NRT_STATUS nrt_get_visible_vnc_count(uint32_t* n) { *n = visible; return 0; }
#endif

NRT_STATUS nrt_get_version(nrt_version_t* v, size_t size) {
  if (size < sizeof *v) return 2;
  memset(v, 0, sizeof *v);
  v->rt_major = 2; v->rt_minor = 21; v->rt_patch = 5; v->rt_maintenance = 7;
  strcpy(v->rt_detail, "2.21.5.7-fake");
  strcpy(v->git_hash, "0123abcd");
  return 0;
}

NRT_STATUS nrt_get_instance_info(nrt_instance_info_t* info, size_t len) {
  if (!inited) return 13; /* NRT_UNINITIALIZED */
  nrt_instance_info_t mine = {2, 6, "trn1", "v2"};
  memcpy(info, &mine, len < sizeof mine ? len : sizeof mine);
  return 0;
}

NRT_STATUS nrt_get_vnc_memory_stats(uint32_t vnc, nrt_vnc_memory_stats_t* stats, size_t in, size_t* out) {
  if (!inited) return 13;
  if (vnc >= visible || in < sizeof *stats) return 2;
  stats->bytes_used = 1024;
  stats->bytes_limit = (size_t)16 << 30 | vnc; /* distinct per core */
  *out = sizeof *stats;
  return 0;
}

/* Test controls. */
void fake_reset(void) {
  init_status = inited = init_calls = close_calls = last_framework = args_ok = 0;
  visible = 2; total = 4; last_fal[0] = 0;
}
void fake_set_init_status(int s) { init_status = s; }
void fake_set_visible(uint32_t n) { visible = n; }
int fake_init_calls(void) { return init_calls; }
int fake_close_calls(void) { return close_calls; }
int fake_last_framework(void) { return last_framework; }
int fake_args_ok(void) { return args_ok; }
const char* fake_last_fal(void) { return last_fal; }
