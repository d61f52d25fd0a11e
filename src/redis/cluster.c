/* cluster.c -- Redis Cluster routing (see cluster.h). */
#include "cluster.h"

#include <stdlib.h>
#include <string.h>

#include "constants.h"
#include "error.h"
#include "replica.h"

typedef struct
{
  char *host;
  guint16 port;
  RankRedisLink *link;
  gboolean started;
} Node;

struct _RankCluster
{
  RankLoop *loop;
  int timeout_ms;
  RankRedisTls *tls;  /* NULL: plain */
  GPtrArray *startup; /* GStrv: sent first on every new connection */
  GPtrArray *nodes;   /* Node *, the seeds first */
  guint n_seeds;
  gint16 owner[RANK_CLUSTER_SLOTS]; /* index in nodes; -1: unknown */
  gboolean refreshing;
  gint64 refreshed_at; /* monotonic us of the last request */
  guint ask_next;      /* round robin over nodes for CLUSTER SLOTS */
  guint n_masters;
  /* Replicas, from the map (Replica *; kept once seen, master -1 when the
   * map no longer lists them), and the heartbeat that measures their lag,
   * started by the first read that allows a replica. */
  GPtrArray *replicas;
  gboolean replicas_read;
  char *heartbeat_id;
  GPtrArray *heartbeat_keys; /* char *, per node index: NULL until needed */
  gint64 next_probe_us;
  gint64 next_refresh_us;
  /* rank_cluster_watch_nodes: the watcher, and the nodes it last heard of
   * ("host:port" lines, sorted). */
  RankClusterNodesFunc watch;
  gpointer watch_data;
  char *watched;
};

typedef struct
{
  char *host;
  guint16 port;
  gint master; /* node index; -1: not a replica in the map now */
  RankReplica lag;
} Replica;

guint16
rank_cluster_crc16 (const char *data, gsize len)
{
  guint16 crc = 0;

  for (gsize i = 0; i < len; i++)
    {
      crc ^= (guint16) ((guint8) data[i] << 8);
      for (int bit = 0; bit < 8; bit++)
        crc = (crc & 0x8000) ? (guint16) ((crc << 1) ^ 0x1021)
                             : (guint16) (crc << 1);
    }
  return crc;
}

guint
rank_cluster_slot (const char *key, gsize len)
{
  const char *open = memchr (key, '{', len);

  if (open != NULL)
    {
      gsize from = (gsize) (open - key) + 1;
      const char *close = memchr (key + from, '}', len - from);

      if (close != NULL && close > key + from)
        return rank_cluster_crc16 (key + from, (gsize) (close - key) - from)
               % RANK_CLUSTER_SLOTS;
    }
  return rank_cluster_crc16 (key, len) % RANK_CLUSTER_SLOTS;
}

gboolean
rank_cluster_parse_redirect (const char *text, gboolean *ask, guint *slot,
                             char **host, guint16 *port)
{
  const char *p, *colon;
  char *end = NULL;
  guint64 s, n;

  if (g_str_has_prefix (text, "MOVED "))
    *ask = FALSE, p = text + 6;
  else if (g_str_has_prefix (text, "ASK "))
    *ask = TRUE, p = text + 4;
  else
    return FALSE;
  if (!g_ascii_isdigit (*p))
    return FALSE;
  s = g_ascii_strtoull (p, &end, 10);
  if (end == p || *end != ' ' || s >= RANK_CLUSTER_SLOTS)
    return FALSE;
  p = end + 1;
  colon = strrchr (p, ':');
  if (colon == NULL || colon == p || !g_ascii_isdigit (colon[1]))
    return FALSE;
  n = g_ascii_strtoull (colon + 1, &end, 10);
  if (end == colon + 1 || *end != '\0' || n == 0 || n > 65535)
    return FALSE;
  *slot = (guint) s;
  *port = (guint16) n;
  *host = g_strndup (p, (gsize) (colon - p));
  return TRUE;
}

