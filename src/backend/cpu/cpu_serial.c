/* Serialization of a cpu executable (the persistent cache): its plan and the
 * object code of its kernels. Little-endian, versioned:
 *
 *   u32 magic "LTCP", u32 version,
 *   u32 nparams, u32 nroots, u32 nslots, u32 nkernels, u32 nfns, u32 ncodes,
 *   u32 nargs, u64 arena_bytes,
 *   per slot: u64 nbytes, u64 offset, i32 first, i32 last,
 *   per root: u32 slot, i32 alias (donated parameter written in place, or -1),
 *   per kernel: u8 kind, u32 out_slot, then
 *     LOOP:   u32 fn_index, i64 extent, i64 unit_cost
 *     BLAS:   u8 f64, u8 ta, u8 tb, i64 n, m, k, lda, ldb, u8 nbatch,
 *             per batch dim: i64 shape, i64 a_stride, i64 b_stride; view a, view b
 *     REF:    u16 op, u8 dtype, u8 ndim, i64 shape[ndim], u64 fattr (bits),
 *             u32 noperands, u32 nattrs, i64 attrs[nattrs], view in[noperands], view out
 *     MEMCPY: view src, u64 nbytes
 *   per function: u32 code, u32 nargs (its slots: the next nargs of the list below),
 *   the functions' slots: u32 slot[nargs],
 *   per code (a compiled kernel): u64 key lo, u64 key hi, u64 object length n,
 *     n bytes of object code (ELF for the host) defining the symbol lt_h<key>,
 *   u64 XXH3-64 of every byte before it.
 *   view: u32 slot, u8 dtype, u8 ndim, i64 offset, i64 shape[ndim], i64 strides[ndim].
 *
 * deserialize checks every count against the bytes left (so no count can
 * make it allocate more than a small multiple of its input), every index
 * (slots, parameters, functions, ops, dtypes), that every view the host code
 * reads or writes (BLAS operands and results, ref fallbacks, copies) lies in
 * its slot, that temporaries lie in the arena, and that roots and donations
 * are consistent; execute checks the buffers against the slots' sizes. The
 * JIT loops cannot be checked that way: their code holds slot indices,
 * shapes and strides, and the plan's extents must agree with it. So the
 * payload carries its own checksum, and a payload whose checksum does not
 * match is rejected before anything else is read; the field checks remain
 * for what passes it. Any input gives LT_EINVAL or a sound executable.
 *
 * A kernel whose key is loaded already (another executable has it) is shared,
 * its object code here unread; the others are loaded from theirs, and must
 * define their key's symbol. */
#include <string.h>
#include <xxhash.h>

#include "../../core/lt_alloc.h"
#include "../../core/lt_error.h"
#include "../bytes.h"
#include "cpu.h"

#include "../../core/lt_metrics.h"

enum { kCpuMagic = 0x50435a4c /* "LZCP" */, kCpuFormat = 2 };
#define MAX_DIM_SIZE ((int64_t)1 << 40)
#define MAX_BYTES ((uint64_t)1 << 40)

/* ---- writing ---- */

static void w_view(lt_wbuf *w, const cpu_view *v) {
  lt__wb_int(w, (uint32_t)v->slot, 4);
  lt__wb_int(w, v->dtype, 1);
  lt__wb_int(w, v->ndim, 1);
  lt__wb_int(w, (uint64_t)v->offset, 8);
  for (int d = 0; d < v->ndim; d++) lt__wb_int(w, (uint64_t)v->shape[d], 8);
  for (int d = 0; d < v->ndim; d++) lt__wb_int(w, (uint64_t)v->strides[d], 8);
}

