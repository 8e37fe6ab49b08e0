#version 460
// The end of an NVFP4 projection on the cooperative-matrix path: y[i] = act(sum_s c[s][i] * rowscale[row]
// * ts). The MATMUL runs once per slice of k: a cooperative-matrix accumulator may add with less than
// fp32's precision, an error that grows with the length of k it sums (ADR 0012 gives the figures), so the
// slices' results are summed here in fp32, in slice order. The sum is then
// undone of nvfp4_split.comp's row scaling (a power of two: exact) and multiplied
// by the tensor scale (once; an infinite or NaN tensor scale was applied weight by weight by
// nvfp4_decode16.comp and is not applied again). One dispatch per weight matrix; grid stride.
// Specialization constants: 0 workgroup size, 1 ACT (include/nvfp4.glsl codes).
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"
#include "include/nvfp4.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ACT = 0u;

layout(set = 0, binding = 0, std430) readonly buffer C { float cv[]; };
layout(set = 0, binding = 1, std430) readonly buffer RowScale { float rowscale[]; };
layout(set = 0, binding = 2, std430) readonly buffer TensorScale { float tensor_scale[]; };
layout(set = 0, binding = 3, std430) writeonly buffer Out { float y[]; };

layout(push_constant, std430) uniform Params {
    uint count;     // m * n of this matrix
    uint n;
    uint c_base;    // element offset of this matrix's results in c
    uint row_base;  // its first row in rowscale
    uint y_base;    // element offset in the y binding
    uint slices;
    uint slice_stride;  // elements from one slice's results to the next
} p;

void main() {
    float ts = tensor_scale[0];
    float factor = isinf(ts) || isnan(ts) ? 1.0 : ts;
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < p.count; i += stride) {
        float v = cv[p.c_base + i];
        for (uint s = 1u; s < p.slices; ++s) {
            v += cv[s * p.slice_stride + p.c_base + i];
        }
        v *= rowscale[p.row_base + i / p.n];
        y[p.y_base + i] = ia_nvfp4_activate(v * factor, ACT);
    }
}
