#version 460
// Two slices in flight, 128 x 256 tiles (8 subgroups): see matmul_coop_2ahead.glsl.
#define COLUMN_GROUPS 4
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_2ahead.glsl"
