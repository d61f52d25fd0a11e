/* tracking.c -- the read cache's tracking session (see tracking.h).
 *
 * Each node goes IDLE -> ID (CLIENT ID of the subscriber) -> SUBSCRIBE ->
 * TRACK (CLIENT TRACKING off, then on, redirected to that id, with every
 * board registered so far, RANK_TRACKING_PREFIXES_PER_COMMAND prefixes a
 * command) -> UP. The loop's prepare hook notices a connection that
 * dropped or was replaced (its connection count moved) and puts the node
 * back to IDLE; replies of an older attempt are ignored.
 *
 * The tracked set (t->boards) takes at most max_slots prefixes. Redis
 * cannot take one prefix out of a session, so when a board does not fit,
 * the set is rotated: each node's spare tracking connection registers the
 * boards read most recently (half the bound at most), and only once every
 * node answered is the old connection turned off and the two swapped. The
 * boards kept are tracked by one connection or the other at every moment,
 * so their answers stand; the others' go. Boards asked for meanwhile wait
 * for the rotation (rank_read_cache_deferred).
 */
#include "tracking.h"

#include <string.h>

#include "constants.h"
#include "metrics.h"
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
  RankRedisLink *spare;     /* the next trk, while the set is rotated */
  guint sub_conn, trk_conn; /* their connection counts in this attempt */
  guint spare_conn;         /* spare's, when the rotation began */
  guint track_left;         /* TRACK: CLIENT TRACKING replies still due */
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
  RankRedisTls *tls; /* NULL: plain */
  gboolean up;
  guint64 epoch;
  GHashTable *boards; /* name -> shards: every board registered */
  guint max_slots;    /* prefixes the set may take (--read-cache-...) */
  guint slots;        /* those boards take, and registrations in flight */
  guint pending;      /* registrations in flight */
  struct _Rotation *rotation; /* in flight, or NULL */
  gboolean rotate_wanted;     /* a board did not fit */
  guint rotate_need;          /* the most prefixes such a board takes */
  gint64 rotate_at;           /* monotonic us: after a failed one, not before */
  gint want_posted;           /* atomic: a take_wanted is posted */
  gboolean stopping;
};

/* A rotation of the tracked set (see the top): the new set, registered on
 * every node's spare connection; replies still due. */
typedef struct _Rotation
{
  RankTracking *t;
  guint64 epoch;
  GHashTable *boards;   /* name -> shards */
  GHashTable *prefixes; /* what each spare has */
  guint left;
  gboolean failed;
} Rotation;

/* A registration of boards on every node, in the session of epoch. */
typedef struct
{
  char **boards;
  GArray *shards; /* shards[i] of boards[i] */
  guint left;     /* replies still due */
  gboolean failed;
  guint slots; /* the prefixes it takes */
  guint64 epoch;
} Registration;

/* One command's reply, for node in attempt (stale after a reset); of a
 * registration or a rotation, if any. */
