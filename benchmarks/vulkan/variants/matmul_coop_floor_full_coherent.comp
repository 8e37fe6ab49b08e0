#version 460
// The whole product, coherent operands: see matmul_coop_floor.glsl.
#define COOP_OPERANDS coherent readonly
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_floor.glsl"
