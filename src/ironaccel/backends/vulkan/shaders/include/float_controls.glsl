// Keep IEEE infinities, NaNs and signed zeros. Without the SignedZeroInfNanPreserve execution mode a
// Vulkan compiler may assume none occur (fold isnan() to false, x * 0 to 0), and TOSA defines results
// for all three. The device must report shaderSignedZeroInfNanPreserveFloat32; device.py checks it.
// 4461 = SignedZeroInfNanPreserve (execution mode), 4466 = its capability, 32 = the fp32 width.
#extension GL_EXT_spirv_intrinsics : require
spirv_execution_mode(capabilities = [4466], 4461, 32);
