#version 460
// GATHER and SCATTER along K, values [N, K, C], indices int32 [N, W], of elements of ES bytes (1, 2 or 4:
// int8, int16, and every 32-bit type; specialization constant 2).
// MODE (specialization constant 1) 0, GATHER: out[n, w, c] = values[n, indices[n, w], c], one
//   invocation per output word (its 4 / ES elements, so no two invocations share a word); bindings:
//   values, indices, out.
// MODE 1, SCATTER: out[n, indices[n, w], c] = input[n, w, c], one invocation per input element, after
//   values_in was copied into out; bindings: indices, input, out. Narrow elements are written with an
//   atomic AND then OR on their bits of the word: positions are distinct (a repeated one is a REQUIRE
//   violation), so invocations sharing a word change disjoint bits and the order does not matter.
// An index outside [0, K) is a REQUIRE violation (the result is unpredictable): GATHER reads 0 and
// SCATTER skips the write, so nothing outside the tensors is ever touched.
#extension GL_GOOGLE_include_directive : require
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint MODE = 0u;
layout(constant_id = 2) const uint ES = 4u;

layout(set = 0, binding = 0, std430) readonly buffer A { uint a[]; };
layout(set = 0, binding = 1, std430) readonly buffer B { uint b[]; };
layout(set = 0, binding = 2, std430) buffer Out { uint outv[]; };

layout(push_constant, std430) uniform Params {
    uint n;  // elements: N * W * C
    uint K;
    uint W;
    uint C;
} p;

uint word_at(uint word, uint i) {  // element i (counted over the binding) of the word holding it
    return ES == 4u ? word : ELEM_GET(word, i, ES);
}

void main() {
    if (MODE == 0u) {
        uint per = ELEM_PER_WORD(ES);
        uint words = (p.n + per - 1u) / per;
        for (uint wi = gl_GlobalInvocationID.x; wi < words; wi += GRID_STRIDE) {
            uint packed = 0u;
            for (uint j = 0u; j < per; ++j) {
                uint i = wi * per + j;
                if (i >= p.n) {
                    break;
                }
                uint c = i % p.C;
                uint nw = i / p.C;  // n * W + w
                uint batch = nw / p.W;
                int k = int(b[nw]);
                if (k >= 0 && uint(k) < p.K) {
                    uint src = (batch * p.K + uint(k)) * p.C + c;
                    packed |= word_at(a[ELEM_WORD(src, ES)], src) << ELEM_SHIFT(i, ES);
                }
            }
            outv[wi] = packed;
        }
        return;
    }
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += GRID_STRIDE) {
        uint c = i % p.C;
        uint nw = i / p.C;
        uint batch = nw / p.W;
        int k = int(a[nw]);
        if (k < 0 || uint(k) >= p.K) {
            continue;
        }
        uint dst = (batch * p.K + uint(k)) * p.C + c;
        uint value = word_at(b[ELEM_WORD(i, ES)], i);
        if (ES == 4u) {
            outv[dst] = value;
        } else {
            uint shift = ELEM_SHIFT(dst, ES);
            atomicAnd(outv[ELEM_WORD(dst, ES)], ~(ELEM_MASK(ES) << shift));
            atomicOr(outv[ELEM_WORD(dst, ES)], value << shift);
        }
    }
}
