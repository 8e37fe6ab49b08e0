#version 460
// MATMUL split-k, second step: out[i] = the sum of partial[s][i] over the S slices, added in slice
// order in fp32 (the same accumulation as one chain, regrouped by slice), so the result does not depend
// on scheduling. Grid-stride over the N * H * W outputs.
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0, std430) readonly buffer Partial { float partial[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Out { float outv[]; };

layout(push_constant, std430) uniform Params {
    uint count;   // N * H * W
    uint slices;
} p;

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < p.count; i += stride) {
        float sum = partial[i];
        for (uint s = 1u; s < p.slices; ++s) {
            sum += partial[s * p.count + i];
        }
        outv[i] = sum;
    }
}
