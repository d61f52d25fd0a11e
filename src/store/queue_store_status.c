/* queue_store_status.c -- what a board's queue streams say of themselves
 * (a stream's state, GetQueueStatus) and their trimming. See
 * queue_store.c for how the queue is kept. */
#include <string.h>

#include "error.h"
#include "layout.h"
#include "queue_store.h"

/* ---- a stream's state: backlog, oldest entry ---- */

/* What one shard's stream says of itself. An entry is in the backlog until
 * acknowledged: those the group has not delivered yet (XINFO GROUPS'
 * lag) and those delivered and pending. Acknowledged entries stay in the
 * stream until the drain trims them (rank_store_queue_trim), so XLEN is
 * not the backlog. */
typedef struct
{
  gboolean grouped;   /* the group is there */
  gint64 len;         /* XLEN */
  gint64 pending;     /* the group's */
  gboolean lag_known; /* lag: XINFO GROUPS could tell */
  gint64 lag;         /* entries not delivered yet */
  char last_id[48];   /* the group's last delivered entry */
  char smallest_pending[48];
  gint64 oldest_ms; /* of the oldest unacknowledged; 0: none */
} ShardState;

typedef void (*ShardStateFunc) (ShardState *state, const GError *error,
                                gpointer data);

typedef struct
{
  RankStore *store;
  const RankContext *ctx;
  guint shard;
  ShardState state;
  StoreCountdown countdown;
  ShardStateFunc func;
  gpointer data;
} ShardTask;

/* The Unix ms of a stream entry id ("1732400000000-0"). */
static gint64
id_ms (const char *id)
{
  return g_ascii_strtoll (id, NULL, 10);
}

static void
shard_task_deliver (ShardTask *task)
{
  task->func (&task->state, task->countdown.error, task->data);
  g_clear_error (&task->countdown.error);
  g_free (task);
}

/* XRANGE (last-delivered + COUNT 1: the oldest entry not delivered. */
static void
undelivered_read (const RankReply *reply, const GError *error, gpointer data)
{
  ShardTask *task = data;
  const RankReply *id;

  if (error == NULL && reply->type == RANK_REPLY_ARRAY && reply->elements > 0
      && reply->element[0]->type == RANK_REPLY_ARRAY
      && (id = rank_reply_string_at (reply->element[0], 0)) != NULL)
    {
      gint64 ms = id_ms (id->str);

      if (task->state.oldest_ms == 0 || ms < task->state.oldest_ms)
        task->state.oldest_ms = ms;
    }
  if (store_countdown_done (&task->countdown, error))
    shard_task_deliver (task);
}

static void
shard_part_done (ShardTask *task, const GError *error)
{
  ShardState *st = &task->state;
  RankCommand cmd;

  if (!store_countdown_done (&task->countdown, error))
    return;
  if (task->countdown.error != NULL)
    {
      shard_task_deliver (task);
      return;
    }
  if (!st->grouped)
    {
      /* Nothing was ever drained: every entry waits. */
      st->lag_known = TRUE;
      st->lag = st->len;
    }
  if (!st->lag_known)
    st->lag = MAX (0, st->len - st->pending); /* at most this many */
  if (st->pending > 0)
    st->oldest_ms = id_ms (st->smallest_pending);
  if (st->lag == 0)
    {
      shard_task_deliver (task);
      return;
    }
  task->countdown.pending = 1;
  rank_command_init (&cmd, "XRANGE");
  add_queue_key (&cmd, task->ctx, task->shard, RANK_KEY_SUFFIX_QUEUE);
  if (st->grouped && strcmp (st->last_id, "0-0") != 0)
    {
      g_autofree char *after = g_strconcat ("(", st->last_id, NULL);

      rank_command_add_str (&cmd, after);
    }
  else
    rank_command_add_str (&cmd, "-");
  rank_command_add_str (&cmd, "+");
  rank_command_add_str (&cmd, "COUNT");
  rank_command_add_str (&cmd, "1");
  rank_backend_send (task->store->backend,
                     store_node_of (task->store, task->shard), &cmd, 0,
                     undelivered_read, task);
}

static void
len_read (const RankReply *reply, const GError *error, gpointer data)
{
  ShardTask *task = data;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && reply->type != RANK_REPLY_INTEGER)
    error = bad = store_unexpected (reply, "XLEN");
  if (error == NULL)
    task->state.len = reply->integer;
  shard_part_done (task, error);
}

/* XINFO GROUPS: [[name, "rankd", consumers, n, pending, n,
 * last-delivered-id, id, entries-read, n, lag, n|nil], ...]. */
