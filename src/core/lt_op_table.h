/* The op table: the one place that says what each IR op is. Everything else
 * reads it: the op enum (lt_node.h), names, families, arity checks, result
 * dtype rules, autograd's rule dispatch, the ref backend's kernel dispatch
 * and the cpu backend's choice of path. A hash of the table's text is part of
 * every compile environment key, so a cache entry written for another op set
 * is never loaded (serialized executables hold raw op ids).
 *
 * X(ENUM, "name", FAMILY, ARITY, RESULT, GRAD, REF, CPU)
 *   FAMILY  the op group (LT_FAM_*): which ops behave alike
 *   ARITY   operands the op takes; -1: one or more
 *   RESULT  result dtype rule (LT_RES_*): SAME as the value operand, BOOL,
 *           INDEX (i64), NODE (chosen by the builder: casts, leaves, draws),
 *           or ACC (SAME, or f32 sums of bf16 operands left unrounded)
 *   GRAD    autograd's rule, ag_rule_<GRAD> (src/autograd); `none` declares
 *           the op not differentiable (its operands get no gradient)
 *   REF     the ref kernel, ref_<REF> (src/backend/ref): the oracle, and the
 *           fallback of every other backend
 *   CPU     how the cpu backend runs it (LT_CPU_*): a fused LOOP, a fused
 *           REDUCE, GEMM, a strided VIEW, a fused RNG draw, a LEAF, a
 *           NATIVE hand-written kernel (backend/cpu/cpu_native.c; dtypes it
 *           lacks take the fallback), or the executor's FALLBACK (the ref
 *           kernel, one node at a time)
 *
 * Append or insert rows freely: ids, names and dispatch follow, and caches
 * written before the change are not read after it. docs/ADDING_AN_OP.md walks
 * through adding one. */
#ifndef LT_OP_TABLE_H
#define LT_OP_TABLE_H

