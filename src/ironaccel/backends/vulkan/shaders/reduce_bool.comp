#version 460
// REDUCE_ALL / REDUCE_ANY of BOOL along one axis ([outer, axis, inner] view), one output word (four
// results) at a time. OP (specialization constant 1): 0 ALL, 1 ANY.
// SPLIT (constant 2): 0, one invocation per output word walks the axis four times (short axes);
// 1, a workgroup per output word: its invocations share each axis (elements t, t + WG, ...) and meet
// in a shared flag (long axes: no invocation loops more than 4 axis / WG times).
#extension GL_GOOGLE_include_directive : require
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0u;
layout(constant_id = 2) const uint SPLIT = 0u;

layout(set = 0, binding = 0, std430) readonly buffer In { uint inw[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Out { uint outw[]; };

layout(push_constant, std430) uniform Params {
    uint outer;
    uint axis;
    uint inner;
} p;

shared uint flag;

// The reduction of output i over axis elements first, first + step, ...
bool fold(uint i, uint first, uint step) {
    uint o = i / p.inner;
    uint base = o * p.axis * p.inner + (i - o * p.inner);
    bool acc = OP == 0u;
    for (uint k = first; k < p.axis; k += step) {
        uint e = base + k * p.inner;
        bool x = read_bool(inw[e >> 2], e);
        acc = OP == 0u ? acc && x : acc || x;
    }
    return acc;
}

void main() {
    uint n = p.outer * p.inner;
    uint words = (n + 3u) / 4u;
    if (SPLIT == 0u) {
        for (uint w = gl_GlobalInvocationID.x; w < words; w += GRID_STRIDE) {
            uint word = 0u;
            for (uint j = 0u; j < 4u && w * 4u + j < n; ++j) {
                word |= uint(fold(w * 4u + j, 0u, 1u)) << (8u * j);
            }
            outw[w] = word;
        }
        return;
    }
    uint t = gl_LocalInvocationID.x;
    for (uint w = gl_WorkGroupID.x; w < words; w += gl_NumWorkGroups.x) {  // uniform across the workgroup
        uint word = 0u;
        for (uint j = 0u; j < 4u && w * 4u + j < n; ++j) {
            if (t == 0u) {
                flag = OP == 0u ? 1u : 0u;
            }
            barrier();
            bool acc = fold(w * 4u + j, t, gl_WorkGroupSize.x);
            if (OP == 0u && !acc) {
                atomicAnd(flag, 0u);
            } else if (OP == 1u && acc) {
                atomicOr(flag, 1u);
            }
            barrier();
            word |= flag << (8u * j);
            barrier();  // every invocation has read the flag before it is reset
        }
        if (t == 0u) {
            outw[w] = word;
        }
    }
}
