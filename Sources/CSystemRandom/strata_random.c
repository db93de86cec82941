// Declared through a header rather than bound by symbol name from Swift: the Glibc module does
// not export getrandom, and musl and the Apple platforms spell it differently.
#include "strata_random.h"
#include <errno.h>

#if defined(__linux__)
#include <sys/random.h>
ssize_t strata_system_random(void *buffer, size_t count) {
    return getrandom(buffer, count, 0);
}
#elif defined(__APPLE__) || defined(__FreeBSD__) || defined(__OpenBSD__) || defined(__NetBSD__)
#include <stdlib.h>
ssize_t strata_system_random(void *buffer, size_t count) {
    arc4random_buf(buffer, count);
    return (ssize_t)count;
}
#else
ssize_t strata_system_random(void *buffer, size_t count) {
    (void)buffer;
    (void)count;
    errno = ENOSYS;
    return -1;
}
#endif