typedef struct
{
  RankTracking *t;
  guint node;
  guint attempt;
  Registration *registration;
  Rotation *rotation;
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

/* One prefix for all of a board's keys ("rk:{board}:"), and one a shard:
 * Redis compares each key it writes with every prefix, so fewer is
 * cheaper. Names hold no '{' or '}' (validate.c), so no board's prefix is
 * a prefix of another's, which Redis would refuse. The keys it also covers
 * beside the board's data (request records, the queue's stream) change
 * with an update of the board or just before one: an invalidation more,
 * at most. */
static void
add_prefixes_of (GPtrArray *out, const char *board, guint shards)
{
  g_ptr_array_add (out, g_strdup_printf ("rk:{%s}:", board));
  for (guint s = 0; shards > 1 && s < shards; s++)
    g_ptr_array_add (out, g_strdup_printf ("rk:s:{%s/%u}:", board, s));
}

/* The prefixes a board of shards shards takes (as add_prefixes_of). */
static guint
slots_of (guint shards)
{
  return shards > 1 ? shards + 1 : 1;
}

/* CLIENT TRACKING on, redirected to id, with those of prefixes have does
 * not have yet (which it then has), at most
 * RANK_TRACKING_PREFIXES_PER_COMMAND a command: Redis checks each new
 * prefix against every one of the session's. The commands (argv arrays);
 * none if no prefix is new. */
static GPtrArray *
tracking_commands (long long id, GHashTable *have, GPtrArray *prefixes)
{
  GPtrArray *commands
      = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  GPtrArray *argv = NULL;

  for (guint i = 0; i < prefixes->len; i++)
    {
      const char *p = prefixes->pdata[i];

      if (g_hash_table_contains (have, p))
        continue;
      g_hash_table_add (have, g_strdup (p));
      if (argv == NULL
          || argv->len >= 6 + 2 * RANK_TRACKING_PREFIXES_PER_COMMAND)
        {
          argv = g_ptr_array_new_with_free_func (g_free);
          g_ptr_array_add (argv, g_strdup ("CLIENT"));
          g_ptr_array_add (argv, g_strdup ("TRACKING"));
          g_ptr_array_add (argv, g_strdup ("on"));
          g_ptr_array_add (argv, g_strdup ("REDIRECT"));
          g_ptr_array_add (argv, g_strdup_printf ("%lld", id));
          g_ptr_array_add (argv, g_strdup ("BCAST"));
          g_ptr_array_add (commands, argv);
        }
      g_ptr_array_add (argv, g_strdup ("PREFIX"));
      g_ptr_array_add (argv, g_strdup (p));
    }
  return commands;
}

/* A placeholder prefix no key has: broadcast mode without a prefix would
 * report every key. */
static GPtrArray *
prefixes_new (void)
{
  GPtrArray *prefixes = g_ptr_array_new_with_free_func (g_free);

  g_ptr_array_add (prefixes, g_strdup ("rk:{}:"));
  return prefixes;
}

/* Prefixes of every board of boards (name -> shards). */
static void
add_prefixes_of_set (GPtrArray *out, GHashTable *boards)
{
  GHashTableIter it;
  gpointer board, shards;

  g_hash_table_iter_init (&it, boards);
  while (g_hash_table_iter_next (&it, &board, &shards))
    add_prefixes_of (out, board, GPOINTER_TO_UINT (shards));
}

static guint
slots_of_set (GHashTable *boards)
{
  GHashTableIter it;
  gpointer shards;
  guint slots = 0;

  g_hash_table_iter_init (&it, boards);
  while (g_hash_table_iter_next (&it, NULL, &shards))
    slots += slots_of (GPOINTER_TO_UINT (shards));
  return slots;
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
  /* Nothing is deferred in a new session: boards that do not fit ask
   * again. */
  t->rotate_wanted = FALSE;
  t->rotate_need = 0;
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
      Node *n = &a->t->nodes[a->node];

      if (why != NULL)
        fail_node (a->t, a->node, "CLIENT TRACKING", why);
      else if (--n->track_left == 0)
        n->phase = PHASE_UP;
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
        g_autoptr (GPtrArray) prefixes = prefixes_new ();
        g_autoptr (GPtrArray) commands = NULL;

        /* The set is bounded (max_slots), and so is each command: a lost
         * session costs Redis a few short commands to recover, not one
         * that outlasts --redis-timeout and is sent again. */
        add_prefixes_of_set (prefixes, t->boards);
        n->phase = PHASE_TRACK;
        /* A tracking connection that outlived its subscriber still has
         * the old prefixes, which may not be given twice; a spare left
         * from a rotation that did not end has some too. */
        rank_redis_link_send (n->trk, 3, off, NULL, ignore, NULL);
        rank_redis_link_send (n->spare, 3, off, NULL, ignore, NULL);
        commands = tracking_commands (n->id, n->prefixes, prefixes);
        /* Never none: n->prefixes was emptied, the placeholder is new. */
        g_assert (commands->len > 0);
        n->track_left = commands->len;
        for (guint c = 0; c < commands->len; c++)
          send_argv (n->trk, commands->pdata[c], tracking_on, ask_new (t, i));
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

/* board of shards shards is in the set (replacing what it had). */
static void
set_board (RankTracking *t, const char *board, guint shards)
{
  gpointer old;

  if (g_hash_table_lookup_extended (t->boards, board, NULL, &old))
    t->slots -= slots_of (GPOINTER_TO_UINT (old));
  g_hash_table_replace (t->boards, g_strdup (board), GUINT_TO_POINTER (shards));
  t->slots += slots_of (shards);
  rank_metrics_tracked (t->slots, FALSE);
}

static void
registered (const RankReply *reply, const GError *error, gpointer data)
{
  Ask *a = data;
  Registration *r = a->registration;
  RankTracking *t = a->t;
  const char *why = failure (reply, error);

  if (why != NULL)
    r->failed = TRUE;
  if (why != NULL && current (a))
    g_warning ("read cache: tracking on %s: CLIENT TRACKING failed: %s",
               rank_redis_link_name (t->nodes[a->node].sub), why);
  g_free (a);
  if (--r->left > 0)
    return;
  if (!t->stopping)
    {
      t->pending--;
      t->slots -= r->slots;
    }
  for (guint b = 0; !t->stopping && r->boards[b] != NULL; b++)
    {
      guint shards = g_array_index (r->shards, guint, b);

      if (r->failed)
        rank_read_cache_refused (t->cache, r->boards[b]);
      else
        {
          /* Prefixes a failed registration sent may be in Redis: not in
           * the set, they go at its next rotation. */
          set_board (t, r->boards[b], shards);
          rank_read_cache_registered (t->cache, r->boards[b], shards, r->epoch);
        }
    }
  g_strfreev (r->boards);
  g_array_unref (r->shards);
  g_free (r);
}

/* Registers boards (owned; shards[i] of boards[i], taking slots prefixes)
 * on every node's tracking connection: the prefixes each lacks. */
static void
register_boards (RankTracking *t, char **boards, GArray *shards, guint slots)
{
  g_autoptr (GPtrArray) prefixes = g_ptr_array_new_with_free_func (g_free);
  Registration *r = g_new0 (Registration, 1);
  Ask *a;

  for (guint b = 0; boards[b] != NULL; b++)
    add_prefixes_of (prefixes, boards[b], g_array_index (shards, guint, b));
  r->boards = boards;
  r->shards = g_array_ref (shards);
  r->left = 1; /* until every node's commands are sent */
  r->slots = slots;
  r->epoch = t->epoch;
  t->slots += slots;
  t->pending++;
  for (guint i = 0; i < t->n_nodes; i++)
    {
      Node *n = &t->nodes[i];
      g_autoptr (GPtrArray) commands = NULL;

      if (!n->active)
        continue;
      commands = tracking_commands (n->id, n->prefixes, prefixes);
      for (guint c = 0; c < commands->len; c++)
        {
          a = ask_new (t, i);
          a->registration = r;
          r->left++;
          send_argv (n->trk, commands->pdata[c], registered, a);
        }
    }
  /* The count's own reference, as one more reply. */
  a = ask_new (t, G_MAXUINT);
  a->registration = r;
  registered (NULL, NULL, a);
}

/* ---- rotations of the tracked set ---- */

static gboolean
rotation_valid (RankTracking *t, Rotation *r)
{
  if (t->stopping || t->rotation != r || r->failed || !t->up
      || r->epoch != t->epoch)
    return FALSE;
  for (guint i = 0; i < t->n_nodes; i++)
    {
      Node *n = &t->nodes[i];

      if (n->active
          && (n->phase != PHASE_UP || !rank_redis_link_is_up (n->spare)
              || rank_redis_link_connections (n->spare) != n->spare_conn))
        return FALSE;
    }
  return TRUE;
}

/* Every spare has the new set: the cache learns it first (the boards that
 * leave are stale from now on), then the old connections stop tracking. */
static void
rotation_done (RankTracking *t, Rotation *r)
{
  const char *off[] = { "CLIENT", "TRACKING", "off" };
  GHashTableIter it;
  gpointer board, shards;

  g_hash_table_iter_init (&it, t->boards);
  while (g_hash_table_iter_next (&it, &board, NULL))
    if (!g_hash_table_contains (r->boards, board))
      rank_read_cache_untracked (t->cache, board);
  g_hash_table_iter_init (&it, r->boards);
  while (g_hash_table_iter_next (&it, &board, &shards))
    rank_read_cache_registered (t->cache, board, GPOINTER_TO_UINT (shards),
                                t->epoch);
  for (guint i = 0; i < t->n_nodes; i++)
    {
      Node *n = &t->nodes[i];
      RankRedisLink *old = n->trk;

      if (!n->active)
        continue;
      rank_redis_link_send (old, 3, off, NULL, ignore, NULL);
      n->trk = n->spare;
      n->spare = old;
      n->trk_conn = n->spare_conn;
      g_hash_table_remove_all (n->prefixes);
      g_hash_table_iter_init (&it, r->prefixes);
      while (g_hash_table_iter_next (&it, &board, NULL))
        g_hash_table_add (n->prefixes, g_strdup (board));
    }
  g_hash_table_unref (t->boards);
  t->boards = g_hash_table_ref (r->boards);
  t->slots = slots_of_set (t->boards);
  rank_metrics_tracked (t->slots, TRUE);
  t->rotate_wanted = FALSE;
  t->rotate_need = 0;
  rank_read_cache_rotated (t->cache);
  g_message ("read cache: tracked set rotated: %u board(s) kept",
             g_hash_table_size (t->boards));
}

static void
rotation_reply (const RankReply *reply, const GError *error, gpointer data)
{
  Ask *a = data;
  Rotation *r = a->rotation;
  RankTracking *t = r->t;
  const char *why = failure (reply, error);

  if (why != NULL && !r->failed && !t->stopping)
    g_warning ("read cache: rotating the tracked set: CLIENT TRACKING "
               "failed: %s; retrying in %d ms",
               why, RANK_TRACKING_RETRY_MS);
  if (why != NULL)
    r->failed = TRUE;
  if (--r->left == 0)
    {
      if (rotation_valid (t, r))
        rotation_done (t, r);
      else if (!t->stopping)
        {
          /* Asked for again later: the deferred boards wait for it. */
          t->rotate_wanted = TRUE;
          t->rotate_at = g_get_monotonic_time ()
                         + (gint64) RANK_TRACKING_RETRY_MS * 1000;
        }
      if (!t->stopping && t->rotation == r)
        t->rotation = NULL;
      g_hash_table_unref (r->boards);
      g_hash_table_unref (r->prefixes);
      g_free (r);
    }
  g_free (a);
}

/* Whether a rotation may begin now: the session up on every node, each
 * spare connected, no registration in flight (it would land on a
 * connection about to stop). */
static gboolean
can_rotate (RankTracking *t)
{
  if (!t->up || t->rotation != NULL || t->pending > 0)
    return FALSE;
  for (guint i = 0; i < t->n_nodes; i++)
    if (t->nodes[i].active
        && (t->nodes[i].phase != PHASE_UP
            || !rank_redis_link_is_up (t->nodes[i].spare)))
      return FALSE;
  return TRUE;
}

/* The boards read most recently, up to half the bound (so that the next
 * rotation is half the bound of new boards away) and leaving room for the
 * largest board that did not fit, registered on every node's spare
 * connection. */
static void
rotate (RankTracking *t)
{
  const char *off[] = { "CLIENT", "TRACKING", "off" };
  g_autoptr (GArray) shards = g_array_new (FALSE, FALSE, sizeof (guint));
  g_auto (GStrv) boards = rank_read_cache_recent_tracked (
      t->cache, MIN (t->max_slots / 2, t->max_slots - t->rotate_need), shards);
  g_autoptr (GPtrArray) prefixes = prefixes_new ();
  Rotation *r = g_new0 (Rotation, 1);
  Ask *a;

  t->rotate_wanted = FALSE;
  r->t = t;
  r->epoch = t->epoch;
  r->boards = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  r->prefixes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  for (guint b = 0; boards[b] != NULL; b++)
    g_hash_table_replace (r->boards, g_strdup (boards[b]),
                          GUINT_TO_POINTER (g_array_index (shards, guint, b)));
  add_prefixes_of_set (prefixes, r->boards);
  t->rotation = r;
  r->left = 1; /* until every node's commands are sent */
  for (guint i = 0; i < t->n_nodes; i++)
    {
      Node *n = &t->nodes[i];
      g_autoptr (GHashTable) have = NULL;
      g_autoptr (GPtrArray) commands = NULL;

      if (!n->active)
        continue;
      have = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
      n->spare_conn = rank_redis_link_connections (n->spare);
      rank_redis_link_send (n->spare, 3, off, NULL, ignore, NULL);
      commands = tracking_commands (n->id, have, prefixes);
      for (guint c = 0; c < commands->len; c++)
        {
          a = ask_new (t, i);
          a->rotation = r;
          r->left++;
          send_argv (n->spare, commands->pdata[c], rotation_reply, a);
        }
    }
  for (guint p = 0; p < prefixes->len; p++)
    g_hash_table_add (r->prefixes, g_strdup (prefixes->pdata[p]));
  a = ask_new (t, G_MAXUINT);
  a->rotation = r;
  rotation_reply (NULL, NULL, a);
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
  n->sub
      = rank_redis_link_new (t->loop, &t->addresses[i], t->timeout_ms, t->tls);
  n->trk
      = rank_redis_link_new (t->loop, &t->addresses[i], t->timeout_ms, t->tls);
  n->spare
      = rank_redis_link_new (t->loop, &t->addresses[i], t->timeout_ms, t->tls);
  if (t->password != NULL)
    {
      rank_redis_link_add_startup (n->sub, auth_argc, auth, NULL);
      rank_redis_link_add_startup (n->trk, auth_argc, auth, NULL);
      rank_redis_link_add_startup (n->spare, auth_argc, auth, NULL);
    }
  rank_redis_link_add_startup (n->sub, 3, sub_name, NULL);
  rank_redis_link_add_startup (n->trk, 3, trk_name, NULL);
  rank_redis_link_add_startup (n->spare, 3, trk_name, NULL);
  rank_redis_link_set_push (n->sub, message, t);
  rank_redis_link_start (n->sub);
  rank_redis_link_start (n->trk);
  rank_redis_link_start (n->spare);
  n->phase = PHASE_IDLE;
}

static void
start_links (RankTracking *t)
{
  for (guint i = 0; i < t->n_nodes; i++)
    if (t->nodes[i].sub == NULL)
      start_node (t, i);
}

/* The cache asks: start the session, or register the boards it wants.
 * Those that do not fit in the set wait for its rotation. */
static void
take_wanted (gpointer data)
{
  RankTracking *t = data;
  g_autoptr (GArray) shards = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr (GArray) fit_shards = g_array_new (FALSE, FALSE, sizeof (guint));
  g_auto (GStrv) boards = NULL;
  GStrvBuilder *fit = g_strv_builder_new ();
  guint slots = 0;

  g_atomic_int_set (&t->want_posted, 0);
  if (t->stopping || !t->started)
    {
      if (!t->stopping)
        {
          t->started = TRUE;
          start_links (t);
        }
      g_strv_builder_unref (fit);
      return;
    }
  boards = rank_read_cache_take_wanted (t->cache, shards);
  for (guint b = 0; t->up && boards[b] != NULL; b++)
    {
      guint want = g_array_index (shards, guint, b);
      gpointer had;
      guint more = slots_of (want);

      if (g_hash_table_lookup_extended (t->boards, boards[b], NULL, &had))
        more -= MIN (more, slots_of (GPOINTER_TO_UINT (had)));
      if (t->rotation == NULL && t->slots + slots + more <= t->max_slots)
        {
          slots += more;
          g_strv_builder_add (fit, boards[b]);
          g_array_append_val (fit_shards, want);
        }
      else if (slots_of (want) > t->max_slots)
        /* Would never fit. */
        rank_read_cache_refused (t->cache, boards[b]);
      else
        {
          /* One rotation in flight is enough: once it is done, the boards
           * it deferred ask again and fit. */
          rank_read_cache_deferred (t->cache, boards[b]);
          if (t->rotation == NULL)
            {
              t->rotate_wanted = TRUE;
              t->rotate_need = MAX (t->rotate_need, slots_of (want));
            }
        }
    }
  {
    g_auto (GStrv) names = g_strv_builder_end (fit);

    g_strv_builder_unref (fit);
    if (names[0] != NULL)
      register_boards (t, g_steal_pointer (&names), fit_shards, slots);
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
  if (t->rotate_wanted && can_rotate (t))
    {
      if (t->rotate_at <= now)
        rotate (t);
      else
        {
          int wait = (int) ((t->rotate_at - now) / 1000) + 1;

          timeout = timeout < 0 ? wait : MIN (timeout, wait);
        }
    }
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
                   const RankAddress *nodes, guint n_nodes,
                   const RankTrackingOptions *options)
{
  RankTracking *t = g_new0 (RankTracking, 1);

  t->loop = loop;
  t->cache = cache;
  for (guint i = 0; i < n_nodes; i++)
    add_node (t, &nodes[i]);
  t->timeout_ms = options->timeout_ms;
  t->max_slots = options->max_boards;
  t->user = g_strdup (options->user);
  t->password = g_strdup (options->password);
  t->tls = options->tls != NULL ? rank_redis_tls_ref (options->tls) : NULL;
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
      rank_redis_link_free (t->nodes[i].spare);
      g_hash_table_unref (t->nodes[i].prefixes);
      rank_address_clear (&t->addresses[i]);
    }
  g_free (t->nodes);
  g_free (t->addresses);
  g_free (t->user);
  rank_redis_tls_unref (t->tls);
  g_free (t->password);
  g_hash_table_unref (t->boards);
  g_free (t);
}
