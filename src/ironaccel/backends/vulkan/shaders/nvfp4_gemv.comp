#version 460
// NVFP4 projection for a few rows of x at a time (decode shapes: memory-bound on the weights):
//   y[z, r, j] = act(ts[z] * sum_b s[z, j, b] * sum_i x[z, r, 16b + i] * e2m1[z, j, 16b + i])
// for matrix z (the batch index of the batched form; 0 otherwise), row r of x and weight row j.
//
// A workgroup of TEAM invocations takes ROWS weight rows and MT rows of x, and splits k between its
// invocations in chunks of 8 * VEC weights (VEC packed words): invocation t takes chunks t, t + TEAM, ...
// For each chunk it loads the MT rows' x values once and uses them for all ROWS weight rows, so x is
// read from memory ROWS times less often than the weights are; the ROWS word loads of one chunk are
// independent, and the next chunk's words are loaded before this chunk's arithmetic, which keeps
// many bytes in flight. Each word is decoded once per MT rows of x. A word's 8 products are summed
// before its block scale multiplies them (the scale is exact: a power-of-two multiple of at most 4
// significant bits), and the tensor scale multiplies each result once.
// The invocations' partial sums are added in a fixed tree in shared memory, so a result does not
// depend on scheduling.
//
// A tensor scale that is infinite or NaN takes the definition literally instead: each weight is
// (e2m1 * scale) * ts, so zero weights become NaN exactly as the CPU backend's decode makes them.
//
// Specialization constants: 0 TEAM (a power of two), 1 ROWS, 2 MT, 3 ACT (include/nvfp4.glsl codes),
// 4 VEC (1, 2 or 4; k is a multiple of 8 * VEC).
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"
#include "include/nvfp4.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROWS = 8u;
layout(constant_id = 2) const uint MT = 1u;
layout(constant_id = 3) const uint ACT = 0u;
layout(constant_id = 4) const uint VEC = 1u;

const uint TEAM = gl_WorkGroupSize.x;
const uint SUMS = ROWS * MT;  // results of one workgroup

layout(set = 0, binding = 0, std430) readonly buffer X4 { vec4 x4[]; };
layout(set = 0, binding = 1, std430) readonly buffer Packed1 { uint packed1[]; };
layout(set = 0, binding = 1, std430) readonly buffer Packed2 { uvec2 packed2[]; };
layout(set = 0, binding = 1, std430) readonly buffer Packed4 { uvec4 packed4[]; };
layout(set = 0, binding = 2, std430) readonly buffer Scales { uint scales[]; };
layout(set = 0, binding = 3, std430) readonly buffer TensorScale { float tensor_scale[]; };
layout(set = 0, binding = 4, std430) writeonly buffer Out { float y[]; };

layout(push_constant, std430) uniform Params {
    uint m;       // rows of x per matrix
    uint n;       // weight rows (outputs per row of x)
    uint k;       // a multiple of 8 * VEC
    uint x_base;  // element offset of matrix 0's x in its binding (an expert's rows in the expert form)
    uint y_base;  // element offset of this dispatch's first matrix in the y binding
    uint z_base;  // first matrix of this dispatch (batches past the z group limit)
} p;

shared float partial[TEAM * SUMS];

uvec4 chunk_words(uint chunk) {  // the VEC packed words of a chunk (index in chunks over the binding)
    if (VEC == 4u) {
        return packed4[chunk];
    }
    if (VEC == 2u) {
        return uvec4(packed2[chunk], 0u, 0u);
    }
    return uvec4(packed1[chunk], 0u, 0u, 0u);
}

