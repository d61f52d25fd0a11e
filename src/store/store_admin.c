/* store_admin.c -- board administration and export (see store.h): the
 * registry of boards (ListBoards), the walk over one board's keys
 * (GetBoardInfo, DeleteBoard, ResetBoard) and Export's pages.
 *
 * The walk names a board's keys from what the board records of itself
 * (below, "a board's keys"), so it costs what the board costs.
 *
 * Removal goes by scope: a board's own keys under one tag, or one period's,
 * the keys one update may touch together. A scope's sorted set, times,
 * data, dense counts (and, with the board's own keys, the request-id meta)
 * go together, in one call of clear.lua, so that an update running at the
 * same time lands wholly before or wholly after them. (Removed key by key
 * as a SCAN found them, a board's sorted set and times went in different
 * commands, and updates in between left members on the board twice, for
 * good.) The request-id record hashes, which can be thousands, go by
 * UNLINK, at most RANK_ADMIN_UNLINK_MAX keys a command, before their
 * scope's entries: an update that lands between keeps its entry until the
 * scope goes, so no entry is ever left without its record (a retry would
 * apply it twice), while a record left without its entry is what
 * ResetBoard leaves too (a retry answers it was applied). UNLINK frees a
 * large value in a background thread, so a 50-million-member sorted set
 * costs the main thread no more than a small one.
 *
 * Export is HSCAN over the period's times hash, shard after shard, in
 * export.lua, which reads each member's entry (its order key, which holds
 * the subscores and the time, and its score) and data in the same call:
 * export.lua says why not ZSCAN.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "layout.h"
#include "orderkey.h"
#include "store_private.h"

/* ---- ListBoards ---- */

typedef struct
{
  RankStoreNamesFunc func;
  gpointer data;
} ListTask;

static void
boards_read (const RankReply *reply, const GError *error, gpointer data)
{
  ListTask *task = data;
  g_autoptr (GError) bad = NULL;
  g_autoptr (GPtrArray) names = g_ptr_array_new ();

  if (error == NULL && reply->type != RANK_REPLY_ARRAY)
    error = bad = store_unexpected (reply, "ZRANGE of the boards");
  for (gsize i = 0; error == NULL && i < reply->elements; i++)
    {
      const RankReply *name = rank_reply_string_at (reply, i);

      if (name == NULL)
        error = bad = store_unexpected (reply, "ZRANGE of the boards");
      else
        g_ptr_array_add (names, name->str);
    }
  task->func ((const char *const *) names->pdata, error ? 0 : names->len, error,
              task->data);
  g_free (task);
}

void
rank_store_list_boards (RankStore *store, const char *after, guint limit,
                        RankStoreNamesFunc func, gpointer data)
{
  ListTask *task = g_new0 (ListTask, 1);
  g_autofree char *from
      = *after == '\0' ? g_strdup ("-") : g_strconcat ("(", after, NULL);
  RankCommand cmd;

  task->func = func;
  task->data = data;
  rank_command_init (&cmd, "ZRANGE");
  rank_command_add_str (&cmd, RANK_BOARDS_KEY);
  rank_command_add_str (&cmd, from);
  rank_command_add_str (&cmd, "+");
  rank_command_add_str (&cmd, "BYLEX");
  rank_command_add_str (&cmd, "LIMIT");
  rank_command_add_str (&cmd, "0");
  rank_command_add_int (&cmd, limit);
  rank_backend_send (store->backend, 0, &cmd, 0, boards_read, task);
}

/* ---- a board's keys ---- */

/* A board's keys are named, never searched for, so that what an admin call
 * costs follows the board, not the node: a SCAN ... MATCH walked every key
 * of the node (2 s for one GetBoardInfo on a Redis of 1M keys). Under each
 * of its tags (its own, "rk:{board}:", and each shard's,
 * "rk:s:{board/i}:") a board has its own scope, with the fixed suffixes
 * below, and the scopes of its periods ("p:LABEL:"), which the tag's
 * registry ("...:k", a sorted set label -> when its keys expire) lists:
 * update.lua adds a period to it in the call that writes the period's
 * first records, and clear.lua takes it out with the period's keys. The
 * request-id records of all periods are with the tag's own keys: the
 * record hashes its meta names ("q:<s>:<i>" for the layout s and the
 * layout being left). */
