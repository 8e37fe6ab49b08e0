#version 460
// GATHER and SCATTER of 32-bit elements along K, values [N, K, C], indices int32 [N, W].
// MODE (specialization constant 1) 0, GATHER: out[n, w, c] = values[n, indices[n, w], c], one
//   invocation per output element; bindings: values, indices, out.
// MODE 1, SCATTER: out[n, indices[n, w], c] = input[n, w, c], one invocation per input element, after
//   values_in was copied into out; bindings: indices, input, out.
// An index outside [0, K) is a REQUIRE violation (the result is unpredictable): GATHER reads 0 and
// SCATTER skips the write, so nothing outside the tensors is ever touched.
#extension GL_GOOGLE_include_directive : require
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint MODE = 0u;

layout(set = 0, binding = 0, std430) readonly buffer A { uint a[]; };
layout(set = 0, binding = 1, std430) readonly buffer B { uint b[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Out { uint outv[]; };

layout(push_constant, std430) uniform Params {
    uint n;  // invocations: N * W * C
    uint K;
    uint W;
    uint C;
} p;

void main() {
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += GRID_STRIDE) {
        uint c = i % p.C;
        uint nw = i / p.C;  // n * W + w
        uint batch = nw / p.W;
        int k = int(MODE == 0u ? b[nw] : a[nw]);
        bool inside = k >= 0 && uint(k) < p.K;
        if (MODE == 0u) {
            outv[i] = inside ? a[(batch * p.K + uint(k)) * p.C + c] : 0u;
        } else if (inside) {
            outv[(batch * p.K + uint(k)) * p.C + c] = b[i];
        }
    }
}
