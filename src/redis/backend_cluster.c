/* backend_cluster.c -- the backend over a Redis Cluster (see
 * backend_impl.h): a command goes to the master of its key's slot
 * (cluster.h keeps the map and the links); MOVED updates the map and is
 * followed, ASK is followed once; a master out of reach makes the map be
 * asked for again.
 */
#include "backend_impl.h"
#include "cluster.h"
#include "constants.h"

gpointer
rank_backend_cluster_new (RankLoop *loop, const RankAddress *seeds,
                          guint n_seeds, int timeout_ms, RankRedisTls *tls,
                          GPtrArray *startup)
{
  RankCluster *cluster
      = rank_cluster_new (loop, seeds, n_seeds, timeout_ms, tls, 0, NULL);

  for (guint i = 0; i < startup->len; i++)
    {
      char **argv = g_ptr_array_index (startup, i);

      rank_cluster_add_startup (cluster, (int) g_strv_length (argv),
                                (const char *const *) argv);
    }
  return cluster;
}

static RankRedisLink *
link_for (gpointer impl, guint node, const char *key, gsize key_len)
{
  return rank_cluster_link (impl, rank_cluster_slot (key, key_len));
}

static RankRedisLink *
replica_for (gpointer impl, guint node, const char *key, gsize key_len,
             int max_lag_ms, gint64 fresh_after_us)
{
  return rank_cluster_replica (impl, rank_cluster_slot (key, key_len),
                               max_lag_ms, fresh_after_us);
}

static RankRedisLink *
redirect (gpointer impl, const char *text, gboolean *ask)
{
  g_autofree char *host = NULL;
  guint slot;
  guint16 port;

  if (!rank_cluster_parse_redirect (text, ask, &slot, &host, &port))
    return NULL;
  if (!*ask)
    rank_cluster_moved (impl, slot, host, port);
  return rank_cluster_link_to (impl, host, port);
}

static void
unreachable (gpointer impl)
{
  rank_cluster_refresh (impl);
}

static guint
nodes (gpointer impl)
{
  return RANK_SHARDS_MAX;
}

static void
watch_nodes (gpointer impl, RankBackendNodesFunc func, gpointer data)
{
  rank_cluster_watch_nodes (impl, func, data);
}

static void
start (gpointer impl)
{
  rank_cluster_start (impl);
}

static gboolean
wait_ready (gpointer impl, int timeout_ms, GError **error)
{
  return rank_cluster_wait_ready (impl, timeout_ms, error);
}

static void
free_cluster (gpointer impl)
{
  rank_cluster_free (impl);
}

const RankBackendImpl rank_backend_cluster_impl = {
  .link_for = link_for,
  .replica_for = replica_for,
  .redirect = redirect,
  .unreachable = unreachable,
  .nodes = nodes,
  .watch_nodes = watch_nodes,
  .start = start,
  .wait_ready = wait_ready,
  .free = free_cluster,
};