#define OWN_SUFFIXES                                                           \
  RANK_KEY_SUFFIX_SCORES RANK_KEY_SUFFIX_TIMES RANK_KEY_SUFFIX_DATA            \
      RANK_KEY_SUFFIX_DISTINCT RANK_KEY_SUFFIX_COUNTS RANK_KEY_SUFFIX_REQUEST  \
          RANK_KEY_SUFFIX_LAYOUT RANK_KEY_SUFFIX_QUEUE RANK_KEY_SUFFIX_DEAD    \
              RANK_KEY_SUFFIX_QUEUE_COUNTS RANK_KEY_SUFFIX_PERIODS             \
                  RANK_KEY_SUFFIX_WINDOW
#define PERIOD_SUFFIXES                                                        \
  RANK_KEY_SUFFIX_SCORES RANK_KEY_SUFFIX_TIMES RANK_KEY_SUFFIX_DATA            \
      RANK_KEY_SUFFIX_DISTINCT RANK_KEY_SUFFIX_COUNTS

/* Newest first: labels of one board sort as their periods do, but for
 * custom periods ("n<index>"), whose indexes are compared as numbers. */
static gint
period_compare (gconstpointer a, gconstpointer b)
{
  const char *x = *(const char *const *) a, *y = *(const char *const *) b;

  if (x[0] == 'n' && y[0] == 'n')
    {
      gint64 i = g_ascii_strtoll (x + 1, NULL, 10);
      gint64 j = g_ascii_strtoll (y + 1, NULL, 10);

      return i < j ? 1 : i > j ? -1 : 0;
    }
  return -strcmp (x, y);
}

/* ---- the walk: GetBoardInfo, DeleteBoard, ResetBoard ---- */

typedef enum
{
  WALK_STATS,
  WALK_DELETE,
  WALK_RESET,
} WalkKind;

/* A tag of the board: its keys' prefix up to and with "}:", and its node. */
typedef struct
{
  char *prefix;
  guint node;
} WalkTag;

/* A scope: the tag's own keys (label NULL) or one period's. */
typedef struct
{
  char *prefix; /* "rk:{board}:", "rk:{board}:p:LABEL:" */
  char *label;
  const WalkTag *tag;
  char *layouts[2]; /* its meta's s and o: the record hashes' layouts */
  gboolean found;   /* stats: some key of it is there */
} WalkScope;

typedef struct Walk Walk;

/* One reply of a round (WalkStep), and what it is about. */
typedef struct
{
  Walk *w;
  WalkScope *scope;
  const WalkTag *tag;
  double weight; /* MEMORY USAGE of a sampled record hash: the hashes it
                  * stands for */
} WalkPart;

typedef void (*WalkStep) (Walk *w);

struct Walk
{
  RankStore *store;
  const RankContext *ctx;
  WalkKind kind;
  WalkTag tags[1 + RANK_SHARDS_MAX];
  guint n_tags;
  GPtrArray *scopes; /* WalkScope */
  guint pending;     /* replies still to come of this round */
  WalkStep next;     /* then */
  GError *error;
  RankBoardStats stats;
  double sampled_keys, sampled_bytes; /* record hashes, weighted */
  char *stored_layout;
  gint64 removed;
  char *admin_key; /* DeleteBoard, ResetBoard: the request id's record */
  gboolean repeated;
  RankStoreStatsFunc stats_func;
  RankStoreClearFunc clear_func;
  gpointer data;
};

static const char *
walk_name (WalkKind kind)
{
  return kind == WALK_DELETE ? "delete" : "reset";
}

static void
scope_free (gpointer data)
{
  WalkScope *s = data;

  g_free (s->prefix);
  g_free (s->label);
  g_free (s->layouts[0]);
  g_free (s->layouts[1]);
  g_free (s);
}

