#version 460
// The whole product, as shipped (checks the variant against matmul_coop.comp): see matmul_coop_floor.glsl.
#define COLUMN_GROUPS 2
#define BUFFERS 2
#define MODE 0
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_floor.glsl"
