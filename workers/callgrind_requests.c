/* Callgrind's client requests, callable from Python through ctypes
 * (workers/counting.py).  A client request is a few special instructions
 * that do nothing on a real CPU and talk to valgrind under it, so they must
 * be compiled into the process: the orchestrator builds this file once with
 * the system's C compiler against valgrind's own header
 * (harness/count/measure.py, build_requests).  */
#include <valgrind/callgrind.h>

/* 1 under valgrind, 0 on a real CPU. */
int harness_on_valgrind(void) { return RUNNING_ON_VALGRIND ? 1 : 0; }

/* Instrument from here on (the worker starts with --instr-atstart=no, so
 * imports and compilation run fast and uncounted). */
void harness_start(void) { CALLGRIND_START_INSTRUMENTATION; }

void harness_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }

/* Forget what was counted since the last dump. */
void harness_zero(void) { CALLGRIND_ZERO_STATS; }

/* Write what was counted since the last zero or dump to a new dump file,
 * labelled, and start counting from zero. */
void harness_dump(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }
