#version 460
// NVFP4 weights decoded to fp32, transposed: out[out_base + c * n + j] = (e2m1[j, c] * scale[j, c / 16])
// * ts for weight row j < n and column c < k, so that MATMUL ([m, k] x [k, n]) takes them as its right
// operand. Exactly the CPU backend's decode: the first product is exact, the tensor scale rounds once.
//
// One invocation per (block, row), rows fastest: adjacent invocations write adjacent floats. Grid
// stride over the n * k / 16 blocks.
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"
#include "include/nvfp4.glsl"

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0, std430) readonly buffer Packed { uvec2 packed[]; };
layout(set = 0, binding = 1, std430) readonly buffer Scales { uint scales[]; };
layout(set = 0, binding = 2, std430) readonly buffer TensorScale { float tensor_scale[]; };
layout(set = 0, binding = 3, std430) writeonly buffer Out { float outv[]; };

layout(push_constant, std430) uniform Params {
    uint n;
    uint k;
    uint out_base;  // element offset of this matrix's [k, n] in the output binding
} p;

void main() {
    uint blocks = p.k / 16u;
    uint count = blocks * p.n;
    float ts = tensor_scale[0];
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint t = gl_GlobalInvocationID.x; t < count; t += stride) {
        uint b = t / p.n;
        uint row = t - b * p.n;
        uint at = row * blocks + b;
        float s = ia_e4m3_scale_unscaled((scales[at >> 2] >> ((at & 3u) * 8u)) & 0xffu);
        vec4 w[4];
        ia_e2m1_block_scaled(packed[at], w[0], w[1], w[2], w[3]);
        uint o = p.out_base + b * 16u * p.n + row;
        for (uint i = 0u; i < 16u; ++i) {
            outv[o + i * p.n] = (w[i / 4u][i % 4u] * s) * ts;
        }
    }
}