static gint
node_index (RankCluster *cluster, const char *host, guint16 port)
{
  RankAddress address = { (char *) host, port, NULL };
  Node *node;

  for (guint i = 0; i < cluster->nodes->len; i++)
    {
      node = g_ptr_array_index (cluster->nodes, i);
      if (node->port == port && strcmp (node->host, host) == 0)
        return (gint) i;
    }
  if (cluster->nodes->len >= RANK_NODES_MAX * 4)
    return -1; /* a map naming this many nodes is not one we trust */
  node = g_new0 (Node, 1);
  node->host = g_strdup (host);
  node->port = port;
  node->link = rank_redis_link_new (cluster->loop, &address,
                                    cluster->timeout_ms, cluster->tls);
  for (guint i = 0; i < cluster->startup->len; i++)
    {
      char **argv = g_ptr_array_index (cluster->startup, i);

      rank_redis_link_add_startup (node->link, (int) g_strv_length (argv),
                                   (const char **) argv, NULL);
    }
  g_ptr_array_add (cluster->nodes, node);
  return (gint) cluster->nodes->len - 1;
}

/* Node i's link, connecting from its first use on. */
static RankRedisLink *
node_link (RankCluster *cluster, guint i)
{
  Node *node = g_ptr_array_index (cluster->nodes, i);

  if (!node->started)
    {
      node->started = TRUE;
      /* Commands sent from now on wait for the connection. */
      rank_redis_link_connect_now (node->link);
    }
  return node->link;
}

/* ---- replicas ---- */

/* A key of master's slots for this worker's heartbeat (NULL if master
 * owns no slot now). */
static const char *
heartbeat_key (RankCluster *cluster, guint master)
{
  char **key;

  if (cluster->heartbeat_keys->len <= master)
    g_ptr_array_set_size (cluster->heartbeat_keys, (gint) master + 1);
  key = (char **) &g_ptr_array_index (cluster->heartbeat_keys, master);
  for (guint n = 0; *key == NULL && n < 64 * RANK_CLUSTER_SLOTS; n++)
    {
      g_autofree char *k = g_strdup_printf (RANK_HEARTBEAT_KEY_PREFIX "{%s/%u}",
                                            cluster->heartbeat_id, n);

      if (cluster->owner[rank_cluster_slot (k, strlen (k))] == (gint) master)
        *key = g_steal_pointer (&k);
    }
  return *key;
}

/* Before the loop sleeps, once replicas are read: every
 * RANK_REPLICA_PROBE_MS the heartbeat on each master with replicas and
 * its reading on each replica (replica.h), and the map asked for again now
 * and then, so that a replica that joined (an old master back after a
 * failover) is found. */
static int
probe (gpointer data)
{
  RankCluster *cluster = data;
  gint64 now = g_get_monotonic_time ();

  if (!cluster->replicas_read && cluster->watch == NULL)
    return -1;
  if (now >= cluster->next_refresh_us)
    {
      cluster->next_refresh_us
          = now + (gint64) RANK_CLUSTER_REPLICA_REFRESH_MS * 1000;
      rank_cluster_refresh (cluster);
    }
  if (!cluster->replicas_read)
    return (int) ((cluster->next_refresh_us - now) / 1000) + 1;
  if (now < cluster->next_probe_us)
    return (int) ((cluster->next_probe_us - now) / 1000) + 1;
  cluster->next_probe_us = now + (gint64) RANK_REPLICA_PROBE_MS * 1000;
  for (guint m = 0; m < cluster->nodes->len; m++)
    {
      gboolean any = FALSE;
      const char *key;

      for (guint i = 0; i < cluster->replicas->len; i++)
        any = any
              || ((Replica *) g_ptr_array_index (cluster->replicas, i))->master
                     == (gint) m;
      if (any && (key = heartbeat_key (cluster, m)) != NULL)
        rank_replica_beat (node_link (cluster, m), key, now);
    }
  for (guint i = 0; i < cluster->replicas->len; i++)
    {
      Replica *r = g_ptr_array_index (cluster->replicas, i);
      const char *key;

      if (r->master >= 0
          && (key = heartbeat_key (cluster, (guint) r->master)) != NULL)
        rank_replica_probe (&r->lag, key);
    }
  return RANK_REPLICA_PROBE_MS;
}

RankRedisLink *
rank_cluster_replica (RankCluster *cluster, guint slot, int max_lag_ms,
                      gint64 fresh_after_us)
{
  gint owner = cluster->owner[slot % RANK_CLUSTER_SLOTS];
  gint64 now = g_get_monotonic_time ();

  cluster->replicas_read = TRUE;
  if (owner < 0)
    return NULL;
  for (guint i = 0; i < cluster->replicas->len; i++)
    {
      Replica *r = g_ptr_array_index (cluster->replicas, i);

      if (r->master == owner
          && rank_replica_fresh (&r->lag, max_lag_ms, fresh_after_us, now))
        return r->lag.link;
    }
  return NULL;
}

