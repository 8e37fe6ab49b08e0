#version 460
// Subgroups of 8 x 4 invocations (columns x rows), each a 32 x 64 block of a 128 x 128 tile: see matmul_warp.glsl.
#define LANES_N 8u
#extension GL_GOOGLE_include_directive : require
#include "matmul_warp.glsl"
