#version 460
// Workgroup-scope matrices, as matmul_wg_coop.comp but through two-dimensional layouts (slices carried between steps): see include/matmul_wg.glsl.
// compiler: slang-glslang
#define WG_INVOCATIONS 256
#define TILE_M 128
#define TILE_N 128
#define TILE_K 32
#define TENSOR 1
#define AHEAD 0
#define INLOOP 0
#define PLANES 1
#extension GL_GOOGLE_include_directive : require
#include "include/matmul_wg.glsl"