RankCluster *
rank_cluster_new (RankLoop *loop, const RankAddress *seeds, guint n_seeds,
                  int timeout_ms, RankRedisTls *tls, int auth_argc,
                  const char *const *auth_argv)
{
  RankCluster *cluster = g_new0 (RankCluster, 1);

  g_assert (n_seeds > 0);
  cluster->loop = loop;
  cluster->timeout_ms = timeout_ms;
  cluster->tls = tls != NULL ? rank_redis_tls_ref (tls) : NULL;
  cluster->startup
      = g_ptr_array_new_with_free_func ((GDestroyNotify) g_strfreev);
  if (auth_argc > 0)
    {
      char **argv = g_new0 (char *, (gsize) auth_argc + 1);

      for (int i = 0; i < auth_argc; i++)
        argv[i] = g_strdup (auth_argv[i]);
      g_ptr_array_add (cluster->startup, argv);
    }
  cluster->nodes = g_ptr_array_new ();
  cluster->replicas = g_ptr_array_new ();
  cluster->heartbeat_keys = g_ptr_array_new_with_free_func (g_free);
  cluster->heartbeat_id = g_uuid_string_random ();
  rank_loop_add_prepare (loop, probe, cluster);
  for (guint i = 0; i < RANK_CLUSTER_SLOTS; i++)
    cluster->owner[i] = -1;
  for (guint i = 0; i < n_seeds; i++)
    {
      g_assert (seeds[i].host != NULL);
      node_index (cluster, seeds[i].host, seeds[i].port);
    }
  cluster->n_seeds = cluster->nodes->len;
  return cluster;
}

void
rank_cluster_add_startup (RankCluster *cluster, int argc,
                          const char *const *argv)
{
  char **copy = g_new0 (char *, (gsize) argc + 1);

  for (int i = 0; i < argc; i++)
    copy[i] = g_strdup (argv[i]);
  g_ptr_array_add (cluster->startup, copy);
  for (guint i = 0; i < cluster->nodes->len; i++)
    rank_redis_link_add_startup (
        ((Node *) g_ptr_array_index (cluster->nodes, i))->link, argc,
        (const char **) argv, NULL);
}

void
rank_cluster_start (RankCluster *cluster)
{
  for (guint i = 0; i < cluster->nodes->len; i++)
    node_link (cluster, i);
  rank_cluster_refresh (cluster);
}

void
rank_cluster_free (RankCluster *cluster)
{
  if (cluster == NULL)
    return;
  /* Freeing a link fails its pending commands: a CLUSTER SLOTS among them
   * still finds the cluster whole. */
  for (guint i = 0; i < cluster->nodes->len; i++)
    rank_redis_link_free (
        ((Node *) g_ptr_array_index (cluster->nodes, i))->link);
  for (guint i = 0; i < cluster->replicas->len; i++)
    rank_redis_link_free (
        ((Replica *) g_ptr_array_index (cluster->replicas, i))->lag.link);
  for (guint i = 0; i < cluster->replicas->len; i++)
    {
      Replica *r = g_ptr_array_index (cluster->replicas, i);

      g_free (r->host);
      g_free (r);
    }
  g_ptr_array_unref (cluster->replicas);
  g_ptr_array_unref (cluster->heartbeat_keys);
  g_free (cluster->heartbeat_id);
  g_free (cluster->watched);
  for (guint i = 0; i < cluster->nodes->len; i++)
    {
      Node *node = g_ptr_array_index (cluster->nodes, i);

      g_free (node->host);
      g_free (node);
    }
  g_ptr_array_unref (cluster->nodes);
  g_ptr_array_unref (cluster->startup);
  rank_redis_tls_unref (cluster->tls);
  g_free (cluster);
}

RankRedisLink *
rank_cluster_link (RankCluster *cluster, guint slot)
{
  gint owner = cluster->owner[slot % RANK_CLUSTER_SLOTS];

  return node_link (cluster, (guint) MAX (owner, 0));
}

RankRedisLink *
rank_cluster_link_to (RankCluster *cluster, const char *host, guint16 port)
{
  gint i = node_index (cluster, host, port);

  return i < 0 ? NULL : node_link (cluster, (guint) i);
}

void
rank_cluster_moved (RankCluster *cluster, guint slot, const char *host,
                    guint16 port)
{
  gint i = node_index (cluster, host, port);

  if (i < 0 || slot >= RANK_CLUSTER_SLOTS)
    return;
  node_link (cluster, (guint) i);
  cluster->owner[slot] = (gint16) i;
  /* A watcher hears of the map's nodes from the map. */
  if (cluster->watch != NULL)
    rank_cluster_refresh (cluster);
}

