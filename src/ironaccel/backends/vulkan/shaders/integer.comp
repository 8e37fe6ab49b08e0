#version 460
// Elementwise operators on BOOL and integer tensors with TOSA broadcasting, one output word
// (4 / ES elements) per invocation. ES (specialization constant 1): element bytes, 1, 2 or 4.
// OP (constant 2): 0 ADD, 1 SUB, 2 MUL (int32; `shift` > 0 rounds the 64-bit product), 3 INTDIV,
// 4 LOGICAL_AND, 5 LOGICAL_OR, 6 LOGICAL_XOR, 7 LOGICAL_NOT (in2 unused), 8 LOGICAL_LEFT_SHIFT,
// 9 LOGICAL_RIGHT_SHIFT, 10 BITWISE_AND, 11 BITWISE_OR, 12 BITWISE_XOR, 13 ARITHMETIC_RIGHT_SHIFT
// (`shift` 1: round, adding the last bit shifted out), 14 MAXIMUM, 15 MINIMUM, 16 EQUAL, 17 GREATER,
// 18 GREATER_EQUAL (BOOL results). OUT_ES (constant 3; 0: ES): the result's element bytes, where it
// differs from the operands' (comparisons, MUL of int8 / int16 into int32).
// Overflow, division by zero and shift counts outside [0, 31] are REQUIRE violations (unpredictable):
// results wrap to the type, x / 0 is 0 and out-of-range shifts are clamped, as in the CPU backend.
#extension GL_GOOGLE_include_directive : require
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ES = 4u;
layout(constant_id = 2) const uint OP = 0u;
layout(constant_id = 3) const uint OUT_ES_GIVEN = 0u;
const uint OUT_ES = OUT_ES_GIVEN == 0u ? ES : OUT_ES_GIVEN;

layout(set = 0, binding = 0, std430) readonly buffer In1 { uint in1[]; };
layout(set = 0, binding = 1, std430) readonly buffer In2 { uint in2[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Out { uint outw[]; };

layout(push_constant, std430) uniform Params {
    uint n;
    uint rank;
    uint shape[MAX_RANK];
    uint stride1[MAX_RANK];
    uint stride2[MAX_RANK];
    uint shift;
} p;

// (a * b + 2^(shift - 1)) >> shift on the exact 64-bit product, for 1 <= shift <= 63.
int rounded_product(int a, int b, uint shift) {
    int hi;
    int lo_signed;
    imulExtended(a, b, hi, lo_signed);
    uint lo = uint(lo_signed);
    if (shift <= 32u) {
        uint add = 1u << (shift - 1u);
        uint sum = lo + add;
        hi += sum < lo ? 1 : 0;
        lo = sum;
    } else {
        hi += 1 << (shift - 33u);
    }
    if (shift < 32u) {
        return int((lo >> shift) | (uint(hi) << (32u - shift)));
    }
    return hi >> (shift - 32u);
}

uint apply(uint ua, uint ub) {
    uint bits = 8u * ES;
    int a = sign_extend(ua, ES);
    int b = sign_extend(ub, ES);
    switch (OP) {
        case 0u: return uint(a + b);
        case 1u: return uint(a - b);
        case 2u: return p.shift == 0u ? uint(a * b) : uint(rounded_product(a, b, p.shift));
        case 3u: {
            if (b == 0) {
                return 0u;
            }
            uint q = (a < 0 ? uint(-a) : uint(a)) / (b < 0 ? uint(-b) : uint(b));
            return (a < 0) != (b < 0) ? uint(-int(q)) : q;
        }
        case 4u: return uint(ua != 0u && ub != 0u);
        case 5u: return uint(ua != 0u || ub != 0u);
        case 6u: return uint((ua != 0u) != (ub != 0u));
        case 7u: return uint(ua == 0u);
        case 8u: return b < 0 ? ua : (b >= int(bits) ? 0u : ua << uint(b));
        case 9u: return b < 0 ? ua : (b >= int(bits) ? 0u : ua >> uint(b));
        case 10u: return ua & ub;
        case 11u: return ua | ub;
        case 12u: return ua ^ ub;
        case 13u: {
            // counts outside [0, 63] are REQUIRE violations, clipped as in the CPU backend
            int s = clamp(b, 0, 63);
            int r = a >> min(s, 31);
            if (p.shift != 0u && s > 0) {
                r += (a >> min(s - 1, 31)) & 1;
            }
            return uint(r);
        }
        case 14u: return uint(max(a, b));
        case 15u: return uint(min(a, b));
        case 16u: return uint(a == b);
        case 17u: return uint(a > b);
        default: return uint(a >= b);
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
            uint i1 = i;
            uint i2 = i;
            if (p.rank > 0u) {
                i1 = broadcast_index(i, p.rank, p.shape, p.stride1);
                i2 = broadcast_index(i, p.rank, p.shape, p.stride2);
            }
            uint a = ELEM_GET(in1[ELEM_WORD(i1, ES)], i1, ES);
            uint b = OP == 7u ? 0u : ELEM_GET(in2[ELEM_WORD(i2, ES)], i2, ES);
            word |= (apply(a, b) & ELEM_MASK(OUT_ES)) << (j * 8u * OUT_ES);
        }
        outw[w] = word;
    }
}
