#version 460
// The whole product, 128 x 256, one shared buffer (31 KiB): see matmul_coop_floor.glsl.
#define COLUMN_GROUPS 4
#define BUFFERS 1
#define MODE 0
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_floor.glsl"
