/* tracking.c -- the read cache's tracking session (see tracking.h).
 *
 * Each node goes IDLE -> ID (CLIENT ID of the subscriber) -> SUBSCRIBE ->
 * TRACK (CLIENT TRACKING off, then on, redirected to that id, with every
 * board registered so far) -> UP. The loop's prepare hook notices a
 * connection that dropped or was replaced (its connection count moved) and
 * puts the node back to IDLE; replies of an older attempt are ignored.
 */
#include "tracking.h"

#include <string.h>

#include "constants.h"
#include "redis_link.h"

typedef enum
{
  PHASE_OFF, /* not started: no connections */
  PHASE_IDLE,
  PHASE_ID,
  PHASE_SUBSCRIBE,
  PHASE_TRACK,
  PHASE_UP,
} Phase;

typedef struct
{
  RankRedisLink *sub;       /* subscribed to the invalidation channel */
  RankRedisLink *trk;       /* CLIENT TRACKING, redirected to sub */
  guint sub_conn, trk_conn; /* their connection counts in this attempt */
  Phase phase;
  guint attempt;
  long long id;         /* sub's CLIENT ID */
  gint64 retry_at;      /* monotonic us: after a refusal, not before */
  guint subscribed;     /* sub's connection count when it subscribed */
  GHashTable *prefixes; /* registered in this attempt */
  gboolean active;      /* in the list tracked now (rank_tracking_set_nodes) */
} Node;

struct _RankTracking
{
  RankLoop *loop;
  RankReadCache *cache;
  /* Every node tracked so far (a Cluster's map changes; a link cannot be
   * freed while the loop runs, so nodes that leave the list stay, idle,
   * and come back as they were): indices do not change. */
  Node *nodes;
  guint n_nodes;
  RankAddress *addresses;
  gboolean started; /* the cache asked for the session */
  int timeout_ms;
  char *user, *password;
  gboolean up;
  guint64 epoch;
  GHashTable *boards; /* name -> shards: every board registered */
  gint want_posted;   /* atomic: a take_wanted is posted */
  gboolean stopping;
};

/* One command's reply, for node in attempt (stale after a reset). */
typedef struct
{
  RankTracking *t;
  guint node;
  guint attempt;
  /* A registration: the boards, their shards, replies still due. */
  char **boards;
  GArray *shards;
  guint *left;
  gboolean *failed;
  guint64 epoch;
} Ask;

static void next_step (RankTracking *t, guint i);

static Ask *
ask_new (RankTracking *t, guint node)
{
  Ask *a = g_new0 (Ask, 1);

  a->t = t;
  a->node = node;
  a->attempt = node < t->n_nodes ? t->nodes[node].attempt : 0;
  return a;
}

/* The reply is for the node's current attempt. */
static gboolean
current (const Ask *a)
{
  return !a->t->stopping && a->node < a->t->n_nodes
         && a->t->nodes[a->node].attempt == a->attempt;
}

static void
node_reset (Node *n)
{
  n->phase = PHASE_IDLE;
  n->attempt++;
  g_hash_table_remove_all (n->prefixes);
}

static void
fail_node (RankTracking *t, guint i, const char *what, const char *why)
{
  g_warning ("read cache: tracking on %s: %s failed: %s; retrying in %d ms",
             rank_redis_link_name (t->nodes[i].sub), what, why,
             RANK_TRACKING_RETRY_MS);
  node_reset (&t->nodes[i]);
  t->nodes[i].retry_at
      = g_get_monotonic_time () + (gint64) RANK_TRACKING_RETRY_MS * 1000;
}

/* A reply that is an error, or none: says why (else NULL). */
static const char *
failure (const RankReply *reply, const GError *error)
{
  if (error != NULL)
    return error->message;
  if (reply != NULL && reply->type == RANK_REPLY_ERROR)
    return reply->str;
  return NULL;
}

/* ---- prefixes ---- */

static void
add_prefixes_of (GPtrArray *out, const char *board, guint shards)
{
  static const char *const families[] = { "z", "t", "a", "d", "c", "p:" };

  for (guint f = 0; f < G_N_ELEMENTS (families); f++)
    g_ptr_array_add (out, g_strdup_printf ("rk:{%s}:%s", board, families[f]));
  for (guint s = 0; shards > 1 && s < shards; s++)
    for (guint f = 0; f < G_N_ELEMENTS (families); f++)
      g_ptr_array_add (
          out, g_strdup_printf ("rk:s:{%s/%u}:%s", board, s, families[f]));
}