static void
walk_free (Walk *w)
{
  for (guint i = 0; i < w->n_tags; i++)
    g_free (w->tags[i].prefix);
  g_ptr_array_unref (w->scopes);
  g_clear_error (&w->error);
  if (w->stats.periods != NULL)
    g_ptr_array_unref (w->stats.periods);
  g_free (w->stored_layout);
  g_free (w->admin_key);
  g_free (w);
}

static void
walk_fail (Walk *w, GError *error)
{
  if (w->error == NULL)
    w->error = error;
  else
    g_error_free (error);
}

static void walk_finish (Walk *w);

/* A round: sends go out with walk_send; once every reply is in, step. */
static void
walk_round (Walk *w, WalkStep step)
{
  w->pending = 1; /* the round's own, until it has sent everything */
  w->next = step;
}

static void
walk_reply_done (Walk *w)
{
  g_assert (w->pending > 0);
  if (--w->pending > 0)
    return;
  if (w->error != NULL)
    walk_finish (w);
  else
    w->next (w);
}

/* Sends cmd; func gets its reply with the part returned (its callbacks
 * never run from the send itself). */
static WalkPart *
walk_send (Walk *w, WalkScope *scope, const WalkTag *tag, RankCommand *cmd,
           RankBackendFunc func)
{
  WalkPart *part = g_new (WalkPart, 1);

  *part = (WalkPart){ w, scope, tag, 1.0 };
  w->pending++;
  rank_backend_send (w->store->backend, tag->node, cmd, 0, func, part);
  return part;
}

/* Takes the part of a reply; NULL (after noting it) if the walk failed. */
static WalkPart
walk_part (gpointer data, const GError *error)
{
  WalkPart part = *(WalkPart *) data;

  g_free (data);
  if (error != NULL)
    walk_fail (part.w, g_error_copy (error));
  return part;
}

/* The shards the board's keys may be under: as the options in force say,
 * or the stored layout, whichever has more. */
static guint
walk_shards (const Walk *w)
{
  guint shards = w->ctx->options->shards;

  return MIN (MAX (shards, rank_layout_stored_shards (w->stored_layout, 1)),
              RANK_SHARDS_MAX);
}

static WalkScope *
walk_add_scope (Walk *w, const WalkTag *tag, const char *label, gsize len)
{
  WalkScope *s = g_new0 (WalkScope, 1);

  s->tag = tag;
  if (label != NULL)
    {
      s->label = g_strndup (label, len);
      s->prefix = g_strdup_printf ("%sp:%s:", tag->prefix, s->label);
    }
  else
    s->prefix = g_strdup (tag->prefix);
  g_ptr_array_add (w->scopes, s);
  return s;
}

static void
key_command (RankCommand *cmd, const char *name, const char *prefix,
             const char *suffix)
{
  rank_command_init (cmd, name);
  rank_command_add_str (cmd, prefix);
  rank_command_append (cmd, suffix, strlen (suffix));
}

/* ---- round 1: the periods of each tag ---- */

static void
periods_read (const RankReply *reply, const GError *error, gpointer data)
{
  WalkPart part = walk_part (data, error);

  if (error == NULL && reply->type != RANK_REPLY_ARRAY)
    walk_fail (part.w, store_unexpected (reply, "ZRANGE of a board's periods"));
  for (gsize i = 0;
       error == NULL && part.w->error == NULL && i < reply->elements; i++)
    {
      const RankReply *label = rank_reply_string_at (reply, i);

      /* A label is part of a key name: ':' would make another scope. */
      if (label == NULL || label->len == 0
          || memchr (label->str, ':', label->len) != NULL)
        walk_fail (part.w, store_unexpected (reply, "a board's periods"));
      else
        walk_add_scope (part.w, part.tag, label->str, label->len);
    }
  walk_reply_done (part.w);
}

static void walk_metas (Walk *w);

