/* store.c -- the store and what its operations share: keys, rows, and the
 * check of a board's stored layout (see store.h, store_private.h; key
 * layout in constants.h and the README; shard placement in shard.h).
 */
#include "store.h"

#include <string.h>

#include "error.h"
#include "layout.h"
#include "orderkey.h"
#include "shard.h"
#include "store_private.h"

/* A board's stored layout as last read, for the options in force. */
typedef struct
{
  gboolean present; /* it has a descriptor */
  char *mismatch;   /* why the options may not touch it; NULL: they may */
  gint64 checked;   /* monotonic us */
} LayoutEntry;

static void
layout_entry_free (gpointer data)
{
  LayoutEntry *e = data;

  g_free (e->mismatch);
  g_free (e);
}

RankStore *
rank_store_new (RankBackend *backend, guint32 seed)
{
  RankStore *store = g_new0 (RankStore, 1);

  store->backend = backend;
  store->nodes = rank_backend_nodes (backend);
  store->rand = seed != 0 ? g_rand_new_with_seed (seed) : g_rand_new ();
  store->layouts = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                          layout_entry_free);
  store->layout_asks = g_hash_table_new (g_str_hash, g_str_equal);
  store->rank_reads = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                             (GDestroyNotify) g_queue_free);
  rank_backend_watch_writes (backend, store_fence_rank_reads, store);
  store_windows_init (store);
  return store;
}

void
rank_store_free (RankStore *store)
{
  if (store == NULL)
    return;
  g_rand_free (store->rand);
  g_hash_table_unref (store->layouts);
  g_hash_table_unref (store->layout_asks);
  g_hash_table_unref (store->rank_reads);
  store_windows_free (store);
  if (store->group_head != NULL)
    rank_command_clear (store->group_head);
  g_free (store->group_head);
  g_free (store);
}

/* ---- keys ---- */

/* Longest key: prefix, board, shard, period, suffix and punctuation. */
#define KEY_MAX RANK_STORE_KEY_MAX

/* Keys that are the board's across periods: request-id records (a retry
 * after midnight is still a retry) and the update queue. */
static gboolean
spans_periods (const char *suffix)
{
  return strcmp (suffix, RANK_KEY_SUFFIX_REQUEST) == 0
         || strcmp (suffix, RANK_KEY_SUFFIX_QUEUE) == 0
         || strcmp (suffix, RANK_KEY_SUFFIX_DEAD) == 0
         || strcmp (suffix, RANK_KEY_SUFFIX_QUEUE_COUNTS) == 0
         || strcmp (suffix, RANK_KEY_SUFFIX_WINDOW) == 0;
}

/* Appends len bytes of s at out + *at, within KEY_MAX. */
static void
key_append (char *out, gsize *at, const char *s, gsize len)
{
  g_assert (*at + len < KEY_MAX);
  memcpy (out + *at, s, len);
  *at += len;
}

#define KEY_APPEND_LITERAL(out, at, s) key_append (out, at, s, sizeof s - 1)

/* Without printf: an update's script call names six keys, and printf was a
 * sixth of rankd's time in an import. */
static gsize
board_key (char *out, const char *board, const char *period, guint shard,
           guint shards, const char *suffix)
{
  gsize at = 0;

  if (shards > 1)
    {
      char number[RANK_FORMAT_INT_MAX];

      KEY_APPEND_LITERAL (out, &at, RANK_SHARD_KEY_PREFIX ":{");
      key_append (out, &at, board, strlen (board));
      KEY_APPEND_LITERAL (out, &at, "/");
      key_append (out, &at, number, rank_format_int (number, shard));
    }
  else
    {
      KEY_APPEND_LITERAL (out, &at, RANK_KEY_PREFIX ":{");
      key_append (out, &at, board, strlen (board));
    }
  KEY_APPEND_LITERAL (out, &at, "}:");
  if (period != NULL && *period != '\0' && !spans_periods (suffix))
    {
      KEY_APPEND_LITERAL (out, &at, "p:");
      key_append (out, &at, period, strlen (period));
      KEY_APPEND_LITERAL (out, &at, ":");
    }
  key_append (out, &at, suffix, strlen (suffix));
  out[at] = '\0';
  return at;
}

