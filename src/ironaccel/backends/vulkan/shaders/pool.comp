#version 460
// AVG_POOL2D / MAX_POOL2D of fp32 NHWC, one invocation per output element.
// OP (specialization constant 1): 0 AVG: the fp32 sum of the window's elements inside the input, in
// order, divided (within 1 ulp) by how many there are (padding does not count). 1 MAX: the largest
// element with NAN_MODE (constant 2): 1 propagate, 2 ignore (an all-NaN window gives NaN).
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"
#include "include/math.glsl"
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0u;
layout(constant_id = 2) const uint NAN_MODE = 1u;

layout(set = 0, binding = 0, std430) readonly buffer In { float inv[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Out { float outv[]; };

layout(push_constant, std430) uniform Params {
    uint n;
    uint IH;
    uint IW;
    uint C;
    uint OH;
    uint OW;
    uint KH;
    uint KW;
    uint SH;
    uint SW;
    uint pad_top;
    uint pad_left;
} p;

void main() {
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += GRID_STRIDE) {
        uint c = i % p.C;
        uint t = i / p.C;
        uint ox = t % p.OW;
        t /= p.OW;
        uint oy = t % p.OH;
        uint batch = t / p.OH;
        int y0 = int(oy * p.SH) - int(p.pad_top);
        int x0 = int(ox * p.SW) - int(p.pad_left);
        uint ky0 = uint(max(-y0, 0));
        uint kx0 = uint(max(-x0, 0));
        uint ky1 = uint(min(int(p.KH), int(p.IH) - y0));
        uint kx1 = uint(min(int(p.KW), int(p.IW) - x0));
        float acc = OP == 0u ? 0.0 : (NAN_MODE == 2u ? ia_nan() : -ia_inf());
        for (uint ky = ky0; ky < ky1; ++ky) {
            uint row = (batch * p.IH + uint(y0 + int(ky))) * p.IW;
            for (uint kx = kx0; kx < kx1; ++kx) {
                float x = inv[(row + uint(x0 + int(kx))) * p.C + c];
                acc = OP == 0u ? acc + x : ia_max(acc, x, NAN_MODE);
            }
        }
        if (OP == 0u) {
            acc = ia_div(acc, float((ky1 - ky0) * (kx1 - kx0)));
        }
        outv[i] = acc;
    }
}
