/* Test hooks: internal switches the tests, fuzzers and tools use to provoke
 * failures and slow executions. Not part of the public API (not installed,
 * not exported from the shared library: link lazytensor_static to use them).
 * Internal test hooks of single modules stay in those modules' headers
 * (lt__disk_cache_fail_next_write, lt__backend_force, lt__op_table_set_text). */
#ifndef LT_TEST_HOOKS_H
#define LT_TEST_HOOKS_H

#include <stdint.h>

#include "lazytensor.h"

/* Fault injection for the reliability tests. The next execution (or compile)
 * after `skip` more succeed fails with LT_EEXEC (LT_ECOMPILE); skip < 0
 * disarms. */
typedef enum lt_fault { LT_FAULT_EXECUTE = 0, LT_FAULT_COMPILE = 1 } lt_fault;
void lt_inject_fault(lt_fault kind, int skip);
/* Sleeps `us` microseconds before every execution (0: off). */
void lt_set_execute_delay_us(int64_t us);

#endif
