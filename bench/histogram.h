/* histogram.h -- latency histogram with ~3% precision, mergeable.
 *
 * Values (nanoseconds) below 64 get a bucket each; above, each power of two
 * is split into 32 buckets. Recording is an increment: no allocation, so a
 * worker records every request without disturbing what it measures.
 */
#ifndef RANK_BENCH_HISTOGRAM_H
#define RANK_BENCH_HISTOGRAM_H

#include <glib.h>

#define RANK_HISTOGRAM_BUCKETS 2048

typedef struct
{
  guint64 counts[RANK_HISTOGRAM_BUCKETS];
  guint64 total;
  guint64 max;
} RankHistogram;

void rank_histogram_record (RankHistogram *h, guint64 value);
void rank_histogram_merge (RankHistogram *into, const RankHistogram *from);

/* The value at quantile q (0..1): the midpoint of its bucket. */
guint64 rank_histogram_quantile (const RankHistogram *h, double q);

#endif /* RANK_BENCH_HISTOGRAM_H */
