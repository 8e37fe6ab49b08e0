#version 460
// DEPTHWISE_CONV2D of int8 x int8 -> int32 with zero points: input [N, IH, IW, C], weights
// [KH, KW, C, M], output [N, OH, OW, C M]; taps in the padding contribute nothing. One invocation per
// output; int32 sums wrap (see conv_int.comp), so results are the CPU backend's bits.
#extension GL_GOOGLE_include_directive : require
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0, std430) readonly buffer In { uint inw[]; };
layout(set = 0, binding = 1, std430) readonly buffer Weight { uint ww[]; };
layout(set = 0, binding = 2, std430) readonly buffer Bias { int bias[]; };
layout(set = 0, binding = 3, std430) readonly buffer InZp { uint inzp[]; };
layout(set = 0, binding = 4, std430) readonly buffer WZp { uint wzp[]; };
layout(set = 0, binding = 5, std430) writeonly buffer Out { int outv[]; };

layout(push_constant, std430) uniform Params {
    uint n;
    uint IH;
    uint IW;
    uint C;
    uint M;
    uint OH;
    uint OW;
    uint KH;
    uint KW;
    uint stride_h;
    uint stride_w;
    uint dil_h;
    uint dil_w;
    uint pad_top;
    uint pad_left;
    uint bias_single;
} p;

int at(uint word, uint i) {
    return sign_extend(ELEM_GET(word, i, 1u), 1u);
}

void main() {
    uint OC = p.C * p.M;
    int zx = at(inzp[0], 0u);
    int zw = at(wzp[0], 0u);
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += GRID_STRIDE) {
        uint oc = i % OC;
        uint t = i / OC;
        uint ox = t % p.OW;
        t /= p.OW;
        uint oy = t % p.OH;
        uint batch = t / p.OH;
        uint c = oc / p.M;
        int y0 = int(oy * p.stride_h) - int(p.pad_top);
        int x0 = int(ox * p.stride_w) - int(p.pad_left);
        int acc = bias[p.bias_single != 0u ? 0u : oc];
        for (uint ky = 0u; ky < p.KH; ++ky) {
            int y = y0 + int(ky * p.dil_h);
            if (y < 0 || y >= int(p.IH)) {
                continue;
            }
            uint row = (batch * p.IH + uint(y)) * p.IW;
            for (uint kx = 0u; kx < p.KW; ++kx) {
                int x = x0 + int(kx * p.dil_w);
                if (x < 0 || x >= int(p.IW)) {
                    continue;
                }
                uint e = (row + uint(x)) * p.C + c;
                uint f = (ky * p.KW + kx) * OC + oc;
                acc += (at(inw[e >> 2u], e) - zx) * (at(ww[f >> 2u], f) - zw);
            }
        }
        outv[i] = acc;
    }
}