int lt__cpu_serialize(const lt_executable *e, void **bytes, size_t *nbytes) {
  if (!e || !bytes || !nbytes) return lt__err(LT_EINVAL, "cpu: serialize: NULL argument");
  lt_wbuf w = {0};
  lt__wb_int(&w, kCpuMagic, 4);
  lt__wb_int(&w, kCpuFormat, 4);
  lt__wb_int(&w, (uint32_t)e->nparams, 4);
  lt__wb_int(&w, (uint32_t)e->nroots, 4);
  lt__wb_int(&w, (uint32_t)e->nslots, 4);
  lt__wb_int(&w, (uint32_t)e->nkernels, 4);
  lt__wb_int(&w, (uint32_t)e->nfns, 4);
  lt__wb_int(&w, (uint32_t)e->ncodes, 4);
  lt__wb_int(&w, (uint32_t)e->nargs, 4);
  lt__wb_int(&w, e->arena_bytes, 8);
  for (int s = 0; s < e->nslots; s++) {
    const cpu_slot *sl = &e->slots[s];
    lt__wb_int(&w, sl->nbytes, 8);
    lt__wb_int(&w, sl->offset, 8);
    lt__wb_int(&w, (uint32_t)sl->first, 4);
    lt__wb_int(&w, (uint32_t)sl->last, 4);
  }
  for (int r = 0; r < e->nroots; r++) {
    lt__wb_int(&w, (uint32_t)e->root_slot[r], 4);
    lt__wb_int(&w, (uint32_t)e->alias[r], 4);
  }
  for (int i = 0; i < e->nkernels; i++) {
    const cpu_kernel *k = &e->kernels[i];
    lt__wb_int(&w, (uint8_t)k->kind, 1);
    lt__wb_int(&w, (uint32_t)k->out_slot, 4);
    switch (k->kind) {
    case CK_LOOP:
      lt__wb_int(&w, (uint32_t)k->fn_index, 4);
      lt__wb_int(&w, (uint64_t)k->extent, 8);
      lt__wb_int(&w, (uint64_t)k->unit_cost, 8);
      break;
    case CK_BLAS: {
      const cpu_matmul *mm = &k->mm;
      lt__wb_int(&w, (uint64_t)mm->f64 | (uint64_t)mm->acc_f32 << 1, 1); /* the result's kind */
      lt__wb_int(&w, mm->ta, 1);
      lt__wb_int(&w, mm->tb, 1);
      lt__wb_int(&w, k->epilogue, 1);
      lt__wb_int(&w, (uint64_t)mm->n, 8);
      lt__wb_int(&w, (uint64_t)mm->m, 8);
      lt__wb_int(&w, (uint64_t)mm->k, 8);
      lt__wb_int(&w, (uint64_t)mm->lda, 8);
      lt__wb_int(&w, (uint64_t)mm->ldb, 8);
      lt__wb_int(&w, (uint8_t)mm->nbatch_dims, 1);
      for (int d = 0; d < mm->nbatch_dims; d++) {
        lt__wb_int(&w, (uint64_t)mm->batch_shape[d], 8);
        lt__wb_int(&w, (uint64_t)mm->a_bstride[d], 8);
        lt__wb_int(&w, (uint64_t)mm->b_bstride[d], 8);
      }
      w_view(&w, &mm->a);
      w_view(&w, &mm->b);
      break;
    }
    case CK_REF: {
      const lt_instr *in = &k->ins;
      lt__instr_write_head(&w, in);
      lt__wb_int(&w, (uint32_t)in->noperands, 4);
      lt__wb_int(&w, (uint32_t)in->nattrs, 4);
      for (int a = 0; a < in->nattrs; a++) lt__wb_int(&w, (uint64_t)in->attrs[a], 8);
      for (int j = 0; j < in->noperands; j++) w_view(&w, &k->in[j]);
      w_view(&w, &k->out);
      break;
    }
    case CK_MEMCPY:
      w_view(&w, &k->src);
      lt__wb_int(&w, k->nbytes, 8);
      break;
    }
  }
  for (int f = 0; f < e->nfns; f++) {
    lt__wb_int(&w, (uint32_t)e->fns[f].code, 4);
    lt__wb_int(&w, (uint32_t)e->fns[f].nargs, 4);
  }
  for (int a = 0; a < e->nargs; a++) lt__wb_int(&w, (uint32_t)e->args[a], 4);
  for (int c = 0; c < e->ncodes; c++) {
    cpu_kkey key = lt__cpu_kcode_key(e->codes[c]);
    size_t len;
    const void *obj = lt__cpu_kcode_object(e->codes[c], &len);
    lt__wb_int(&w, key.lo, 8);
    lt__wb_int(&w, key.hi, 8);
    lt__wb_int(&w, len, 8);
    lt__wb_raw(&w, obj, len);
  }
  lt__wb_int(&w, w.oom ? 0 : XXH3_64bits(w.p, w.len), 8);
  return lt__wb_finish(&w, bytes, nbytes, "cpu");
}

