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

// Elements of 1, 2 or 4 bytes (BOOL / INT8, INT16, INT32 / FP32) packed in 32-bit words, little
// endian as numpy stores them: element i of an ES-byte tensor is word i / (4 / ES), bits from
// (i % (4 / ES)) * 8 ES. ES is a specialization constant where these are used, so they fold.
#define ELEM_PER_WORD(ES) (4u / (ES))
#define ELEM_WORD(i, ES) ((i) / ELEM_PER_WORD(ES))
#define ELEM_SHIFT(i, ES) (((i) % ELEM_PER_WORD(ES)) * 8u * (ES))
#define ELEM_MASK(ES) ((ES) == 4u ? 0xffffffffu : ((1u << (8u * (ES))) - 1u))
#define ELEM_GET(word, i, ES) (((word) >> ELEM_SHIFT(i, ES)) & ELEM_MASK(ES))

// An element's bits (zero-extended) read as the signed integer of that width.
int sign_extend(uint bits, uint es) {
    return es == 4u ? int(bits) : bitfieldExtract(int(bits), 0, int(8u * es));
}
