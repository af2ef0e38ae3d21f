/* lazytensor-aot: a saved program (lt_program_save) as a C object file with
 * no dependency beyond libc and libm:
 *
 *   lazytensor-aot FILE -o NAME [--cc CC]   ->  NAME.c, NAME.h, NAME.o
 *
 * NAME.h declares int NAME_run(const float *input, float *output) and the
 * element counts of both. The program must have one f32 input and one f32
 * output. Each node of the graph becomes a loop nest in NAME.c (matmul a
 * plain i-k-j triple loop the C compiler vectorizes), each captured constant
 * a static array of exact hex floats, each intermediate a static buffer: so
 * NAME_run is not reentrant. Ops outside the supported set (listed by
 * --help) are refused by name. docs/DEPLOY.md has the plan this begins. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lazytensor.h"
/* The IR and a program's graph: internal headers, on the allowlist of
 * scripts/check_layers.sh (the public API has no graph to walk). */
#include "../../src/core/lt_node.h"
#include "../../src/exec/program_graph.h"

typedef struct aot {
  FILE *f;
  const lt_program *p;
  lt_node **nodes; /* post order */
  int n, cap;
} aot;

static int index_of(const aot *a, const lt_node *n) {
  for (int i = 0; i < a->n; i++)
    if (a->nodes[i] == n) return i;
  return -1;
}

/* Post order (graphs of deployable models are small: recursion is fine). */
static int visit(aot *a, lt_node *n) {
  if (index_of(a, n) >= 0) return 0;
  for (int k = 0; k < n->noperands; k++)
    if (visit(a, n->operands[k].node)) return 1;
  if (a->n == a->cap) {
    a->cap = a->cap ? 2 * a->cap : 64;
    a->nodes = realloc(a->nodes, (size_t)a->cap * sizeof *a->nodes);
    if (!a->nodes) return 1;
  }
  a->nodes[a->n++] = n;
  return 0;
}

static bool is_input(const aot *a, const lt_node *n) { return lt__program_is_input(a->p, 0, n); }

/* The C name of node i's value. */
static void vname(const aot *a, int i, char *buf, size_t nbuf) {
  const lt_node *n = a->nodes[i];
  if (is_input(a, n))
    snprintf(buf, nbuf, "input");
  else
    snprintf(buf, nbuf, "%s%d", n->op == LT_OP_DATA ? "c" : "t", i);
}

static const char *unary_expr(int op) {
  switch (op) {
  case LT_OP_NEG:
    return "(-(x))";
  case LT_OP_RELU:
    return "((x) > 0.0f ? (x) : 0.0f)";
  case LT_OP_EXP:
    return "expf(x)";
  case LT_OP_TANH:
    return "tanhf(x)";
  case LT_OP_SIGMOID:
    return "(1.0f / (1.0f + expf(-(x))))";
  default:
    return NULL;
  }
}

static const char *binary_op(int op) {
  switch (op) {
  case LT_OP_ADD:
    return "+";
  case LT_OP_SUB:
    return "-";
  case LT_OP_MUL:
    return "*";
  case LT_OP_DIV:
    return "/";
  case LT_OP_MAXIMUM:
    return "max";
  default:
    return NULL;
  }
}

/* The offset expression of operand o read at the output index (i0, i1, ...)
 * of out, numpy broadcasting (o right-aligned, size-1 dimensions repeat). */
static void offset_expr(const lt_node *out, const lt_node *o, char *buf, size_t nbuf) {
  size_t len = (size_t)snprintf(buf, nbuf, "0");
  int64_t stride = 1;
  for (int d = o->ndim - 1; d >= 0; d--) {
    int od = out->ndim - o->ndim + d;
    if (o->shape[d] != 1 && len < nbuf)
      len += (size_t)snprintf(buf + len, nbuf - len, " + (long)i%d * %lldL", od, (long long)stride);
    stride *= o->shape[d];
  }
}

static void loops_open(FILE *f, const lt_node *n) {
  for (int d = 0; d < n->ndim; d++)
    fprintf(f, "  for (long i%d = 0; i%d < %lldL; i%d++)\n", d, d, (long long)n->shape[d], d);
}

