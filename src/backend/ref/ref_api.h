/* What the rest of the library sees of the ref backend: the backend itself. */
#ifndef LT_REF_API_H
#define LT_REF_API_H

#include "../backend.h"

extern const lt_backend lt__ref_backend;

#endif
