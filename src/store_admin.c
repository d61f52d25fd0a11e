/* store_admin.c -- board administration and export (see store.h): the
 * registry of boards (ListBoards), the walk over one board's keys
 * (GetBoardInfo, DeleteBoard, ResetBoard) and Export's pages.
 *
 * A board's keys have no index; they are found by SCAN with a MATCH
 * pattern (the board's name glob-escaped) on each node that can hold them,
 * RANK_ADMIN_SCAN_COUNT keys a call, so Redis is never held up for long,
 * whatever the size of the keyspace. A pattern is only a filter: every key
 * found is checked again here against the board's exact prefixes, so no
 * key of another board (one whose name the pattern also matches, "a*" for
 * "a*") is ever touched. A board's own keys sit under its tag,
 * "rk:{board}:", and its shards' under "rk:s:{board/i}:"; the shards to
 * look at are those of the options in force and of the stored layout,
 * whichever are more.
 *
 * Removal goes by scope: a board's own keys under one tag, or one period's,
 * the keys one update may touch together. A scope's sorted set, times,
 * data, dense counts and request-id meta go together, in one call of
 * clear.lua once the walk is over, so that an update running at the same
 * time lands wholly before or wholly after them. (Removed key by key as
 * SCAN found them, a board's sorted set and times went in different
 * commands, and updates in between left members on the board twice, for
 * good.) Only the request-id record hashes, which can be thousands, go as
 * the walk finds them, by UNLINK, at most RANK_ADMIN_UNLINK_MAX keys of one
 * hash tag a command (a Redis Cluster command may not span slots), and
 * before their scope's entries: an update that lands between keeps its
 * entry until the scope goes, so no entry is ever left without its record
 * (a retry would apply it twice), while a record left without its entry
 * is what ResetBoard leaves too (a retry answers it was applied). UNLINK
 * frees a large value in a background thread, so a 50-million-member
 * sorted set costs the main thread no more than a small one.
 *
 * Export is HSCAN over the period's times hash, shard after shard, in
 * export.lua, which reads each member's entry (its order key, which holds
 * the subscores and the time, and its score) and data in the same call:
 * export.lua says why not ZSCAN.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "orderkey.h"
#include "store_private.h"

static void
ignore_reply (const RankReply *reply, const GError *error, gpointer data)
{
}

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

typedef enum
{
  KEY_OTHER,    /* not the board's */
  KEY_ENTRIES,  /* scores, times, data, dense counts: of any period */
  KEY_LAYOUT,   /* the stored layout */
  KEY_REQUESTS, /* request-id records of updates */
  KEY_ADMIN,    /* request-id records of DeleteBoard, ResetBoard */
  KEY_QUEUE,    /* the update queue: stream, dead letters, counts */
} KeyKind;

static gboolean
take_prefix (const char **p, const char *end, const char *prefix, gsize len)
{
  if ((gsize) (end - *p) < len || memcmp (*p, prefix, len) != 0)
    return FALSE;
  *p += len;
  return TRUE;
}

#define ORDINARY_TAG RANK_KEY_PREFIX ":{"
#define SHARD_TAG RANK_SHARD_KEY_PREFIX ":{"

/* What key is to board; *rest: what follows its tag ("z", "p:2026-11:z"). */
static KeyKind
classify_key (const char *board, const char *key, gsize len, const char **rest,
              gsize *rest_len)
{
  const char *p = key, *end = key + len;
  gboolean shard = FALSE;

  if (take_prefix (&p, end, SHARD_TAG, strlen (SHARD_TAG)))
    shard = TRUE;
  else if (!take_prefix (&p, end, ORDINARY_TAG, strlen (ORDINARY_TAG)))
    return KEY_OTHER;
  if (!take_prefix (&p, end, board, strlen (board)))
    return KEY_OTHER;
  if (shard)
    {
      guint index = 0, digits = 0;

      if (!take_prefix (&p, end, "/", 1))
        return KEY_OTHER;
      while (p < end && g_ascii_isdigit (*p) && digits < 3)
        index = index * 10 + (guint) (*p++ - '0'), digits++;
      if (digits == 0 || index >= RANK_SHARDS_MAX)
        return KEY_OTHER;
    }
  if (!take_prefix (&p, end, "}:", 2))
    return KEY_OTHER;
  *rest = p;
  *rest_len = (gsize) (end - p);
  if (*rest_len == 1 && *p == RANK_KEY_SUFFIX_REQUEST[0])
    return KEY_REQUESTS;
  if (*rest_len >= 2 && p[0] == RANK_KEY_SUFFIX_REQUEST[0] && p[1] == ':')
    return KEY_REQUESTS;
  if (!shard && *rest_len == 1 && *p == RANK_KEY_SUFFIX_LAYOUT[0])
    return KEY_LAYOUT;
  if (*rest_len == 1
      && (*p == RANK_KEY_SUFFIX_QUEUE[0] || *p == RANK_KEY_SUFFIX_DEAD[0]
          || *p == RANK_KEY_SUFFIX_QUEUE_COUNTS[0]))
    return KEY_QUEUE;
  if (!shard && *rest_len >= 2 && p[0] == RANK_KEY_SUFFIX_ADMIN[0]
      && p[1] == ':')
    return KEY_ADMIN;
  return KEY_ENTRIES;
}