/* CLIENT TRACKING on for node, with those of prefixes it does not have
 * yet (which it then has); NULL if none is new. */
static GPtrArray *
tracking_command (RankTracking *t, Node *n, GPtrArray *prefixes)
{
  GPtrArray *argv = g_ptr_array_new_with_free_func (g_free);

  g_ptr_array_add (argv, g_strdup ("CLIENT"));
  g_ptr_array_add (argv, g_strdup ("TRACKING"));
  g_ptr_array_add (argv, g_strdup ("on"));
  g_ptr_array_add (argv, g_strdup ("REDIRECT"));
  g_ptr_array_add (argv, g_strdup_printf ("%lld", n->id));
  g_ptr_array_add (argv, g_strdup ("BCAST"));
  for (guint i = 0; i < prefixes->len; i++)
    {
      const char *p = prefixes->pdata[i];

      if (g_hash_table_contains (n->prefixes, p))
        continue;
      g_hash_table_add (n->prefixes, g_strdup (p));
      g_ptr_array_add (argv, g_strdup ("PREFIX"));
      g_ptr_array_add (argv, g_strdup (p));
    }
  if (argv->len == 6)
    {
      g_ptr_array_unref (argv);
      return NULL;
    }
  return argv;
}

static void
send_argv (RankRedisLink *link, GPtrArray *argv, RankRedisReplyFunc func,
           gpointer data)
{
  rank_redis_link_send (link, (int) argv->len, (const char **) argv->pdata,
                        NULL, func, data);
}

/* ---- the session ---- */

static guint
active_nodes (RankTracking *t)
{
  guint n = 0;

  for (guint i = 0; i < t->n_nodes; i++)
    n += t->nodes[i].active ? 1 : 0;
  return n;
}

static void
session_check (RankTracking *t)
{
  /* No node (a Cluster's map not read yet) is no session. */
  gboolean all = active_nodes (t) > 0;

  for (guint i = 0; i < t->n_nodes; i++)
    all = all && (!t->nodes[i].active || t->nodes[i].phase == PHASE_UP);
  if (all == t->up)
    return;
  t->up = all;
  t->epoch = rank_read_cache_tracking (t->cache, all);
  if (all)
    {
      GHashTableIter it;
      gpointer board, shards;

      /* Every node's session began with every board registered so far. */
      g_hash_table_iter_init (&it, t->boards);
      while (g_hash_table_iter_next (&it, &board, &shards))
        rank_read_cache_registered (t->cache, board, GPOINTER_TO_UINT (shards),
                                    t->epoch);
      g_message ("read cache: tracking is up on %u Redis node(s)",
                 active_nodes (t));
    }
  else
    g_message ("read cache: tracking is down; cached answers dropped");
}

static void
tracking_on (const RankReply *reply, const GError *error, gpointer data)
{
  Ask *a = data;
  const char *why = failure (reply, error);

  if (current (a))
    {
      if (why != NULL)
        fail_node (a->t, a->node, "CLIENT TRACKING", why);
      else
        a->t->nodes[a->node].phase = PHASE_UP;
      session_check (a->t);
    }
  g_free (a);
}

static void
subscribed (const RankReply *reply, const GError *error, gpointer data)
{
  Ask *a = data;
  const char *why = failure (reply, error);

  if (current (a))
    {
      if (why != NULL)
        fail_node (a->t, a->node, "SUBSCRIBE", why);
      else
        {
          Node *n = &a->t->nodes[a->node];

          n->subscribed = rank_redis_link_connections (n->sub);
          next_step (a->t, a->node);
        }
    }
  g_free (a);
}

static void
got_id (const RankReply *reply, const GError *error, gpointer data)
{
  Ask *a = data;
  const char *why = failure (reply, error);

  if (current (a))
    {
      if (why == NULL && reply->type != RANK_REPLY_INTEGER)
        why = "not an integer";
      if (why != NULL)
        fail_node (a->t, a->node, "CLIENT ID", why);
      else
        {
          a->t->nodes[a->node].id = reply->integer;
          next_step (a->t, a->node);
        }
    }
  g_free (a);
}