/* clang-format off */
#define LT_OP_TABLE(X) \
  /* leaves */ \
  X(DATA,          "data",          LEAF,    0, NODE,  none,    leaf,        LEAF)     \
  X(CONST,         "const",         LEAF,    0, NODE,  none,    leaf,        LOOP)     \
  /* unary elementwise (the operand already has the compute dtype) */ \
  X(NEG,           "neg",           UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(ABS,           "abs",           UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(SIGN,          "sign",          UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(RELU,          "relu",          UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(FLOOR,         "floor",         UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(CEIL,          "ceil",          UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(ROUND,         "round",         UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(EXP,           "exp",           UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(LOG,           "log",           UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(LOG1P,         "log1p",         UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(SQRT,          "sqrt",          UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(RSQRT,         "rsqrt",         UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(SIN,           "sin",           UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(COS,           "cos",           UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(TANH,          "tanh",          UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(SIGMOID,       "sigmoid",       UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(GELU,          "gelu",          UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(GELU_TANH,     "gelu_tanh",     UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(ERF,           "erf",           UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(SOFTSIGN,      "softsign",      UNARY,   1, SAME,  unary,   elementwise, LOOP)     \
  X(NOT,           "not",           UNARY,   1, BOOL,  none,    elementwise, LOOP)     \
  X(CAST,          "cast",          UNARY,   1, NODE,  cast,    elementwise, LOOP)     \
  /* binary elementwise: numpy broadcasting inside the op; both operands carry \
   * the same (promoted) dtype */ \
  X(ADD,           "add",           BINARY,  2, SAME,  binary,  elementwise, LOOP)     \
  X(SUB,           "sub",           BINARY,  2, SAME,  binary,  elementwise, LOOP)     \
  X(MUL,           "mul",           BINARY,  2, SAME,  binary,  elementwise, LOOP)     \
  X(DIV,           "div",           BINARY,  2, SAME,  binary,  elementwise, LOOP)     \
  X(POW,           "pow",           BINARY,  2, SAME,  binary,  elementwise, LOOP)     \
  /* C's fmod (exact; the sign of a); floats only from the builders */      \
  X(FMOD,          "fmod",          BINARY,  2, SAME,  binary,  elementwise, LOOP)     \
  X(MAXIMUM,       "maximum",       BINARY,  2, SAME,  binary,  elementwise, LOOP)     \
  X(MINIMUM,       "minimum",       BINARY,  2, SAME,  binary,  elementwise, LOOP)     \
  X(EQ,            "eq",            COMPARE, 2, BOOL,  binary,  elementwise, LOOP)     \
  X(NE,            "ne",            COMPARE, 2, BOOL,  binary,  elementwise, LOOP)     \
  X(LT,            "lt",            COMPARE, 2, BOOL,  binary,  elementwise, LOOP)     \
  X(LE,            "le",            COMPARE, 2, BOOL,  binary,  elementwise, LOOP)     \
  X(GT,            "gt",            COMPARE, 2, BOOL,  binary,  elementwise, LOOP)     \
  X(GE,            "ge",            COMPARE, 2, BOOL,  binary,  elementwise, LOOP)     \
  X(AND,           "and",           BINARY,  2, SAME,  binary,  elementwise, LOOP)     \
  X(OR,            "or",            BINARY,  2, SAME,  binary,  elementwise, LOOP)     \
  X(WHERE,         "where",         TERNARY, 3, SAME,  where,   elementwise, LOOP)     \
  /* reductions: attrs[0] = bit mask of reduced axes, attrs[1] = keepdim; \
   * arg reductions: attrs[0] = axis, attrs[1] = keepdim; softmax: attrs[0] = axis */ \
  X(SUM,           "sum",           REDUCE,  1, SAME,  reduce,  reduce,      REDUCE)   \
  X(MEAN,          "mean",          REDUCE,  1, SAME,  reduce,  reduce,      REDUCE)   \
  X(MAX,           "max",           REDUCE,  1, SAME,  reduce,  reduce,      REDUCE)   \
  X(MIN,           "min",           REDUCE,  1, SAME,  reduce,  reduce,      REDUCE)   \
  X(PROD,          "prod",          REDUCE,  1, SAME,  reduce,  reduce,      REDUCE)   \
  X(LOGSUMEXP,     "logsumexp",     REDUCE,  1, SAME,  reduce,  reduce,      REDUCE)   \
  X(ARGMAX,        "argmax",        REDUCE,  1, INDEX, none,    reduce,      NATIVE)   \
  X(ARGMIN,        "argmin",        REDUCE,  1, INDEX, none,    reduce,      NATIVE)   \
  X(SOFTMAX,       "softmax",       REDUCE,  1, SAME,  softmax, reduce,      REDUCE)   \
  X(LOG_SOFTMAX,   "log_softmax",   REDUCE,  1, SAME,  softmax, reduce,      REDUCE)   \
  /* along one axis, result of the operand's shape (family REDUCE: one-axis \
   * ops as softmax); attrs[0] = axis. cumsum: attrs[1] = reverse (sums from \
   * each element to the end: the op's own gradient); argsort: \
   * attrs[1] = descending, stable, NaN largest (torch.sort) */ \
  X(CUMSUM,        "cumsum",        REDUCE,  1, SAME,  scan,    scan,        NATIVE)   \
  X(ARGSORT,       "argsort",       REDUCE,  1, INDEX, none,    sort,        NATIVE)   \
  /* contraction: [..., n, k] x [..., k, m] (rank >= 2), batch dims broadcast */ \
  X(MATMUL,        "matmul",        MATMUL,  2, ACC,   matmul,  matmul,      GEMM)     \
  /* attention (q [B,L,E], k [B,S,E], v [B,S,Ev][, mask [B,L,S]]) -> [B,L,Ev]: \
   * softmax(q k^T * fattr + bias) v; attrs {causal, mask kind: 0 none, 1 bool \
   * (false: -inf), 2 additive}; a row that sees nothing is NaN */ \
  X(ATTENTION,     "attention",     MATMUL, -1, SAME,  attention, attention, NATIVE) \
  /* convolution, NCHW (family CONV): attrs {sh, sw, ph, pw, dh, dw, groups}; \
   * conv2d (x [N,C,H,W], w [O,C/g,kh,kw]) -> [N,O,OH,OW]; its input gradient \
   * (gy, w) -> [N,C,H,W] (conv_transpose2d); its weight gradient (x, gy) -> \
   * [O,C/g,kh,kw]; the node's shape gives the sizes the attrs do not. \
   * conv2d_bias (x, w, b [O]) is conv2d plus b[o] on each output channel \
   * (one pass: the bias is not an elementwise loop over the output). \
   * max_pool2d_argmax: attrs {kh, kw, sh, sw, ph, pw, dh, dw}, per window the \
   * index h*W+w of its first largest element (its last NaN if it holds any; \
   * -1 for a window of padding only); \
   * pool_gather (v [N,C,H,W], idx i64 [N,C,P]) -> [N,C,P]: v's plane read at \
   * the flat indices (max_pool2d's values, idx its argmax of any shape with \
   * P elements a plane); pool_scatter_add (g [N,C,P], idx) -> [N,C,H,W] (the \
   * node's shape): zeros plus each g at its index, summed in double for f32 \
   * where indices repeat (pool_gather's gradient, and the other way round) */ \
  X(CONV2D,             "conv2d",             CONV,    2, SAME,  conv,   conv,        NATIVE)   \
  X(CONV2D_BIAS,        "conv2d_bias",        CONV,    3, SAME,  conv,   conv,        NATIVE)   \
  X(CONV2D_GRAD_INPUT,  "conv2d_grad_input",  CONV,    2, SAME,  conv,   conv,        NATIVE)   \
  X(CONV2D_GRAD_WEIGHT, "conv2d_grad_weight", CONV,    2, SAME,  conv,   conv,        NATIVE)   \
  X(MAX_POOL2D_ARGMAX,  "max_pool2d_argmax",  CONV,    1, INDEX, none,   conv,        NATIVE)   \
  X(POOL_GATHER,        "pool_gather",        CONV,    2, SAME,  conv,   conv,        NATIVE)   \
  X(POOL_SCATTER_ADD,   "pool_scatter_add",   CONV,    2, SAME,  conv,   conv,        NATIVE)   \
  /* shape: reshape keeps row-major order; permute attrs = perm; expand is a \
   * numpy broadcast; slice attrs = starts then steps; concat attrs[0] = axis; \
   * pad attrs = before/after pairs, fattr = value */ \
  X(RESHAPE,       "reshape",       SHAPE,   1, SAME,  reshape, shape,       VIEW)     \
  X(PERMUTE,       "permute",       SHAPE,   1, SAME,  permute, shape,       VIEW)     \
  X(EXPAND,        "expand",        SHAPE,   1, SAME,  expand,  shape,       VIEW)     \
  X(SLICE,         "slice",         SHAPE,   1, SAME,  slice,   shape,       VIEW)     \
  X(CONCAT,        "concat",        SHAPE,  -1, SAME,  concat,  shape,       NATIVE)   \
  X(PAD,           "pad",           SHAPE,   1, SAME,  pad,     shape,       NATIVE)   \
  /* indexing: gather (a, index of a's rank), index_select (a, 1-d index), \
   * attrs[0] = axis; one_hot attrs[0] = num_classes; these and scatter_add, \
   * index_add may have attrs[1]: the public function that built them \
   * (lt_caller.h), which their index errors name */ \
  X(GATHER,        "gather",        INDEX,   2, SAME,  indexed, index,       NATIVE)   \
  X(INDEX_SELECT,  "index_select",  INDEX,   2, SAME,  indexed, index,       NATIVE)   \
  X(ONE_HOT,       "one_hot",       INDEX,   1, NODE,  none,    index,       NATIVE)   \
  /* random: operand 0 is the op's seed (i64 0-d); element k of the result is \
   * a function of (seed, k) only */ \
  X(RNG_UNIFORM,   "rng_uniform",   RANDOM,  1, NODE,  none,    random,      RNG)      \
  X(RNG_NORMAL,    "rng_normal",    RANDOM,  1, NODE,  none,    random,      NATIVE)   \
  X(RANDPERM,      "randperm",      RANDOM,  1, NODE,  none,    random,      NATIVE)   \
  /* transposes of indexing ops (made by autograd): zeros of the node's shape \
   * with src added (scatter_add, index_add) or placed (unslice) */ \
  X(SCATTER_ADD,   "scatter_add",   SCATTER, 2, SAME,  indexed, grad_ops,    NATIVE)   \
  X(INDEX_ADD,     "index_add",     SCATTER, 2, SAME,  indexed, grad_ops,    NATIVE)   \
  X(UNSLICE,       "unslice",       SCATTER, 1, SAME,  unslice, grad_ops,    NATIVE)   \
  /* collectives over the replicas of a world (lazytensor_dist.h, \
   * docs/SCALE_OUT.md): all_reduce attrs {redop}; all_gather {axis, size}; \
   * reduce_scatter {redop, axis, size}; broadcast {root}. redop: 0 sum, \
   * 1 mean, 2 max, 3 min (bool: or, and); size: the world size the node \
   * was traced for. \
   * Over replica groups (a mesh axis, lt_*_over): all_reduce {redop, size, \
   * stride}, all_gather {axis, size, stride}, reduce_scatter {redop, axis, \
   * size, stride}, broadcast {root, size, stride}: groups of size ranks, \
   * stride apart (core/lt_collective.h) */ \
  X(ALL_REDUCE,     "all_reduce",     COLLECTIVE, 1, SAME, collective, collective, NATIVE) \
  X(ALL_GATHER,     "all_gather",     COLLECTIVE, 1, SAME, collective, collective, NATIVE) \
  X(REDUCE_SCATTER, "reduce_scatter", COLLECTIVE, 1, SAME, collective, collective, NATIVE) \
  X(BROADCAST,      "broadcast",      COLLECTIVE, 1, SAME, none,       collective, NATIVE) \
  /* SPMD (sharding, lazytensor_dist.h): one global program whose replicated \
   * values are equal on every rank. shard {axis, size}: chunk `rank` along \
   * axis, no communication; spmd_all_gather {axis, size}; spmd_all_reduce \
   * {redop, size} of per-rank partial values; spmd_copy {size}: identity, \
   * marks a replicated value entering rank-dependent work. Adjoints: shard <-> \
   * spmd_all_gather, spmd_all_reduce sum -> identity (mean: / size), \
   * spmd_copy -> spmd_all_reduce sum (ag_collective.c) */ \
  X(SHARD,           "shard",           COLLECTIVE, 1, SAME, spmd, collective, NATIVE) \
  X(SPMD_ALL_GATHER, "spmd_all_gather", COLLECTIVE, 1, SAME, spmd, collective, NATIVE) \
  X(SPMD_ALL_REDUCE, "spmd_all_reduce", COLLECTIVE, 1, SAME, spmd, collective, NATIVE) \
  X(SPMD_COPY,       "spmd_copy",       COLLECTIVE, 1, SAME, spmd, collective, NATIVE) \
  /* all_to_all {split_axis, concat_axis, size}; collective_permute {size, \
   * s0, t0, s1, t1, ...}: (source, target) rank pairs, each rank at most \
   * once a source and once a target. Adjoints: all_to_all with the axes \
   * swapped; the inverse permutation (ag_collective.c) */ \
  X(ALL_TO_ALL,         "all_to_all",         COLLECTIVE, 1, SAME, collective, collective, NATIVE) \
  X(COLLECTIVE_PERMUTE, "collective_permute", COLLECTIVE, 1, SAME, collective, collective, NATIVE)
/* clang-format on */

#endif
