// Nothing to compile: the target exists for its header (include/cepoll.h).
#include "cepoll.h"
