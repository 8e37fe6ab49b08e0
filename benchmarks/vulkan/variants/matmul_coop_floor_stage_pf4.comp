#version 460
// The staging floor with slices touched 1 steps ahead: see matmul_coop_floor.glsl.
#define MODE 1
#define PREFETCH 4
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_floor.glsl"
