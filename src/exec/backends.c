/* The backends this library is built with, registered at the first use of
 * any: the executor (not the backend layer) knows them, picks the cpu
 * backend by default, and names ref, the oracle that runs every op, as the
 * fallback for ops another backend has no path for. */
#include <pthread.h>

#include "../backend/cpu/cpu_api.h"
#include "../backend/ref/ref_api.h"
#include "../core/lt_dtype.h"
#include "../core/lt_error.h"
#include "exec_internal.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void register_builtin(void) {
  /* Registration of static tables cannot fail but by a programming error,
   * which the op-table test catches. */
  (void)lt__backend_register(&lt__ref_backend);
  (void)lt__backend_register(&lt__cpu_backend);
  lt__backend_set_fallback(&lt__ref_backend);
}

void lt__backends_init(void) { pthread_once(&g_once, register_builtin); }

const lt_backend *lt__backend_for(lt_device dev) {
  lt__backends_init();
  return lt__backend_select(dev, "cpu");
}

const char *lt_get_isa(lt_device dev, lt_dtype dt) {
  const char *fn = "lt_get_isa";
  if (!lt__exec_dev(fn, dev)) return NULL;
  if (!lt__dtype_valid(dt)) {
    lt__err(LT_EINVAL, "%s: %d is not a dtype", fn, (int)dt);
    return NULL;
  }
  const lt_backend *be = lt__backend_for(dev);
  if (!be) {
    lt__err(LT_EDEVICE, "%s: no backend for the device", fn);
    return NULL;
  }
  return be->isa ? be->isa(dt) : be->name;
}
