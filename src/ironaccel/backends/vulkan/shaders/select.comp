#version 460
// SELECT with TOSA broadcasting: out = cond ? in2 : in3, cond BOOL (bytes), values fp32.
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0, std430) readonly buffer Cond { uint condw[]; };
layout(set = 0, binding = 1, std430) readonly buffer In2 { float in2[]; };
layout(set = 0, binding = 2, std430) readonly buffer In3 { float in3[]; };
layout(set = 0, binding = 3, std430) writeonly buffer Out { float outv[]; };

layout(push_constant, std430) uniform Params {
    uint n;
    uint rank;
    uint shape[MAX_RANK];
    uint stride1[MAX_RANK];
    uint stride2[MAX_RANK];
    uint stride3[MAX_RANK];
} p;

void main() {
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += GRID_STRIDE) {
        uint i1 = i;
        uint i2 = i;
        uint i3 = i;
        if (p.rank > 0u) {
            i1 = broadcast_index(i, p.rank, p.shape, p.stride1);
            i2 = broadcast_index(i, p.rank, p.shape, p.stride2);
            i3 = broadcast_index(i, p.rank, p.shape, p.stride3);
        }
        outv[i] = read_bool(condw[i1 >> 2], i1) ? in2[i2] : in3[i3];
    }
}