/* Every tag of the board, its own scope, and the scopes of its periods. */
static void
walk_tags (Walk *w)
{
  guint shards = walk_shards (w);

  w->tags[w->n_tags++]
      = (WalkTag){ g_strdup_printf (RANK_KEY_PREFIX ":{%s}:", w->ctx->board),
                   0 };
  for (guint i = 0; i < shards && shards > 1; i++)
    w->tags[w->n_tags++] = (WalkTag){
      g_strdup_printf (RANK_SHARD_KEY_PREFIX ":{%s/%u}:", w->ctx->board, i),
      store_node_of (w->store, i)
    };
  walk_round (w, walk_metas);
  for (guint i = 0; i < w->n_tags; i++)
    {
      RankCommand cmd;

      walk_add_scope (w, &w->tags[i], NULL, 0);
      key_command (&cmd, "ZRANGE", w->tags[i].prefix, RANK_KEY_SUFFIX_PERIODS);
      rank_command_add_str (&cmd, "0");
      rank_command_add_str (&cmd, "-1");
      walk_send (w, NULL, &w->tags[i], &cmd, periods_read);
    }
  walk_reply_done (w);
}

/* ---- round 2: each scope's record-hash layouts ---- */

static void
meta_read (const RankReply *reply, const GError *error, gpointer data)
{
  WalkPart part = walk_part (data, error);

  if (error == NULL
      && (reply->type != RANK_REPLY_ARRAY || reply->elements != 2))
    walk_fail (part.w, store_unexpected (reply, "HMGET of a request-id meta"));
  for (guint i = 0; error == NULL && part.w->error == NULL && i < 2; i++)
    {
      const RankReply *size = reply->element[i];
      guint64 n;

      if (size->type == RANK_REPLY_NIL)
        continue;
      if (size->type != RANK_REPLY_STRING
          || !g_ascii_string_to_unsigned (size->str, 10, 1,
                                          RANK_RECORD_HASHES_MAX, &n, NULL))
        walk_fail (part.w, store_unexpected (reply, "a request-id meta"));
      else
        part.scope->layouts[i] = g_strndup (size->str, size->len);
    }
  walk_reply_done (part.w);
}

static void walk_keys (Walk *w);

static void
walk_metas (Walk *w)
{
  walk_round (w, walk_keys);
  for (guint i = 0; i < w->scopes->len; i++)
    {
      WalkScope *s = w->scopes->pdata[i];
      RankCommand cmd;

      if (s->label != NULL)
        continue; /* its records are with its tag's own keys */

      key_command (&cmd, "HMGET", s->prefix, RANK_KEY_SUFFIX_REQUEST);
      rank_command_add_str (&cmd, "s");
      rank_command_add_str (&cmd, "o");
      walk_send (w, s, s->tag, &cmd, meta_read);
    }
  walk_reply_done (w);
}

/* ---- round 3: count the keys (stats), or remove the record hashes ---- */

static void
memory_read (const RankReply *reply, const GError *error, gpointer data)
{
  WalkPart part = walk_part (data, error);

  if (error == NULL && reply->type == RANK_REPLY_INTEGER)
    {
      part.w->sampled_keys += part.weight;
      part.w->sampled_bytes += part.weight * (double) reply->integer;
      part.scope->found = TRUE;
    }
  /* NIL: no such key. */
  walk_reply_done (part.w);
}

/* A reply of UNLINK or clear.lua: the keys it removed. */
static void
removed_read (const RankReply *reply, const GError *error, gpointer data)
{
  WalkPart part = walk_part (data, error);

  if (error == NULL && reply->type == RANK_REPLY_INTEGER)
    part.w->removed += reply->integer;
  else if (error == NULL)
    walk_fail (part.w, store_unexpected (reply, "UNLINK"));
  walk_reply_done (part.w);
}

/* MEMORY USAGE of key, which stands for weight keys like it. */
static void
memory_usage (Walk *w, WalkScope *s, const char *key, double weight)
{
  RankCommand cmd;

  rank_command_init (&cmd, "MEMORY");
  rank_command_add_str (&cmd, "USAGE");
  rank_command_add_str (&cmd, key);
  rank_command_route (&cmd, key, strlen (key));
  walk_send (w, s, s->tag, &cmd, memory_read)->weight = weight;
}

/* The scope's record hashes: each counted (stats), or removed by UNLINK,
 * RANK_ADMIN_UNLINK_MAX a command. A layout of more than
 * RANK_ADMIN_RECORD_SAMPLE hashes is counted by that many of them, evenly
 * spread, each standing for its share: GetBoardInfo's cost follows the
 * layout no further (a board updated at a steady rate can have 100,000
 * record hashes; 8,192 took 0.25 s, one MEMORY USAGE each). */
