#version 460
// Subgroups of 4 x 8 invocations (columns x rows), each a 64 x 32 block of a 128 x 128 tile: see matmul_warp.glsl.
#define LANES_N 4u
#extension GL_GOOGLE_include_directive : require
#include "matmul_warp.glsl"
