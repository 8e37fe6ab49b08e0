#version 460
// The arithmetic ceiling at 128 x 256: see matmul_coop_floor.glsl.
#define COLUMN_GROUPS 4
#define BUFFERS 1
#define MODE 2
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_floor.glsl"
