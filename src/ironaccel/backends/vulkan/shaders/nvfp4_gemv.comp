#version 460
// NVFP4 projection for a few rows of x at a time (decode shapes: memory-bound on the weights):
//   y[z, r, j] = act(ts[z] * sum_b s[z, j, b] * sum_i x[z, r, 16b + i] * e2m1[z, j, 16b + i])
// for matrix z (the batch index of the batched form; 0 otherwise), row r of x and weight row j.
//
// A workgroup of TEAM x ROWS invocations takes ROWS weight rows, one team of TEAM invocations each,
// and MT rows of x. A team walks its row's 16-element blocks TEAM apart: 8 packed bytes and one scale
// byte per block, adjacent invocations reading adjacent bytes, every weight decoded once per MT rows
// of x. A block's 16 products are summed before the block scale multiplies them (exact: the scale is
// a power-of-two multiple of at most 4 significant bits applied to one fp32 sum), and the tensor scale
// multiplies the row's total once. The team's partial sums are added in a fixed tree in shared memory,
// so a result does not depend on scheduling.
//
// A tensor scale that is infinite or NaN takes the definition literally instead: each weight is
// (e2m1 * scale) * ts, so zero weights become NaN exactly as the CPU backend's decode makes them.
//
// Specialization constants: 0 TEAM (a power of two), 1 ROWS, 2 MT, 3 ACT (include/nvfp4.glsl codes).
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"
#include "include/nvfp4.glsl"

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z = 1) in;
layout(constant_id = 2) const uint MT = 1u;
layout(constant_id = 3) const uint ACT = 0u;

const uint TEAM = gl_WorkGroupSize.x;
const uint ROWS = gl_WorkGroupSize.y;

layout(set = 0, binding = 0, std430) readonly buffer X4 { vec4 x4[]; };
layout(set = 0, binding = 1, std430) readonly buffer Packed { uvec2 packed[]; };
layout(set = 0, binding = 2, std430) readonly buffer Scales { uint scales[]; };
layout(set = 0, binding = 3, std430) readonly buffer TensorScale { float tensor_scale[]; };
layout(set = 0, binding = 4, std430) writeonly buffer Out { float y[]; };

layout(push_constant, std430) uniform Params {
    uint m;       // rows of x per matrix
    uint n;       // weight rows (outputs per row of x)
    uint k;       // a multiple of 16
    uint x_base;  // element offset of matrix 0's x in its binding (an expert's rows in the expert form)
    uint y_base;  // element offset of this dispatch's first matrix in the y binding
    uint z_base;  // first matrix of this dispatch (batches past the z group limit)
} p;

shared float partial[MT * ROWS * TEAM];

void main() {
    uint lane = gl_LocalInvocationID.x;
    uint team = gl_LocalInvocationID.y;
    uint z = p.z_base + gl_WorkGroupID.z;
    uint blocks = p.k / 16u;
    uint m0 = gl_WorkGroupID.y * MT;
    float ts = tensor_scale[z];
    bool finite = !isinf(ts) && !isnan(ts);
    uint x0 = p.x_base + z * p.m * p.k;
    uint y0 = p.y_base + gl_WorkGroupID.z * p.m * p.n;  // y is bound from this dispatch's first matrix
    for (uint r0 = gl_WorkGroupID.x * ROWS; r0 < p.n; r0 += gl_NumWorkGroups.x * ROWS) {
        uint row = r0 + team;
        float acc[MT];
        for (uint i = 0u; i < MT; ++i) {
            acc[i] = 0.0;
        }
        if (row < p.n) {
            uint first = (z * p.n + row) * blocks;  // the row's first block, counted over the binding
            for (uint b = lane; b < blocks; b += TEAM) {
                uint at = first + b;
                float s = ia_e4m3_scale_unscaled((scales[at >> 2] >> ((at & 3u) * 8u)) & 0xffu);
                vec4 w0, w1, w2, w3;
                ia_e2m1_block_scaled(packed[at], w0, w1, w2, w3);
                if (!finite) {  // the literal definition: every weight rounded once with the tensor scale
                    w0 = (w0 * s) * ts;
                    w1 = (w1 * s) * ts;
                    w2 = (w2 * s) * ts;
                    w3 = (w3 * s) * ts;
                }
                for (uint i = 0u; i < MT; ++i) {
                    if (m0 + i < p.m) {
                        uint q = (x0 + (m0 + i) * p.k) / 4u + b * 4u;
                        float d = dot(x4[q], w0) + dot(x4[q + 1u], w1) + dot(x4[q + 2u], w2) + dot(x4[q + 3u], w3);
                        acc[i] += finite ? d * s : d;
                    }
                }
            }
        }
        for (uint i = 0u; i < MT; ++i) {
            partial[(i * ROWS + team) * TEAM + lane] = acc[i];
        }
        for (uint half_ = TEAM / 2u; half_ > 0u; half_ >>= 1u) {
            barrier();
            if (lane < half_) {
                for (uint i = 0u; i < MT; ++i) {
                    uint at = (i * ROWS + team) * TEAM + lane;
                    partial[at] += partial[at + half_];
                }
            }
        }
        barrier();
        if (lane == 0u && row < p.n) {
            for (uint i = 0u; i < MT; ++i) {
                if (m0 + i < p.m) {
                    float v = partial[(i * ROWS + team) * TEAM];
                    y[y0 + (m0 + i) * p.n + row] = ia_nvfp4_activate(finite ? v * ts : v, ACT);
                }
            }
        }
        barrier();  // the next rows reuse the shared sums
    }
}
