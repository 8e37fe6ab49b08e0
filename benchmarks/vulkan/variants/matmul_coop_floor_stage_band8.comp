#version 460
// The staging floor, tiles in bands of 8 rows: see matmul_coop_floor.glsl.
#define MODE 1
#define BAND 8
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_floor.glsl"
