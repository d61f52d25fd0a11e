/* backend_impl.h -- what an implementation of the backend (backend.h)
 * provides: where a command goes, and, on Redis Cluster, where a redirect
 * sends it. Private to backend*.c.
 */
#ifndef RANK_BACKEND_IMPL_H
#define RANK_BACKEND_IMPL_H

#include "backend.h"
#include "redis_link.h"

typedef struct
{
  /* The link for a command to node whose routing key is key. */
  RankRedisLink *(*link_for) (gpointer impl, guint node, const char *key,
                              gsize key_len);
  /* An error reply that redirects (MOVED, ASK): the link to go to, *ask
   * set for ASK; NULL if it is none. */
  RankRedisLink *(*redirect) (gpointer impl, const char *text, gboolean *ask);
  /* A replica of node that lags less than max_lag_ms and has what the
   * primary had at fresh_after_us; NULL if none (or the implementation
   * has no replicas). */
  RankRedisLink *(*replica_for) (gpointer impl, guint node, const char *key,
                                 gsize key_len, int max_lag_ms,
                                 gint64 fresh_after_us);
  /* A command could not reach its node (the node may have failed over). */
  void (*unreachable) (gpointer impl);
  guint (*nodes) (gpointer impl);
  /* Reports the nodes as they change (Cluster); NULL: they do not. */
  void (*watch_nodes) (gpointer impl, RankBackendNodesFunc func, gpointer data);
  void (*start) (gpointer impl);
  gboolean (*wait_ready) (gpointer impl, int timeout_ms, GError **error);
  void (*free) (gpointer impl);
} RankBackendImpl;

/* startup: commands (GStrv) every new connection sends first, in order.
 * replicas[i] (n_replicas of them) is a replica of node replica_of[i].
 * tls: every link's (NULL: plain). */
gpointer rank_backend_nodes_new (RankLoop *loop, const RankAddress *nodes,
                                 guint n_nodes, const RankAddress *replicas,
                                 const guint *replica_of, guint n_replicas,
                                 int timeout_ms, RankRedisTls *tls,
                                 GPtrArray *startup);
extern const RankBackendImpl rank_backend_nodes_impl;

gpointer rank_backend_cluster_new (RankLoop *loop, const RankAddress *seeds,
                                   guint n_seeds, int timeout_ms,
                                   RankRedisTls *tls, GPtrArray *startup);
extern const RankBackendImpl rank_backend_cluster_impl;

#endif /* RANK_BACKEND_IMPL_H */