gsize
store_board_key (char *out, const char *board, const char *suffix)
{
  return board_key (out, board, NULL, 0, 1, suffix);
}

gsize
store_key (char *out, const RankContext *ctx, guint shard, const char *suffix)
{
  return board_key (out, ctx->board, ctx->period.label, shard,
                    ctx->options->shards, suffix);
}

void
store_add_key (RankCommand *cmd, const RankContext *ctx, guint shard,
               const char *suffix)
{
  char key[KEY_MAX];

  rank_command_add (cmd, key, store_key (key, ctx, shard, suffix));
}

void
store_add_node_keys (RankCommand *cmd, const RankStore *store,
                     const RankContext *ctx, guint node, gint skip,
                     const char *suffix)
{
  for (guint j = 0; j < ctx->options->shards; j++)
    if ((gint) j != skip && store_node_of (store, j) == node)
      store_add_key (cmd, ctx, j, suffix);
}

guint
store_shard_of (const RankContext *ctx, const char *member, gsize len)
{
  return rank_shard_of (member, len, ctx->options->shards);
}

void
store_read_from (RankCommand *cmd, const RankContext *ctx)
{
  if (ctx->options->read_from_replica)
    rank_command_read_from (cmd, (int) ctx->options->max_replica_lag_ms,
                            ctx->fresh_after_us);
}

guint
store_node_of (const RankStore *store, guint shard)
{
  return rank_shard_node (shard, store->nodes);
}

/* ---- replies ---- */

GError *
store_unexpected (const RankReply *reply, const char *what)
{
  g_warning ("unexpected Redis reply (type %d) to %s", reply->type, what);
  return g_error_new (RANK_ERROR, RANK_ERROR_INTERNAL,
                      "unexpected Redis reply to %s", what);
}

gsize
store_prefix_len (const RankBoardOptions *o)
{
  return RANK_ORDERKEY_PREFIX_BYTES (o->n_subscores);
}

void
store_decode_subscores (const RankBoardOptions *o, const char *prefix, guint *n,
                        gint64 *out)
{
  *n = o->n_subscores;
  for (guint i = 0; i < o->n_subscores; i++)
    out[i] = rank_orderkey_decode_subscore (
        (const guint8 *) prefix + i * RANK_ORDERKEY_SUBSCORE_BYTES,
        o->subscore_asc[i]);
}

void
store_row_from_key (const RankBoardOptions *o, const char *key, gsize key_len,
                    gint64 zscore, RankRow *row)
{
  gsize skip = store_prefix_len (o);

  g_assert (key_len > skip);
  row->member = key + skip;
  row->member_len = key_len - skip;
  row->score = o->order == RANK_ORDER_ASC ? zscore : -zscore;
  row->rank = 0;
  row->data = NULL;
  row->data_len = 0;
  row->time_ms = rank_orderkey_decode_time (
      (const guint8 *) key + o->n_subscores * RANK_ORDERKEY_SUBSCORE_BYTES);
  store_decode_subscores (o, key, &row->n_subscores, row->subscores);
}

void
store_zscore_bounds (const RankBoardOptions *o, gint64 min, gint64 max,
                     gint64 *lo, gint64 *hi)
{
  *lo = o->order == RANK_ORDER_ASC ? min : -max;
  *hi = o->order == RANK_ORDER_ASC ? max : -min;
}

const char *
store_order_name (RankOrder order)
{
  return order == RANK_ORDER_ASC ? "asc" : "desc";
}

const char *
store_kind_name (RankKind kind)
{
  return kind == RANK_KIND_COMPETITION ? "competition"
         : kind == RANK_KIND_DENSE     ? "dense"
                                       : "ordinal";
}

