#version 460
// The staging floor at 128 x 256, two buffers (62 KiB): see matmul_coop_floor.glsl.
#define COLUMN_GROUPS 4
#define BUFFERS 2
#define MODE 1
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_floor.glsl"
