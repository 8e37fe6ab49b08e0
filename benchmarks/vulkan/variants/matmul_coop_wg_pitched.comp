#version 460
// Workgroup-scope matrices, as matmul_wg_coop.comp but plain pitched loads (multiples of the tile only): see include/matmul_wg.glsl.
// compiler: slang-glslang
#define WG_INVOCATIONS 256
#define TILE_M 128
#define TILE_N 128
#define TILE_K 32
#define TENSOR 0
#define AHEAD 0
#extension GL_GOOGLE_include_directive : require
#include "include/matmul_wg.glsl"
