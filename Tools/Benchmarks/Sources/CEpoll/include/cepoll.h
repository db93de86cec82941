// epoll for the fleet row's load generator: Swift's Glibc module does not bring <sys/epoll.h>.
#pragma once
#include <sys/epoll.h>
