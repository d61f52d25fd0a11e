/* histogram.c -- log-linear latency histogram (see histogram.h). */
#include "histogram.h"

static guint
bucket_of (guint64 v)
{
  int msb, shift;

  if (v < 64)
    return (guint) v;
  msb = 63 - __builtin_clzll (v);
  shift = msb - 5; /* keep the top 6 bits: v >> shift is in [32, 63] */
  return MIN ((guint) ((shift << 5) + (int) (v >> shift)),
              RANK_HISTOGRAM_BUCKETS - 1);
}

/* Lower bound and width of bucket i. */
static void
bucket_range (guint i, guint64 *low, guint64 *width)
{
  int shift;

  if (i < 64)
    {
      *low = i;
      *width = 1;
      return;
    }
  shift = (int) (i >> 5) - 1;
  *low = (guint64) (i - ((guint) shift << 5)) << shift;
  *width = (guint64) 1 << shift;
}

void
rank_histogram_record (RankHistogram *h, guint64 value)
{
  h->counts[bucket_of (value)]++;
  h->total++;
  if (value > h->max)
    h->max = value;
}

void
rank_histogram_merge (RankHistogram *into, const RankHistogram *from)
{
  for (guint i = 0; i < RANK_HISTOGRAM_BUCKETS; i++)
    into->counts[i] += from->counts[i];
  into->total += from->total;
  into->max = MAX (into->max, from->max);
}

guint64
rank_histogram_quantile (const RankHistogram *h, double q)
{
  guint64 rank, seen = 0;

  if (h->total == 0)
    return 0;
  rank = (guint64) (q * (double) h->total);
  if (rank >= h->total)
    rank = h->total - 1;
  for (guint i = 0; i < RANK_HISTOGRAM_BUCKETS; i++)
    {
      seen += h->counts[i];
      if (seen > rank)
        {
          guint64 low, width;

          bucket_range (i, &low, &width);
          return MIN (low + width / 2, h->max);
        }
    }
  return h->max;
}
