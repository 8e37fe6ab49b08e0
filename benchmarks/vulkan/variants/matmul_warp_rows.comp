#version 460
// As matmul_warp, with A staged by row: see matmul_warp.glsl.
#define LANES_N 8u
#define STAGE_BY_ROW
#extension GL_GOOGLE_include_directive : require
#include "matmul_warp.glsl"