/* How much of rest ("p:LABEL:z", "p:LABEL:q:8:3", "z") names the
 * period: "p:LABEL:", or nothing for the board's own keys. Labels hold no
 * ':' (period.c). */
static gsize
period_len (const char *rest, gsize len)
{
  const char *colon;

  if (len < 4 || rest[0] != 'p' || rest[1] != ':')
    return 0;
  colon = memchr (rest + 2, ':', len - 2);
  if (colon == NULL || colon == rest + 2)
    return 0;
  return (gsize) (colon - rest) + 1;
}

/* The period label of an entries key's rest, or NULL. */
static char *
period_of (const char *rest, gsize len)
{
  gsize n = period_len (rest, len);

  return n > 0 ? g_strndup (rest + 2, n - 3) : NULL;
}

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

/* A MATCH pattern for text as it is. */
static void
glob_escape (GString *out, const char *text)
{
  for (const char *p = text; *p != '\0'; p++)
    {
      if (strchr ("*?[]\\", *p) != NULL)
        g_string_append_c (out, '\\');
      g_string_append_c (out, *p);
    }
}

/* The tag part of a key (up to and with "}:"): keys that share it may go
 * in one command. */
static gsize
tag_len (const char *key, gsize len)
{
  const char *close = memchr (key, '}', len);

  return close != NULL ? (gsize) (close - key) + 1 : len;
}

/* ---- the walk: GetBoardInfo, DeleteBoard, ResetBoard ---- */

typedef enum
{
  WALK_STATS,
  WALK_DELETE,
  WALK_RESET,
} WalkKind;

/* SCAN on one node, for keys under one pattern. */
typedef struct
{
  guint node;
  char *route; /* a key that routes SCAN there (Redis Cluster) */
  char *pattern;
} WalkGroup;

typedef struct
{
  RankStore *store;
  const RankContext *ctx;
  WalkKind kind;
  WalkGroup groups[1 + RANK_SHARDS_MAX];
  guint n_groups, group;
  char *cursor;  /* SCAN's, in groups[group] */
  guint pending; /* replies still to come of this round */
  GError *error;
  GHashTable *seen;    /* stats: keys counted */
  GHashTable *periods; /* stats: labels */
  GHashTable *scopes;  /* delete, reset: prefix -> Scope, cleared at the end */
  gboolean clearing;   /* the scopes' clear.lua calls are out */
  RankBoardStats stats;
  char *stored_layout;
  gint64 removed;
  char *admin_key; /* DeleteBoard, ResetBoard: the request id's record */
  gboolean repeated;
  RankStoreStatsFunc stats_func;
  RankStoreClearFunc clear_func;
  gpointer data;
} Walk;

/* A scope to clear (clear.lua): the node it is on, and what goes. */
typedef struct
{
  guint node;
  const char *what; /* "entries", "period" or "all" */
} Scope;

static const char *
walk_name (WalkKind kind)
{
  return kind == WALK_DELETE ? "delete" : "reset";
}

