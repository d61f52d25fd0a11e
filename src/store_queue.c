/* store_queue.c -- the update queue's Redis side (see store.h; the drain is
 * queue.c's): a board's updates wait in a Redis stream per shard,
 * "rk:{board}:u" ("rk:s:{board/i}:u"), under the shard's own hash tag, so
 * on a Redis Cluster each stream lives with the keys it updates.
 *
 * An entry is one update, in fields: m member, r request id, v value, o
 * mode (1-3), t time (Unix ms, fixed when it was queued, so that it picks
 * the same period whenever it is applied), s subscores (8 bytes each, big
 * endian; absent: none given), d data (memberdata.h's encoding; absent:
 * the data stays as it is). Every rankd reads its streams as a consumer of
 * the group RANK_QUEUE_GROUP; an entry is acknowledged and deleted once
 * applied, so a stream's length is its backlog. What could not apply goes
 * to the dead-letter stream "...:v" with its reason; "...:n" counts both.
 */
#include <string.h>

#include "error.h"
#include "orderkey.h"
#include "store_private.h"

/* Field names of an entry. */
#define F_MEMBER "m"
#define F_REQUEST_ID "r"
#define F_VALUE "v"
#define F_MODE "o"
#define F_TIME "t"
#define F_SUBSCORES "s"
#define F_DATA "d"
#define F_REASON "reason"

static void
add_queue_key (RankCommand *cmd, const RankContext *ctx, guint shard,
               const char *suffix)
{
  store_add_key (cmd, ctx, shard, suffix);
}

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

/* ---- Enqueue ---- */

typedef struct
{
  RankStore *store;
  const RankContext *ctx;
  const RankUpdate *const *updates;
  guint n;
  StoreCountdown countdown;
  gint64 backlog;
  char **ids; /* NULL-terminated once all are in */
  RankStoreIdsFunc func;
  gpointer data;
} EnqueueTask;

static void
enqueue_deliver (EnqueueTask *task)
{
  task->func ((const char *const *) task->ids,
              task->countdown.error != NULL ? 0 : task->n,
              task->countdown.error, task->data);
  g_clear_error (&task->countdown.error);
  g_strfreev (task->ids);
  g_free (task);
}

static void
enqueue_added (const RankReply *reply, const GError *error, gpointer data)
{
  StorePart *part = data;
  EnqueueTask *task = part->task;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && reply->type != RANK_REPLY_STRING)
    error = bad = store_unexpected (reply, "XADD");
  if (error == NULL)
    task->ids[part->index] = g_strndup (reply->str, reply->len);
  g_free (part);
  if (store_countdown_done (&task->countdown, error))
    enqueue_deliver (task);
}

static void
ignore_reply (const RankReply *reply, const GError *error, gpointer data)
{
}

/* The backlog is known: too much, or every update goes in. */
static void
enqueue_add (EnqueueTask *task)
{
  const RankBoardOptions *o = task->ctx->options;
  RankCommand cmd;

  if (task->backlog + task->n > (gint64) o->queue_max_backlog)
    {
      task->countdown.error = g_error_new (
          RANK_ERROR, RANK_ERROR_UNAVAILABLE,
          "queue full: board '%s' has %" G_GINT64_FORMAT
          " updates waiting and takes at most %u (queue_max_backlog); "
          "nothing of this call was queued",
          task->ctx->board, task->backlog, o->queue_max_backlog);
      enqueue_deliver (task);
      return;
    }
  task->ids = g_new0 (char *, task->n + 1);
  task->countdown.pending = task->n + 1;
  for (guint i = 0; i < task->n; i++)
    {
      const RankUpdate *u = task->updates[i];
      guint shard = store_shard_of (task->ctx, u->member, strlen (u->member));
      StorePart *part = g_new0 (StorePart, 1);

      rank_command_init (&cmd, "XADD");
      add_queue_key (&cmd, task->ctx, shard, RANK_KEY_SUFFIX_QUEUE);
      rank_command_add_str (&cmd, "*");
      rank_command_add_str (&cmd, F_MEMBER);
      rank_command_add_str (&cmd, u->member);
      rank_command_add_str (&cmd, F_REQUEST_ID);
      rank_command_add_str (&cmd, u->request_id);
      rank_command_add_str (&cmd, F_VALUE);
      rank_command_add_int (&cmd, u->value);
      rank_command_add_str (&cmd, F_MODE);
      rank_command_add_int (&cmd, u->mode);
      rank_command_add_str (&cmd, F_TIME);
      rank_command_add_int (&cmd, u->timestamp_ms);
      if (u->n_subscores > 0)
        {
          guint8 subs[RANK_SUBSCORES_MAX * 8];

          for (guint k = 0; k < u->n_subscores; k++)
            {
              guint64 be = GUINT64_TO_BE ((guint64) u->subscores[k]);

              memcpy (subs + 8 * k, &be, 8);
            }
          rank_command_add_str (&cmd, F_SUBSCORES);
          rank_command_add (&cmd, subs, 8 * u->n_subscores);
        }
      if (u->data_given)
        {
          rank_command_add_str (&cmd, F_DATA);
          rank_command_add (&cmd, u->data, u->data_len);
        }
      part->task = task;
      part->index = i;
      rank_backend_send (task->store->backend,
                         store_node_of (task->store, shard), &cmd,
                         RANK_SEND_REPLICATED, enqueue_added, part);
    }
  /* The drains find the board here. */
  rank_command_init (&cmd, "ZADD");
  rank_command_add_str (&cmd, RANK_QUEUES_KEY);
  rank_command_add_str (&cmd, "0");
  rank_command_add_str (&cmd, task->ctx->board);
  rank_backend_send (task->store->backend, 0, &cmd, 0, ignore_reply, NULL);
  if (store_countdown_done (&task->countdown, NULL))
    enqueue_deliver (task);
}

