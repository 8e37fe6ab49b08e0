#version 460
// RESIZE of fp32 NHWC images, one invocation per output element, as the specification's pseudocode:
// y = oy * scale_y_d + offset_y; iy = floor(y / scale_y_n) (integer floor division, exact);
// dy = (y - iy * scale_y_n) / scale_y_n rounded once to fp32 (exact long division, not the driver's
// 2.5-ulp quotient: NEAREST's dy >= 0.5 depends on it); the same along x. Source rows and columns
// are clamped into the image. MODE (specialization constant 1): 0 NEAREST, 1 BILINEAR (weights
// 1 - dy, dy and 1 - dx, dx in fp32).
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint MODE = 0u;

layout(set = 0, binding = 0, std430) readonly buffer In { float inv[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Out { float outv[]; };

layout(push_constant, std430) uniform Params {
    uint n;
    uint IH;
    uint IW;
    uint C;
    uint OH;
    uint OW;
    uint scale_y_n;
    uint scale_y_d;
    uint scale_x_n;
    uint scale_x_d;
    int offset_y;
    int offset_x;
} p;

// r / d correctly rounded (to nearest, ties to even) for 0 <= r < d <= 2^30, by long division.
float exact_ratio(uint r, uint d) {
    if (r == 0u) {
        return 0.0;
    }
    int e = 0;
    while (r < d) {  // r / d = (r 2^-e) / d with r now in [d, 2d)
        r <<= 1;
        e -= 1;
    }
    uint q = 0u;
    for (int b = 0; b < 24; ++b) {
        q <<= 1;
        if (r >= d) {
            q |= 1u;
            r -= d;
        }
        r <<= 1;
    }
    bool tie_or_more = r >= d;
    if (tie_or_more) {
        r -= d;
    }
    if (tie_or_more && (r != 0u || (q & 1u) != 0u)) {
        q += 1u;
    }
    return float(q) * uintBitsToFloat(uint(127 + e - 23) << 23);  // 2^(e - 23): exact scaling
}

// Floor division of y by a positive n, the remainder and the fraction; the two source indices.
void source_position(int y, uint n, uint size, out uint i0, out uint i1, out float frac) {
    int q = y >= 0 ? y / int(n) : -((-y + int(n) - 1) / int(n));
    uint r = uint(y - q * int(n));
    frac = exact_ratio(r, n);
    i0 = uint(clamp(q, 0, int(size) - 1));
    i1 = uint(clamp(q + 1, 0, int(size) - 1));
}

void main() {
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += GRID_STRIDE) {
        uint c = i % p.C;
        uint t = i / p.C;
        uint ox = t % p.OW;
        t /= p.OW;
        uint oy = t % p.OH;
        uint batch = t / p.OH;
        uint y0, y1, x0, x1;
        float dy, dx;
        source_position(int(oy * p.scale_y_d) + p.offset_y, p.scale_y_n, p.IH, y0, y1, dy);
        source_position(int(ox * p.scale_x_d) + p.offset_x, p.scale_x_n, p.IW, x0, x1, dx);
        uint base = batch * p.IH;
        if (MODE == 0u) {
            uint y = dy >= 0.5 ? y1 : y0;
            uint x = dx >= 0.5 ? x1 : x0;
            outv[i] = inv[((base + y) * p.IW + x) * p.C + c];
        } else {
            float v00 = inv[((base + y0) * p.IW + x0) * p.C + c];
            float v01 = inv[((base + y0) * p.IW + x1) * p.C + c];
            float v10 = inv[((base + y1) * p.IW + x0) * p.C + c];
            float v11 = inv[((base + y1) * p.IW + x1) * p.C + c];
            precise float wy = 1.0 - dy;
            precise float wx = 1.0 - dx;
            precise float top = v00 * wx + v01 * dx;
            precise float bottom = v10 * wx + v11 * dx;
            outv[i] = top * wy + bottom * dy;
        }
    }
}
