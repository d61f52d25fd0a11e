/* backend_nodes.c -- the backend over plain Redis nodes (--redis, or the
 * embedded one): one pipelined link per node; a command goes to the node it
 * is sent for (see backend_impl.h).
 */
#include "backend_impl.h"

typedef struct
{
  RankRedisLink **links;
  guint n;
} Nodes;

gpointer
rank_backend_nodes_new (RankLoop *loop, const RankAddress *nodes, guint n_nodes,
                        int timeout_ms, GPtrArray *startup)
{
  Nodes *impl = g_new0 (Nodes, 1);

  g_assert (n_nodes >= 1);
  impl->n = n_nodes;
  impl->links = g_new0 (RankRedisLink *, n_nodes);
  for (guint i = 0; i < n_nodes; i++)
    {
      impl->links[i] = rank_redis_link_new (loop, &nodes[i], timeout_ms);
      for (guint j = 0; j < startup->len; j++)
        {
          char **argv = g_ptr_array_index (startup, j);

          rank_redis_link_add_startup (impl->links[i],
                                       (int) g_strv_length (argv),
                                       (const char **) argv, NULL);
        }
    }
  return impl;
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
  g_free (impl->links);
  g_free (impl);
}

const RankBackendImpl rank_backend_nodes_impl = {
  .link_for = link_for,
  .redirect = NULL,
  .unreachable = NULL,
  .nodes = nodes,
  .start = start,
  .wait_ready = wait_ready,
  .free = free_nodes,
};
