/* Placeholder until the persistent cache lands: always disabled. */
#include "disk_cache.h"

bool lt__disk_cache_enabled(const lt_backend *be) {
  (void)be;
  return false;
}
int lt__disk_cache_load(const lt_backend *be, lt_graph_key key, lt_executable **exe) {
  (void)be;
  (void)key;
  (void)exe;
  return LT_ENOTFOUND;
}
void lt__disk_cache_store(const lt_backend *be, lt_graph_key key, const lt_executable *exe) {
  (void)be;
  (void)key;
  (void)exe;
}
