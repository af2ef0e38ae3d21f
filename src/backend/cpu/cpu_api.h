/* What the rest of the library sees of the cpu backend: the backend itself. */
#ifndef LT_CPU_API_H
#define LT_CPU_API_H

#include "../backend.h"

extern const lt_backend lt__cpu_backend;

#endif
