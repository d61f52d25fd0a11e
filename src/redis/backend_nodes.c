/* backend_nodes.c -- the backend over plain Redis nodes (--redis, or the
 * embedded one): one pipelined link per node; a command goes to the node it
 * is sent for (see backend_impl.h).
 *
 * Replicas ([redis] replicas): a link to each, and its lag measured by
 * this worker's heartbeat key on its primary (replica.h). */
#include "backend_impl.h"
#include "constants.h"
#include "replica.h"

typedef struct
{
  RankReplica lag;
  guint node; /* whose replica */
} Replica;

typedef struct
{
  RankRedisLink **links;
  guint n;
  Replica *replicas;
  guint n_replicas;
  guint next; /* round robin over fresh replicas */
  char *heartbeat_key;
  gint64 next_probe_us;
} Nodes;

/* Before the loop sleeps: the heartbeat, when due. */
static int
probe (gpointer data)
{
  Nodes *impl = data;
  gint64 now = g_get_monotonic_time ();

  if (now < impl->next_probe_us)
    return (int) ((impl->next_probe_us - now) / 1000) + 1;
  impl->next_probe_us = now + (gint64) RANK_REPLICA_PROBE_MS * 1000;
  for (guint i = 0; i < impl->n; i++)
    {
      gboolean any = FALSE;

      for (guint r = 0; r < impl->n_replicas; r++)
        any = any || impl->replicas[r].node == i;
      if (any)
        rank_replica_beat (impl->links[i], impl->heartbeat_key, now);
    }
  for (guint r = 0; r < impl->n_replicas; r++)
    rank_replica_probe (&impl->replicas[r].lag, impl->heartbeat_key);
  return RANK_REPLICA_PROBE_MS;
}

static RankRedisLink *
new_link (RankLoop *loop, const RankAddress *address, int timeout_ms,
          RankRedisTls *tls, GPtrArray *startup)
{
  RankRedisLink *link = rank_redis_link_new (loop, address, timeout_ms, tls);

  for (guint j = 0; j < startup->len; j++)
    {
      char **argv = g_ptr_array_index (startup, j);

      rank_redis_link_add_startup (link, (int) g_strv_length (argv),
                                   (const char **) argv, NULL);
    }
  return link;
}

gpointer
rank_backend_nodes_new (RankLoop *loop, const RankAddress *nodes, guint n_nodes,
                        const RankAddress *replicas, const guint *replica_of,
                        guint n_replicas, int timeout_ms, RankRedisTls *tls,
                        GPtrArray *startup)
{
  Nodes *impl = g_new0 (Nodes, 1);

  g_assert (n_nodes >= 1);
  impl->n = n_nodes;
  impl->links = g_new0 (RankRedisLink *, n_nodes);
  for (guint i = 0; i < n_nodes; i++)
    impl->links[i] = new_link (loop, &nodes[i], timeout_ms, tls, startup);
  impl->n_replicas = n_replicas;
  impl->replicas = g_new0 (Replica, MAX (n_replicas, 1));
  for (guint r = 0; r < n_replicas; r++)
    {
      g_assert (replica_of[r] < n_nodes);
      impl->replicas[r].lag.link
          = new_link (loop, &replicas[r], timeout_ms, tls, startup);
      impl->replicas[r].node = replica_of[r];
    }
  if (n_replicas > 0)
    {
      g_autofree char *id = g_uuid_string_random ();

      impl->heartbeat_key = g_strconcat (RANK_HEARTBEAT_KEY_PREFIX, id, NULL);
      rank_loop_add_prepare (loop, probe, impl);
    }
  return impl;
}

static RankRedisLink *
replica_for (gpointer data, guint node, const char *key, gsize key_len,
             int max_lag_ms, gint64 fresh_after_us)
{
  Nodes *impl = data;
  gint64 now = g_get_monotonic_time ();

  for (guint k = 0; k < impl->n_replicas; k++)
    {
      Replica *r = &impl->replicas[(impl->next + k) % impl->n_replicas];

      if (r->node == node
          && rank_replica_fresh (&r->lag, max_lag_ms, fresh_after_us, now))
        {
          impl->next = (impl->next + k + 1) % impl->n_replicas;
          return r->lag.link;
        }
    }
  return NULL;
}

static RankRedisLink *
link_for (gpointer data, guint node, const char *key, gsize key_len)
{
  Nodes *impl = data;

  g_assert (node < impl->n);
  return impl->links[node];
}

static guint
nodes (gpointer data)
{
  return ((Nodes *) data)->n;
}

static void
start (gpointer data)
{
  Nodes *impl = data;

  for (guint i = 0; i < impl->n; i++)
    rank_redis_link_start (impl->links[i]);
  for (guint r = 0; r < impl->n_replicas; r++)
    rank_redis_link_start (impl->replicas[r].lag.link);
}

static gboolean
wait_ready (gpointer data, int timeout_ms, GError **error)
{
  Nodes *impl = data;

  for (guint i = 0; i < impl->n; i++)
    if (!rank_redis_link_wait_ready (impl->links[i], timeout_ms, error))
      return FALSE;
  return TRUE;
}

static void
free_nodes (gpointer data)
{
  Nodes *impl = data;

  for (guint i = 0; i < impl->n; i++)
    rank_redis_link_free (impl->links[i]);
  for (guint r = 0; r < impl->n_replicas; r++)
    rank_redis_link_free (impl->replicas[r].lag.link);
  g_free (impl->links);
  g_free (impl->replicas);
  g_free (impl->heartbeat_key);
  g_free (impl);
}

const RankBackendImpl rank_backend_nodes_impl = {
  .link_for = link_for,
  .replica_for = replica_for,
  .redirect = NULL,
  .unreachable = NULL,
  .nodes = nodes,
  .start = start,
  .wait_ready = wait_ready,
  .free = free_nodes,
};
