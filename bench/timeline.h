/* timeline.h -- latency over time: every measured request as a sample,
 * then per-second percentiles per operation, as TSV and as a PNG that
 * gnuplot draws.
 */
#ifndef RANK_BENCH_TIMELINE_H
#define RANK_BENCH_TIMELINE_H

#include <glib.h>

typedef struct
{
  guint32 t_ms;       /* since the measurement began */
  guint32 latency_us; /* of one request */
  guint8 op;
} RankSample;

/* samples: one GArray of RankSample per worker. Writes tsv (second, op,
 * count, p50/p99/p99.9 in ms) and, if png is set, draws it with gnuplot
 * (log scale, one colour per percentile, one panel per operation). */
gboolean rank_timeline_write (GArray *const *samples, guint n_workers,
                              const char *const *op_names, guint n_ops,
                              double seconds, const char *tsv, const char *png,
                              const char *title, GError **error);

#endif /* RANK_BENCH_TIMELINE_H */
