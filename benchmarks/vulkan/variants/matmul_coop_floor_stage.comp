#version 460
// The staging floor of the shipped form: see matmul_coop_floor.glsl.
#define COLUMN_GROUPS 2
#define BUFFERS 2
#define MODE 1
#extension GL_GOOGLE_include_directive : require
#include "matmul_coop_floor.glsl"
