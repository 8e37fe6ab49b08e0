#version 460
// The staging floor, coherent operands: see matmul_coop_floor.glsl.
#define MODE 1
#define COOP_OPERANDS coherent readonly
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_floor.glsl"