/* The replica at host:port, made on first sight: its own link, whose
 * connections send READONLY after the start-up commands. */
static Replica *
replica_at (RankCluster *cluster, const char *host, guint16 port)
{
  RankAddress address = { (char *) host, port, NULL };
  static const char *const readonly[] = { "READONLY" };
  Replica *r;

  for (guint i = 0; i < cluster->replicas->len; i++)
    {
      r = g_ptr_array_index (cluster->replicas, i);
      if (r->port == port && strcmp (r->host, host) == 0)
        return r;
    }
  r = g_new0 (Replica, 1);
  r->host = g_strdup (host);
  r->port = port;
  r->master = -1;
  r->lag.link = rank_redis_link_new (cluster->loop, &address,
                                     cluster->timeout_ms, cluster->tls);
  for (guint i = 0; i < cluster->startup->len; i++)
    {
      char **argv = g_ptr_array_index (cluster->startup, i);

      rank_redis_link_add_startup (r->lag.link, (int) g_strv_length (argv),
                                   (const char **) argv, NULL);
    }
  rank_redis_link_add_startup (r->lag.link, 1, (const char **) readonly, NULL);
  rank_redis_link_connect_now (r->lag.link);
  g_ptr_array_add (cluster->replicas, r);
  return r;
}

/* One CLUSTER SLOTS entry: {start, end, {host, port, id...}, replicas...}.
 * An empty host means the node that answered. */
static gboolean
read_range (RankCluster *cluster, const RankReply *e, const Node *asked)
{
  const RankReply *master;
  gint i;

  if (e->type != RANK_REPLY_ARRAY || e->elements < 3
      || e->element[0]->type != RANK_REPLY_INTEGER
      || e->element[1]->type != RANK_REPLY_INTEGER
      || e->element[2]->type != RANK_REPLY_ARRAY || e->element[2]->elements < 2
      || e->element[2]->element[0]->type != RANK_REPLY_STRING
      || e->element[2]->element[1]->type != RANK_REPLY_INTEGER)
    return FALSE;
  master = e->element[2];
  if (e->element[0]->integer < 0 || e->element[1]->integer >= RANK_CLUSTER_SLOTS
      || e->element[0]->integer > e->element[1]->integer
      || master->element[1]->integer <= 0
      || master->element[1]->integer > 65535)
    return FALSE;
  i = node_index (cluster,
                  master->element[0]->len > 0 ? master->element[0]->str
                                              : asked->host,
                  (guint16) master->element[1]->integer);
  if (i < 0)
    return FALSE;
  node_link (cluster, (guint) i);
  for (long long s = e->element[0]->integer; s <= e->element[1]->integer; s++)
    cluster->owner[s] = (gint16) i;
  for (gsize r = 3; r < e->elements; r++)
    {
      const RankReply *rep = e->element[r];

      if (rep->type == RANK_REPLY_ARRAY && rep->elements >= 2
          && rep->element[0]->type == RANK_REPLY_STRING
          && rep->element[1]->type == RANK_REPLY_INTEGER
          && rep->element[1]->integer > 0 && rep->element[1]->integer <= 65535)
        replica_at (cluster,
                    rep->element[0]->len > 0 ? rep->element[0]->str
                                             : asked->host,
                    (guint16) rep->element[1]->integer)
            ->master
            = i;
    }
  return TRUE;
}

typedef struct
{
  RankCluster *cluster;
  guint asked;
} SlotsAsk;

static gint
compare_strings (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* Tells the watcher of the map's nodes (masters is the nodes owning
 * slots, by index), if they changed. */