static void
walk_records (Walk *w, WalkScope *s)
{
  RankCommand cmd;
  guint in_cmd = 0;

  for (guint l = 0; l < 2; l++)
    {
      guint64 n = s->layouts[l] != NULL
                      ? g_ascii_strtoull (s->layouts[l], NULL, 10)
                      : 0;

      for (guint64 k = 0, m = MIN (n, RANK_ADMIN_RECORD_SAMPLE);
           w->kind == WALK_STATS && k < m; k++)
        {
          /* Hash i stands for those up to the next one counted. */
          guint64 i = k * n / m, next = (k + 1) * n / m;
          g_autofree char *key = g_strdup_printf ("%s" RANK_KEY_SUFFIX_REQUEST
                                                  ":%s:%" G_GUINT64_FORMAT,
                                                  s->prefix, s->layouts[l], i);

          memory_usage (w, s, key, (double) (next - i));
        }
      for (guint64 i = 0; w->kind != WALK_STATS && i < n; i++)
        {
          g_autofree char *key = g_strdup_printf ("%s" RANK_KEY_SUFFIX_REQUEST
                                                  ":%s:%" G_GUINT64_FORMAT,
                                                  s->prefix, s->layouts[l], i);

          if (in_cmd == 0)
            rank_command_init (&cmd, "UNLINK");
          rank_command_add_str (&cmd, key);
          if (++in_cmd == RANK_ADMIN_UNLINK_MAX)
            {
              walk_send (w, s, s->tag, &cmd, removed_read);
              in_cmd = 0;
            }
        }
    }
  if (in_cmd > 0)
    walk_send (w, s, s->tag, &cmd, removed_read);
}

static void walk_clear_scopes (Walk *w);

static void
walk_keys (Walk *w)
{
  walk_round (w, w->kind == WALK_STATS ? walk_finish : walk_clear_scopes);
  for (guint i = 0; i < w->scopes->len; i++)
    {
      WalkScope *s = w->scopes->pdata[i];
      const char *suffixes = s->label != NULL ? PERIOD_SUFFIXES : OWN_SUFFIXES;

      /* ResetBoard keeps the request-id records. */
      if (w->kind != WALK_RESET)
        walk_records (w, s);
      for (const char *p = suffixes; w->kind == WALK_STATS && *p != '\0'; p++)
        {
          g_autofree char *key = g_strdup_printf ("%s%c", s->prefix, *p);

          memory_usage (w, s, key, 1.0);
        }
    }
  walk_reply_done (w);
}

/* ---- round 4 (DeleteBoard, ResetBoard): each scope whole ---- */

/* After its record hashes: an update that lands between keeps its entry
 * until its scope goes, so no entry is left without its record (a retry
 * would apply it twice); a record left without its entry is what
 * ResetBoard leaves too (a retry answers that it was applied). */
static void
walk_clear_scopes (Walk *w)
{
  walk_round (w, walk_finish);
  for (guint i = 0; i < w->scopes->len; i++)
    {
      WalkScope *s = w->scopes->pdata[i];
      const char *what;
      RankCommand cmd;

      if (s->label != NULL)
        what = "period";
      else
        what = w->kind == WALK_DELETE ? "all" : "entries";
      rank_command_init_script (&cmd, RANK_SCRIPT_CLEAR);
      rank_command_add_str (&cmd, s->prefix);
      rank_command_append (&cmd, RANK_KEY_SUFFIX_SCORES,
                           strlen (RANK_KEY_SUFFIX_SCORES));
      rank_command_keys_done (&cmd);
      rank_command_add_str (&cmd, s->prefix);
      rank_command_add_str (&cmd, what);
      if (s->label != NULL)
        {
          rank_command_add_str (&cmd, s->tag->prefix);
          rank_command_append (&cmd, RANK_KEY_SUFFIX_PERIODS,
                               strlen (RANK_KEY_SUFFIX_PERIODS));
          rank_command_add_str (&cmd, s->label);
        }
      walk_send (w, s, s->tag, &cmd, removed_read);
    }
  walk_reply_done (w);
}

