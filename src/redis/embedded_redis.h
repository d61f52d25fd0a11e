/* embedded_redis.h -- the redis-server rankd runs itself when no --redis is
 * given.
 *
 * It lives in the data directory: a unix socket (no TCP port), append-only
 * persistence (fsync every second), its log. A lock file keeps two rankd
 * processes from sharing one directory. The child gets SIGTERM if rankd dies
 * without stopping it, so Redis always shuts down cleanly and keeps its data.
 * If the child dies, rankd starts it again (with back-off) on its own data.
 */
#ifndef RANK_EMBEDDED_REDIS_H
#define RANK_EMBEDDED_REDIS_H

#include <glib.h>

#include "address.h"

typedef struct _RankEmbeddedRedis RankEmbeddedRedis;

/* Starts redis-server (from $RANKD_REDIS_SERVER or PATH) and waits until it
 * answers PING. */
RankEmbeddedRedis *rank_embedded_redis_start (const char *data_dir,
                                              GError **error);

const RankAddress *rank_embedded_redis_address (RankEmbeddedRedis *redis);

/* Stops the child (SIGTERM, then SIGKILL after a timeout) and frees. */
void rank_embedded_redis_stop (RankEmbeddedRedis *redis);

#endif /* RANK_EMBEDDED_REDIS_H */
