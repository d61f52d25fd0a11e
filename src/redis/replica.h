/* replica.h -- how far a Redis replica lags, measured with a heartbeat; the
 * plain-node and the Cluster backends (backend_nodes.c, cluster.c) share it.
 *
 * Every RANK_REPLICA_PROBE_MS a worker writes its own heartbeat key on a
 * primary (SET, the monotonic time it was sent, in us) and reads it back
 * from each replica of it (GET). The value a replica returns says it has
 * every write the primary had applied when that SET ran: a write this
 * rankd saw acknowledged before the SET was sent is there. Lag = now - that
 * value. Loop thread only.
 */
#ifndef RANK_REPLICA_H
#define RANK_REPLICA_H

#include <glib.h>

#include "redis_link.h"

typedef struct
{
  RankRedisLink *link;
  gint64 seen_us;   /* the newest heartbeat the replica returned; 0: none */
  gboolean probing; /* a GET is out */
} RankReplica;

/* Writes the heartbeat key on primary (if connected), valued now_us. */
void rank_replica_beat (RankRedisLink *primary, const char *key, gint64 now_us);

/* Reads key back from the replica, unless a read is out or it is down; the
 * answer updates seen_us and the lag metric. */
void rank_replica_probe (RankReplica *replica, const char *key);

/* The replica may answer a read: connected, lagging less than max_lag_ms
 * at now_us, and with what the primary had at fresh_after_us. */
gboolean rank_replica_fresh (const RankReplica *replica, int max_lag_ms,
                             gint64 fresh_after_us, gint64 now_us);

#endif /* RANK_REPLICA_H */
