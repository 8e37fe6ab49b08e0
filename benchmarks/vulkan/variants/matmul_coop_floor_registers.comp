#version 460
// Register ceiling, 128 x 128: see matmul_coop_floor.glsl.
#define COLUMN_GROUPS 2
#define BUFFERS 1
#define MODE 7
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_floor.glsl"
