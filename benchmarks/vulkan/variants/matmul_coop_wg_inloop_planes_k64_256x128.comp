#version 460
// Workgroup-scope matrices, as matmul_wg_coop.comp but 256 x 128 tiles in 64-deep steps, slices loaded inside the loop through two-dimensional layouts: see include/matmul_wg.glsl.
// compiler: slang-glslang
#define WG_INVOCATIONS 256
#define TILE_M 256
#define TILE_N 128
#define TILE_K 64
#define TENSOR 1
#define AHEAD 0
#define INLOOP 1
#define PLANES 1
#extension GL_GOOGLE_include_directive : require
#include "include/matmul_wg.glsl"