/* ---- reading ---- */

typedef struct reader {
  lt_rbuf r;
  lt_executable *e;
  const char *bad; /* the first problem */
} reader;

static bool fail_if(reader *rd, bool cond, const char *what) {
  if (cond && !rd->bad) rd->bad = what;
  return cond || rd->bad;
}

static uint64_t align64(uint64_t n) { return (n + 63) & ~(uint64_t)63; }

/* Elements of a shape (each dim in [0, 2^40], product checked); -1 when bad. */
static int64_t checked_numel(const int64_t *shape, int ndim) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 0 || shape[d] > MAX_DIM_SIZE) return -1;
    if (shape[d] && n > (int64_t)(MAX_BYTES / 8) / shape[d]) return -1;
    n *= shape[d];
  }
  return n;
}

/* Whether elements [lo, hi] (in elements of size es) at slot s lie inside it. */
static bool in_slot(const lt_executable *e, int slot, __int128 lo, __int128 hi, size_t es) {
  if (lo < 0 || hi < lo) return false;
  return (hi + 1) * (__int128)es <= (__int128)e->slots[slot].nbytes;
}

static bool r_view(reader *rd, cpu_view *v) {
  lt_rbuf *r = &rd->r;
  memset(v, 0, sizeof *v);
  uint32_t slot = (uint32_t)lt__rb_int(r, 4);
  uint64_t dt = lt__rb_int(r, 1), nd = lt__rb_int(r, 1);
  int64_t off = (int64_t)lt__rb_int(r, 8);
  if (fail_if(rd, r->bad, "truncated view")) return false;
  if (fail_if(rd, slot >= (uint32_t)rd->e->nslots, "view of a slot out of range")) return false;
  if (fail_if(rd, dt >= LT_NUM_DTYPES, "unknown dtype")) return false;
  if (fail_if(rd, nd > LT_MAX_DIMS, "too many dims")) return false;
  v->slot = (int)slot;
  v->dtype = (uint8_t)dt;
  v->ndim = (uint8_t)nd;
  v->offset = off;
  for (uint64_t d = 0; d < nd; d++) v->shape[d] = (int64_t)lt__rb_int(r, 8);
  for (uint64_t d = 0; d < nd; d++) v->strides[d] = (int64_t)lt__rb_int(r, 8);
  if (fail_if(rd, r->bad, "truncated view")) return false;
  int64_t numel = checked_numel(v->shape, v->ndim);
  if (fail_if(rd, numel < 0, "bad view shape")) return false;
  if (numel == 0) return true;
  __int128 lo = off, hi = off;
  for (int d = 0; d < v->ndim; d++) {
    int64_t st = v->strides[d];
    if (fail_if(rd, st < -MAX_DIM_SIZE || st > MAX_DIM_SIZE, "bad view stride")) return false;
    __int128 span = (__int128)(v->shape[d] - 1) * st;
    if (span < 0)
      lo += span;
    else
      hi += span;
  }
  return !fail_if(rd, !in_slot(rd->e, v->slot, lo, hi, lt_dtype_size((lt_dtype)dt)),
                  "view outside its slot");
}

/* A slot a kernel may write: a root's, a temporary, or a donated parameter. */
static bool writable(const lt_executable *e, uint32_t s) {
  if (s >= (uint32_t)e->nslots) return false;
  if (s >= (uint32_t)e->nparams) return true;
  for (int r = 0; r < e->nroots; r++)
    if (e->alias[r] == (int)s) return true;
  return false;
}