void main() {
    uint t = gl_LocalInvocationID.x;
    uint z = p.z_base + gl_WorkGroupID.z;
    uint chunks = p.k / (8u * VEC);  // per weight row
    uint m0 = gl_WorkGroupID.y * MT;
    float ts = tensor_scale[z];
    bool finite = !isinf(ts) && !isnan(ts);
    uint x0 = p.x_base + z * p.m * p.k;
    uint y0 = p.y_base + gl_WorkGroupID.z * p.m * p.n;  // y is bound from this dispatch's first matrix
    for (uint r0 = gl_WorkGroupID.x * ROWS; r0 < p.n; r0 += gl_NumWorkGroups.x * ROWS) {
        float acc[ROWS][MT];
        for (uint r = 0u; r < ROWS; ++r) {
            for (uint i = 0u; i < MT; ++i) {
                acc[r][i] = 0.0;
            }
        }
        // Software pipelining: the next step's packed words and scale words are loaded before this
        // step's arithmetic, so each invocation keeps two steps of weight bytes in flight.
        uvec4 next_words[ROWS];
        uint next_scales[ROWS];
        for (uint r = 0u; r < ROWS; ++r) {
            uint row = min(r0 + r, p.n - 1u);  // rows past n are computed but not written
            uint c = min(t, chunks - 1u);
            next_words[r] = chunk_words((z * p.n + row) * chunks + c);
            next_scales[r] = scales[(((z * p.n + row) * p.k + c * VEC * 8u) / 16u) >> 2];
        }
        for (uint c = t; c < chunks; c += TEAM) {
            uvec4 words[ROWS];
            uint scale_words[ROWS];
            for (uint r = 0u; r < ROWS; ++r) {
                words[r] = next_words[r];
                scale_words[r] = next_scales[r];
            }
            if (c + TEAM < chunks) {
                for (uint r = 0u; r < ROWS; ++r) {
                    uint row = min(r0 + r, p.n - 1u);
                    next_words[r] = chunk_words((z * p.n + row) * chunks + c + TEAM);
                    next_scales[r] = scales[(((z * p.n + row) * p.k + (c + TEAM) * VEC * 8u) / 16u) >> 2];
                }
            }
            vec4 xs[MT][2u * VEC];
            for (uint i = 0u; i < MT; ++i) {
                uint q = (x0 + min(m0 + i, p.m - 1u) * p.k) / 4u + c * 2u * VEC;  // rows past m: unused
                for (uint v = 0u; v < 2u * VEC; ++v) {
                    xs[i][v] = x4[q + v];
                }
            }
            for (uint r = 0u; r < ROWS; ++r) {
                uint row = min(r0 + r, p.n - 1u);
                for (uint v = 0u; v < VEC; ++v) {
                    uint block = ((z * p.n + row) * p.k + (c * VEC + v) * 8u) / 16u;  // in the step's word
                    float s = ia_e4m3_scale_unscaled((scale_words[r] >> ((block & 3u) * 8u)) & 0xffu);
                    vec4 w0 = vec4(ia_e2m1_pair_scaled(words[r][v]), ia_e2m1_pair_scaled(words[r][v] >> 8));
                    vec4 w1 = vec4(ia_e2m1_pair_scaled(words[r][v] >> 16), ia_e2m1_pair_scaled(words[r][v] >> 24));
                    if (!finite) {  // the literal definition: every weight rounded once with the tensor scale
                        w0 = (w0 * s) * ts;
                        w1 = (w1 * s) * ts;
                    }
                    for (uint i = 0u; i < MT; ++i) {
                        float d = dot(xs[i][2u * v], w0) + dot(xs[i][2u * v + 1u], w1);
                        acc[r][i] += finite ? d * s : d;
                    }
                }
            }
        }
        for (uint r = 0u; r < ROWS; ++r) {
            for (uint i = 0u; i < MT; ++i) {
                partial[(r * MT + i) * TEAM + t] = acc[r][i];
            }
        }
        for (uint half_ = TEAM / 2u; half_ > 0u; half_ >>= 1u) {
            barrier();
            if (t < half_) {
                for (uint j = 0u; j < SUMS; ++j) {
                    partial[j * TEAM + t] += partial[j * TEAM + t + half_];
                }
            }
        }
        barrier();
        for (uint j = t; j < SUMS; j += TEAM) {
            uint row = r0 + j / MT;
            uint i = j % MT;
            if (row < p.n && m0 + i < p.m) {
                float v = partial[j * TEAM];
                y[y0 + (m0 + i) * p.n + row] = ia_nvfp4_activate(finite ? v * ts : v, ACT);
            }
        }
        barrier();  // the next rows reuse the shared sums
    }
}
