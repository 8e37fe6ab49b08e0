// Flat output index -> flat operand index under TOSA broadcasting. The host coalesces neighbouring
// dimensions with the same broadcast pattern (ops/common.py) and passes, per operand, one stride per
// output dimension: 0 where the operand's dimension is 1. rank 0 means "every operand has the
// output's shape", so the index is used as it is.
#define MAX_RANK 6

// The workgroup walks the output in a grid-stride loop: dispatches stay under the per-dimension
// group limit (65535 on many devices) whatever the element count.
#define GRID_STRIDE (gl_NumWorkGroups.x * gl_WorkGroupSize.x)

uint broadcast_index(uint i, uint rank, uint shape[MAX_RANK], uint strides[MAX_RANK]) {
    uint offset = 0u;
    for (int d = int(rank) - 1; d >= 0; --d) {
        uint q = i / shape[d];
        offset += (i - q * shape[d]) * strides[d];
        i = q;
    }
    return offset;
}

// BOOL tensors are one byte per value (numpy's layout); 32-bit words keep the kernels free of the
// 8-bit storage feature. A reader extracts its byte; writers own whole words (see compare.comp).
bool read_bool(uint word, uint i) {
    return ((word >> ((i & 3u) * 8u)) & 0xffu) != 0u;
}
