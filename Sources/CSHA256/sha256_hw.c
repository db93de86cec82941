// SHA-256's compression function with the CPU's SHA extensions (x86-64): about 1.5 GB/s where
// StrataCore's portable Swift one does about 0.1 GB/s — what decides how fast a store can take
// and check a 5 GiB video. The Swift version defines the result; this is only a faster way to
// the same numbers, chosen at run time, and the tests compare the two.
#include "sha256_hw.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <cpuid.h>

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

__attribute__((target("sha,sse4.1,ssse3")))
void strata_sha256_hardware_blocks(uint32_t state[8], const void *data, size_t blocks) {
    const unsigned char *p = data;
    // The instructions keep the state as (A, B, E, F) and (C, D, G, H).
    const __m128i byteSwap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i tmp = _mm_loadu_si128((const __m128i *)&state[0]);
    __m128i state1 = _mm_loadu_si128((const __m128i *)&state[4]);
    tmp = _mm_shuffle_epi32(tmp, 0xB1);            // C D A B
    state1 = _mm_shuffle_epi32(state1, 0x1B);      // E F G H
    __m128i state0 = _mm_alignr_epi8(tmp, state1, 8);  // A B E F
    state1 = _mm_blend_epi16(state1, tmp, 0xF0);       // C D G H
    while (blocks > 0) {
        const __m128i abef = state0, cdgh = state1;
        __m128i w[4];
        for (int group = 0; group < 16; group++) {
            __m128i words;
            if (group < 4) {
                words = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * group)), byteSwap);
            } else {
                // W[t] = σ1(W[t−2]) + W[t−7] + σ0(W[t−15]) + W[t−16], four at a time.
                __m128i m = _mm_sha256msg1_epu32(w[group & 3], w[(group + 1) & 3]);
                m = _mm_add_epi32(m, _mm_alignr_epi8(w[(group + 3) & 3], w[(group + 2) & 3], 4));
                words = _mm_sha256msg2_epu32(m, w[(group + 3) & 3]);
            }
            w[group & 3] = words;
            __m128i msg = _mm_add_epi32(words, _mm_loadu_si128((const __m128i *)&K[4 * group]));
            state1 = _mm_sha256rnds2_epu32(state1, state0, msg);
            msg = _mm_shuffle_epi32(msg, 0x0E);
            state0 = _mm_sha256rnds2_epu32(state0, state1, msg);
        }
        state0 = _mm_add_epi32(state0, abef);
        state1 = _mm_add_epi32(state1, cdgh);
        p += 64;
        blocks--;
    }
    tmp = _mm_shuffle_epi32(state0, 0x1B);         // F E B A
    state1 = _mm_shuffle_epi32(state1, 0xB1);      // D C H G
    state0 = _mm_blend_epi16(tmp, state1, 0xF0);   // D C B A
    state1 = _mm_alignr_epi8(state1, tmp, 8);      // H G F E
    _mm_storeu_si128((__m128i *)&state[0], state0);
    _mm_storeu_si128((__m128i *)&state[4], state1);
}

// Asked of the CPU itself (CPUID), not of the compiler runtime's feature table, whose layout
// differs between libgcc versions: SHA is leaf 7 EBX bit 29; SSSE3 and SSE4.1 are leaf 1 ECX
// bits 9 and 19.
int strata_sha256_hardware_available(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    if (!(ecx & (1u << 9)) || !(ecx & (1u << 19))) return 0;
    if (__get_cpuid_max(0, 0) < 7) return 0;
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    return (ebx & (1u << 29)) ? 1 : 0;
}
#else
void strata_sha256_hardware_blocks(uint32_t state[8], const void *data, size_t blocks) {
    (void)state; (void)data; (void)blocks;
}

int strata_sha256_hardware_available(void) { return 0; }
#endif
