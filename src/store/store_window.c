/* store_window.c -- rolling windows (board option window=N): each call on
 * a board with a window makes sure its window is rolled to the call's
 * period (lua/window.lua holds the storage and the roll).
 *
 * The roll is the update library's second function: one call places at
 * most RANK_WINDOW_ROLL_CHUNK members in the window being built, and
 * answers "more" until the last call swaps it in and answers "done". A
 * worker drives one roll at a time per board and shard, and remembers the
 * window it last saw done, so a call on a rolled board costs no Redis
 * command. Several workers (or rankds) may drive the same roll: each call
 * moves it on atomically.
 */
#include <string.h>

#include "store_private.h"

/* A board whose every shard this worker saw rolled to the period
 * [start_ms, end_ms), at checked_us at the earliest: a call in that period
 * within RANK_LAYOUT_RECHECK_MS of it needs nothing (no period labels to
 * work out: GLib's calendar was a quarter of rankd's time on a window
 * board). */
typedef struct
{
  gint64 start_ms, end_ms, checked_us;
} WindowFresh;

typedef struct
{
  RankStore *store;
  char *key;        /* "board/shard" in store->windows */
  char *done;       /* the labels of the window last seen done */
  gint64 done_us;   /* when (g_get_monotonic_time) */
  gint64 warned_us; /* the last failure logged */
  char *target;     /* of the roll in flight (NULL: none) */
  /* The roll's arguments, sent again on "more". */
  char *state_key;
  const char *combine, *order;
  gint64 prefix_len, start_ms, expire_ms;
  guint node;
} WindowEntry;

static void
window_entry_free (gpointer data)
{
  WindowEntry *e = data;

  g_free (e->key);
  g_free (e->done);
  g_free (e->target);
  g_free (e->state_key);
  g_free (e);
}

void
store_windows_init (RankStore *store)
{
  store->windows = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                          window_entry_free);
  store->windows_fresh
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
}

void
store_windows_free (RankStore *store)
{
  g_hash_table_unref (store->windows);
  g_hash_table_unref (store->windows_fresh);
}

void
store_forget_windows (RankStore *store, const char *board, guint shards)
{
  g_hash_table_remove (store->windows_fresh, board);
  for (guint shard = 0; shard < shards; shard++)
    {
      g_autofree char *key = g_strdup_printf ("%s/%u", board, shard);
      WindowEntry *e = g_hash_table_lookup (store->windows, key);

      /* A roll in flight keeps its entry (its reply comes back to it). */
      if (e != NULL && e->target == NULL)
        g_hash_table_remove (store->windows, key);
    }
}

const char *
store_window_combine (const RankBoardOptions *o)
{
  if (o->window == 0)
    return "";
  return o->mode == RANK_MODE_BEST ? "best" : "sum";
}

static void roll_send (WindowEntry *e);

static gboolean
is_done (gpointer key, gpointer value, gpointer data)
{
  return ((WindowEntry *) value)->target == NULL;
}

static void
forget_done (RankStore *store)
{
  g_hash_table_foreach_remove (store->windows, is_done, NULL);
}

static void
rolled (const RankReply *reply, const GError *error, gpointer data)
{
  WindowEntry *e = data;
  const RankReply *what = NULL, *labels = NULL;

  if (error == NULL && reply->type == RANK_REPLY_ARRAY)
    {
      what = rank_reply_string_at (reply, 0);
      labels = rank_reply_string_at (reply, 1);
    }
  if (what != NULL && labels != NULL && strcmp (what->str, "more") == 0)
    {
      roll_send (e);
      return;
    }
  if (what != NULL && labels != NULL && strcmp (what->str, "done") == 0)
    {
      g_free (e->done);
      e->done = g_strdup (labels->str);
      e->done_us = g_get_monotonic_time ();
    }
  else if (g_get_monotonic_time () - e->warned_us > 10 * G_USEC_PER_SEC)
    {
      /* Tried again by the next call on the board; logged at most every
       * 10 s (every call tries again while Redis is down). */
      e->warned_us = g_get_monotonic_time ();
      g_warning ("rolling window of %s: %s; tried again at the next call",
                 e->key,
                 error != NULL                     ? error->message
                 : reply->type == RANK_REPLY_ERROR ? reply->str
                                                   : "unexpected reply");
    }
  g_clear_pointer (&e->target, g_free);
}

