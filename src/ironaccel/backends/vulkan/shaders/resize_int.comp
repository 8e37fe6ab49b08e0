#version 460
// RESIZE of int8 NHWC images (PRO-INT), exactly as the specification's integer pseudocode: for each
// output row, y = oy * scale_y_d + offset_y, iy = floor(y / scale_y_n), ry = y - iy * scale_y_n; source
// rows iy0 = max(iy, 0) and iy1 = min(iy + 1, IH - 1); the same along x.
// NEAREST (MODE 0): the pixel (2 ry >= scale_y_n ? iy1 : iy0, 2 rx >= scale_x_n ? ix1 : ix0), int8 out.
// BILINEAR (MODE 1): sum of the four pixels weighted (scale_y_n - ry or ry) * (scale_x_n - rx or rx),
// an int32 result (int8 x 2^11 x 2^11 x 4 fits). One invocation per output word (ES_OUT 1: four int8
// outputs; 4: one int32), so no two invocations share a word. Specialization constants: 0 workgroup
// size, 1 MODE, 2 ES_OUT.
#extension GL_GOOGLE_include_directive : require
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint MODE = 0u;
layout(constant_id = 2) const uint ES_OUT = 1u;

layout(set = 0, binding = 0, std430) readonly buffer In { uint inw[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Out { uint outv[]; };

layout(push_constant, std430) uniform Params {
    uint n;
    uint IH;
    uint IW;
    uint C;
    uint OH;
    uint OW;
    int scale_y_n;
    int scale_y_d;
    int scale_x_n;
    int scale_x_d;
    int offset_y;
    int offset_x;
} p;

int pixel(uint batch, int y, int x, uint c) {
    uint i = ((batch * p.IH + uint(y)) * p.IW + uint(x)) * p.C + c;
    return sign_extend(ELEM_GET(inw[i >> 2u], i, 1u), 1u);
}

int floor_div(int a, int b) {  // b > 0
    int q = a / b;
    return (q * b > a) ? q - 1 : q;
}

int resize_one(uint i) {
    uint c = i % p.C;
    uint ox = (i / p.C) % p.OW;
    uint oy = (i / (p.C * p.OW)) % p.OH;
    uint batch = i / (p.C * p.OW * p.OH);
    int y = int(oy) * p.scale_y_d + p.offset_y;
    int x = int(ox) * p.scale_x_d + p.offset_x;
    int iy = floor_div(y, p.scale_y_n);
    int ix = floor_div(x, p.scale_x_n);
    int ry = y - iy * p.scale_y_n;
    int rx = x - ix * p.scale_x_n;
    int iy0 = max(iy, 0);
    int iy1 = min(iy + 1, int(p.IH) - 1);
    int ix0 = max(ix, 0);
    int ix1 = min(ix + 1, int(p.IW) - 1);
    if (MODE == 0u) {
        return pixel(batch, 2 * ry >= p.scale_y_n ? iy1 : iy0, 2 * rx >= p.scale_x_n ? ix1 : ix0, c);
    }
    int wy0 = p.scale_y_n - ry;
    int wx0 = p.scale_x_n - rx;
    return pixel(batch, iy0, ix0, c) * wy0 * wx0 + pixel(batch, iy0, ix1, c) * wy0 * rx
        + pixel(batch, iy1, ix0, c) * ry * wx0 + pixel(batch, iy1, ix1, c) * ry * rx;
}

void main() {
    uint per = ELEM_PER_WORD(ES_OUT);
    uint words = (p.n + per - 1u) / per;
    for (uint w = gl_GlobalInvocationID.x; w < words; w += GRID_STRIDE) {
        if (ES_OUT == 4u) {
            outv[w] = uint(resize_one(w));
            continue;
        }
        uint packed = 0u;
        for (uint j = 0u; j < per && w * per + j < p.n; ++j) {
            packed |= (uint(resize_one(w * per + j)) & 0xffu) << (8u * j);
        }
        outv[w] = packed;
    }
}
