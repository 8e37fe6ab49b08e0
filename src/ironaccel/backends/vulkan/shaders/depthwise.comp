#version 460
// DEPTHWISE_CONV2D of fp32: input [N, IH, IW, C], weights [KH, KW, C, M], output [N, OH, OW, C M];
// output channel c M + m sums the taps of input channel c with weights [., ., c, m]. One invocation
// per output element, taps accumulated with fma in fp32 in (kh, kw) order, then the bias.
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0, std430) readonly buffer In { float inv[]; };
layout(set = 0, binding = 1, std430) readonly buffer Weight { float wv[]; };
layout(set = 0, binding = 2, std430) readonly buffer Bias { float bias[]; };
layout(set = 0, binding = 3, std430) writeonly buffer Out { float outv[]; };

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

void main() {
    uint OC = p.C * p.M;
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
        float acc = 0.0;
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
                acc = fma(inv[(row + uint(x)) * p.C + c], wv[(ky * p.KW + kx) * OC + oc], acc);
            }
        }
        outv[i] = acc + bias[p.bias_single != 0u ? 0u : oc];
    }
}
