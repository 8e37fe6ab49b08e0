#version 460
// The whole product, restrict operands: see matmul_coop_floor.glsl.
#define COOP_OPERANDS restrict readonly
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_floor.glsl"
