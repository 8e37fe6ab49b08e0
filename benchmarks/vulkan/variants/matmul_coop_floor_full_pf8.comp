#version 460
// The whole product with slices touched 8 steps ahead: see matmul_coop_floor.glsl.
#define PREFETCH 8
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_floor.glsl"
