#version 460
// Reductions of fp32 along one axis, and ARGMAX. The input is viewed as [outer, axis, inner] and each
// invocation produces one output element, walking the axis in order.
// OP (specialization constant 1): 0 SUM, 1 MAX, 2 MIN, 3 PRODUCT, 4 ARGMAX (int32 result).
// NAN_MODE (constant 2; MAX, MIN, ARGMAX): 1 propagate, 2 ignore. ARGMAX gives the first index of the
// largest value; propagating, the first NaN's; ignoring NaNs, 0 when all are NaN.
// SUM and PRODUCT accumulate in fp32 in index order; TOSA judges SUM as a dot product against an fp64
// reference. Results are written as bits (ARGMAX's integers must not pass through a float).
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"
#include "include/math.glsl"
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0u;
layout(constant_id = 2) const uint NAN_MODE = 1u;

layout(set = 0, binding = 0, std430) readonly buffer In { float inv[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Out { uint outw[]; };

layout(push_constant, std430) uniform Params {
    uint outer;
    uint axis;
    uint inner;
} p;

void main() {
    uint n = p.outer * p.inner;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += GRID_STRIDE) {
        uint o = i / p.inner;
        uint j = i - o * p.inner;
        uint base = o * p.axis * p.inner + j;
        float acc = inv[base];
        uint best = 0u;
        for (uint k = 1u; k < p.axis; ++k) {
            float x = inv[base + k * p.inner];
            switch (OP) {
                case 0u: acc = acc + x; break;
                case 1u: acc = ia_max(acc, x, NAN_MODE); break;
                case 2u: acc = ia_min(acc, x, NAN_MODE); break;
                case 3u: acc = acc * x; break;
                default: {
                    bool take = NAN_MODE == 2u ? !isnan(x) && (isnan(acc) || x > acc) : !isnan(acc) && (isnan(x) || x > acc);
                    if (take) {
                        acc = x;
                        best = k;
                    }
                }
            }
        }
        outw[i] = OP == 4u ? best : floatBitsToUint(acc);
    }
}
