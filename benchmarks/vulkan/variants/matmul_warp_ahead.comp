#version 460
// As matmul_warp, reading k + 1 from shared memory before the products of k: see matmul_warp.glsl.
#define LANES_N 8u
#define FRAG_AHEAD
#extension GL_GOOGLE_include_directive : require
#include "matmul_warp.glsl"
