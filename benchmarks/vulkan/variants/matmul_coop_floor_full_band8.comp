#version 460
// The whole product, tiles in bands of 8 rows: see matmul_coop_floor.glsl.
#define BAND 8
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_floor.glsl"
