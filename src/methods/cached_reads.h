/* cached_reads.h -- reads of boards with a read cache (GetRank, GetTopN):
 * answered from the cache when they may be, else sent to Redis once for
 * all the calls that want the same answer (cached_reads.c). Private to
 * the method layer.
 */
#ifndef RANK_CACHED_READS_H
#define RANK_CACHED_READS_H

#include "handler_private.h"

/* A call of a read that may be cached: GetRank, GetTopN. */
typedef struct
{
  Call call;
  /* A read of a cached board that missed: the answer's key, and whether
   * it may be kept. */
  char *cache_key;
  RankCacheTicket ticket;
  gboolean leads; /* a flight under cache_key waits for this call */
} CachedReadCall;

/* Whether the call's board's answers are cached (its context resolved). */
gboolean handler_cache_wanted (Call *call);

/* A read of a board with a read cache (key: its answer's, taken): answered
 * from the cache (TRUE: as a list<Entry> or, !list, one Entry), waiting
 * for the same read already in flight (TRUE: it is answered then), or to
 * be read, its answer kept if it may be (FALSE). */
gboolean handler_cached (CachedReadCall *read, char *key, gboolean list);

/* The answer of read came from Redis (error: it failed): the calls that
 * wait for it read the cache again, or get the error. */
void handler_land (CachedReadCall *read, const GError *error);

#endif /* RANK_CACHED_READS_H */