static void
walk_free (Walk *w)
{
  for (guint i = 0; i < w->n_groups; i++)
    {
      g_free (w->groups[i].route);
      g_free (w->groups[i].pattern);
    }
  g_free (w->cursor);
  g_clear_error (&w->error);
  if (w->seen != NULL)
    g_hash_table_unref (w->seen);
  if (w->periods != NULL)
    g_hash_table_unref (w->periods);
  if (w->scopes != NULL)
    g_hash_table_unref (w->scopes);
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

static void walk_scan (Walk *w);
static void walk_finish (Walk *w);

/* The shards the board's keys may be under: as the options in force say,
 * or the stored layout, whichever has more. */
static guint
walk_shards (const Walk *w)
{
  guint shards = w->ctx->options->shards;
  const char *s
      = w->stored_layout != NULL ? strstr (w->stored_layout, " shards=") : NULL;

  if (s != NULL)
    shards = MAX (shards, (guint) g_ascii_strtoull (s + 8, NULL, 10));
  return MIN (shards, RANK_SHARDS_MAX);
}

static void
walk_add_group (Walk *w, guint node, const char *route, GString *pattern)
{
  WalkGroup *g = &w->groups[w->n_groups++];

  g->node = node;
  g->route = g_strdup (route);
  g->pattern = g_strdup (pattern->str);
}

/* The board's own tag on node 0; its shards' on each node that holds one:
 * every shard of a node at once (one pattern), or on a Redis Cluster,
 * where a node is a slot's master, shard by shard. */
static void
walk_plan (Walk *w)
{
  const char *board = w->ctx->board;
  g_autoptr (GString) pattern = g_string_new (ORDINARY_TAG);
  char route[RANK_STORE_KEY_MAX];
  guint shards = walk_shards (w);
  gboolean by_shard = w->store->nodes >= RANK_SHARDS_MAX;

  glob_escape (pattern, board);
  g_string_append (pattern, "}:*");
  store_board_key (route, board, RANK_KEY_SUFFIX_LAYOUT);
  walk_add_group (w, 0, route, pattern);
  for (guint i = 0; i < shards && (by_shard || i < w->store->nodes); i++)
    {
      g_string_assign (pattern, SHARD_TAG);
      glob_escape (pattern, board);
      if (by_shard)
        g_string_append_printf (pattern, "/%u}:*", i);
      else
        g_string_append (pattern, "/*}:*");
      g_snprintf (route, sizeof route, SHARD_TAG "%s/%u}:z", board, i);
      walk_add_group (w, store_node_of (w->store, i), route, pattern);
    }
  w->cursor = g_strdup ("0");
}

/* One reply of this round is in: the next SCAN once they all are. */
static void
walk_round_done (Walk *w)
{
  g_assert (w->pending > 0);
  if (--w->pending > 0)
    return;
  if (w->error != NULL)
    {
      walk_finish (w);
      return;
    }
  if (strcmp (w->cursor, "0") == 0 && ++w->group == w->n_groups)
    {
      walk_finish (w);
      return;
    }
  walk_scan (w);
}

static void
memory_read (const RankReply *reply, const GError *error, gpointer data)
{
  Walk *w = data;

  if (error != NULL)
    walk_fail (w, g_error_copy (error));
  else if (reply->type == RANK_REPLY_INTEGER)
    w->stats.memory_bytes += reply->integer;
  /* NIL: the key went meanwhile. */
  walk_round_done (w);
}

/* A reply of UNLINK or clear.lua: the keys it removed. */
static void
walk_add_removed (Walk *w, const RankReply *reply, const GError *error,
                  const char *what)
{
  if (error != NULL)
    walk_fail (w, g_error_copy (error));
  else if (reply->type == RANK_REPLY_INTEGER)
    w->removed += reply->integer;
  else
    walk_fail (w, store_unexpected (reply, what));
}

static void
unlink_read (const RankReply *reply, const GError *error, gpointer data)
{
  walk_add_removed (data, reply, error, "UNLINK");
  walk_round_done (data);
}

static void
walk_count (Walk *w, const RankReply *key, const char *rest, gsize rest_len)
{
  char *label;
  RankCommand cmd;

  if (!g_hash_table_add (w->seen, g_strndup (key->str, key->len)))
    return; /* SCAN may give a key twice */
  w->stats.keys++;
  label = period_of (rest, rest_len);
  if (label != NULL)
    g_hash_table_add (w->periods, label);
  rank_command_init (&cmd, "MEMORY");
  rank_command_add_str (&cmd, "USAGE");
  rank_command_add (&cmd, key->str, key->len);
  rank_command_route (&cmd, key->str, key->len);
  w->pending++;
  rank_backend_send (w->store->backend, w->groups[w->group].node, &cmd, 0,
                     memory_read, w);
}

static gint
key_compare (gconstpointer a, gconstpointer b)
{
  const RankReply *x = *(const RankReply *const *) a;
  const RankReply *y = *(const RankReply *const *) b;
  int c = memcmp (x->str, y->str, MIN (x->len, y->len));

  return c != 0 ? c : x->len < y->len ? -1 : x->len > y->len;
}

/* UNLINKs doomed, sorted, in runs of one tag. */
static void
walk_unlink (Walk *w, GPtrArray *doomed)
{
  guint i = 0;

  g_ptr_array_sort (doomed, key_compare);
  while (i < doomed->len)
    {
      const RankReply *first = doomed->pdata[i];
      gsize tag = tag_len (first->str, first->len);
      RankCommand cmd;
      guint n = 0;

      rank_command_init (&cmd, "UNLINK");
      while (i < doomed->len && n < RANK_ADMIN_UNLINK_MAX)
        {
          const RankReply *k = doomed->pdata[i];

          if (tag_len (k->str, k->len) != tag
              || memcmp (k->str, first->str, tag) != 0)
            break;
          rank_command_add (&cmd, k->str, k->len);
          i++, n++;
        }
      w->pending++;
      rank_backend_send (w->store->backend, w->groups[w->group].node, &cmd, 0,
                         unlink_read, w);
    }
}

/* The one-letter suffixes clear.lua removes (constants.h). */
#define SCOPE_SUFFIXES                                                         \
  RANK_KEY_SUFFIX_SCORES RANK_KEY_SUFFIX_TIMES RANK_KEY_SUFFIX_DATA            \
      RANK_KEY_SUFFIX_DISTINCT RANK_KEY_SUFFIX_COUNTS RANK_KEY_SUFFIX_REQUEST  \
          RANK_KEY_SUFFIX_LAYOUT RANK_KEY_SUFFIX_QUEUE RANK_KEY_SUFFIX_DEAD    \
              RANK_KEY_SUFFIX_QUEUE_COUNTS

/* DeleteBoard, ResetBoard: a key found. Its scope (its tag, then its
 * period's "p:LABEL:" if it has one) is noted, to go whole at the end; a
 * request-id record hash of a scope whose records go ("q:<s>:<i>" after
 * it), or a key none of rankd's scripts writes, goes now, into doomed. */
static void
walk_note (Walk *w, const RankReply *key, const char *rest, gsize rest_len,
           GPtrArray *doomed)
{
  gsize period = period_len (rest, rest_len);
  const char *after = rest + period;
  gsize after_len = rest_len - period;
  Scope *scope;
  char *prefix;

  if (after_len > 2 && after[0] == RANK_KEY_SUFFIX_REQUEST[0]
      && after[1] == ':')
    {
      if (period > 0 || w->kind == WALK_DELETE)
        g_ptr_array_add (doomed, (gpointer) key);
    }
  else if (after_len != 1 || strchr (SCOPE_SUFFIXES, after[0]) == NULL)
    g_ptr_array_add (doomed, (gpointer) key); /* none of rankd's: it goes */
  prefix = g_strndup (key->str, (gsize) (after - key->str));
  if (g_hash_table_contains (w->scopes, prefix))
    {
      g_free (prefix);
      return;
    }
  scope = g_new (Scope, 1);
  scope->node = w->groups[w->group].node;
  if (period > 0)
    scope->what = "period";
  else
    scope->what = w->kind == WALK_DELETE ? "all" : "entries";
  g_hash_table_insert (w->scopes, prefix, scope);
}

static void
scan_read (const RankReply *reply, const GError *error, gpointer data)
{
  Walk *w = data;
  const RankReply *cursor, *keys;
  g_autoptr (GPtrArray) doomed = g_ptr_array_new ();

  /* The round's own reply counts as one of it. */
  w->pending = 1;
  if (error != NULL)
    {
      walk_fail (w, g_error_copy (error));
      walk_round_done (w);
      return;
    }
  if (reply->type != RANK_REPLY_ARRAY || reply->elements != 2
      || (cursor = rank_reply_string_at (reply, 0)) == NULL
      || (keys = reply->element[1])->type != RANK_REPLY_ARRAY)
    {
      walk_fail (w, store_unexpected (reply, "SCAN"));
      walk_round_done (w);
      return;
    }
  g_free (w->cursor);
  w->cursor = g_strndup (cursor->str, cursor->len);
  for (gsize i = 0; i < keys->elements; i++)
    {
      const RankReply *key = keys->element[i];
      const char *rest;
      gsize rest_len;
      KeyKind kind;

      if (key->type != RANK_REPLY_STRING)
        continue;
      kind = classify_key (w->ctx->board, key->str, key->len, &rest, &rest_len);
      if (kind == KEY_OTHER)
        continue;
      if (w->kind == WALK_STATS)
        walk_count (w, key, rest, rest_len);
      else if (kind != KEY_ADMIN)
        walk_note (w, key, rest, rest_len, doomed);
    }
  if (doomed->len > 0)
    walk_unlink (w, doomed);
  walk_round_done (w);
}

static void
walk_scan (Walk *w)
{
  const WalkGroup *g = &w->groups[w->group];
  RankCommand cmd;

  rank_command_init (&cmd, "SCAN");
  rank_command_add_str (&cmd, w->cursor);
  rank_command_add_str (&cmd, "MATCH");
  rank_command_add_str (&cmd, g->pattern);
  rank_command_add_str (&cmd, "COUNT");
  rank_command_add_int (&cmd, RANK_ADMIN_SCAN_COUNT);
  rank_command_route (&cmd, g->route, strlen (g->route));
  rank_backend_send (w->store->backend, g->node, &cmd, 0, scan_read, w);
}

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
scope_cleared (const RankReply *reply, const GError *error, gpointer data)
{
  Walk *w = data;

  walk_add_removed (w, reply, error, "clear.lua");
  g_assert (w->pending > 0);
  if (--w->pending == 0)
    walk_finish (w);
}

/* Each scope the walk found goes whole, in one clear.lua call. */
static void
walk_clear_scopes (Walk *w)
{
  GHashTableIter it;
  gpointer prefix, value;

  w->clearing = TRUE;
  g_hash_table_iter_init (&it, w->scopes);
  while (g_hash_table_iter_next (&it, &prefix, &value))
    {
      const Scope *scope = value;
      gsize len = strlen (prefix);
      RankCommand cmd;

      rank_command_init_script (&cmd, RANK_SCRIPT_CLEAR);
      rank_command_add (&cmd, prefix, len);
      rank_command_append (&cmd, RANK_KEY_SUFFIX_SCORES,
                           strlen (RANK_KEY_SUFFIX_SCORES));
      rank_command_keys_done (&cmd);
      rank_command_add (&cmd, prefix, len);
      rank_command_add_str (&cmd, scope->what);
      w->pending++;
      rank_backend_send (w->store->backend, scope->node, &cmd, 0, scope_cleared,
                         w);
    }
}

static void
walk_finish (Walk *w)
{
  RankCommand cmd;

  if (w->kind == WALK_STATS || w->error != NULL)
    {
      if (w->kind == WALK_STATS && w->error == NULL)
        {
          GHashTableIter it;
          gpointer label;

          w->stats.periods = g_ptr_array_new_with_free_func (g_free);
          g_hash_table_iter_init (&it, w->periods);
          while (g_hash_table_iter_next (&it, &label, NULL))
            g_ptr_array_add (w->stats.periods, g_strdup (label));
          g_ptr_array_sort (w->stats.periods, period_compare);
          w->stats.stored_layout = w->stored_layout;
        }
      walk_deliver (w);
      return;
    }
  if (!w->clearing && g_hash_table_size (w->scopes) > 0)
    {
      walk_clear_scopes (w);
      return;
    }
  if (w->kind == WALK_RESET)
    {
      admin_record (w, "done", admin_done_written);
      return;
    }
  store_forget_layout (w->store, w->ctx->board);
  rank_command_init (&cmd, "ZREM");
  rank_command_add_str (&cmd, RANK_QUEUES_KEY);
  rank_command_add_str (&cmd, w->ctx->board);
  rank_backend_send (w->store->backend, 0, &cmd, 0, ignore_reply, NULL);
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
  walk_plan (w);
  walk_scan (w);
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

void
rank_store_board_stats (RankStore *store, const RankContext *ctx,
                        RankStoreStatsFunc func, gpointer data)
{
  Walk *w = g_new0 (Walk, 1);

  w->store = store;
  w->ctx = ctx;
  w->kind = WALK_STATS;
  w->seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  w->periods = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
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
  Walk *w = g_new0 (Walk, 1);
  g_autofree char *digest
      = g_compute_checksum_for_string (G_CHECKSUM_SHA256, request_id, -1);
  char key[RANK_STORE_KEY_MAX];
  g_autofree char *suffix = NULL;
  RankCommand cmd;

  w->store = store;
  w->ctx = ctx;
  w->kind = kind == RANK_CLEAR_DELETE ? WALK_DELETE : WALK_RESET;
  w->scopes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
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
