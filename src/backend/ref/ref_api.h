/* What the rest of the library sees of the ref backend: the backend itself. */
#ifndef LT_REF_API_H
#define LT_REF_API_H

#include "../backend.h"

extern const lt_backend lt__ref_backend;

/* Whether the ref backend has a kernel for op (its dispatch is built from
 * the op table; the op-table test walks every op through this). */
bool lt__ref_has_kernel(lt_op op);

#endif
