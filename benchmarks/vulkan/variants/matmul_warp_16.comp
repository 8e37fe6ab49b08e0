#version 460
// Subgroups of 16 x 2 invocations, each a 16 x 128 block: the read pattern of matmul.comp, blocks contiguous: see matmul_warp.glsl.
#define LANES_N 16u
#extension GL_GOOGLE_include_directive : require
#include "matmul_warp.glsl"