/* The largest element offset a matrix operand reaches: rows x cols stored
 * row-major with leading dimension ld (transposed: cols x rows), over the
 * batch; false when it leaves the slot. */
static bool blas_operand_ok(const lt_executable *e, const cpu_matmul *mm, const cpu_view *v,
                            const int64_t *bstride, bool trans, int64_t rows, int64_t cols,
                            int64_t ld, size_t es) {
  int64_t srows = trans ? cols : rows, scols = trans ? rows : cols;
  if (ld < 1 || ld < scols || ld > MAX_DIM_SIZE) return false;
  /* f32 or bf16 (the product's dtype is its operands', or f32 from bf16:
   * cpu.h), f64 */
  if (mm->f64 ? v->dtype != LT_F64 : v->dtype != LT_F32 && v->dtype != LT_BF16) return false;
  if (mm->acc_f32 && v->dtype != LT_BF16) return false;
  if (v->dtype != mm->a.dtype) return false; /* b's dtype is a's */
  int64_t nbatch = 1;
  for (int d = 0; d < mm->nbatch_dims; d++) nbatch *= mm->batch_shape[d];
  if (nbatch == 0 || rows == 0 || cols == 0 || mm->n == 0 || mm->m == 0 || mm->k == 0)
    return true; /* run_blas reads nothing */
  __int128 hi = v->offset + (__int128)(srows - 1) * ld + (scols - 1);
  for (int d = 0; d < mm->nbatch_dims; d++) {
    if (bstride[d] < 0 || bstride[d] > MAX_DIM_SIZE) return false;
    hi += (__int128)(mm->batch_shape[d] - 1) * bstride[d];
  }
  return in_slot(e, v->slot, v->offset, hi, es);
}

static void r_blas(reader *rd, cpu_kernel *k) {
  lt_rbuf *r = &rd->r;
  cpu_matmul *mm = &k->mm;
  uint64_t kind = lt__rb_int(r, 1), ta = lt__rb_int(r, 1), tb = lt__rb_int(r, 1);
  uint64_t epilogue = lt__rb_int(r, 1);
  mm->n = (int64_t)lt__rb_int(r, 8);
  mm->m = (int64_t)lt__rb_int(r, 8);
  mm->k = (int64_t)lt__rb_int(r, 8);
  mm->lda = (int64_t)lt__rb_int(r, 8);
  mm->ldb = (int64_t)lt__rb_int(r, 8);
  uint64_t nb = lt__rb_int(r, 1);
  if (fail_if(rd, r->bad, "truncated matmul")) return;
  /* kind: 0 the operands' dtype, 1 f64, 2 f32 sums of bf16 operands */
  if (fail_if(rd, kind > 2 || ta > 1 || tb > 1 || epilogue > 1 || nb > LT_MAX_DIMS - 2,
              "bad matmul"))
    return;
  k->epilogue = epilogue; /* checked against the next kernel where it runs */
  mm->f64 = kind == 1;
  mm->acc_f32 = kind == 2;
  mm->ta = ta;
  mm->tb = tb;
  mm->nbatch_dims = (int)nb;
  for (uint64_t d = 0; d < nb; d++) {
    mm->batch_shape[d] = (int64_t)lt__rb_int(r, 8);
    mm->a_bstride[d] = (int64_t)lt__rb_int(r, 8);
    mm->b_bstride[d] = (int64_t)lt__rb_int(r, 8);
  }
  if (fail_if(rd, r->bad, "truncated matmul")) return;
  const int64_t kMaxBlas = INT32_MAX; /* blasint */
  if (fail_if(rd,
              mm->n < 0 || mm->m < 0 || mm->k < 0 || mm->n > kMaxBlas || mm->m > kMaxBlas ||
                  mm->k > kMaxBlas || mm->lda > kMaxBlas || mm->ldb > kMaxBlas,
              "bad matmul sizes"))
    return;
  int64_t bshape[LT_MAX_DIMS + 3];
  memcpy(bshape, mm->batch_shape, nb * sizeof *bshape);
  bshape[nb] = mm->n;
  bshape[nb + 1] = mm->m;
  int64_t out_numel = checked_numel(bshape, (int)nb + 2);
  if (fail_if(rd, out_numel < 0, "bad matmul sizes")) return;
  if (!r_view(rd, &mm->a) || !r_view(rd, &mm->b)) return;
  size_t es = lt_dtype_size((lt_dtype)mm->a.dtype);
  if (fail_if(
          rd,
          !blas_operand_ok(rd->e, mm, &mm->a, mm->a_bstride, mm->ta, mm->n, mm->k, mm->lda, es) ||
              !blas_operand_ok(rd->e, mm, &mm->b, mm->b_bstride, mm->tb, mm->k, mm->m, mm->ldb, es),
          "matmul operand outside its slot"))
    return;
  size_t ces = mm->acc_f32 ? sizeof(float) : es; /* the result's element */
  fail_if(rd, out_numel && !in_slot(rd->e, k->out_slot, 0, (__int128)out_numel - 1, ces),
          "matmul result outside its slot");
}

