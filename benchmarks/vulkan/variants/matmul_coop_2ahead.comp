#version 460
// Two slices in flight, 128 x 128 tiles: see matmul_coop_2ahead.glsl.
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_2ahead.glsl"
