/* What the rest of the library sees of the cpu backend: the backend itself and
 * a test hook that picks the backend of later compiles (the differential tests
 * run each graph on ref and on cpu in one process). */
#ifndef LT_CPU_API_H
#define LT_CPU_API_H

#include "../backend.h"

extern const lt_backend lt__cpu_backend;

/* Forces lt__backend_for to answer be (NULL: back to LT_BACKEND). Process-wide. */
void lt__backend_force(const lt_backend *be);
const lt_backend *lt__backend_forced(void);

#endif