static bool contiguous_view(const cpu_view *v) { return lt__cpu_view_contiguous(v); }

static void r_ref(reader *rd, cpu_kernel *k) {
  lt_rbuf *r = &rd->r;
  lt_instr *in = &k->ins;
  const char *problem = lt__instr_read_head(r, in);
  if (fail_if(rd, problem != NULL, problem)) return;
  int op = in->op;
  in->param = -1;
  uint32_t nops = (uint32_t)lt__rb_int(r, 4), nattrs = (uint32_t)lt__rb_int(r, 4);
  if (fail_if(rd, r->bad, "truncated ref kernel")) return;
  if (fail_if(rd, checked_numel(in->shape, in->ndim) < 0, "bad ref kernel shape")) return;
  /* a view takes at least 14 bytes, an attribute 8 */
  if (fail_if(rd, op == LT_OP_DATA || !lt__op_arity_ok(op, nops) || nops > lt__rb_left(r) / 14,
              "bad operand count"))
    return;
  if (fail_if(rd, nattrs > UINT16_MAX || nattrs > lt__rb_left(r) / 8, "bad attribute count"))
    return;
  if (nattrs) {
    in->attrs = lt__malloc((size_t)nattrs * sizeof(int64_t));
    if (fail_if(rd, !in->attrs, "out of memory")) return;
    in->nattrs = (int)nattrs;
    for (uint32_t a = 0; a < nattrs; a++) in->attrs[a] = (int64_t)lt__rb_int(r, 8);
  }
  if (nops) {
    k->in = lt__calloc((size_t)nops * sizeof *k->in);
    if (fail_if(rd, !k->in, "out of memory")) return;
    in->noperands = (int)nops;
    for (uint32_t j = 0; j < nops; j++) {
      if (!r_view(rd, &k->in[j])) return;
      if (fail_if(rd, !contiguous_view(&k->in[j]), "ref operand not contiguous")) return;
    }
  }
  if (!r_view(rd, &k->out)) return;
  fail_if(rd,
          k->out.slot != k->out_slot || !contiguous_view(&k->out) || k->out.dtype != in->dtype ||
              k->out.ndim != in->ndim ||
              memcmp(k->out.shape, in->shape, (size_t)in->ndim * sizeof(int64_t)) != 0,
          "ref result disagrees with its kernel");
}

