#ifndef STRATA_CRC32C_HW_H
#define STRATA_CRC32C_HW_H
#include <stddef.h>
#include <stdint.h>

/// 1 when this CPU has a CRC-32C instruction (SSE 4.2 on x86-64, CRC on ARMv8), else 0.
int strata_crc32c_hardware_available(void);

/// Continues the raw (not inverted) CRC-32C state `state` over `count` bytes with the CPU's
/// instruction. Only call it when strata_crc32c_hardware_available() is 1.
uint32_t strata_crc32c_hardware(uint32_t state, const void *data, size_t count);
#endif
