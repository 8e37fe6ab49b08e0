#version 460
// CONV2D, CONV3D and TRANSPOSE_CONV2D of int8 (or int16) x int8 -> int32 as an implicit GEMM, the
// integer twin of conv.comp (same tiling, staging and tap arithmetic): out[m, oc] = bias[oc] +
// sum_k (A[m, k] - input_zp) (W[oc, k] - weight_zp), where a tap in the padding contributes nothing.
// Products and sums are int32 with two's complement wrap-around: an int32 accumulator that overflows
// is a REQUIRE violation, and a wrapped sum is the low 32 bits of the exact one whatever the order, so
// the result equals the CPU backend's exact sum narrowed to int32.
// MODE (constant 0) as in conv.comp; TM, TN (1, 2) outputs per invocation; IN_ES (3): input element
// bytes (1 int8, 2 int16). Weights are int8.
#extension GL_GOOGLE_include_directive : require
#include "include/elementwise.glsl"

layout(local_size_x = 16, local_size_y = 16, local_size_z = 1) in;
layout(constant_id = 0) const uint MODE = 0u;
layout(constant_id = 1) const uint TM = 4u;
layout(constant_id = 2) const uint TN = 4u;
layout(constant_id = 3) const uint IN_ES = 1u;
const uint BK = 16u;
const uint BM = 16u * TM;
const uint BN = 16u * TN;

layout(set = 0, binding = 0, std430) readonly buffer In { uint inw[]; };
layout(set = 0, binding = 1, std430) readonly buffer Weight { uint ww[]; };
layout(set = 0, binding = 2, std430) readonly buffer Bias { int bias[]; };
layout(set = 0, binding = 3, std430) readonly buffer InZp { uint inzp[]; };
layout(set = 0, binding = 4, std430) readonly buffer WZp { uint wzp[]; };
layout(set = 0, binding = 5, std430) writeonly buffer Out { int outv[]; };

layout(push_constant, std430) uniform Params {
    uint M;  // output positions: N * OD * OH * OW
    uint K;  // KD * KH * KW * IC
    uint OC;
    uint IC;
    uint ID;
    uint IH;
    uint IW;
    uint OD;
    uint OH;
    uint OW;
    uint KH;
    uint KW;
    uint stride_d;
    uint stride_h;
    uint stride_w;
    uint dil_d;
    uint dil_h;
    uint dil_w;
    int pad_d;  // leading pads (TRANSPOSE_CONV2D: out_pad_top / out_pad_left, possibly negative)
    int pad_h;
    int pad_w;
    uint bias_single;  // 1: one bias for every channel
} p;

shared int As[BK][BM + 1u];
shared int Bs[BK][BN + 1u];

// One output position's first input coordinates (forward) or its position less the padding
// (transposed), and the start of its batch in the input.
struct Row {
    bool valid;
    uint batch;
    int d;
    int h;
    int w;
};

Row row_of(uint m) {
    Row r;
    r.valid = m < p.M;
    uint t = r.valid ? m : 0u;
    uint ow = t % p.OW;
    t /= p.OW;
    uint oh = t % p.OH;
    t /= p.OH;
    uint od = t % p.OD;
    uint n = t / p.OD;
    r.batch = n * p.ID;
    if (MODE == 0u) {
        r.d = int(od * p.stride_d) - p.pad_d;
        r.h = int(oh * p.stride_h) - p.pad_h;
        r.w = int(ow * p.stride_w) - p.pad_w;
    } else {
        r.d = int(od);
        r.h = int(oh) - p.pad_h;
        r.w = int(ow) - p.pad_w;
    }
    return r;
}

// Input coordinate along one axis for a tap, or -1 when the tap reads padding / no input row.
int tap(int base, uint k, uint stride, uint dil, uint size) {
    int x;
    if (MODE == 0u) {
        x = base + int(k * dil);
    } else {
        int t = base - int(k);
        if (t < 0 || uint(t) % stride != 0u) {
            return -1;
        }
        x = int(uint(t) / stride);
    }
    return x >= 0 && uint(x) < size ? x : -1;
}

