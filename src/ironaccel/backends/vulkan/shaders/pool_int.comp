#version 460
// AVG_POOL2D / MAX_POOL2D of int8 / int16 NHWC (ES, constant 2: element bytes), one output word
// (4 / ES elements) per invocation. OP (constant 1): 0 AVG: the int32 sum of (x - input_zp) over the
// window's elements inside the input, divided by their count as TOSA specifies (reciprocal_scale's
// multiplier ((2^30 + 1) << k) / count by long division, then apply_scale_32 with shift 30 + k),
// plus output_zp, saturated; 1 MAX: the largest element.
#extension GL_GOOGLE_include_directive : require
#include "include/elementwise.glsl"
#include "include/integer.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0u;
layout(constant_id = 2) const uint ES = 1u;

layout(set = 0, binding = 0, std430) readonly buffer In { uint inw[]; };
layout(set = 0, binding = 1, std430) readonly buffer InZp { uint inzp[]; };  // AVG (else In again)
layout(set = 0, binding = 2, std430) readonly buffer OutZp { uint outzp[]; };
layout(set = 0, binding = 3, std430) writeonly buffer Out { uint outw[]; };

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

// floor(((2^30 + 1) << k) / count) for 1 <= count <= 2^31 (k the bit length of count - 1, so the
// quotient is below 2^31): restoring division, one bit of the 62-bit numerator at a time.
int reciprocal_multiplier(uint count, uint k) {
    uint rem = 0u;
    uint q = 0u;
    for (int bit = int(30u + k); bit >= 0; --bit) {
        uint shifted = uint(bit) >= k ? uint(bit) - k : 64u;  // numerator bit `bit` is bit (bit - k) of 2^30 + 1
        uint nbit = shifted == 0u || shifted == 30u ? 1u : 0u;
        rem = (rem << 1u) | nbit;
        q <<= 1u;
        if (rem >= count) {
            rem -= count;
            q |= 1u;
        }
    }
    return int(q);
}

int pool(uint i, int zp_in, int zp_out) {
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
    int acc = OP == 0u ? 0 : type_min(ES, false);
    for (uint ky = ky0; ky < ky1; ++ky) {
        uint row = (batch * p.IH + uint(y0 + int(ky))) * p.IW;
        for (uint kx = kx0; kx < kx1; ++kx) {
            uint e = (row + uint(x0 + int(kx))) * p.C + c;
            int x = sign_extend(ELEM_GET(inw[ELEM_WORD(e, ES)], e, ES), ES);
            acc = OP == 0u ? acc + (x - zp_in) : max(acc, x);
        }
    }
    if (OP != 0u) {
        return acc;
    }
    uint count = (ky1 - ky0) * (kx1 - kx0);
    uint k = uint(findMSB(count - 1u) + 1);  // bit length of count - 1 (0 for count 1)
    int scaled = apply_scale(acc, reciprocal_multiplier(count, k), int(30u + k), false);
    return add_saturate(scaled, zp_out, type_min(ES, false), type_max(ES, false));
}

void main() {
    int zp_in = OP == 0u ? sign_extend(ELEM_GET(inzp[0], 0u, ES), ES) : 0;
    int zp_out = OP == 0u ? sign_extend(ELEM_GET(outzp[0], 0u, ES), ES) : 0;
    uint per = ELEM_PER_WORD(ES);
    uint words = (p.n + per - 1u) / per;
    for (uint w = gl_GlobalInvocationID.x; w < words; w += GRID_STRIDE) {
        uint word = 0u;
        for (uint j = 0u; j < per; ++j) {
            uint i = w * per + j;
            if (i >= p.n) {
                break;
            }
            word |= (uint(pool(i, zp_in, zp_out)) & ELEM_MASK(ES)) << (j * 8u * ES);
        }
        outw[w] = word;
    }
}