gboolean
store_countdown_done (StoreCountdown *c, const GError *error)
{
  if (error != NULL && c->error == NULL)
    c->error = g_error_copy (error);
  g_assert (c->pending > 0);
  return --c->pending == 0;
}

/* ---- the board's layout ---- */

typedef struct
{
  RankStoreDoneFunc func;
  gpointer data;
} LayoutWaiter;

typedef struct
{
  RankStore *store;
  char *board;
  gboolean write;
  char *describe;  /* the options in force, described */
  char *ask;       /* its key in store->layout_asks */
  GArray *waiters; /* LayoutWaiter: every call waiting for this check */
} LayoutTask;

static GError *
layout_refusal (const char *mismatch)
{
  return g_error_new_literal (RANK_ERROR, RANK_ERROR_UNAVAILABLE, mismatch);
}

static void
layout_read (const RankReply *reply, const GError *error, gpointer data)
{
  LayoutTask *task = data;
  RankStore *store = task->store;
  g_autoptr (GError) refused = NULL;
  LayoutEntry *e;

  if (error == NULL && reply->type != RANK_REPLY_NIL
      && reply->type != RANK_REPLY_STRING)
    error = refused = store_unexpected (reply, "the board's layout descriptor");
  if (error == NULL)
    {
      if (g_hash_table_size (store->layouts) >= RANK_LAYOUT_CACHE_MAX)
        g_hash_table_remove_all (store->layouts);
      e = g_new0 (LayoutEntry, 1);
      /* NIL: none (a read), or none until this SET NX wrote ours. */
      e->present = reply->type == RANK_REPLY_STRING || task->write;
      e->mismatch
          = reply->type == RANK_REPLY_STRING
                ? rank_layout_mismatch (task->board, reply->str, task->describe)
                : NULL;
      e->checked = g_get_monotonic_time ();
      g_hash_table_replace (store->layouts, g_strdup (task->board), e);
      if (e->present)
        rank_layout_report (task->board, e->mismatch);
      if (e->mismatch != NULL)
        error = refused = layout_refusal (e->mismatch);
    }
  if (g_hash_table_lookup (store->layout_asks, task->ask) == task)
    g_hash_table_remove (store->layout_asks, task->ask);
  for (guint i = 0; i < task->waiters->len; i++)
    {
      LayoutWaiter *w = &g_array_index (task->waiters, LayoutWaiter, i);

      w->func (error, w->data);
    }
  g_array_unref (task->waiters);
  g_free (task->ask);
  g_free (task->describe);
  g_free (task->board);
  g_free (task);
}

static void
ignore_reply (const RankReply *reply, const GError *error, gpointer data)
{
}

static void
add_descriptor_key (RankCommand *cmd, const char *board)
{
  char key[KEY_MAX];

  rank_command_add (cmd, key,
                    board_key (key, board, NULL, 0, 1, RANK_KEY_SUFFIX_LAYOUT));
}