void main() {
    uint tx = gl_LocalInvocationID.x;
    uint ty = gl_LocalInvocationID.y;
    uint tid = ty * 16u + tx;
    uint kk = tid % BK;  // the k this invocation loads, in each staged slice
    uint lr = tid / BK;  // the first row / column it loads (then every 16th)
    uint col0 = gl_WorkGroupID.x * BN;
    int zp_in = sign_extend(ELEM_GET(inzp[0], 0u, IN_ES), IN_ES);
    int zp_w = sign_extend(ELEM_GET(wzp[0], 0u, 1u), 1u);
    uint row_tiles = (p.M + BM - 1u) / BM;
    for (uint tile = gl_WorkGroupID.y; tile < row_tiles; tile += gl_NumWorkGroups.y) {
        uint row0 = tile * BM;
        Row rows[TM];
        for (uint i = 0u; i < TM; ++i) {
            rows[i] = row_of(row0 + lr + 16u * i);
        }
        int acc[TM][TN];
        for (uint i = 0u; i < TM; ++i) {
            for (uint j = 0u; j < TN; ++j) {
                acc[i][j] = 0;
            }
        }
        for (uint k0 = 0u; k0 < p.K; k0 += BK) {
            uint k = k0 + kk;
            bool k_ok = k < p.K;
            uint c = k % p.IC;
            uint t = k / p.IC;
            uint kw = t % p.KW;
            t /= p.KW;
            uint kh = t % p.KH;
            uint kd = t / p.KH;
            for (uint i = 0u; i < TM; ++i) {
                Row r = rows[i];
                int v = 0;
                if (r.valid && k_ok) {
                    int z = tap(r.d, kd, p.stride_d, p.dil_d, p.ID);
                    int y = tap(r.h, kh, p.stride_h, p.dil_h, p.IH);
                    int x = tap(r.w, kw, p.stride_w, p.dil_w, p.IW);
                    if (z >= 0 && y >= 0 && x >= 0) {
                        uint e = (((r.batch + uint(z)) * p.IH + uint(y)) * p.IW + uint(x)) * p.IC + c;
                        v = sign_extend(ELEM_GET(inw[ELEM_WORD(e, IN_ES)], e, IN_ES), IN_ES) - zp_in;
                    }
                }
                As[kk][lr + 16u * i] = v;
            }
            for (uint j = 0u; j < TN; ++j) {
                uint oc = col0 + lr + 16u * j;
                uint e = oc * p.K + k;
                Bs[kk][lr + 16u * j] = (oc < p.OC && k_ok) ? sign_extend(ELEM_GET(ww[ELEM_WORD(e, 1u)], e, 1u), 1u) - zp_w : 0;
            }
            barrier();
            for (uint q = 0u; q < BK; ++q) {
                int a[TM];
                int b[TN];
                for (uint i = 0u; i < TM; ++i) {
                    a[i] = As[q][ty + 16u * i];
                }
                for (uint j = 0u; j < TN; ++j) {
                    b[j] = Bs[q][tx + 16u * j];
                }
                for (uint i = 0u; i < TM; ++i) {
                    for (uint j = 0u; j < TN; ++j) {
                        acc[i][j] += a[i] * b[j];
                    }
                }
            }
            barrier();
        }
        for (uint i = 0u; i < TM; ++i) {
            uint m = row0 + ty + 16u * i;
            if (m >= p.M) {
                continue;
            }
            for (uint j = 0u; j < TN; ++j) {
                uint oc = col0 + tx + 16u * j;
                if (oc < p.OC) {
                    outv[m * p.OC + oc] = acc[i][j] + bias[p.bias_single != 0u ? 0u : oc];
                }
            }
        }
    }
}
