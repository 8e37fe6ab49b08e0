#version 460
// MATMUL fp16 x fp16 with fp32 accumulation on workgroup-scope cooperative matrices: a workgroup of
// 256 invocations computes a 128 x 256 output tile in 32-deep steps, each step's slices loaded just
// before their multiply-add through two-dimensional tensor layouts (any shape). Of the forms measured
// this one was the fastest (ADR 0020): slices declared inside the loop carry no matrix between steps, and
// two-dimensional layouts (the batch reached by an element offset) keep the kernel off the register limit.
// Chosen at load instead of matmul_coop.comp only where the device was opened with workgroup matrices
// and lists fp16 16 x 16 x 16 (or a finer granularity) with an fp32 accumulator at 256 invocations
// (ops/matmul.py). The body: include/matmul_wg.glsl.
// compiler: slang-glslang
#define WG_INVOCATIONS 256
#define TILE_M 128
#define TILE_N 256
#define TILE_K 32
#define TENSOR 1
#define AHEAD 0
#define INLOOP 1
#define PLANES 1
#extension GL_GOOGLE_include_directive : require
#include "include/matmul_wg.glsl"
