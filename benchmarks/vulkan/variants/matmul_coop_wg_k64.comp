#version 460
// Workgroup-scope matrices through tensor layouts: 128 x 128 tiles, 64-deep steps, 256 invocations: see matmul_coop_wg.glsl.
#define WG_INVOCATIONS 256
#define TILE_M 128
#define TILE_N 128
#define TILE_K 64
#define TENSOR 1
#define AHEAD 0
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_wg.glsl"