static void
report_nodes (RankCluster *cluster, const gboolean *masters)
{
  g_autoptr (GPtrArray) lines = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GArray) addresses
      = g_array_new (FALSE, TRUE, sizeof (RankAddress));
  g_autofree char *all = NULL;

  if (cluster->watch == NULL)
    return;
  for (guint i = 0; i < cluster->nodes->len; i++)
    if (masters[i])
      {
        Node *node = g_ptr_array_index (cluster->nodes, i);
        RankAddress a = { node->host, node->port, NULL };

        g_array_append_val (addresses, a);
      }
  for (guint i = 0; i < cluster->replicas->len; i++)
    {
      Replica *r = g_ptr_array_index (cluster->replicas, i);
      RankAddress a = { r->host, r->port, NULL };

      if (r->master >= 0)
        g_array_append_val (addresses, a);
    }
  for (guint i = 0; i < addresses->len; i++)
    {
      RankAddress *a = &g_array_index (addresses, RankAddress, i);

      g_ptr_array_add (lines, g_strdup_printf ("%s:%u", a->host, a->port));
    }
  g_ptr_array_sort (lines, compare_strings);
  g_ptr_array_add (lines, NULL);
  all = g_strjoinv ("\n", (char **) lines->pdata);
  if (addresses->len == 0 || g_strcmp0 (all, cluster->watched) == 0)
    return;
  g_free (cluster->watched);
  cluster->watched = g_steal_pointer (&all);
  cluster->watch ((const RankAddress *) addresses->data, addresses->len,
                  cluster->watch_data);
}

void
rank_cluster_watch_nodes (RankCluster *cluster, RankClusterNodesFunc func,
                          gpointer data)
{
  cluster->watch = func;
  cluster->watch_data = data;
}

static void
slots_reply (const RankReply *reply, const GError *error, gpointer data)
{
  SlotsAsk *ask = data;
  RankCluster *cluster = ask->cluster;
  const Node *asked = g_ptr_array_index (cluster->nodes, ask->asked);
  gboolean seen[RANK_NODES_MAX * 4] = { FALSE };

  g_free (ask);
  cluster->refreshing = FALSE;
  if (error != NULL || reply->type != RANK_REPLY_ARRAY)
    {
      g_message ("redis cluster: CLUSTER SLOTS from %s:%u failed: %s",
                 asked->host, asked->port,
                 error != NULL                     ? error->message
                 : reply->type == RANK_REPLY_ERROR ? reply->str
                                                   : "not an array");
      return;
    }
  for (guint i = 0; i < RANK_CLUSTER_SLOTS; i++)
    cluster->owner[i] = -1;
  for (guint i = 0; i < cluster->replicas->len; i++)
    ((Replica *) g_ptr_array_index (cluster->replicas, i))->master = -1;
  /* The heartbeat keys were chosen for the old owners' slots. */
  for (guint i = 0; i < cluster->heartbeat_keys->len; i++)
    g_clear_pointer (&g_ptr_array_index (cluster->heartbeat_keys, i), g_free);
  for (gsize i = 0; i < reply->elements; i++)
    if (!read_range (cluster, reply->element[i], asked))
      g_warning ("redis cluster: CLUSTER SLOTS from %s:%u: entry %zu "
                 "malformed, skipped",
                 asked->host, asked->port, i);
  cluster->n_masters = 0;
  for (guint i = 0; i < RANK_CLUSTER_SLOTS; i++)
    if (cluster->owner[i] >= 0 && !seen[cluster->owner[i]])
      {
        seen[cluster->owner[i]] = TRUE;
        cluster->n_masters++;
      }
  report_nodes (cluster, seen);
}

void
rank_cluster_refresh (RankCluster *cluster)
{
  static const char *const argv[] = { "CLUSTER", "SLOTS" };
  gint64 now = g_get_monotonic_time ();
  SlotsAsk *ask;

  if (cluster->refreshing
      || (cluster->refreshed_at != 0
          && now - cluster->refreshed_at
                 < (gint64) RANK_CLUSTER_REFRESH_MIN_MS * 1000))
    return;
  cluster->refreshing = TRUE;
  cluster->refreshed_at = now;
  ask = g_new (SlotsAsk, 1);
  ask->cluster = cluster;
  /* The next connected node (each request another): a dead master does
   * not stop the map from coming back. */
  for (guint tries = 0; tries < cluster->nodes->len; tries++)
    {
      ask->asked = cluster->ask_next++ % cluster->nodes->len;
      if (rank_redis_link_is_up (
              ((Node *) g_ptr_array_index (cluster->nodes, ask->asked))->link))
        break;
    }
  rank_redis_link_send (node_link (cluster, ask->asked), 2,
                        (const char **) argv, NULL, slots_reply, ask);
}

gboolean
rank_cluster_wait_ready (RankCluster *cluster, int timeout_ms, GError **error)
{
  /* The seeds were made by rank_cluster_new; their pointers do not change. */
  return rank_redis_link_wait_ready (
      ((Node *) g_ptr_array_index (cluster->nodes, 0))->link, timeout_ms,
      error);
}

guint
rank_cluster_n_masters (RankCluster *cluster)
{
  return cluster->n_masters;
}