static void r_kernel(reader *rd, cpu_kernel *k) {
  lt_rbuf *r = &rd->r;
  lt_executable *e = rd->e;
  uint64_t kind = lt__rb_int(r, 1);
  uint32_t out = (uint32_t)lt__rb_int(r, 4);
  if (fail_if(rd, r->bad, "truncated kernel")) return;
  if (fail_if(rd, kind > CK_MEMCPY, "unknown kernel kind")) return;
  k->kind = (cpu_kind)kind;
  if (fail_if(rd, !writable(e, out), "kernel writes a slot it may not")) return;
  k->out_slot = (int)out;
  switch (k->kind) {
  case CK_LOOP: {
    uint32_t fn = (uint32_t)lt__rb_int(r, 4);
    k->extent = (int64_t)lt__rb_int(r, 8);
    k->unit_cost = (int64_t)lt__rb_int(r, 8);
    if (fail_if(rd, r->bad, "truncated kernel")) return;
    size_t room = e->slots[out].nbytes ? e->slots[out].nbytes : 1; /* elements <= bytes */
    fail_if(rd,
            fn >= (uint32_t)e->nfns || k->extent < 0 || (uint64_t)k->extent > room ||
                k->unit_cost < 0 || k->unit_cost > MAX_DIM_SIZE,
            "bad loop kernel");
    k->fn_index = (int)fn;
    break;
  }
  case CK_BLAS:
    r_blas(rd, k);
    break;
  case CK_REF:
    r_ref(rd, k);
    break;
  case CK_MEMCPY:
    if (!r_view(rd, &k->src)) return;
    k->nbytes = (size_t)lt__rb_int(r, 8);
    if (fail_if(rd, r->bad, "truncated kernel")) return;
    fail_if(rd,
            !contiguous_view(&k->src) ||
                (uint64_t)k->nbytes != (uint64_t)checked_numel(k->src.shape, k->src.ndim) *
                                           lt_dtype_size((lt_dtype)k->src.dtype) ||
                k->nbytes > e->slots[out].nbytes,
            "bad copy kernel");
    break;
  }
}

/* The functions and their slots; NULL, or what is wrong. */
static const char *r_functions(reader *rd, uint32_t nargs, uint32_t ncodes) {
  lt_rbuf *r = &rd->r;
  lt_executable *e = rd->e;
  if (!e->nfns) return nargs || ncodes ? "functions and codes disagree" : NULL;
  if (lt__cpu_executable_fn_block(e, e->nfns, (int)nargs) != LT_OK) return "out of memory";
  uint64_t total = 0;
  bool *used = lt__calloc(ncodes);
  if (!used) return "out of memory";
  const char *bad = NULL;
  for (int f = 0; f < e->nfns && !bad; f++) {
    uint32_t code = (uint32_t)lt__rb_int(r, 4), n = (uint32_t)lt__rb_int(r, 4);
    if (r->bad)
      bad = "truncated functions";
    else if (code >= ncodes)
      bad = "function of a code out of range";
    else if (n > nargs - total)
      bad = "function slots beyond the list";
    else {
      used[code] = true;
      e->fns[f] = (cpu_fn){(int)code, (int)total, (int)n};
      total += n;
    }
  }
  for (uint32_t c = 0; c < ncodes && !bad; c++)
    if (!used[c]) bad = "a code no function uses";
  lt__free(used, ncodes);
  if (bad) return bad;
  if (total != nargs) return "function slots and the list disagree";
  for (uint32_t a = 0; a < nargs; a++) {
    uint32_t s = (uint32_t)lt__rb_int(r, 4);
    if (r->bad) return "truncated function slots";
    if (s >= (uint32_t)e->nslots) return "function slot out of range";
    e->args[a] = (int)s;
  }
  return NULL;
}

/* The codes: shared when loaded already, else loaded from their object code
 * (which must end the bytes). LT_OK, or an error set. */