static void
backlog_read (ShardState *state, const GError *error, gpointer data)
{
  EnqueueTask *task = data;

  if (error == NULL)
    task->backlog += state->lag + state->pending;
  if (!store_countdown_done (&task->countdown, error))
    return;
  if (task->countdown.error != NULL)
    enqueue_deliver (task);
  else
    enqueue_add (task);
}

void
rank_store_enqueue (RankStore *store, const RankContext *ctx,
                    const RankUpdate *const *updates, guint n,
                    RankStoreIdsFunc func, gpointer data)
{
  EnqueueTask *task = g_new0 (EnqueueTask, 1);

  task->store = store;
  task->ctx = ctx;
  task->updates = updates;
  task->n = n;
  task->func = func;
  task->data = data;
  /* The backlog of every shard first: a call that would pass the cap
   * queues nothing. Calls at once may pass it by what they carry. */
  task->countdown.pending = ctx->options->shards;
  for (guint shard = 0; shard < ctx->options->shards; shard++)
    shard_state (store, ctx, shard, backlog_read, task);
}

/* ---- GetQueueStatus ---- */

typedef struct
{
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

static void
stats_state_read (ShardState *st, const GError *error, gpointer data)
{
  StatsTask *task = data;

  if (error == NULL)
    {
      task->stats.backlog += st->lag + st->pending;
      task->stats.pending += st->pending;
      if (st->oldest_ms > 0
          && (task->stats.oldest_ms == 0
              || st->oldest_ms < task->stats.oldest_ms))
        task->stats.oldest_ms = st->oldest_ms;
    }
  stats_done (task, error);
}

static void
counts_read (const RankReply *reply, const GError *error, gpointer data)
{
  StatsTask *task = data;

  if (error == NULL && reply->type == RANK_REPLY_ARRAY && reply->elements == 2)
    for (int k = 0; k < 2; k++)
      if (reply->element[k]->type == RANK_REPLY_STRING)
        *(k == 0 ? &task->stats.applied : &task->stats.dead)
            += g_ascii_strtoll (reply->element[k]->str, NULL, 10);
  stats_done (task, error);
}

void
rank_store_queue_stats (RankStore *store, const RankContext *ctx,
                        RankStoreQueueStatsFunc func, gpointer data)
{
  StatsTask *task = g_new0 (StatsTask, 1);

  task->func = func;
  task->data = data;
  task->countdown.pending = 2 * ctx->options->shards;
  for (guint shard = 0; shard < ctx->options->shards; shard++)
    {
      RankCommand cmd;

      shard_state (store, ctx, shard, stats_state_read, task);
      rank_command_init (&cmd, "HMGET");
      add_queue_key (&cmd, ctx, shard, RANK_KEY_SUFFIX_QUEUE_COUNTS);
      rank_command_add_str (&cmd, "applied");
      rank_command_add_str (&cmd, "dead");
      rank_backend_send (store->backend, store_node_of (store, shard), &cmd, 0,
                         counts_read, task);
    }
  if (ctx->options->shards == 0)
    stats_done (task, NULL);
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

/* ---- the drain ---- */

void
rank_queue_batch_free (RankQueueBatch *batch)
{
  if (batch == NULL)
    return;
  g_free (batch->entries);
  if (batch->reply != NULL)
    rank_reply_free (batch->reply);
  g_free (batch);
}

/* An entry [id, [field, value, ...]] into e, pointing into the reply;
 * FALSE if it is not one (a deleted entry has no fields). */
static gboolean
entry_of (const RankReply *r, RankQueueEntry *e)
{
  const RankReply *id, *fields;
  gboolean member = FALSE, rid = FALSE, value = FALSE, mode = FALSE,
           time = FALSE;

  memset (e, 0, sizeof *e);
  if (r->type != RANK_REPLY_ARRAY || r->elements != 2
      || (id = rank_reply_string_at (r, 0)) == NULL)
    return FALSE;
  e->id = id->str;
  fields = r->element[1];
  if (fields->type != RANK_REPLY_ARRAY || fields->elements % 2 != 0)
    return FALSE;
  for (gsize i = 0; i + 1 < fields->elements; i += 2)
    {
      const RankReply *f = fields->element[i], *v = fields->element[i + 1];
      RankUpdate *u = &e->update;

      if (f->type != RANK_REPLY_STRING || v->type != RANK_REPLY_STRING)
        return FALSE;
      if (strcmp (f->str, F_MEMBER) == 0)
        u->member = v->str, member = TRUE;
      else if (strcmp (f->str, F_REQUEST_ID) == 0)
        u->request_id = v->str, rid = TRUE;
      else if (strcmp (f->str, F_VALUE) == 0)
        value = g_ascii_string_to_signed (v->str, 10, G_MININT64, G_MAXINT64,
                                          &u->value, NULL);
      else if (strcmp (f->str, F_MODE) == 0)
        {
          gint64 m = 0;

          mode = g_ascii_string_to_signed (v->str, 10, RANK_MODE_INCREMENT,
                                           RANK_MODE_SET, &m, NULL);
          u->mode = (RankMode) m;
        }
      else if (strcmp (f->str, F_TIME) == 0)
        time = g_ascii_string_to_signed (v->str, 10, 0, G_MAXINT64,
                                         &u->timestamp_ms, NULL);
      else if (strcmp (f->str, F_SUBSCORES) == 0)
        {
          if (v->len % 8 != 0 || v->len / 8 > RANK_SUBSCORES_MAX)
            return FALSE;
          u->n_subscores = (guint) (v->len / 8);
          for (guint k = 0; k < u->n_subscores; k++)
            {
              guint64 be;

              memcpy (&be, v->str + 8 * k, 8);
              e->subscores[k] = (gint64) GUINT64_FROM_BE (be);
            }
        }
      else if (strcmp (f->str, F_DATA) == 0)
        {
          u->data_given = TRUE;
          u->data = v->str;
          u->data_len = v->len;
        }
    }
  e->update.subscores = e->update.n_subscores > 0 ? e->subscores : NULL;
  /* Nobody reads a drained update's answer. */
  e->update.without_rank = TRUE;
  e->valid = member && rid && value && mode && time;
  return TRUE;
}

typedef struct
{
  RankStore *store;
  RankStoreBatchFunc func;
  gpointer data;
  gboolean claim;
} ReadTask;

static void
entries_read (const RankReply *reply, const GError *error, gpointer data)
{
  ReadTask *task = data;
  RankQueueBatch *batch = g_new0 (RankQueueBatch, 1);
  const RankReply *list = NULL;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && reply->type == RANK_REPLY_NIL)
    ; /* XREADGROUP: nothing new */
  else if (error == NULL && task->claim)
    {
      /* XAUTOCLAIM: [next start, [entries], [deleted ids]] */
      if (reply->type != RANK_REPLY_ARRAY || reply->elements < 2)
        error = bad = store_unexpected (reply, "XAUTOCLAIM");
      else
        list = reply->element[1];
    }
  else if (error == NULL)
    {
      /* XREADGROUP: [[key, [entries]]] */
      if (reply->type != RANK_REPLY_ARRAY || reply->elements != 1
          || reply->element[0]->type != RANK_REPLY_ARRAY
          || reply->element[0]->elements != 2)
        error = bad = store_unexpected (reply, "XREADGROUP");
      else
        list = reply->element[0]->element[1];
    }
  if (error == NULL && list != NULL && list->type != RANK_REPLY_ARRAY)
    error = bad = store_unexpected (reply, "a stream's entries");
  if (error == NULL && list != NULL && list->elements > 0)
    {
      batch->reply = rank_reply_copy (reply);
      list = task->claim ? batch->reply->element[1]
                         : batch->reply->element[0]->element[1];
      batch->entries = g_new0 (RankQueueEntry, list->elements);
      for (gsize i = 0; i < list->elements; i++)
        if (entry_of (list->element[i], &batch->entries[batch->n]))
          batch->n++;
    }
  if (error != NULL)
    {
      rank_queue_batch_free (batch);
      batch = NULL;
    }
  task->func (batch, error, task->data);
  g_free (task);
}

void
rank_store_queue_read (RankStore *store, const RankContext *ctx, guint shard,
                       const char *consumer, RankQueueRead how, guint count,
                       guint min_idle_ms, RankStoreBatchFunc func,
                       gpointer data)
{
  ReadTask *task = g_new0 (ReadTask, 1);
  RankCommand cmd;

  task->store = store;
  task->func = func;
  task->data = data;
  task->claim = how == RANK_QUEUE_CLAIM;
  if (task->claim)
    {
      rank_command_init (&cmd, "XAUTOCLAIM");
      add_queue_key (&cmd, ctx, shard, RANK_KEY_SUFFIX_QUEUE);
      rank_command_add_str (&cmd, RANK_QUEUE_GROUP);
      rank_command_add_str (&cmd, consumer);
      rank_command_add_int (&cmd, min_idle_ms);
      rank_command_add_str (&cmd, "0-0");
      rank_command_add_str (&cmd, "COUNT");
      rank_command_add_int (&cmd, count);
    }
  else
    {
      char key[RANK_STORE_KEY_MAX];
      RankCommand k;

      /* The key comes after STREAMS: it routes the command. */
      rank_command_init_args (&k);
      add_queue_key (&k, ctx, shard, RANK_KEY_SUFFIX_QUEUE);
      g_assert (k.len[0] < sizeof key);
      memcpy (key, k.bytes + k.offset[0], k.len[0]);
      rank_command_init (&cmd, "XREADGROUP");
      rank_command_add_str (&cmd, "GROUP");
      rank_command_add_str (&cmd, RANK_QUEUE_GROUP);
      rank_command_add_str (&cmd, consumer);
      rank_command_add_str (&cmd, "COUNT");
      rank_command_add_int (&cmd, count);
      rank_command_add_str (&cmd, "STREAMS");
      rank_command_add (&cmd, key, k.len[0]);
      rank_command_add_str (&cmd, how == RANK_QUEUE_OWN_PENDING ? "0" : ">");
      rank_command_route (&cmd, key, k.len[0]);
      rank_command_clear (&k);
    }
  rank_backend_send (store->backend, store_node_of (store, shard), &cmd, 0,
                     entries_read, task);
}

typedef struct
{
  RankStoreDoneFunc func;
  gpointer data;
  StoreCountdown countdown;
} DoneTask;

static void
done_part (const RankReply *reply, const GError *error, gpointer data)
{
  DoneTask *task = data;

  if (!store_countdown_done (&task->countdown, error))
    return;
  task->func (task->countdown.error, task->data);
  g_clear_error (&task->countdown.error);
  g_free (task);
}

static void
send_done_part (RankStore *store, guint shard, RankCommand *cmd, DoneTask *task)
{
  task->countdown.pending++;
  rank_backend_send (store->backend, store_node_of (store, shard), cmd, 0,
                     done_part, task);
}

void
rank_store_queue_done (RankStore *store, const RankContext *ctx, guint shard,
                       const RankQueueOutcome *outcomes, guint n,
                       RankStoreDoneFunc func, gpointer data)
{
  DoneTask *task = g_new0 (DoneTask, 1);
  guint applied = 0, dead = 0;
  RankCommand ack, cmd;

  task->func = func;
  task->data = data;
  task->countdown.pending = 1;
  /* Dead letters first: an entry leaves the queue only once its reason is
   * kept. */
  for (guint i = 0; i < n; i++)
    {
      const RankQueueOutcome *o = &outcomes[i];

      if (o->reason == NULL)
        {
          applied++;
          continue;
        }
      dead++;
      rank_command_init (&cmd, "XADD");
      add_queue_key (&cmd, ctx, shard, RANK_KEY_SUFFIX_DEAD);
      rank_command_add_str (&cmd, "*");
      rank_command_add_str (&cmd, F_REASON);
      rank_command_add_str (&cmd, o->reason);
      rank_command_add_str (&cmd, "id");
      rank_command_add_str (&cmd, o->entry->id);
      rank_command_add_str (&cmd, F_MEMBER);
      rank_command_add_str (&cmd, o->entry->update.member);
      rank_command_add_str (&cmd, F_REQUEST_ID);
      rank_command_add_str (&cmd, o->entry->update.request_id);
      rank_command_add_str (&cmd, F_VALUE);
      rank_command_add_int (&cmd, o->entry->update.value);
      rank_command_add_str (&cmd, F_MODE);
      rank_command_add_int (&cmd, o->entry->update.mode);
      rank_command_add_str (&cmd, F_TIME);
      rank_command_add_int (&cmd, o->entry->update.timestamp_ms);
      send_done_part (store, shard, &cmd, task);
    }
  rank_command_init (&ack, "XACK");
  add_queue_key (&ack, ctx, shard, RANK_KEY_SUFFIX_QUEUE);
  rank_command_add_str (&ack, RANK_QUEUE_GROUP);
  /* Acknowledged entries stay until rank_store_queue_trim: one XTRIM a
   * second costs Redis less than an XDEL of every batch. */
  for (guint i = 0; i < n; i++)
    rank_command_add_str (&ack, outcomes[i].entry->id);
  send_done_part (store, shard, &ack, task);
  rank_command_init (&cmd, "HINCRBY");
  add_queue_key (&cmd, ctx, shard, RANK_KEY_SUFFIX_QUEUE_COUNTS);
  rank_command_add_str (&cmd, "applied");
  rank_command_add_int (&cmd, applied);
  send_done_part (store, shard, &cmd, task);
  if (dead > 0)
    {
      rank_command_init (&cmd, "HINCRBY");
      add_queue_key (&cmd, ctx, shard, RANK_KEY_SUFFIX_QUEUE_COUNTS);
      rank_command_add_str (&cmd, "dead");
      rank_command_add_int (&cmd, dead);
      send_done_part (store, shard, &cmd, task);
    }
  done_part (NULL, NULL, task);
}

typedef struct
{
  RankStoreDoneFunc func;
  gpointer data;
} CreateTask;

static void
group_created (const RankReply *reply, const GError *error, gpointer data)
{
  CreateTask *task = data;

  /* BUSYGROUP: it was there. */
  if (error != NULL
      && g_error_matches (error, RANK_ERROR, RANK_ERROR_NOT_FOUND))
    error = NULL;
  task->func (error, task->data);
  g_free (task);
}

void
rank_store_queue_create (RankStore *store, const RankContext *ctx, guint shard,
                         RankStoreDoneFunc func, gpointer data)
{
  CreateTask *task = g_new0 (CreateTask, 1);
  RankCommand cmd;

  task->func = func;
  task->data = data;
  rank_command_init (&cmd, "XGROUP");
  rank_command_add_str (&cmd, "CREATE");
  add_queue_key (&cmd, ctx, shard, RANK_KEY_SUFFIX_QUEUE);
  rank_command_add_str (&cmd, RANK_QUEUE_GROUP);
  rank_command_add_str (&cmd, "0");
  rank_command_add_str (&cmd, "MKSTREAM");
  {
    /* The key is the third argument: it routes the command. */
    const char *key = cmd.bytes + cmd.offset[2];

    rank_command_route (&cmd, key, cmd.len[2]);
  }
  rank_backend_send (store->backend, store_node_of (store, shard), &cmd, 0,
                     group_created, task);
}

typedef struct
{
  RankStoreNamesFunc func;
  gpointer data;
} QueuesTask;

static void
queues_read (const RankReply *reply, const GError *error, gpointer data)
{
  QueuesTask *task = data;
  g_autoptr (GPtrArray) names = g_ptr_array_new ();
  g_autoptr (GError) bad = NULL;

  if (error == NULL && reply->type != RANK_REPLY_ARRAY)
    error = bad = store_unexpected (reply, "ZRANGE of the queues");
  for (gsize i = 0; error == NULL && i < reply->elements; i++)
    if (reply->element[i]->type == RANK_REPLY_STRING)
      g_ptr_array_add (names, reply->element[i]->str);
  task->func ((const char *const *) names->pdata, error ? 0 : names->len, error,
              task->data);
  g_free (task);
}

void
rank_store_list_queues (RankStore *store, RankStoreNamesFunc func,
                        gpointer data)
{
  QueuesTask *task = g_new0 (QueuesTask, 1);
  RankCommand cmd;

  task->func = func;
  task->data = data;
  rank_command_init (&cmd, "ZRANGE");
  rank_command_add_str (&cmd, RANK_QUEUES_KEY);
  rank_command_add_str (&cmd, "0");
  rank_command_add_str (&cmd, "-1");
  rank_backend_send (store->backend, 0, &cmd, 0, queues_read, task);
}
