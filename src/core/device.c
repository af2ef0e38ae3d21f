/* Devices: parsing, printing, and per-device contexts. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "lt_device.h"
#include "lt_alloc.h"
#include "lt_error.h"
#include "lt_tensor.h"

static lt_device_ctx g_ctx[LT_MAX_DEVICES];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_contexts(void) {
  for (int i = 0; i < LT_MAX_DEVICES; i++) {
    g_ctx[i].dev = lt_cpu(i);
    pthread_mutex_init(&g_ctx[i].live_lock, NULL);
  }
}

lt_device lt_cpu(int index) {
  lt_device d = {LT_DEVICE_CPU, index};
  return d;
}

bool lt__device_equal(lt_device a, lt_device b) { return a.type == b.type && a.index == b.index; }

lt_device_ctx *lt__device_ctx(const char *fn, lt_device dev) {
  if (dev.type != LT_DEVICE_CPU || dev.index < 0 || dev.index >= LT_MAX_DEVICES) {
    lt__err(LT_EDEVICE, "%s: unknown device (type %d, index %d); CPU:0..CPU:%d exist", fn,
            (int)dev.type, dev.index, LT_MAX_DEVICES - 1);
    return NULL;
  }
  pthread_once(&g_once, init_contexts);
  return &g_ctx[dev.index];
}

int lt_device_parse(const char *text, lt_device *out) {
  if (!text || !out) return lt__err(LT_EINVAL, "lt_device_parse: NULL argument");
  const char *colon = text;
  while (*colon && *colon != ':') colon++;
  if (*colon != ':' || colon - text != 3 || strncasecmp(text, "cpu", 3) != 0 ||
      !isdigit((unsigned char)colon[1]))
    return lt__err(LT_EDEVICE, "lt_device_parse: '%s' is not a device (expected CPU:<index>)",
                   text);
  char *end;
  long idx = strtol(colon + 1, &end, 10);
  if (*end != '\0' || idx < 0 || idx >= LT_MAX_DEVICES)
    return lt__err(LT_EDEVICE, "lt_device_parse: '%s': index must be 0..%d", text,
                   LT_MAX_DEVICES - 1);
  out->type = LT_DEVICE_CPU;
  out->index = (int)idx;
  return LT_OK;
}

int lt_device_str(lt_device dev, char *buf, size_t n) {
  if (dev.type != LT_DEVICE_CPU) return snprintf(buf, n, "?:%d", dev.index);
  return snprintf(buf, n, "CPU:%d", dev.index);
}

int64_t lt_device_live_tensors(lt_device dev) {
  lt_device_ctx *ctx = lt__device_ctx("lt_device_live_tensors", dev);
  if (!ctx) return -1;
  pthread_mutex_lock(&ctx->live_lock);
  int64_t n = ctx->live_count;
  pthread_mutex_unlock(&ctx->live_lock);
  return n;
}

void lt__device_add_live(lt_device_ctx *ctx, lt_tensor *t) {
  pthread_mutex_lock(&ctx->live_lock);
  t->live_prev = NULL;
  t->live_next = ctx->live_head;
  if (ctx->live_head) ctx->live_head->live_prev = t;
  ctx->live_head = t;
  ctx->live_count++;
  pthread_mutex_unlock(&ctx->live_lock);
}

void lt__device_remove_live(lt_device_ctx *ctx, lt_tensor *t) {
  pthread_mutex_lock(&ctx->live_lock);
  if (t->live_prev)
    t->live_prev->live_next = t->live_next;
  else
    ctx->live_head = t->live_next;
  if (t->live_next) t->live_next->live_prev = t->live_prev;
  ctx->live_count--;
  pthread_mutex_unlock(&ctx->live_lock);
}

lt_tensor **lt__device_live_snapshot(lt_device_ctx *ctx, int *n) {
  pthread_mutex_lock(&ctx->live_lock);
  int count = (int)ctx->live_count;
  lt_tensor **all = lt__malloc((size_t)count * sizeof *all);
  if (all) {
    int k = 0;
    for (lt_tensor *t = ctx->live_head; t; t = t->live_next) all[k++] = lt_retain(t);
  }
  pthread_mutex_unlock(&ctx->live_lock);
  *n = all ? count : 0;
  return all;
}