static int r_codes(reader *rd, uint32_t ncodes) {
  lt_rbuf *r = &rd->r;
  lt_executable *e = rd->e;
  if (!ncodes) return lt__rb_left(r) ? lt__err(LT_EINVAL, "bytes after the plan") : LT_OK;
  cpu_kobj *objs = lt__malloc((size_t)ncodes * sizeof *objs);
  int rc = objs ? LT_OK : LT_ENOMEM, nshared = 0;
  for (uint32_t c = 0; c < ncodes && rc == LT_OK; c++) {
    objs[c].key.lo = lt__rb_int(r, 8);
    objs[c].key.hi = lt__rb_int(r, 8);
    uint64_t len = lt__rb_int(r, 8);
    if (r->bad || len == 0 || len > lt__rb_left(r)) {
      rc = lt__err(LT_EINVAL, "truncated or empty object code");
      break;
    }
    objs[c].obj = r->p + r->pos;
    objs[c].len = (size_t)len;
    r->pos += (size_t)len;
    for (uint32_t d = 0; d < c && rc == LT_OK; d++)
      if (objs[d].key.lo == objs[c].key.lo && objs[d].key.hi == objs[c].key.hi)
        rc = lt__err(LT_EINVAL, "a code twice");
  }
  if (rc == LT_OK && lt__rb_left(r)) rc = lt__err(LT_EINVAL, "bytes after the object code");
  if (rc == LT_OK) rc = lt__cpu_kcode_get(objs, (int)ncodes, e->codes, &nshared);
  if (rc == LT_OK) {
    e->ncodes = (int)ncodes;
    lt__count(LT_CTR_KERNEL_CACHE_HIT, nshared);
  }
  lt__free(objs, (size_t)ncodes * sizeof *objs);
  if (rc == LT_ENOMEM) return lt__err(LT_ENOMEM, "cpu: out of memory deserializing an executable");
  return rc;
}

static int bad_bytes(lt_executable *e, const char *what) {
  lt__cpu_executable_free(e);
  if (what && strcmp(what, "out of memory") == 0)
    return lt__err(LT_ENOMEM, "cpu: out of memory deserializing an executable");
  return lt__err(LT_EINVAL, "cpu: bad serialized executable: %s", what ? what : "?");
}

