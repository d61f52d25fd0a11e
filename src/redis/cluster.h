/* cluster.h -- Redis Cluster routing for one event loop: which master
 * holds a key's slot, and a link to each master.
 *
 * A key's slot is CRC16 (XMODEM) of its hash tag (the bytes between the
 * first '{' and the next '}', when not empty; else the whole key) mod 16384.
 * Every key of an ordinary board shares the tag {board}, every key of a
 * shard the tag {board/i}: each script touches one slot.
 *
 * The slot map comes from CLUSTER SLOTS, asked of a seed at start and again
 * (rate-limited) whenever a master cannot be reached: after a failover the
 * promoted replica answers for the slots. A MOVED reply updates the one
 * slot at once; an ASK reply is followed once, with ASKING, without
 * touching the map. Until a slot's owner is known its commands go to a seed,
 * whose MOVED tells where it lives.
 *
 * The map's replicas serve reads that allow one (backend.h): a link to
 * each (READONLY), their lag measured as on plain nodes (backend_nodes.c),
 * with this worker's heartbeat key on each master chosen to hash to one of
 * its slots.
 *
 * Loop thread only (each worker has its own map and links), except
 * rank_cluster_new/free and the pure functions.
 */
#ifndef RANK_CLUSTER_H
#define RANK_CLUSTER_H

#include <glib.h>

#include "address.h"
#include "redis_link.h"

#define RANK_CLUSTER_SLOTS 16384

typedef struct _RankCluster RankCluster;

/* CRC16-XMODEM, as Redis Cluster computes it. */
guint16 rank_cluster_crc16 (const char *data, gsize len);

/* The slot of key. */
guint rank_cluster_slot (const char *key, gsize len);

/* Parses "MOVED 3999 127.0.0.1:6381" or "ASK ..." error text: FALSE if it
 * is neither. host is a new string. */
gboolean rank_cluster_parse_redirect (const char *text, gboolean *ask,
                                      guint *slot, char **host, guint16 *port);

/* seeds: where to ask for the map. tls (NULL: plain): every node's link
 * speaks TLS, the seeds' and those the map or a redirect names (with
 * tls-cluster, Redis names its TLS ports to a TLS client). auth_argv (NULL
 * or AUTH [user] password, auth_argc long) is sent first on every
 * connection. */
RankCluster *rank_cluster_new (RankLoop *loop, const RankAddress *seeds,
                               guint n_seeds, int timeout_ms, RankRedisTls *tls,
                               int auth_argc, const char *const *auth_argv);

/* A command (no NULs in its arguments) sent first on every connection,
 * to the masters known now and those found later (SCRIPT LOAD). Call
 * before start. */
void rank_cluster_add_startup (RankCluster *cluster, int argc,
                               const char *const *argv);

/* Connects to the seeds and asks for the map. */
void rank_cluster_start (RankCluster *cluster);

/* After the loop stopped: fails what is pending, frees the links. */
void rank_cluster_free (RankCluster *cluster);

/* The link to the master of slot (a seed's while unknown). */
RankRedisLink *rank_cluster_link (RankCluster *cluster, guint slot);

/* The link to host:port (created on first use). */
RankRedisLink *rank_cluster_link_to (RankCluster *cluster, const char *host,
                                     guint16 port);

/* A MOVED reply: slot lives at host:port from now on. */
void rank_cluster_moved (RankCluster *cluster, guint slot, const char *host,
                         guint16 port);

/* A replica of slot's master that lags less than max_lag_ms and has what
 * the master had at fresh_after_us (monotonic), or NULL. The first call
 * starts measuring the replicas' lag (a heartbeat every
 * RANK_REPLICA_PROBE_MS, and the map asked for every
 * RANK_CLUSTER_REPLICA_REFRESH_MS), so the first reads get NULL. */
RankRedisLink *rank_cluster_replica (RankCluster *cluster, guint slot,
                                     int max_lag_ms, gint64 fresh_after_us);

/* Called on the loop thread with every node the map names: the masters
 * that own slots, then their replicas. */
typedef void (*RankClusterNodesFunc) (const RankAddress *nodes, guint n,
                                      gpointer data);

/* func hears of the map's nodes after every read of the map that changes
 * them (the first included); the map is then asked for every
 * RANK_CLUSTER_REPLICA_REFRESH_MS, and at once on a MOVED, so that a node
 * that joins is seen. */
void rank_cluster_watch_nodes (RankCluster *cluster, RankClusterNodesFunc func,
                               gpointer data);

/* Asks for the whole map again, unless a request is under way or the last
 * one was under RANK_CLUSTER_REFRESH_MIN_MS ago. */
void rank_cluster_refresh (RankCluster *cluster);

/* Waits (any thread) until a seed is connected. */
gboolean rank_cluster_wait_ready (RankCluster *cluster, int timeout_ms,
                                  GError **error);

/* Masters known (for tests and logs). */
guint rank_cluster_n_masters (RankCluster *cluster);

#endif /* RANK_CLUSTER_H */
