#version 460
// The read pattern of matmul.comp (as matmul_warp_16) with A staged by row: see matmul_warp.glsl.
#define LANES_N 16u
#define STAGE_BY_ROW
#extension GL_GOOGLE_include_directive : require
#include "matmul_warp.glsl"
