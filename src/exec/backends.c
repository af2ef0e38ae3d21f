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

/* Buffers of host-storage backends are plain host memory in one layout: any
 * such backend reads another's (the fallback already runs ref over cpu's
 * buffers), and each buffer frees through its own backend's data_free. So a
 * switch between two of them needs nothing moved; one to or from a backend
 * with storage of its own would hand the new backend buffers it cannot read,
 * and is refused while tensors are alive. */
int lt_set_backend(const char *name) {
  const char *fn = "lt_set_backend";
  lt__backends_init();
  const lt_backend *be = name ? lt__backend_find(name) : NULL;
  if (!be) {
    char known[128];
    lt__backend_names(known, sizeof known);
    return lt__err(LT_EINVAL, "%s: %s%s%s names no backend (known: %s)", fn, name ? "'" : "",
                   name ? name : "NULL", name ? "'" : "", known);
  }
  const lt_backend *cur = lt__backend_for(lt_cpu(0));
  if (cur != be && !(cur->host_storage && be->host_storage))
    for (int i = 0; i < LT_MAX_DEVICES; i++) {
      int64_t n = lt_device_live_tensors(lt_cpu(i));
      if (n > 0)
        return lt__err(LT_EINVAL,
                       "%s: '%s' cannot read the storage of '%s', and %lld tensors are alive on "
                       "CPU:%d; release them first",
                       fn, be->name, cur->name, (long long)n, i);
    }
  lt__backend_choose(be);
  return LT_OK;
}

const char *lt_get_backend(void) {
  const lt_backend *be = lt__backend_for(lt_cpu(0));
  return be ? be->name : NULL;
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
