/* cpu.h -- CPU time of processes over a measured interval, for rank-bench's
 * "CPU per operation" figures.
 *
 * A process's CPU is the sum over its threads of /proc/PID/task/TID/schedstat
 * (time on a CPU, in ns): precise where utime/stime count 10 ms ticks. The
 * load generator's own is getrusage(RUSAGE_SELF). Threads that end within the
 * interval are not counted (rankd's and Redis's live as long as they do).
 */
#ifndef RANK_BENCH_CPU_H
#define RANK_BENCH_CPU_H

#include <glib.h>

typedef struct _RankCpuWatch RankCpuWatch;

/* spec: NAME=PID[,NAME=PID...] (NULL: none but the load generator itself,
 * which is always watched as "client"). */
RankCpuWatch *rank_cpu_watch_new (const char *spec, GError **error);
void rank_cpu_watch_free (RankCpuWatch *watch);

/* The interval's start and end. */
void rank_cpu_watch_start (RankCpuWatch *watch);
void rank_cpu_watch_stop (RankCpuWatch *watch);

/* Appends "NAME":µs per op, for each process, to out (JSON members, no
 * braces); ops: what the interval did. */
void rank_cpu_watch_json (RankCpuWatch *watch, guint64 ops, GString *out);

/* The same as text lines ("cpu per op: rankd 12.3 us, ..."). */
void rank_cpu_watch_text (RankCpuWatch *watch, guint64 ops, GString *out);

#endif /* RANK_BENCH_CPU_H */
