#ifndef STRATA_RANDOM_H
#define STRATA_RANDOM_H
#include <stddef.h>
#include <sys/types.h>

/// Fills `buffer` with up to `count` bytes from the kernel's CSPRNG (getrandom(2) on Linux, glibc
/// and musl alike; arc4random_buf on Apple platforms and the BSDs). Returns the bytes written, or
/// -1 with errno set (ENOSYS where the system has no such call: the caller falls back to the
/// standard library's generator).
ssize_t strata_system_random(void *buffer, size_t count);
#endif
