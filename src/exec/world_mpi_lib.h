/* The MPI library, loaded at run time (world_mpi_lib.c).
 *
 * liblazytensor does not link libmpi: a program that never calls
 * lt_world_mpi must not need MPI installed. The MPI transport (world_mpi.c,
 * world_mpi_live.c) still compiles against mpi.h for its types and integer
 * constants, but calls MPI only through lt__mpi, a table that lt__mpi_load
 * fills with dlopen and dlsym. MPI's predefined handles (MPI_COMM_WORLD,
 * MPI_FLOAT, MPI_SUM, ...) are, in Open MPI, addresses of global objects in
 * libmpi: they are resolved the same way, so the transport must use the
 * table's fields, never the mpi.h macros for handles. */
#ifndef LT_WORLD_MPI_LIB_H
#define LT_WORLD_MPI_LIB_H

#ifdef LT_HAVE_MPI
#include <mpi.h>
#include <stddef.h>

/* The MPI functions the transport calls, each field named by the part of its
 * name after "MPI_"; the pointer's type is taken from mpi.h. */
// clang-format off
#define LT_MPI_FUNCTIONS(X) \
  X(Init_thread) X(Initialized) X(Finalized) X(Finalize) \
  X(Query_thread) X(Comm_dup) X(Comm_split) X(Comm_free) X(Comm_rank) \
  X(Comm_size) X(Comm_set_errhandler) X(Op_create) X(Op_free) \
  X(Error_string) X(Test) X(Testall) X(Wait) \
  X(Cancel) X(Request_free) X(Isend) X(Irecv) \
  X(Iallgather) X(Iallreduce) X(Ireduce_scatter_block) X(Ibcast) \
  X(Ialltoall)
// clang-format on

/* The predefined handles it uses: field, type, Open MPI's global object,
 * mpi.h's macro (the value itself in implementations whose handles are
 * integer constants, such as MPICH). */
#define LT_MPI_HANDLES(X)                                                       \
  X(comm_world, MPI_Comm, "ompi_mpi_comm_world", MPI_COMM_WORLD)                \
  X(errors_return, MPI_Errhandler, "ompi_mpi_errors_return", MPI_ERRORS_RETURN) \
  X(t_float, MPI_Datatype, "ompi_mpi_float", MPI_FLOAT)                         \
  X(t_double, MPI_Datatype, "ompi_mpi_double", MPI_DOUBLE)                      \
  X(t_int8, MPI_Datatype, "ompi_mpi_int8_t", MPI_INT8_T)                        \
  X(t_uint8, MPI_Datatype, "ompi_mpi_uint8_t", MPI_UINT8_T)                     \
  X(t_int32, MPI_Datatype, "ompi_mpi_int32_t", MPI_INT32_T)                     \
  X(t_int64, MPI_Datatype, "ompi_mpi_int64_t", MPI_INT64_T)                     \
  X(op_sum, MPI_Op, "ompi_mpi_op_sum", MPI_SUM)                                 \
  X(op_max, MPI_Op, "ompi_mpi_op_max", MPI_MAX)                                 \
  X(op_min, MPI_Op, "ompi_mpi_op_min", MPI_MIN)                                 \
  X(request_null, MPI_Request, "ompi_request_null", MPI_REQUEST_NULL)

#define LT_MPI_FUNCTION_FIELD(name) __typeof__(MPI_##name) *name;
#define LT_MPI_HANDLE_FIELD(field, type, ompi_symbol, macro) type field;
typedef struct lt__mpi_api {
  LT_MPI_FUNCTIONS(LT_MPI_FUNCTION_FIELD)
  LT_MPI_HANDLES(LT_MPI_HANDLE_FIELD)
} lt__mpi_api;
#undef LT_MPI_FUNCTION_FIELD
#undef LT_MPI_HANDLE_FIELD

#ifdef OPEN_MPI /* those macros would make libmpi a link-time dependency again */
#undef MPI_COMM_WORLD
#undef MPI_ERRORS_RETURN
#undef MPI_FLOAT
#undef MPI_DOUBLE
#undef MPI_INT8_T
#undef MPI_UINT8_T
#undef MPI_INT32_T
#undef MPI_INT64_T
#undef MPI_SUM
#undef MPI_MAX
#undef MPI_MIN
#undef MPI_REQUEST_NULL
#endif

/* Filled by a successful lt__mpi_load; read-only afterwards. */
extern lt__mpi_api lt__mpi;

/* Loads libmpi once per process (LT_MPI_LIBRARY names another file; the
 * default is the soname found when lazytensor was configured) and fills
 * lt__mpi. Returns 0, or -1 with why ("cannot open libmpi.so.40: ...") when
 * the library or one of its symbols is missing; a failure is remembered. */
int lt__mpi_load(char *why, size_t n);
#endif

#endif
