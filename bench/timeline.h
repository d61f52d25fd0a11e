/* timeline.h -- latency over time: every measured request as a sample,
 * then per-second percentiles per operation, as TSV and as a PNG that
 * gnuplot draws.
 */
#ifndef RANK_BENCH_TIMELINE_H
#define RANK_BENCH_TIMELINE_H

#include <glib.h>

/* One measured request: 12 bytes. */
typedef struct
{
  guint32 t_ms;       /* when it started, since the measurement began */
  guint32 latency_us; /* how long it took */
  guint8 op;          /* index into op_names */
} RankSample;

/* samples: one GArray of RankSample per worker, each in the order its
 * requests started; seconds: how long the measurement ran. Writes tsv (a
 * header, then "second op count p50_ms p99_ms p999_ms" for each operation
 * and second with requests, grouped by operation) and, if png is set, draws
 * it with gnuplot (pngcairo; one panel per operation, p50, p99 and p99.9 on
 * a log scale). FALSE with error set if a file cannot be written, gnuplot
 * fails, or there is nothing to draw. */
gboolean rank_timeline_write (GArray *const *samples, guint n_workers,
                              const char *const *op_names, guint n_ops,
                              double seconds, const char *tsv, const char *png,
                              const char *title, GError **error);

#endif /* RANK_BENCH_TIMELINE_H */