/* ---- the end ---- */

static void
walk_deliver (Walk *w)
{
  if (w->kind == WALK_STATS)
    w->stats_func (w->error != NULL ? NULL : &w->stats, w->error, w->data);
  else
    w->clear_func (!w->repeated, w->removed, w->error, w->data);
  walk_free (w);
}

static void
admin_done_written (const RankReply *reply, const GError *error, gpointer data)
{
  Walk *w = data;

  if (error != NULL)
    walk_fail (w, g_error_copy (error));
  walk_deliver (w);
}

static void
admin_record (Walk *w, const char *state, RankBackendFunc func)
{
  g_autofree char *value = g_strdup_printf ("%s %s %" G_GINT64_FORMAT, state,
                                            walk_name (w->kind), w->removed);
  RankCommand cmd;

  rank_command_init (&cmd, "SET");
  rank_command_add_str (&cmd, w->admin_key);
  rank_command_add_str (&cmd, value);
  rank_command_add_str (&cmd, "PX");
  rank_command_add_int (&cmd, MAX (w->ctx->dedup_window_ms, 1));
  rank_backend_send (w->store->backend, 0, &cmd, 0, func, w);
}

static void
registry_removed (const RankReply *reply, const GError *error, gpointer data)
{
  Walk *w = data;

  if (error != NULL)
    {
      walk_fail (w, g_error_copy (error));
      walk_deliver (w);
      return;
    }
  admin_record (w, "done", admin_done_written);
}

static void
walk_finish (Walk *w)
{
  RankCommand cmd;

  if (w->kind == WALK_STATS && w->error == NULL)
    {
      w->stats.keys = (gint64) (w->sampled_keys + 0.5);
      w->stats.memory_bytes = (gint64) (w->sampled_bytes + 0.5);
      w->stats.periods = g_ptr_array_new_with_free_func (g_free);
      for (guint i = 0; i < w->scopes->len; i++)
        {
          const WalkScope *s = w->scopes->pdata[i];

          /* A rolling window's keys are counted, but it is no period. */
          if (s->label != NULL && s->found
              && strcmp (s->label, RANK_WINDOW_LABEL) != 0
              && strcmp (s->label, RANK_WINDOW_NEXT_LABEL) != 0)
            g_ptr_array_add (w->stats.periods, g_strdup (s->label));
        }
      g_ptr_array_sort (w->stats.periods, period_compare);
      /* Each shard lists its periods: one label each. */
      for (guint i = 1; i < w->stats.periods->len;)
        if (strcmp (w->stats.periods->pdata[i], w->stats.periods->pdata[i - 1])
            == 0)
          g_ptr_array_remove_index (w->stats.periods, i);
        else
          i++;
      w->stats.stored_layout = w->stored_layout;
    }
  if (w->kind == WALK_STATS || w->error != NULL)
    {
      walk_deliver (w);
      return;
    }
  /* A rolling window's state went with the board: this worker rolls it
   * afresh at the board's next call (others within a second). */
  store_forget_windows (w->store, w->ctx->board, w->ctx->options->shards);
  if (w->kind == WALK_RESET)
    {
      admin_record (w, "done", admin_done_written);
      return;
    }
  /* The board stays in rk:queues: a drain takes it off once its streams
   * are empty, and only if no Enqueue listed it again meanwhile
   * (queues.lua), where a ZREM here could drop the listing of an Enqueue
   * that came after the walk, and strand its entries. */
  store_forget_layout (w->store, w->ctx->board);
  rank_command_init (&cmd, "ZREM");
  rank_command_add_str (&cmd, RANK_BOARDS_KEY);
  rank_command_add_str (&cmd, w->ctx->board);
  rank_backend_send (w->store->backend, 0, &cmd, 0, registry_removed, w);
}

/* The stored layout is read first: it may name more shards. */
static void
layout_read (const RankReply *reply, const GError *error, gpointer data)
{
  Walk *w = data;

  if (error != NULL)
    walk_fail (w, g_error_copy (error));
  else if (reply->type == RANK_REPLY_STRING)
    w->stored_layout = g_strndup (reply->str, reply->len);
  else if (reply->type != RANK_REPLY_NIL)
    walk_fail (w, store_unexpected (reply, "the board's layout descriptor"));
  if (w->error != NULL)
    {
      walk_deliver (w);
      return;
    }
  walk_tags (w);
}

