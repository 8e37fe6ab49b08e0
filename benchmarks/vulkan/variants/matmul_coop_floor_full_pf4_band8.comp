#version 460
// The whole product with slices touched 4 steps ahead, tiles in bands of 8 rows: see matmul_coop_floor.glsl.
#define PREFETCH 4
#define BAND 8
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_floor.glsl"
