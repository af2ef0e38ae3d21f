/* Every allocation of the library goes through here, so one hook (lt_set_allocator)
 * sees them all and tests can inject failures. */
#ifndef LT_ALLOC_H
#define LT_ALLOC_H

#include <stddef.h>

/* Returns NULL and records LT_ENOMEM on failure. Zero sizes allocate one byte so
 * that empty tensors still get a distinct, freeable block. */
void *lt__malloc(size_t n);
void *lt__calloc(size_t n);
void *lt__realloc(void *p, size_t oldn, size_t newn);
void lt__free(void *p, size_t n);

#endif
