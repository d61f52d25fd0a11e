/* tracking.h -- Redis's server-assisted client-side caching, for the read
 * cache (cache.h): Redis reports every change of a tracked board's keys.
 *
 * Per Redis node, two connections of their own: one subscribed to
 * __redis__:invalidate (the RESP2 way: invalidations are messages on that
 * channel), and one that turns CLIENT TRACKING on in broadcast mode
 * (BCAST), redirected to the first, with a PREFIX for each key family of
 * each tracked board (rk:{board}: and each shard's rk:s:{board/i}:).
 * Broadcast mode reports a change of any key under a prefix,
 * whoever made it and whether or not rankd read the key, so nothing
 * depends on which keys scripts read; Redis sends the invalidations of one
 * event-loop iteration together.
 *
 * A session is up when every node's pair is connected, subscribed and
 * tracking; the cache serves tracked boards only then. Either connection
 * of any node dropping ends the session (the cache drops everything) and a
 * new one starts once both are back. Boards are registered the first time
 * a read asks for them (or, after a new session, all those registered
 * before, in its first CLIENT TRACKING commands).
 *
 * Redis compares every key it writes with every prefix of every session,
 * so the tracked set is bounded (max_boards prefixes: a board takes one, a
 * sharded board one more a shard). A board that does not fit is not
 * cached until the set is rotated to the boards read most recently,
 * through a third connection per node, without a moment when a board kept
 * is not tracked (tracking.c).
 *
 * On a Redis Cluster the nodes are every node of the slot map, masters
 * and replicas (rank_tracking_set_nodes, from the map as it changes):
 * replicas report the changes they replicate, so a replica promoted by a
 * failover was already reporting the slots it takes over. A node new to
 * the session (a node added to the map, or one back in it) ends the
 * session until it is up too; a node that leaves the map is left idle
 * (its links stay: they cannot be freed while the loop runs).
 *
 * Runs on one worker's loop.
 */
#ifndef RANK_TRACKING_H
#define RANK_TRACKING_H

#include <glib.h>

#include "address.h"
#include "cache.h"
#include "loop.h"
#include "redis_tls.h"

typedef struct _RankTracking RankTracking;

typedef struct
{
  int timeout_ms;       /* of each command */
  guint max_boards;     /* prefixes the tracked set takes at most */
  const char *user;     /* AUTH (copied; NULL: none) */
  const char *password; /* (copied; NULL: none) */
  RankRedisTls *tls;    /* the links' TLS (NULL: plain; referenced) */
} RankTrackingOptions;

/* Connects to nodes only once the cache asks for a tracked board. */
RankTracking *rank_tracking_new (RankLoop *loop, RankReadCache *cache,
                                 const RankAddress *nodes, guint n_nodes,
                                 const RankTrackingOptions *options);

/* The nodes to track from now on (a Cluster's map changed). A node new to
 * the session takes the session down (the cache drops everything) until
 * it is up too. Loop thread. */
void rank_tracking_set_nodes (RankTracking *tracking, const RankAddress *nodes,
                              guint n_nodes);

/* After the loop stopped. */
void rank_tracking_free (RankTracking *tracking);

#endif /* RANK_TRACKING_H */
