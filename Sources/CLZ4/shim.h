#ifndef STRATA_CLZ4_SHIM_H
#define STRATA_CLZ4_SHIM_H
#include <lz4.h>

/// LZ4_COMPRESSBOUND is a macro; Swift cannot call it, so it is wrapped here.
static inline int CLZ4_compressBound(int inputSize) {
    return LZ4_compressBound(inputSize);
}

/// The largest input LZ4's block format accepts (LZ4_MAX_INPUT_SIZE is a macro).
static inline int CLZ4_maxInputSize(void) {
    return LZ4_MAX_INPUT_SIZE;
}
#endif
