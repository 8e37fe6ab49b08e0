#version 460
// Reductions of fp32 along one axis, and ARGMAX. The input is viewed as [outer, axis, inner].
// OP (specialization constant 1): 0 SUM, 1 MAX, 2 MIN, 3 PRODUCT, 4 ARGMAX (int32 result).
// NAN_MODE (constant 2; MAX, MIN, ARGMAX): 1 propagate, 2 ignore. ARGMAX gives the first index of the
// largest value; propagating, the first NaN's; ignoring NaNs, 0 when all are NaN.
// SPLIT (constant 3): 0, one invocation per output walks the axis in order (short axes, many
// outputs); 1, a workgroup per output: invocation t folds elements t, t + WG, ... in order, then the
// partial results meet in a fixed tree in shared memory (long axes: parallel, and no invocation loops
// more than axis / WG times; a software driver caps loop iterations per invocation).
// SUM and PRODUCT accumulate in fp32; TOSA judges SUM as a dot product against an fp64 reference.
// Results are written as bits (ARGMAX's integers must not pass through a float).
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"
#include "include/math.glsl"
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0u;
layout(constant_id = 2) const uint NAN_MODE = 1u;
layout(constant_id = 3) const uint SPLIT = 0u;

layout(set = 0, binding = 0, std430) readonly buffer In { float inv[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Out { uint outw[]; };

layout(push_constant, std430) uniform Params {
    uint outer;
    uint axis;
    uint inner;
} p;

// A partial result: the value so far and, for ARGMAX, its index.
struct Partial {
    float value;
    uint index;
};

// Fold b into a. MAX, MIN and ARGMAX keep the earlier index among equal values (as a walk in order
// does, which matters for the sign of a zero and for ARGMAX); NaN follows NAN_MODE: propagating, a NaN
// wins (the earliest of several); ignoring, any number beats NaN.
Partial combine(Partial a, Partial b) {
    if (OP == 0u) {
        return Partial(a.value + b.value, 0u);
    }
    if (OP == 3u) {
        return Partial(a.value * b.value, 0u);
    }
    bool na = isnan(a.value);
    bool nb = isnan(b.value);
    bool earlier = b.index < a.index;
    bool take;
    if (na || nb) {
        take = NAN_MODE == 2u ? (na && (!nb || earlier)) : (nb && (!na || earlier));
    } else if (a.value == b.value) {
        take = earlier;
    } else {
        take = OP == 2u ? b.value < a.value : b.value > a.value;
    }
    return take ? b : a;
}

Partial element(uint base, uint k) {
    return Partial(inv[base + k * p.inner], k);
}

const uint WG = gl_WorkGroupSize.x;
shared float part_value[WG];
shared uint part_index[WG];

void write(uint i, Partial r) {
    outw[i] = OP == 4u ? r.index : floatBitsToUint(r.value);
}

void main() {
    uint n = p.outer * p.inner;
    if (SPLIT == 0u) {
        for (uint i = gl_GlobalInvocationID.x; i < n; i += GRID_STRIDE) {
            uint o = i / p.inner;
            uint base = o * p.axis * p.inner + (i - o * p.inner);
            Partial acc = element(base, 0u);
            for (uint k = 1u; k < p.axis; ++k) {
                acc = combine(acc, element(base, k));
            }
            write(i, acc);
        }
        return;
    }
    uint t = gl_LocalInvocationID.x;
    for (uint i = gl_WorkGroupID.x; i < n; i += gl_NumWorkGroups.x) {  // uniform across the workgroup
        uint o = i / p.inner;
        uint base = o * p.axis * p.inner + (i - o * p.inner);
        Partial acc = element(base, t);  // the axis is at least WG long in this mode
        for (uint k = t + WG; k < p.axis; k += WG) {
            acc = combine(acc, element(base, k));
        }
        part_value[t] = acc.value;
        part_index[t] = acc.index;
        barrier();
        for (uint s = WG / 2u; s > 0u; s >>= 1u) {
            if (t < s) {
                Partial a = Partial(part_value[t], part_index[t]);
                Partial r = combine(a, Partial(part_value[t + s], part_index[t + s]));
                part_value[t] = r.value;
                part_index[t] = r.index;
            }
            barrier();
        }
        if (t == 0u) {
            write(i, Partial(part_value[0], part_index[0]));
        }
        barrier();  // the shared partials are reused by the next output
    }
}