int lt__cpu_deserialize(const void *bytes, size_t nbytes, lt_executable **out) {
  if (!bytes || !out) return lt__err(LT_EINVAL, "cpu: deserialize: NULL argument");
  reader rd = {{bytes, nbytes, 0, false}, NULL, NULL};
  lt_rbuf *r = &rd.r;
  if (lt__rb_int(r, 4) != kCpuMagic) return bad_bytes(NULL, "not a cpu executable");
  if (lt__rb_int(r, 4) != kCpuFormat) return bad_bytes(NULL, "unknown format version");
  if (nbytes < 16) return bad_bytes(NULL, "truncated");
  lt_rbuf tail = {(const uint8_t *)bytes + nbytes - 8, 8, 0, false};
  if (lt__rb_int(&tail, 8) != XXH3_64bits(bytes, nbytes - 8))
    return bad_bytes(NULL, "bad checksum");
  r->len = nbytes - 8; /* the fields end before the checksum */
  uint32_t nparams = (uint32_t)lt__rb_int(r, 4), nroots = (uint32_t)lt__rb_int(r, 4),
           nslots = (uint32_t)lt__rb_int(r, 4), nkernels = (uint32_t)lt__rb_int(r, 4),
           nfns = (uint32_t)lt__rb_int(r, 4), ncodes = (uint32_t)lt__rb_int(r, 4),
           nargs = (uint32_t)lt__rb_int(r, 4);
  uint64_t arena = lt__rb_int(r, 8);
  if (r->bad) return bad_bytes(NULL, "truncated header");
  /* A slot takes 24 bytes, a root 8, a kernel at least 5, a function 8, an
   * argument 4, a code at least 25: no count may promise more than the bytes
   * left (this bounds every allocation). */
  size_t left = lt__rb_left(r);
  if (nslots > left / 24 || nroots > left / 8 || nkernels > left / 5 || nfns > nkernels ||
      nfns > left / 8 || nargs > left / 4 || ncodes > nfns || ncodes > left / 25 ||
      nparams > nslots || nroots > nslots - nparams || arena > MAX_BYTES)
    return bad_bytes(NULL, "counts larger than the bytes");
  lt_executable *e = lt__calloc(sizeof *e);
  if (!e) return bad_bytes(NULL, "out of memory");
  rd.e = e;
  static _Atomic uint64_t next_uid = (uint64_t)1 << 62; /* apart from compiled ones' */
  e->uid = atomic_fetch_add(&next_uid, 1);
  e->nparams = (int)nparams;
  e->nroots = (int)nroots;
  e->nfns = (int)nfns;
  e->arena_bytes = (size_t)arena;
  /* exact sizes: lt__cpu_executable_free frees slots_cap and kernels_cap elements */
  e->slots = lt__calloc((size_t)nslots * sizeof *e->slots);
  e->slots_cap = e->slots ? (int)nslots : 0;
  e->kernels = lt__calloc((size_t)nkernels * sizeof *e->kernels);
  e->kernels_cap = e->kernels ? (int)nkernels : 0;
  e->root_slot = lt__malloc((size_t)nroots * sizeof(int) + 1);
  e->alias = lt__malloc((size_t)nroots * sizeof(int) + 1);
  if (!e->slots || !e->root_slot || !e->alias || !e->kernels) {
    e->nroots = 0; /* root_slot and alias: freed with their own size below */
    lt__free(e->root_slot, (size_t)nroots * sizeof(int) + 1);
    lt__free(e->alias, (size_t)nroots * sizeof(int) + 1);
    e->root_slot = e->alias = NULL;
    return bad_bytes(e, "out of memory");
  }
  e->nslots = (int)nslots;
  for (uint32_t s = 0; s < nslots; s++) {
    cpu_slot *sl = &e->slots[s];
    uint64_t nb = lt__rb_int(r, 8), off = lt__rb_int(r, 8);
    sl->first = (int32_t)(uint32_t)lt__rb_int(r, 4);
    sl->last = (int32_t)(uint32_t)lt__rb_int(r, 4);
    if (r->bad) return bad_bytes(e, "truncated slots");
    if (nb > MAX_BYTES || off > MAX_BYTES) return bad_bytes(e, "bad slot size");
    sl->nbytes = (size_t)nb;
    sl->offset = (size_t)off;
    if (s >= nparams + nroots && off + align64(nb) > arena)
      return bad_bytes(e, "temporary outside the arena");
  }
  for (uint32_t q = 0; q < nroots; q++) {
    uint32_t slot = (uint32_t)lt__rb_int(r, 4);
    int32_t a = (int32_t)(uint32_t)lt__rb_int(r, 4);
    if (r->bad) return bad_bytes(e, "truncated roots");
    if (a < -1 || a >= (int32_t)nparams) return bad_bytes(e, "alias out of range");
    e->alias[q] = a;
    e->root_slot[q] = (int)slot;
    if (slot != (a >= 0 ? (uint32_t)a : nparams + q)) return bad_bytes(e, "bad root slot");
    if (a >= 0 && e->slots[a].nbytes != e->slots[nparams + q].nbytes)
      return bad_bytes(e, "alias of a different size");
    for (uint32_t p = 0; p < q; p++)
      if (a >= 0 && e->alias[p] == a) return bad_bytes(e, "parameter aliased twice");
  }
  for (uint32_t i = 0; i < nkernels; i++) {
    r_kernel(&rd, &e->kernels[i]);
    e->nkernels = (int)i + 1; /* frees what this kernel holds */
    if (rd.bad) return bad_bytes(e, rd.bad);
  }
  const char *bad = r_functions(&rd, nargs, ncodes);
  if (bad) return bad_bytes(e, bad);
  int rc = r_codes(&rd, ncodes);
  if (rc != LT_OK) { /* bytes that do not link are bad bytes too */
    lt__cpu_executable_free(e);
    if (rc == LT_ENOMEM) return rc;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", lt_last_error());
    return lt__err(LT_EINVAL, "cpu: bad serialized executable: %s", msg);
  }
  lt__cpu_executable_link(e);
  lt__cpu_pool_threads();
  *out = e;
  return LT_OK;
}