static int emit_node(aot *a, int i) {
  FILE *f = a->f;
  lt_node *n = a->nodes[i];
  char me[32], x[32], y[32], ox[512], oy[512];
  vname(a, i, me, sizeof me);
  if (n->dtype != LT_F32) {
    fprintf(stderr, "lazytensor-aot: node %d (%s) is %s; only f32 graphs are supported\n", i,
            lt__op_name((lt_op)n->op), lt_dtype_name((lt_dtype)n->dtype));
    return 1;
  }
  if (n->op == LT_OP_DATA) return 0; /* declared with the constants */
  if (n->op == LT_OP_CONST) {
    fprintf(f, "  for (long k = 0; k < %lldL; k++) %s[k] = %a;\n",
            (long long)lt__numel(n->shape, n->ndim), me, n->fattr);
    return 0;
  }
  int ia = n->noperands > 0 ? index_of(a, n->operands[0].node) : -1;
  int ib = n->noperands > 1 ? index_of(a, n->operands[1].node) : -1;
  if (ia >= 0) vname(a, ia, x, sizeof x);
  if (ib >= 0) vname(a, ib, y, sizeof y);
  const char *u = unary_expr(n->op), *b = binary_op(n->op);
  if ((u || b || n->op == LT_OP_MATMUL) && n->nattrs) { /* a variant this emitter does not know */
    fprintf(stderr, "lazytensor-aot: node %d: op '%s' with attributes is not supported yet\n", i,
            lt__op_name((lt_op)n->op));
    return 1;
  }
  if (u || n->op == LT_OP_EXPAND || n->op == LT_OP_RESHAPE) {
    const lt_node *o = n->operands[0].node;
    if (n->op == LT_OP_RESHAPE) { /* row-major: the same elements in order */
      fprintf(f, "  memcpy(%s, %s, sizeof(float) * %lldL);\n", me, x,
              (long long)lt__numel(n->shape, n->ndim));
      return 0;
    }
    offset_expr(n, o, ox, sizeof ox);
    fprintf(f, "  {\n  long o = 0;\n");
    loops_open(f, n);
    if (u) {
      fprintf(f, "  { float x = %s[%s]; %s[o++] = ", x, ox, me);
      fprintf(f, "%s; }\n  }\n", u);
    } else {
      fprintf(f, "  %s[o++] = %s[%s];\n  }\n", me, x, ox);
    }
    return 0;
  }
  if (b) {
    offset_expr(n, n->operands[0].node, ox, sizeof ox);
    offset_expr(n, n->operands[1].node, oy, sizeof oy);
    fprintf(f, "  {\n  long o = 0;\n");
    loops_open(f, n);
    if (strcmp(b, "max") == 0)
      fprintf(f, "  { float x = %s[%s], y = %s[%s]; %s[o++] = x != x || x > y ? x : y; }\n", x, ox,
              y, oy, me);
    else
      fprintf(f, "  %s[o++] = %s[%s] %s %s[%s];\n", me, x, ox, b, y, oy);
    fprintf(f, "  }\n");
    return 0;
  }
  if (n->op == LT_OP_MATMUL) {
    const lt_node *l = n->operands[0].node, *r = n->operands[1].node;
    if (l->ndim != 2 || r->ndim != 2 || n->ndim != 2) {
      fprintf(stderr, "lazytensor-aot: node %d: only 2-d matmul is supported\n", i);
      return 1;
    }
    long long M = l->shape[0], K = l->shape[1], N = r->shape[1];
    fprintf(f,
            "  for (long i = 0; i < %lldL; i++) {\n"
            "    float *o = %s + i * %lldL;\n"
            "    for (long j = 0; j < %lldL; j++) o[j] = 0.0f;\n"
            "    for (long k = 0; k < %lldL; k++) {\n"
            "      float s = %s[i * %lldL + k];\n"
            "      const float *w = %s + k * %lldL;\n"
            "      for (long j = 0; j < %lldL; j++) o[j] += s * w[j];\n"
            "    }\n"
            "  }\n",
            M, me, N, N, K, x, K, y, N, N);
    return 0;
  }
  fprintf(stderr, "lazytensor-aot: node %d: op '%s' is not supported yet\n", i,
          lt__op_name((lt_op)n->op));
  return 1;
}

static int emit_constant(aot *a, int i) {
  lt_node *n = a->nodes[i];
  size_t count = (size_t)lt__numel(n->shape, n->ndim);
  float *v = malloc((count + 1) * sizeof *v);
  if (!v || lt__program_read_leaf(n, v, count * sizeof *v) != LT_OK) {
    free(v);
    fprintf(stderr, "lazytensor-aot: cannot read constant %d\n", i);
    return 1;
  }
  fprintf(a->f, "static const float c%d[%zu] = {", i, count ? count : 1);
  for (size_t k = 0; k < count; k++)
    fprintf(a->f, "%s%a", k == 0 ? "\n  " : k % 6 ? ", " : ",\n  ", v[k]);
  fprintf(a->f, "%s};\n", count ? "" : "0");
  free(v);
  return 0;
}