static void
walk_start (Walk *w)
{
  char key[RANK_STORE_KEY_MAX];
  RankCommand cmd;

  rank_command_init (&cmd, "GET");
  rank_command_add (
      &cmd, key, store_board_key (key, w->ctx->board, RANK_KEY_SUFFIX_LAYOUT));
  rank_backend_send (w->store->backend, 0, &cmd, 0, layout_read, w);
}

static Walk *
walk_new (RankStore *store, const RankContext *ctx, WalkKind kind)
{
  Walk *w = g_new0 (Walk, 1);

  w->store = store;
  w->ctx = ctx;
  w->kind = kind;
  w->scopes = g_ptr_array_new_with_free_func (scope_free);
  return w;
}

void
rank_store_board_stats (RankStore *store, const RankContext *ctx,
                        RankStoreStatsFunc func, gpointer data)
{
  Walk *w = walk_new (store, ctx, WALK_STATS);

  w->stats_func = func;
  w->data = data;
  walk_start (w);
}

static void
admin_pending_written (const RankReply *reply, const GError *error,
                       gpointer data)
{
  Walk *w = data;

  if (error != NULL)
    {
      walk_fail (w, g_error_copy (error));
      walk_deliver (w);
      return;
    }
  walk_start (w);
}

/* The request id's record: none, or "pending OP" (a call that did not
 * finish: this one goes on with it), or "done OP N". */
static void
admin_read (const RankReply *reply, const GError *error, gpointer data)
{
  Walk *w = data;
  g_auto (GStrv) parts = NULL;

  if (error != NULL)
    {
      walk_fail (w, g_error_copy (error));
      walk_deliver (w);
      return;
    }
  if (reply->type == RANK_REPLY_NIL)
    {
      admin_record (w, "pending", admin_pending_written);
      return;
    }
  if (reply->type != RANK_REPLY_STRING)
    {
      walk_fail (w, store_unexpected (reply, "a DeleteBoard record"));
      walk_deliver (w);
      return;
    }
  parts = g_strsplit (reply->str, " ", 3);
  if (g_strv_length (parts) != 3 || strcmp (parts[1], walk_name (w->kind)) != 0)
    {
      walk_fail (w, g_error_new (RANK_ERROR, RANK_ERROR_INVALID,
                                 "request_id: already used on board '%s' by "
                                 "%s, not %s",
                                 w->ctx->board,
                                 g_strv_length (parts) == 3
                                         && strcmp (parts[1], "reset") == 0
                                     ? "ResetBoard"
                                     : "DeleteBoard",
                                 w->kind == WALK_DELETE ? "DeleteBoard"
                                                        : "ResetBoard"));
      walk_deliver (w);
      return;
    }
  if (strcmp (parts[0], "done") == 0)
    {
      w->repeated = TRUE;
      w->removed = g_ascii_strtoll (parts[2], NULL, 10);
      walk_deliver (w);
      return;
    }
  walk_start (w);
}

void
rank_store_clear_board (RankStore *store, const RankContext *ctx,
                        RankClearKind kind, const char *request_id,
                        RankStoreClearFunc func, gpointer data)
{
  Walk *w = walk_new (store, ctx,
                      kind == RANK_CLEAR_DELETE ? WALK_DELETE : WALK_RESET);
  g_autofree char *digest
      = g_compute_checksum_for_string (G_CHECKSUM_SHA256, request_id, -1);
  char key[RANK_STORE_KEY_MAX];
  g_autofree char *suffix = NULL;
  RankCommand cmd;

  w->clear_func = func;
  w->data = data;
  digest[32] = '\0';
  suffix = g_strconcat (RANK_KEY_SUFFIX_ADMIN ":", digest, NULL);
  store_board_key (key, ctx->board, suffix);
  w->admin_key = g_strdup (key);
  rank_command_init (&cmd, "GET");
  rank_command_add_str (&cmd, w->admin_key);
  rank_backend_send (store->backend, 0, &cmd, 0, admin_read, w);
}

