#ifndef STRATA_SHA256_HW_H
#define STRATA_SHA256_HW_H
#include <stddef.h>
#include <stdint.h>

/// 1 when this CPU has SHA-256 instructions (the SHA extensions on x86-64), else 0.
int strata_sha256_hardware_available(void);

/// Compresses `blocks` 64-byte blocks at `data` into `state` (a, b, … h) with the CPU's
/// instructions. Only call it when strata_sha256_hardware_available() is 1.
void strata_sha256_hardware_blocks(uint32_t state[8], const void *data, size_t blocks);
#endif
