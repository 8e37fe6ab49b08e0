#version 460
// TRANSPOSE of 32-bit elements: output index -> input index through the input's strides taken in
// the output's dimension order (stride[d] = input stride of dimension perms[d]).
#extension GL_GOOGLE_include_directive : require
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0, std430) readonly buffer In { uint inv[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Out { uint outv[]; };

layout(push_constant, std430) uniform Params {
    uint n;
    uint rank;
    uint shape[MAX_RANK];
    uint stride[MAX_RANK];
} p;

void main() {
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += GRID_STRIDE) {
        outv[i] = inv[broadcast_index(i, p.rank, p.shape, p.stride)];
    }
}
