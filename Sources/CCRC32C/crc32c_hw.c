// CRC-32C with the CPU's own instruction (about 8 bytes per cycle instead of roughly one with
// tables). The portable table version in Swift (CRC32C.swift) defines the result; this is only a
// faster way to the same numbers, chosen at run time, and the tests compare the two.
#include "crc32c_hw.h"
#include <string.h>

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
uint32_t strata_crc32c_hardware(uint32_t state, const void *data, size_t count) {
    const unsigned char *p = data;
    uint64_t c = state;
    while (count >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __builtin_ia32_crc32di(c, word);
        p += 8;
        count -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (count > 0) {
        c32 = __builtin_ia32_crc32qi(c32, *p++);
        count--;
    }
    return c32;
}

int strata_crc32c_hardware_available(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") ? 1 : 0;
}
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
uint32_t strata_crc32c_hardware(uint32_t state, const void *data, size_t count) {
    const unsigned char *p = data;
    uint32_t c = state;
    while (count >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __crc32cd(c, word);
        p += 8;
        count -= 8;
    }
    while (count > 0) {
        c = __crc32cb(c, *p++);
        count--;
    }
    return c;
}

int strata_crc32c_hardware_available(void) { return 1; }
#else
uint32_t strata_crc32c_hardware(uint32_t state, const void *data, size_t count) {
    (void)data;
    (void)count;
    return state;
}

int strata_crc32c_hardware_available(void) { return 0; }
#endif