/* Reads board's descriptor (or, write, records options' if there is none). */
static void
layout_ask (RankStore *store, const char *board, const RankBoardOptions *o,
            gint64 now_ms, gboolean write, RankStoreDoneFunc func,
            gpointer data)
{
  LayoutWaiter waiter = { func, data };
  g_autofree char *describe = rank_layout_describe (o);
  g_autofree char *ask = g_strconcat (board, "\n", describe, NULL);
  LayoutTask *task = g_hash_table_lookup (store->layout_asks, ask);
  RankCommand cmd;
  gint64 expire_ms = 0;

  /* The board's newest check on its way, if it asks the same, answers this
   * call too: a burst of reads (or of writes) sends one. Calls answered by
   * one check run in the order they came, and checks answer in the order
   * they were sent, so a connection's calls still reach Redis in order. */
  if (task != NULL && task->write == write)
    {
      g_array_append_val (task->waiters, waiter);
      return;
    }
  task = g_new0 (LayoutTask, 1);
  task->store = store;
  task->board = g_strdup (board);
  task->write = write;
  task->describe = g_steal_pointer (&describe);
  task->ask = g_steal_pointer (&ask);
  task->waiters = g_array_new (FALSE, FALSE, sizeof (LayoutWaiter));
  g_array_append_val (task->waiters, waiter);
  g_hash_table_replace (store->layout_asks, task->ask, task);
  if (!write)
    {
      rank_command_init (&cmd, "GET");
      add_descriptor_key (&cmd, board);
      rank_backend_send (store->backend, 0, &cmd, 0, layout_read, task);
      return;
    }
  /* The first write records the layout; a periodic board's descriptor
   * lives as long as its newest period's keys, and every write check moves
   * that on. */
  if (o->period.kind != RANK_PERIOD_NONE)
    {
      RankPeriod current;

      rank_period_of (&o->period, now_ms, &current);
      expire_ms = rank_period_expiry_ms (&o->period, &current, o->retention);
    }
  rank_command_init (&cmd, "SET");
  add_descriptor_key (&cmd, board);
  rank_command_add_str (&cmd, task->describe);
  rank_command_add_str (&cmd, "NX");
  rank_command_add_str (&cmd, "GET");
  if (expire_ms > 0)
    {
      rank_command_add_str (&cmd, "PXAT");
      rank_command_add_int (&cmd, expire_ms);
    }
  rank_backend_send (store->backend, 0, &cmd, 0, layout_read, task);
  /* ListBoards finds the board here (a no-op but the first time). */
  rank_command_init (&cmd, "ZADD");
  rank_command_add_str (&cmd, RANK_BOARDS_KEY);
  rank_command_add_str (&cmd, "0");
  rank_command_add_str (&cmd, board);
  rank_backend_send (store->backend, 0, &cmd, 0, ignore_reply, NULL);
  if (expire_ms > 0)
    {
      rank_command_init (&cmd, "PEXPIREAT");
      add_descriptor_key (&cmd, board);
      rank_command_add_int (&cmd, expire_ms);
      rank_command_add_str (&cmd, "GT");
      rank_backend_send (store->backend, 0, &cmd, 0, ignore_reply, NULL);
    }
}

RankLayoutCheck
rank_store_check_layout (RankStore *store, const RankContext *ctx,
                         gboolean write, GError **error, RankStoreDoneFunc func,
                         gpointer data)
{
  LayoutEntry *e = g_hash_table_lookup (store->layouts, ctx->board);

  /* Judged at the call's decoding, so the updates of one call are all
   * checked again, or none. */
  if (e != NULL
      && ctx->decoded_us - e->checked < (gint64) RANK_LAYOUT_RECHECK_MS * 1000
      && (e->present || !write))
    {
      if (e->mismatch == NULL)
        return RANK_LAYOUT_OK;
      g_propagate_error (error, layout_refusal (e->mismatch));
      return RANK_LAYOUT_REFUSED;
    }
  layout_ask (store, ctx->board, ctx->options, ctx->now_ms, write, func, data);
  return RANK_LAYOUT_PENDING;
}

void
store_forget_layout (RankStore *store, const char *board)
{
  g_hash_table_remove (store->layouts, board);
}

void
rank_store_forget_layouts (RankStore *store)
{
  g_hash_table_remove_all (store->layouts);
}

static void
layout_checked_quietly (const GError *error, gpointer data)
{
}

void
rank_store_check_configured_layouts (RankStore *store, RankConfig *config,
                                     gint64 now_ms)
{
  g_auto (GStrv) boards = rank_config_board_names (config);

  for (char **b = boards; *b != NULL; b++)
    layout_ask (store, *b, rank_config_board (config, *b), now_ms, FALSE,
                layout_checked_quietly, NULL);
}
