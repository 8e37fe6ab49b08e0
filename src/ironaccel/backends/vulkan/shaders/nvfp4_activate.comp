#version 460
// An NVFP4 projection's activation over its fp32 product: out[i] = act(in[i]) (include/nvfp4.glsl).
// Grid stride over the elements. Specialization constants: 0 workgroup size, 1 ACT.
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"
#include "include/nvfp4.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ACT = 0u;

layout(set = 0, binding = 0, std430) readonly buffer In { float inv[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Out { float outv[]; };

layout(push_constant, std430) uniform Params {
    uint count;
} p;

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < p.count; i += stride) {
        outv[i] = ia_nvfp4_activate(inv[i], ACT);
    }
}
