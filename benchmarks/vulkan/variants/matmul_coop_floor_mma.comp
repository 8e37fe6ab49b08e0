#version 460
// The arithmetic ceiling of the shipped tile: see matmul_coop_floor.glsl.
#define COLUMN_GROUPS 2
#define BUFFERS 1
#define MODE 2
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_floor.glsl"