static void
roll_send (WindowEntry *e)
{
  RankCommand cmd;

  rank_command_init_script (&cmd, RANK_SCRIPT_ROLL);
  rank_command_add_str (&cmd, e->state_key);
  rank_command_keys_done (&cmd);
  rank_command_add_str (&cmd, e->combine);
  rank_command_add_str (&cmd, e->order);
  rank_command_add_int (&cmd, e->prefix_len);
  rank_command_add_str (&cmd, e->target);
  rank_command_add_int (&cmd, e->start_ms);
  rank_command_add_int (&cmd, e->expire_ms);
  rank_command_add_int (&cmd, RANK_WINDOW_ROLL_CHUNK);
  rank_backend_send (e->store->backend, e->node, &cmd, 0, rolled, e);
}

void
rank_store_window_ensure (RankStore *store, const RankContext *ctx)
{
  const RankBoardOptions *o = ctx->options;
  RankPeriod current;
  g_autoptr (GString) target = NULL;
  gint64 expire_ms;
  char state_key[RANK_STORE_KEY_MAX];
  WindowFresh *fresh;
  gboolean all_done = TRUE;
  gint64 oldest_us = G_MAXINT64;

  if (o->window == 0)
    return;
  fresh = g_hash_table_lookup (store->windows_fresh, ctx->board);
  if (fresh != NULL && ctx->now_ms >= fresh->start_ms
      && ctx->now_ms < fresh->end_ms
      && ctx->decoded_us - fresh->checked_us
             < (gint64) RANK_LAYOUT_RECHECK_MS * 1000)
    return;
  rank_period_of (&o->period, ctx->now_ms, &current);
  target = g_string_new (current.label);
  for (guint back = 1; back < o->window; back++)
    {
      RankPeriod p;

      rank_period_back (&o->period, ctx->now_ms, back, &p);
      g_string_append_c (target, ',');
      g_string_append (target, p.label);
    }
  /* The window's keys go with its newest period's. */
  expire_ms = rank_period_expiry_ms (&o->period, &current, o->retention);
  for (guint shard = 0; shard < o->shards; shard++)
    {
      g_autofree char *key = g_strdup_printf ("%s/%u", ctx->board, shard);
      WindowEntry *e = g_hash_table_lookup (store->windows, key);

      /* Asked again after RANK_LAYOUT_RECHECK_MS: a ResetBoard or
       * DeleteBoard meanwhile took the window's state with the board. */
      if (e != NULL && e->target == NULL
          && g_strcmp0 (e->done, target->str) == 0
          && ctx->decoded_us - e->done_us
                 < (gint64) RANK_LAYOUT_RECHECK_MS * 1000)
        {
          oldest_us = MIN (oldest_us, e->done_us);
          continue;
        }
      all_done = FALSE;
      if (e != NULL && e->target != NULL)
        continue;
      if (e == NULL)
        {
          /* Many boards named: forget the rolls done (each is asked
           * again at its next call, one Redis call). */
          if (g_hash_table_size (store->windows) >= RANK_LAYOUT_CACHE_MAX)
            forget_done (store);
          e = g_new0 (WindowEntry, 1);
          e->store = store;
          e->key = g_steal_pointer (&key);
          g_hash_table_insert (store->windows, e->key, e);
        }
      e->target = g_strdup (target->str);
      e->node = store_node_of (store, shard);
      g_free (e->state_key);
      /* The state key, the board's across periods. */
      store_key (state_key, ctx, shard, RANK_KEY_SUFFIX_WINDOW);
      e->state_key = g_strdup (state_key);
      e->combine = store_window_combine (o);
      e->order = store_order_name (o->order);
      e->prefix_len = (gint64) store_prefix_len (o);
      e->start_ms = current.start_ms;
      e->expire_ms = expire_ms;
      roll_send (e);
    }
  if (all_done)
    {
      if (fresh == NULL)
        {
          if (g_hash_table_size (store->windows_fresh) >= RANK_LAYOUT_CACHE_MAX)
            g_hash_table_remove_all (store->windows_fresh);
          fresh = g_new (WindowFresh, 1);
          g_hash_table_insert (store->windows_fresh, g_strdup (ctx->board),
                               fresh);
        }
      fresh->start_ms = current.start_ms;
      fresh->end_ms = current.end_ms;
      fresh->checked_us = oldest_us;
    }
}
