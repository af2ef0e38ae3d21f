/* Loads libmpi with dlopen (world_mpi_lib.h). RTLD_GLOBAL: Open MPI's own
 * plugins, which it dlopens in MPI_Init, resolve some of their symbols in
 * libmpi's global scope. The library stays loaded for the process's life. */
#ifdef LT_HAVE_MPI
#include "world_mpi_lib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef LT_MPI_SONAME /* CMake passes the soname of the libmpi it found */
#define LT_MPI_SONAME "libmpi.so.40"
#endif

lt__mpi_api lt__mpi;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_why[512];

/* Returns the address of name in h, or NULL with load_why set. */
static void *need(void *h, const char *lib, const char *name) {
  dlerror();
  void *p = dlsym(h, name);
  if (!p)
    snprintf(load_why, sizeof load_why,
             "%s has no symbol %s: not an MPI library lazytensor can use", lib, name);
  return p;
}

static void load(void) {
  const char *env = getenv("LT_MPI_LIBRARY");
  const char *lib = env && *env ? env : LT_MPI_SONAME;
  void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(load_why, sizeof load_why,
             "cannot load the MPI library %s (%s); install Open MPI's runtime library, or set "
             "LT_MPI_LIBRARY to its path",
             lib, e ? e : "dlopen failed");
    load_rc = -1;
    return;
  }
  lt__mpi_api api;
  void *p;
#define LOAD_FUNCTION(name)                         \
  if (!(p = need(h, lib, "MPI_" #name))) goto fail; \
  memcpy(&api.name, &p, sizeof p); /* object to function pointer: POSIX allows it */
  LT_MPI_FUNCTIONS(LOAD_FUNCTION)
#undef LOAD_FUNCTION
#ifdef OPEN_MPI /* a handle is the address of a global object in libmpi */
#define LOAD_HANDLE(field, type, ompi_symbol, macro) \
  if (!(p = need(h, lib, ompi_symbol))) goto fail;   \
  api.field = (type)p;
#else /* a handle is a constant of mpi.h */
#define LOAD_HANDLE(field, type, ompi_symbol, macro) api.field = macro;
  (void)p;
#endif
  LT_MPI_HANDLES(LOAD_HANDLE)
#undef LOAD_HANDLE
  lt__mpi = api;
  load_rc = 0;
  return;
fail:
  dlclose(h);
  load_rc = -1;
}

int lt__mpi_load(char *why, size_t n) {
  pthread_once(&load_once, load);
  if (load_rc != 0 && n) snprintf(why, n, "%s", load_why);
  return load_rc;
}
#endif
