#version 460
// Arithmetic ceiling without barriers, 128 x 128: see matmul_coop_floor.glsl.
#define COLUMN_GROUPS 2
#define BUFFERS 1
#define MODE 6
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_floor.glsl"