static void
groups_read (const RankReply *reply, const GError *error, gpointer data)
{
  ShardTask *task = data;
  ShardState *st = &task->state;

  /* No stream yet: no group, nothing waits. */
  if (error != NULL
      && g_error_matches (error, RANK_ERROR, RANK_ERROR_NOT_FOUND))
    error = NULL;
  for (gsize g = 0; error == NULL && reply != NULL
                    && reply->type == RANK_REPLY_ARRAY && g < reply->elements;
       g++)
    {
      const RankReply *f = reply->element[g];
      gboolean ours = FALSE;

      if (f->type != RANK_REPLY_ARRAY)
        continue;
      for (gsize i = 0; i + 1 < f->elements; i += 2)
        {
          const RankReply *k = f->element[i], *v = f->element[i + 1];

          if (k->type != RANK_REPLY_STRING)
            continue;
          if (strcmp (k->str, "name") == 0 && v->type == RANK_REPLY_STRING)
            ours = strcmp (v->str, RANK_QUEUE_GROUP) == 0;
        }
      if (!ours)
        continue;
      st->grouped = TRUE;
      for (gsize i = 0; i + 1 < f->elements; i += 2)
        {
          const RankReply *k = f->element[i], *v = f->element[i + 1];

          if (k->type != RANK_REPLY_STRING)
            continue;
          if (strcmp (k->str, "pending") == 0 && v->type == RANK_REPLY_INTEGER)
            st->pending = v->integer;
          else if (strcmp (k->str, "lag") == 0 && v->type == RANK_REPLY_INTEGER)
            st->lag_known = TRUE, st->lag = v->integer;
          else if (strcmp (k->str, "last-delivered-id") == 0
                   && v->type == RANK_REPLY_STRING)
            g_strlcpy (st->last_id, v->str, sizeof st->last_id);
        }
    }
  shard_part_done (task, error);
}

/* XPENDING summary: [count, smallest id, greatest id, consumers]. */
static void
pending_read (const RankReply *reply, const GError *error, gpointer data)
{
  ShardTask *task = data;
  const RankReply *id;

  /* No group yet: nothing pending. */
  if (error != NULL
      && g_error_matches (error, RANK_ERROR, RANK_ERROR_NOT_FOUND))
    error = NULL;
  if (error == NULL && reply != NULL && reply->type == RANK_REPLY_ARRAY
      && reply->elements >= 2 && (id = rank_reply_string_at (reply, 1)) != NULL)
    g_strlcpy (task->state.smallest_pending, id->str,
               sizeof task->state.smallest_pending);
  shard_part_done (task, error);
}

static void
shard_state (RankStore *store, const RankContext *ctx, guint shard,
             ShardStateFunc func, gpointer data)
{
  ShardTask *task = g_new0 (ShardTask, 1);
  RankCommand cmd;

  task->store = store;
  task->ctx = ctx;
  task->shard = shard;
  task->func = func;
  task->data = data;
  task->countdown.pending = 3;
  rank_command_init (&cmd, "XLEN");
  add_queue_key (&cmd, ctx, shard, RANK_KEY_SUFFIX_QUEUE);
  rank_backend_send (store->backend, store_node_of (store, shard), &cmd, 0,
                     len_read, task);
  rank_command_init (&cmd, "XINFO");
  rank_command_add_str (&cmd, "GROUPS");
  add_queue_key (&cmd, ctx, shard, RANK_KEY_SUFFIX_QUEUE);
  rank_command_route (&cmd, cmd.bytes + cmd.offset[2], cmd.len[2]);
  rank_backend_send (store->backend, store_node_of (store, shard), &cmd, 0,
                     groups_read, task);
  rank_command_init (&cmd, "XPENDING");
  add_queue_key (&cmd, ctx, shard, RANK_KEY_SUFFIX_QUEUE);
  rank_command_add_str (&cmd, RANK_QUEUE_GROUP);
  rank_backend_send (store->backend, store_node_of (store, shard), &cmd, 0,
                     pending_read, task);
}

/* ---- GetQueueStatus ---- */

/* Of those, the ones a drain has read. */
static gint64
counts_pending (const QueueCounts *c)
{
  return MAX (0, MIN (c->delivered, c->queued) - queue_counts_done (c));
}

typedef struct
{
  RankStore *store;
  QueueStreams streams;
  RankQueueStats stats;
  StoreCountdown countdown;
  RankStoreQueueStatsFunc func;
  gpointer data;
} StatsTask;