static void
ignore (const RankReply *reply, const GError *error, gpointer data)
{
}

/* Node i's next command of its attempt. */
static void
next_step (RankTracking *t, guint i)
{
  Node *n = &t->nodes[i];

  switch (n->phase)
    {
    case PHASE_IDLE:
      {
        const char *argv[] = { "CLIENT", "ID" };

        n->attempt++;
        n->sub_conn = rank_redis_link_connections (n->sub);
        n->trk_conn = rank_redis_link_connections (n->trk);
        if (n->subscribed == n->sub_conn)
          {
            /* Still subscribed (tracking was refused, the connection
             * stayed): it takes no other command, and its id stands. */
            n->phase = PHASE_SUBSCRIBE;
            next_step (t, i);
            break;
          }
        n->phase = PHASE_ID;
        rank_redis_link_send (n->sub, 2, argv, NULL, got_id, ask_new (t, i));
        break;
      }
    case PHASE_ID:
      {
        const char *argv[] = { "SUBSCRIBE", RANK_TRACKING_CHANNEL };

        n->phase = PHASE_SUBSCRIBE;
        rank_redis_link_send (n->sub, 2, argv, NULL, subscribed,
                              ask_new (t, i));
        break;
      }
    case PHASE_SUBSCRIBE:
      {
        const char *off[] = { "CLIENT", "TRACKING", "off" };
        g_autoptr (GPtrArray) prefixes
            = g_ptr_array_new_with_free_func (g_free);
        g_autoptr (GPtrArray) argv = NULL;
        GHashTableIter it;
        gpointer board, shards;

        /* A placeholder no key has: broadcast mode without a prefix
         * would report every key. */
        g_ptr_array_add (prefixes, g_strdup ("rk:{}:"));
        g_hash_table_iter_init (&it, t->boards);
        while (g_hash_table_iter_next (&it, &board, &shards))
          add_prefixes_of (prefixes, board, GPOINTER_TO_UINT (shards));
        n->phase = PHASE_TRACK;
        /* A tracking connection that outlived its subscriber still has
         * the old prefixes, which may not be given twice. */
        rank_redis_link_send (n->trk, 3, off, NULL, ignore, NULL);
        argv = tracking_command (t, n, prefixes);
        send_argv (n->trk, argv, tracking_on, ask_new (t, i));
        break;
      }
    default:
      break;
    }
}

/* ---- invalidations ---- */

static void
message (const RankReply *reply, const GError *error, gpointer data)
{
  RankTracking *t = data;
  const RankReply *payload;

  if (reply->type != RANK_REPLY_ARRAY || reply->elements != 3
      || reply->element[0]->type != RANK_REPLY_STRING
      || strcmp (reply->element[0]->str, "message") != 0)
    return;
  payload = reply->element[2];
  if (payload->type == RANK_REPLY_NIL)
    {
      /* FLUSHALL, FLUSHDB. */
      rank_read_cache_changed_all (t->cache);
      return;
    }
  if (payload->type != RANK_REPLY_ARRAY)
    return;
  for (gsize i = 0; i < payload->elements; i++)
    if (payload->element[i]->type == RANK_REPLY_STRING)
      rank_read_cache_invalidated (t->cache, payload->element[i]->str,
                                   payload->element[i]->len);
}

/* ---- registrations ---- */

static void
registered (const RankReply *reply, const GError *error, gpointer data)
{
  Ask *a = data;
  const char *why = failure (reply, error);

  if (why != NULL)
    *a->failed = TRUE;
  if (why != NULL && current (a))
    g_warning ("read cache: tracking on %s: CLIENT TRACKING failed: %s",
               rank_redis_link_name (a->t->nodes[a->node].sub), why);
  if (--*a->left == 0)
    {
      for (guint b = 0; a->boards[b] != NULL; b++)
        {
          guint shards = g_array_index (a->shards, guint, b);

          if (a->t->stopping)
            ;
          else if (*a->failed)
            rank_read_cache_refused (a->t->cache, a->boards[b]);
          else
            {
              g_hash_table_replace (a->t->boards, g_strdup (a->boards[b]),
                                    GUINT_TO_POINTER (shards));
              rank_read_cache_registered (a->t->cache, a->boards[b], shards,
                                          a->epoch);
            }
        }
      g_strfreev (a->boards);
      g_array_unref (a->shards);
      g_free (a->left);
      g_free (a->failed);
    }
  g_free (a);
}

