#version 460
// MATMUL fp32: [N, H, C] x [N, C, W] -> [N, H, W]. A 16 x 16 output tile per workgroup; A and B
// tiles of 16 along C are staged in shared memory, and every invocation accumulates its output
// element with fma in fp32 (one rounding per step). Out-of-range tile entries are zeros, which only
// meet each other or rows / columns that are never written.
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"

#define TILE 16u
layout(local_size_x = 16, local_size_y = 16, local_size_z = 1) in;

layout(set = 0, binding = 0, std430) readonly buffer A { float a[]; };
layout(set = 0, binding = 1, std430) readonly buffer B { float b[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Out { float outv[]; };

layout(push_constant, std430) uniform Params {
    uint batch_base;  // first batch of this dispatch (batches beyond the z group limit)
    uint H;
    uint C;
    uint W;
} p;

shared float ta[TILE][TILE + 1u];
shared float tb[TILE][TILE + 1u];

void main() {
    uint lx = gl_LocalInvocationID.x;
    uint ly = gl_LocalInvocationID.y;
    uint n = p.batch_base + gl_WorkGroupID.z;
    uint row = gl_WorkGroupID.y * TILE + ly;
    uint col = gl_WorkGroupID.x * TILE + lx;
    uint a_base = n * p.H * p.C;
    uint b_base = n * p.C * p.W;
    float acc = 0.0;
    for (uint k0 = 0u; k0 < p.C; k0 += TILE) {
        ta[ly][lx] = (row < p.H && k0 + lx < p.C) ? a[a_base + row * p.C + k0 + lx] : 0.0;
        tb[ly][lx] = (k0 + ly < p.C && col < p.W) ? b[b_base + (k0 + ly) * p.W + col] : 0.0;
        barrier();
        uint kmax = min(TILE, p.C - k0);
        for (uint k = 0u; k < kmax; ++k) {
            acc = fma(ta[ly][k], tb[k][lx], acc);
        }
        barrier();
    }
    if (row < p.H && col < p.W) {
        outv[n * p.H * p.W + row * p.W + col] = acc;
    }
}