static void
stats_done (StatsTask *task, const GError *error)
{
  if (!store_countdown_done (&task->countdown, error))
    return;
  task->func (task->countdown.error ? NULL : &task->stats,
              task->countdown.error, task->data);
  g_clear_error (&task->countdown.error);
  g_free (task);
}

/* The stream tells how old its oldest unacknowledged entry is. */
static void
stats_state_read (ShardState *st, const GError *error, gpointer data)
{
  StatsTask *task = data;

  if (error == NULL && st->oldest_ms > 0
      && (task->stats.oldest_ms == 0 || st->oldest_ms < task->stats.oldest_ms))
    task->stats.oldest_ms = st->oldest_ms;
  stats_done (task, error);
}

/* The counts tell how many updates. */
static void
stats_counts_read (const RankReply *reply, const GError *error, gpointer data)
{
  StatsTask *task = data;
  QueueCounts c;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && !queue_counts_of (reply, &c))
    error = bad = store_unexpected (reply, "the queue's counts");
  if (error == NULL)
    {
      task->stats.backlog += queue_counts_backlog (&c);
      task->stats.pending += counts_pending (&c);
      task->stats.applied += c.applied;
      task->stats.dead += c.dead;
    }
  stats_done (task, error);
}

static void
stats_streams_read (const GError *error, gpointer data)
{
  StatsTask *task = data;
  const QueueStreams *qs = &task->streams;

  task->countdown.pending = 1 + 2 * qs->n;
  for (guint i = 0; error == NULL && i < qs->n; i++)
    {
      shard_state (task->store, qs->at[i].ctx, qs->at[i].shard,
                   stats_state_read, task);
      queue_send_counts (task->store, qs->at[i].ctx, qs->at[i].shard,
                         stats_counts_read, task);
    }
  if (error != NULL)
    task->countdown.pending = 1;
  stats_done (task, error);
}

void
rank_store_queue_stats (RankStore *store, const RankContext *ctx,
                        RankStoreQueueStatsFunc func, gpointer data)
{
  StatsTask *task = g_new0 (StatsTask, 1);

  task->store = store;
  task->func = func;
  task->data = data;
  queue_streams_read (store, ctx, &task->streams, stats_streams_read, task);
}

/* ---- trimming ---- */

typedef struct
{
  RankStore *store;
  const RankContext *ctx;
  guint shard;
  RankStoreDoneFunc func;
  gpointer data;
} TrimTask;

static void
trimmed (const RankReply *reply, const GError *error, gpointer data)
{
  TrimTask *task = data;

  task->func (error, task->data);
  g_free (task);
}

/* Every entry before the smallest pending one, or, with none pending,
 * up to the group's last delivered one, is acknowledged: those go. */
static void
trim_state_read (ShardState *st, const GError *error, gpointer data)
{
  TrimTask *task = data;
  char minid[64];
  RankCommand cmd;

  if (error != NULL || !st->grouped || strcmp (st->last_id, "0-0") == 0
      || st->last_id[0] == '\0')
    {
      task->func (error, task->data);
      g_free (task);
      return;
    }
  if (st->pending > 0)
    g_strlcpy (minid, st->smallest_pending, sizeof minid);
  else
    {
      /* The entry after the last delivered: "ms-seq" -> "ms-(seq+1)". */
      const char *dash = strchr (st->last_id, '-');
      guint64 seq = dash != NULL ? g_ascii_strtoull (dash + 1, NULL, 10) : 0;

      g_snprintf (minid, sizeof minid, "%.*s-%" G_GUINT64_FORMAT,
                  dash != NULL ? (int) (dash - st->last_id)
                               : (int) strlen (st->last_id),
                  st->last_id, seq + 1);
    }
  rank_command_init (&cmd, "XTRIM");
  add_queue_key (&cmd, task->ctx, task->shard, RANK_KEY_SUFFIX_QUEUE);
  rank_command_add_str (&cmd, "MINID");
  rank_command_add_str (&cmd, minid);
  rank_backend_send (task->store->backend,
                     store_node_of (task->store, task->shard), &cmd, 0, trimmed,
                     task);
}

void
rank_store_queue_trim (RankStore *store, const RankContext *ctx, guint shard,
                       RankStoreDoneFunc func, gpointer data)
{
  TrimTask *task = g_new0 (TrimTask, 1);

  task->store = store;
  task->ctx = ctx;
  task->shard = shard;
  task->func = func;
  task->data = data;
  shard_state (store, ctx, shard, trim_state_read, task);
}