static int generate(const lt_program *p, const char *name, const char *cpath, const char *hpath) {
  aot a = {0};
  a.p = p;
  lt_node *root = lt__program_root(p, 0);
  if (visit(&a, root)) {
    fprintf(stderr, "lazytensor-aot: out of memory\n");
    return 1;
  }
  int64_t in_shape[LT_MAX_DIMS];
  int in_ndim = 0;
  lt_dtype in_dt;
  lt_program_signature(p, false, 0, &in_dt, in_shape, &in_ndim); /* main checked input 0 */
  long long in_n = lt__numel(in_shape, in_ndim);
  long long out_n = lt__numel(root->shape, root->ndim);
  FILE *h = fopen(hpath, "w");
  if (!h) {
    fprintf(stderr, "lazytensor-aot: -o: cannot write %s: %s\n", hpath, strerror(errno));
    free(a.nodes);
    return 1;
  }
  fprintf(h,
          "/* Generated by lazytensor-aot: the program's forward, libc and libm only. */\n"
          "#ifndef %s_AOT_H\n#define %s_AOT_H\n\n"
          "#define %s_INPUT_NUMEL %lldL\n#define %s_OUTPUT_NUMEL %lldL\n\n"
          "/* output = program(input); 0 on success. Not reentrant (static buffers). */\n"
          "int %s_run(const float *input, float *output);\n\n#endif\n",
          name, name, name, in_n, name, out_n, name);
  fclose(h);
  a.f = fopen(cpath, "w");
  if (!a.f) {
    fprintf(stderr, "lazytensor-aot: -o: cannot write %s: %s\n", cpath, strerror(errno));
    free(a.nodes);
    return 1;
  }
  fprintf(a.f,
          "/* Generated by lazytensor-aot. */\n#include <math.h>\n#include <string.h>\n\n"
          "#include \"%s.h\"\n\n",
          name);
  int rc = 0;
  for (int i = 0; i < a.n && !rc; i++) {
    lt_node *n = a.nodes[i];
    if (n->op == LT_OP_DATA && !is_input(&a, n))
      rc = emit_constant(&a, i);
    else if (n->op != LT_OP_DATA)
      fprintf(a.f, "static float t%d[%lld];\n", i, (long long)lt__numel(n->shape, n->ndim) + 1);
  }
  fprintf(a.f, "\nint %s_run(const float *input, float *output) {\n  (void)input;\n", name);
  for (int i = 0; i < a.n && !rc; i++) rc = emit_node(&a, i);
  char r[32];
  vname(&a, a.n - 1, r, sizeof r);
  fprintf(a.f, "  memcpy(output, %s, sizeof(float) * %lldL);\n  return 0;\n}\n", r, out_n);
  if (fclose(a.f) != 0 && !rc) {
    fprintf(stderr, "lazytensor-aot: -o: writing %s failed: %s\n", cpath, strerror(errno));
    rc = 1;
  }
  free(a.nodes);
  return rc;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: lazytensor-aot PROGRAM_FILE -o NAME [--cc CC]\n"
          "  writes NAME.c, NAME.h and NAME.o (int NAME_run(const float *, float *)).\n"
          "  Supported: one f32 input and output; ops data, const, neg, relu, exp, tanh,\n"
          "  sigmoid, add, sub, mul, div, maximum (broadcasting), expand, reshape,\n"
          "  2-d matmul.\n");
}

int main(int argc, char **argv) {
  const char *file = NULL, *name = NULL, *cc = "cc";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { /* as GNU tools: stdout, 0 */
      usage(stdout);
      return 0;
    }
    if (!strcmp(argv[i], "-o") && i + 1 < argc)
      name = argv[++i];
    else if (!strcmp(argv[i], "--cc") && i + 1 < argc)
      cc = argv[++i];
    else if (argv[i][0] != '-' && !file)
      file = argv[i];
    else {
      fprintf(stderr, "lazytensor-aot: unexpected argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  if (!file || !name) {
    fprintf(stderr, "lazytensor-aot: need PROGRAM_FILE and -o NAME (see --help)\n");
    return 2;
  }
  const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
  for (const char *c = base; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_' ||
          (c > base && *c >= '0' && *c <= '9'))) {
      fprintf(stderr, "lazytensor-aot: NAME's last part must be a C identifier\n");
      return 2;
    }
  lt_program *p = lt_program_load(file);
  if (!p) {
    fprintf(stderr, "lazytensor-aot: %s\n", lt_last_error());
    return 1;
  }
  int64_t shape[LT_MAX_DIMS];
  int ndim;
  lt_dtype in_dt = LT_F32, out_dt = LT_F32;
  if (lt_program_count(p, false) != 1 || lt_program_count(p, true) != 1 ||
      lt_program_signature(p, false, 0, &in_dt, shape, &ndim) != LT_OK ||
      lt_program_signature(p, true, 0, &out_dt, shape, &ndim) != LT_OK || in_dt != LT_F32 ||
      out_dt != LT_F32) {
    fprintf(stderr, "lazytensor-aot: the program must have one f32 input and one f32 output\n");
    lt_program_free(p);
    return 1;
  }
  size_t len = strlen(name) + 4;
  char *cpath = malloc(len), *hpath = malloc(len), *opath = malloc(len);
  snprintf(cpath, len, "%s.c", name);
  snprintf(hpath, len, "%s.h", name);
  snprintf(opath, len, "%s.o", name);
  int rc = generate(p, base, cpath, hpath);
  lt_program_free(p);
  if (rc == 0) {
    size_t n = strlen(cc) + 2 * len + 64;
    char *cmd = malloc(n);
    snprintf(cmd, n, "%s -std=c99 -O2 -fPIC -c '%s' -o '%s'", cc, cpath, opath);
    rc = system(cmd) != 0;
    if (rc) fprintf(stderr, "lazytensor-aot: compiling failed: %s\n", cmd);
    free(cmd);
  }
  if (rc == 0) printf("lazytensor-aot: wrote %s, %s, %s\n", hpath, cpath, opath);
  free(cpath);
  free(hpath);
  free(opath);
  return rc;
}
