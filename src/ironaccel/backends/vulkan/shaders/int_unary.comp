#version 460
// Elementwise integer operators of one operand, one output word (4 / OUT_ES elements) per invocation.
// OP (constant 3): 0 ABS, 1 NEGATE (out_zp - (x - in_zp), saturated to the type, zero points given
// in `a` and `b`), 2 CLAMP to [a, b], 3 BITWISE_NOT, 4 CLZ, 5 CAST between BOOL and the integer types
// (to BOOL: x != 0; narrowing keeps the low bits), 6 TABLE of int8 (table[x + 128], int8 entries),
// 7 TABLE of int16 (x a 9.7 fixed-point index into 513 int16 entries, linearly interpolated; int32
// out). IN_ES, OUT_ES (constants 1, 2): element bytes. Exact two's complement arithmetic; ABS and
// NEGATE is formed in 64 bits and saturated; ABS of the most negative int32 wraps (a REQUIRE
// violation), as in the CPU backend.
#extension GL_GOOGLE_include_directive : require
#include "include/elementwise.glsl"
#include "include/integer.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint IN_ES = 4u;
layout(constant_id = 2) const uint OUT_ES = 4u;
layout(constant_id = 3) const uint OP = 0u;

layout(set = 0, binding = 0, std430) readonly buffer In { uint inw[]; };
layout(set = 0, binding = 1, std430) readonly buffer Table { uint table[]; };  // TABLE only (else In again)
layout(set = 0, binding = 2, std430) writeonly buffer Out { uint outw[]; };

layout(push_constant, std430) uniform Params {
    uint n;
    int a;
    int b;
} p;

int entry(int index) {
    uint i = uint(index);
    return sign_extend(ELEM_GET(table[ELEM_WORD(i, 2u)], i, 2u), 2u);
}

uint apply(int x) {
    switch (OP) {
        case 0u: return uint(x < 0 ? -x : x);
        case 1u: {
            I64 v = i64_add(i64_add(i64_negated(x), i64_from(p.a)), i64_from(p.b));
            return uint(saturate64(v, type_min(OUT_ES, false), type_max(OUT_ES, false)));
        }
        case 2u: return uint(clamp(x, p.a, p.b));
        case 3u: return ~uint(x);
        case 4u: return uint(31 - findMSB(uint(x)));  // findMSB(0) is -1: 32
        case 5u: return OUT_ES == 1u && p.a != 0 ? uint(x != 0) : uint(x);
        case 6u: {
            uint i = uint(x + 128);
            return ELEM_GET(table[ELEM_WORD(i, 1u)], i, 1u);
        }
        default: {
            int index = (x + 32768) >> 7;
            int fraction = x & 0x7f;
            int base = entry(index);
            return uint((base << 7) + (entry(index + 1) - base) * fraction);
        }
    }
}

void main() {
    uint per = ELEM_PER_WORD(OUT_ES);
    uint words = (p.n + per - 1u) / per;
    for (uint w = gl_GlobalInvocationID.x; w < words; w += GRID_STRIDE) {
        uint word = 0u;
        for (uint j = 0u; j < per; ++j) {
            uint i = w * per + j;
            if (i >= p.n) {
                break;
            }
            int x = sign_extend(ELEM_GET(inw[ELEM_WORD(i, IN_ES)], i, IN_ES), IN_ES);
            word |= (apply(x) & ELEM_MASK(OUT_ES)) << (j * 8u * OUT_ES);
        }
        outw[w] = word;
    }
}