static void
start_node (RankTracking *t, guint i)
{
  Node *n = &t->nodes[i];
  const char *sub_name[] = { "CLIENT", "SETNAME", RANK_TRACKING_CLIENT_NAME };
  const char *trk_name[] = { "CLIENT", "SETNAME", "rankd-tracking" };
  const char *auth[] = { "AUTH", t->user, t->password };
  int auth_argc = t->user ? 3 : 2;

  if (t->user == NULL)
    auth[1] = t->password;
  n->sub = rank_redis_link_new (t->loop, &t->addresses[i], t->timeout_ms);
  n->trk = rank_redis_link_new (t->loop, &t->addresses[i], t->timeout_ms);
  if (t->password != NULL)
    {
      rank_redis_link_add_startup (n->sub, auth_argc, auth, NULL);
      rank_redis_link_add_startup (n->trk, auth_argc, auth, NULL);
    }
  rank_redis_link_add_startup (n->sub, 3, sub_name, NULL);
  rank_redis_link_add_startup (n->trk, 3, trk_name, NULL);
  rank_redis_link_set_push (n->sub, message, t);
  rank_redis_link_start (n->sub);
  rank_redis_link_start (n->trk);
  n->phase = PHASE_IDLE;
}

static void
start_links (RankTracking *t)
{
  for (guint i = 0; i < t->n_nodes; i++)
    if (t->nodes[i].sub == NULL)
      start_node (t, i);
}

/* The cache asks: start the session, or register the boards it wants. */
static void
take_wanted (gpointer data)
{
  RankTracking *t = data;
  g_autoptr (GArray) shards = g_array_new (FALSE, FALSE, sizeof (guint));
  g_auto (GStrv) boards = NULL;
  g_autoptr (GPtrArray) prefixes = g_ptr_array_new_with_free_func (g_free);
  guint *left;
  gboolean *failed;

  g_atomic_int_set (&t->want_posted, 0);
  if (t->stopping)
    return;
  if (!t->started)
    {
      t->started = TRUE;
      start_links (t);
      return;
    }
  boards = rank_read_cache_take_wanted (t->cache, shards);
  if (boards[0] == NULL || !t->up)
    return;
  for (guint b = 0; boards[b] != NULL; b++)
    add_prefixes_of (prefixes, boards[b], g_array_index (shards, guint, b));
  left = g_new0 (guint, 1);
  failed = g_new0 (gboolean, 1);
  *left = 1; /* until every node's command is sent */
  for (guint i = 0; i < t->n_nodes; i++)
    {
      g_autoptr (GPtrArray) argv = NULL;
      Ask *a;

      if (!t->nodes[i].active
          || (argv = tracking_command (t, &t->nodes[i], prefixes)) == NULL)
        continue;
      a = ask_new (t, i);
      a->left = left;
      a->failed = failed;
      a->epoch = t->epoch;
      a->boards = boards;
      a->shards = shards;
      (*left)++;
      send_argv (t->nodes[i].trk, argv, registered, a);
    }
  {
    /* The count's own reference, as one more reply. */
    Ask *a = ask_new (t, G_MAXUINT);

    a->left = left;
    a->failed = failed;
    a->epoch = t->epoch;
    a->boards = g_steal_pointer (&boards);
    a->shards = g_steal_pointer (&shards);
    registered (NULL, NULL, a);
  }
}

static void
want (gpointer data)
{
  RankTracking *t = data;

  if (g_atomic_int_compare_and_exchange (&t->want_posted, 0, 1))
    rank_loop_post (t->loop, take_wanted, t);
}

/* Before the loop sleeps: a node whose connection dropped or was replaced
 * starts over; one with both connections up begins its attempt. */