/* ---- Export ---- */

typedef struct
{
  RankStore *store;
  const RankContext *ctx;
  RankExportCursor at, next;
  RankStoreExportFunc func;
  gpointer user_data;
} ExportTask;

static void
export_read (const RankReply *reply, const GError *error, gpointer data)
{
  ExportTask *task = data;
  const RankBoardOptions *o = task->ctx->options;
  const RankReply *cursor = NULL, *pairs = NULL, *values = NULL;
  gsize n = 0, prefix = store_prefix_len (o);
  g_autoptr (GError) bad = NULL;
  g_autofree RankRow *rows = NULL;
  guint64 next = 0;
  gboolean last = FALSE;

  if (error == NULL
      && (reply->type != RANK_REPLY_ARRAY || reply->elements != 3
          || (cursor = rank_reply_string_at (reply, 0)) == NULL
          || (pairs = reply->element[1])->type != RANK_REPLY_ARRAY
          || pairs->elements % 2 != 0
          || (values = reply->element[2])->type != RANK_REPLY_ARRAY
          || values->elements != pairs->elements / 2
          || !g_ascii_string_to_unsigned (cursor->str, 10, 0, G_MAXUINT64,
                                          &next, NULL)))
    error = bad = store_unexpected (reply, "export.lua");
  if (error == NULL)
    n = pairs->elements / 2;
  rows = g_new0 (RankRow, MAX (n, 1));
  for (gsize i = 0; error == NULL && i < n; i++)
    {
      const RankReply *key = pairs->element[2 * i];
      const RankReply *score = pairs->element[2 * i + 1];
      const RankReply *value = values->element[i];
      gint64 zscore;

      if (key->type != RANK_REPLY_STRING || key->len <= prefix
          || score->type != RANK_REPLY_STRING
          || !rank_orderkey_parse_zscore (score->str, score->len, &zscore))
        {
          error = bad
              = store_unexpected (reply, "export.lua (malformed entry)");
          break;
        }
      /* Parsed as the score of a descending board: back to the stored. */
      store_row_from_key (o, key->str, key->len, -zscore, &rows[i]);
      if (value->type == RANK_REPLY_STRING && value->len > 0)
        {
          rows[i].data = value->str;
          rows[i].data_len = value->len;
        }
    }
  if (error == NULL)
    {
      if (next != 0)
        task->next = (RankExportCursor){ task->at.shard, next };
      else if (task->at.shard + 1 < o->shards)
        task->next = (RankExportCursor){ task->at.shard + 1, 0 };
      else
        last = TRUE;
    }
  task->func (rows, error != NULL ? 0 : n,
              error != NULL || last ? NULL : &task->next, error,
              task->user_data);
  g_free (task);
}

void
rank_store_export (RankStore *store, const RankContext *ctx,
                   const RankExportCursor *cursor, guint count,
                   RankStoreExportFunc func, gpointer data)
{
  ExportTask *task = g_new0 (ExportTask, 1);
  char text[24];
  RankCommand cmd;

  g_assert (cursor->shard < ctx->options->shards);
  task->store = store;
  task->ctx = ctx;
  task->at = *cursor;
  task->func = func;
  task->user_data = data;
  rank_command_init_script (&cmd, RANK_SCRIPT_EXPORT);
  store_add_key (&cmd, ctx, cursor->shard, RANK_KEY_SUFFIX_TIMES);
  store_add_key (&cmd, ctx, cursor->shard, RANK_KEY_SUFFIX_SCORES);
  store_add_key (&cmd, ctx, cursor->shard, RANK_KEY_SUFFIX_DATA);
  rank_command_keys_done (&cmd);
  g_snprintf (text, sizeof text, "%" G_GUINT64_FORMAT, cursor->cursor);
  rank_command_add_str (&cmd, text);
  rank_command_add_int (&cmd, count);
  rank_command_add_int (&cmd, (gint64) store_prefix_len (ctx->options));
  rank_backend_send (store->backend, store_node_of (store, cursor->shard), &cmd,
                     0, export_read, task);
}
