/* tracking.h -- Redis's server-assisted client-side caching, for the read
 * cache (cache.h): Redis reports every change of a tracked board's keys.
 *
 * Per Redis node, two connections of their own: one subscribed to
 * __redis__:invalidate (the RESP2 way: invalidations are messages on that
 * channel), and one that turns CLIENT TRACKING on in broadcast mode
 * (BCAST), redirected to the first, with a PREFIX for each key family of
 * each tracked board (rk:{board}:z, :t, :a, :d, :c, :p: and the same for
 * each shard). Broadcast mode reports a change of any key under a prefix,
 * whoever made it and whether or not rankd read the key, so nothing
 * depends on which keys scripts read; Redis sends the invalidations of one
 * event-loop iteration together.
 *
 * A session is up when every node's pair is connected, subscribed and
 * tracking; the cache serves tracked boards only then. Either connection
 * of any node dropping ends the session (the cache drops everything) and a
 * new one starts once both are back. Boards are registered the first time
 * a read asks for them (or, after a new session, all those registered
 * before, in its first CLIENT TRACKING).
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

typedef struct _RankTracking RankTracking;

/* Connects to nodes only once the cache asks for a tracked board. user and
 * password: AUTH (copied; NULL: none). */
RankTracking *rank_tracking_new (RankLoop *loop, RankReadCache *cache,
                                 const RankAddress *nodes, guint n_nodes,
                                 int timeout_ms, const char *user,
                                 const char *password);

/* The nodes to track from now on (a Cluster's map changed). A node new to
 * the session takes the session down (the cache drops everything) until
 * it is up too. Loop thread. */
void rank_tracking_set_nodes (RankTracking *tracking, const RankAddress *nodes,
                              guint n_nodes);

/* After the loop stopped. */
void rank_tracking_free (RankTracking *tracking);

#endif /* RANK_TRACKING_H */