static int
prepare (gpointer data)
{
  RankTracking *t = data;
  gint64 now = g_get_monotonic_time ();
  int timeout = -1;

  if (t->stopping || !t->started)
    return -1;
  for (guint i = 0; i < t->n_nodes; i++)
    {
      Node *n = &t->nodes[i];
      gboolean sub_up, trk_up;

      if (!n->active)
        continue;
      sub_up = rank_redis_link_is_up (n->sub);
      trk_up = rank_redis_link_is_up (n->trk);

      if (n->phase != PHASE_IDLE
          && (!sub_up || !trk_up
              || rank_redis_link_connections (n->sub) != n->sub_conn
              || rank_redis_link_connections (n->trk) != n->trk_conn))
        node_reset (n);
      if (n->phase == PHASE_IDLE && sub_up && trk_up)
        {
          /* Refused: Redis is asked again later, not in a tight loop. */
          if (n->retry_at > now)
            {
              int wait = (int) ((n->retry_at - now) / 1000) + 1;

              timeout = timeout < 0 ? wait : MIN (timeout, wait);
            }
          else
            next_step (t, i);
        }
    }
  session_check (t);
  return timeout;
}

/* Node i's index in the pool, or -1. */
static gint
node_at (RankTracking *t, const RankAddress *a)
{
  for (guint i = 0; i < t->n_nodes; i++)
    if (a->port == t->addresses[i].port
        && g_strcmp0 (a->host, t->addresses[i].host) == 0
        && g_strcmp0 (a->path, t->addresses[i].path) == 0)
      return (gint) i;
  return -1;
}

/* A new node of the pool, active; its index. */
static guint
add_node (RankTracking *t, const RankAddress *a)
{
  guint i = t->n_nodes++;

  t->nodes = g_renew (Node, t->nodes, t->n_nodes);
  t->addresses = g_renew (RankAddress, t->addresses, t->n_nodes);
  memset (&t->nodes[i], 0, sizeof (Node));
  t->addresses[i].host = g_strdup (a->host);
  t->addresses[i].port = a->port;
  t->addresses[i].path = g_strdup (a->path);
  t->nodes[i].phase = PHASE_OFF;
  t->nodes[i].active = TRUE;
  t->nodes[i].prefixes
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  return i;
}

void
rank_tracking_set_nodes (RankTracking *t, const RankAddress *nodes,
                         guint n_nodes)
{
  gboolean changed = FALSE;

  if (t->stopping)
    return;
  for (guint i = 0; i < t->n_nodes; i++)
    {
      Node *n = &t->nodes[i];
      gboolean wanted = FALSE;

      for (guint j = 0; j < n_nodes && !wanted; j++)
        wanted = node_at (t, &nodes[j]) == (gint) i;
      if (wanted == n->active)
        continue;
      changed = TRUE;
      n->active = wanted;
      /* Back in the list: it missed the boards registered meanwhile, so it
       * starts its part of the session over. */
      if (wanted && n->phase != PHASE_OFF)
        node_reset (n);
    }
  for (guint j = 0; j < n_nodes; j++)
    if (node_at (t, &nodes[j]) < 0)
      {
        guint i = add_node (t, &nodes[j]);

        changed = TRUE;
        if (t->started)
          start_node (t, i);
      }
  if (!changed)
    return;
  g_message ("read cache: tracking follows the Redis Cluster map: %u node(s)",
             n_nodes);
  /* A node new to the session is not up yet: the session is down (every
   * answer dropped) until it is. */
  session_check (t);
}

RankTracking *
rank_tracking_new (RankLoop *loop, RankReadCache *cache,
                   const RankAddress *nodes, guint n_nodes, int timeout_ms,
                   const char *user, const char *password)
{
  RankTracking *t = g_new0 (RankTracking, 1);

  t->loop = loop;
  t->cache = cache;
  for (guint i = 0; i < n_nodes; i++)
    add_node (t, &nodes[i]);
  t->timeout_ms = timeout_ms;
  t->user = g_strdup (user);
  t->password = g_strdup (password);
  t->boards = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  rank_loop_add_prepare (loop, prepare, t);
  rank_read_cache_set_want (cache, want, t);
  return t;
}

void
rank_tracking_free (RankTracking *t)
{
  if (t == NULL)
    return;
  t->stopping = TRUE;
  rank_read_cache_set_want (t->cache, NULL, NULL);
  for (guint i = 0; i < t->n_nodes; i++)
    {
      rank_redis_link_free (t->nodes[i].sub);
      rank_redis_link_free (t->nodes[i].trk);
      g_hash_table_unref (t->nodes[i].prefixes);
      rank_address_clear (&t->addresses[i]);
    }
  g_free (t->nodes);
  g_free (t->addresses);
  g_free (t->user);
  g_free (t->password);
  g_hash_table_unref (t->boards);
  g_free (t);
}
