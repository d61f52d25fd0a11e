/* store_queue.c -- the update queue's Redis side (see store.h; the drain is
 * queue.c's): a board's updates wait in a Redis stream per shard,
 * "rk:{board}:u" ("rk:s:{board/i}:u"), under the shard's own hash tag, so
 * on a Redis Cluster each stream lives with the keys it updates.
 *
 * An entry holds the updates of one Enqueue call to one shard, packed
 * (below), each with its time fixed when it was queued, so that it picks
 * the same period whenever it is applied: the stream's commands cost
 * Redis once a call, not once an update. Every rankd reads its streams as
 * a consumer of the group RANK_QUEUE_GROUP; an entry is acknowledged once
 * every update of it is applied or dead, and trimmed after. What could not
 * apply goes to the dead-letter stream "...:v" with its reason. The hash
 * "...:n" counts updates queued, delivered, applied, replayed (a request
 * id applied before) and dead, each moved by queue.lua with the stream:
 * the backlog, in updates, comes from it. rk:queues lists the boards whose
 * streams hold work (queues.lua): Enqueue adds its board, a drain takes it
 * off once they are empty.
 */
#include <string.h>

#include "error.h"
#include "layout.h"
#include "store_private.h"

/* Field names of an entry: its count and its packed updates. */
#define F_COUNT "n"
#define F_PACKED "p"
/* A dead letter's fields are queue.lua's. */

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

/* ---- a board's counts (queue.lua), in updates ---- */

/* A call of queue.lua (op) on shard's stream and counts, and its dead
 * letters if dead_letters. */
static void
queue_script (RankCommand *cmd, const RankContext *ctx, guint shard,
              const char *op, gboolean dead_letters)
{
  rank_command_init_script (cmd, RANK_SCRIPT_QUEUE);
  add_queue_key (cmd, ctx, shard, RANK_KEY_SUFFIX_QUEUE);
  add_queue_key (cmd, ctx, shard, RANK_KEY_SUFFIX_QUEUE_COUNTS);
  if (dead_letters)
    add_queue_key (cmd, ctx, shard, RANK_KEY_SUFFIX_DEAD);
  rank_command_keys_done (cmd);
  rank_command_add_str (cmd, op);
}

/* A call of queues.lua (op) on rk:queues for board. */
static void
queues_script (RankCommand *cmd, const char *op, const char *board)
{
  rank_command_init_script (cmd, RANK_SCRIPT_QUEUES);
  rank_command_add_str (cmd, RANK_QUEUES_KEY);
  rank_command_keys_done (cmd);
  rank_command_add_str (cmd, op);
  rank_command_add_str (cmd, board);
}

typedef struct
{
  gint64 queued;
  gint64 delivered;
  gint64 applied;
  gint64 replayed;
  gint64 dead;
} QueueCounts;

static void
send_counts (RankStore *store, const RankContext *ctx, guint shard,
             RankBackendFunc func, gpointer data)
{
  RankCommand cmd;

  rank_command_init (&cmd, "HMGET");
  add_queue_key (&cmd, ctx, shard, RANK_KEY_SUFFIX_QUEUE_COUNTS);
  rank_command_add_str (&cmd, "queued");
  rank_command_add_str (&cmd, "delivered");
  rank_command_add_str (&cmd, "applied");
  rank_command_add_str (&cmd, "replayed");
  rank_command_add_str (&cmd, "dead");
  rank_backend_send (store->backend, store_node_of (store, shard), &cmd, 0,
                     func, data);
}

/* HMGET's answer into c (an absent count is 0); FALSE if it is none. */
static gboolean
counts_of (const RankReply *reply, QueueCounts *c)
{
  gint64 *field[]
      = { &c->queued, &c->delivered, &c->applied, &c->replayed, &c->dead };

  memset (c, 0, sizeof *c);
  if (reply->type != RANK_REPLY_ARRAY
      || reply->elements != G_N_ELEMENTS (field))
    return FALSE;
  for (guint k = 0; k < G_N_ELEMENTS (field); k++)
    {
      const RankReply *v = reply->element[k];

      if (v->type == RANK_REPLY_STRING)
        *field[k] = g_ascii_strtoll (v->str, NULL, 10);
      else if (v->type != RANK_REPLY_NIL)
        return FALSE;
    }
  return TRUE;
}

/* Updates of entries acknowledged. */
static gint64
counts_done (const QueueCounts *c)
{
  return c->applied + c->replayed + c->dead;
}

/* Updates queued and not acknowledged. */
static gint64
counts_backlog (const QueueCounts *c)
{
  return MAX (0, c->queued - counts_done (c));
}

/* Of those, the ones a drain has read. */
static gint64
counts_pending (const QueueCounts *c)
{
  return MAX (0, MIN (c->delivered, c->queued) - counts_done (c));
}

/* ---- an entry's updates, packed ---- */

/* An entry's field p holds its updates one after another, each: member,
 * NUL; request id, NUL; value (8 bytes, big endian); mode (1 byte, 1-3);
 * time (8 bytes, Unix ms); the number of subscores (1 byte), each in 8
 * bytes; data given (1 byte, 0 or 1), then, if given, its length (4
 * bytes) and the data (memberdata.h's encoding). Numbers are big endian
 * two's complement. Member and request id hold no NUL (validate.c), so
 * the drain points into the reply for them. */

static void
put_be64 (GByteArray *b, gint64 v)
{
  guint64 be = GUINT64_TO_BE ((guint64) v);

  g_byte_array_append (b, (const guint8 *) &be, 8);
}

static void
put_byte (GByteArray *b, guint8 v)
{
  g_byte_array_append (b, &v, 1);
}

static void
pack_update (GByteArray *b, const RankUpdate *u)
{
  g_byte_array_append (b, (const guint8 *) u->member, strlen (u->member) + 1);
  g_byte_array_append (b, (const guint8 *) u->request_id,
                       strlen (u->request_id) + 1);
  put_be64 (b, u->value);
  put_byte (b, (guint8) u->mode);
  put_be64 (b, u->timestamp_ms);
  put_byte (b, (guint8) u->n_subscores);
  for (guint k = 0; k < u->n_subscores; k++)
    put_be64 (b, u->subscores[k]);
  put_byte (b, u->data_given ? 1 : 0);
  if (u->data_given)
    {
      guint32 be = GUINT32_TO_BE ((guint32) u->data_len);

      g_byte_array_append (b, (const guint8 *) &be, 4);
      g_byte_array_append (b, (const guint8 *) u->data, u->data_len);
    }
}

/* Reads packed updates: each take_* is FALSE past the end. */
typedef struct
{
  const char *p;
  gsize left;
} Unpack;

static gboolean
take (Unpack *in, gsize n, const char **at)
{
  if (in->left < n)
    return FALSE;
  *at = in->p;
  in->p += n;
  in->left -= n;
  return TRUE;
}

static gboolean
take_string (Unpack *in, const char **s)
{
  const char *end = memchr (in->p, '\0', in->left);

  return end != NULL && take (in, (gsize) (end - in->p) + 1, s);
}

static gboolean
take_be64 (Unpack *in, gint64 *v)
{
  const char *at;
  guint64 be;

  if (!take (in, 8, &at))
    return FALSE;
  memcpy (&be, at, 8);
  *v = (gint64) GUINT64_FROM_BE (be);
  return TRUE;
}

static gboolean
take_byte (Unpack *in, guint *v)
{
  const char *at;

  if (!take (in, 1, &at))
    return FALSE;
  *v = (guint8) at[0];
  return TRUE;
}

/* One update of in into u; FALSE if it is not one. */
static gboolean
unpack_update (Unpack *in, RankQueueUpdate *u)
{
  RankUpdate *up = &u->update;
  guint mode, nsub, given;

  if (!take_string (in, &up->member) || !take_string (in, &up->request_id)
      || !take_be64 (in, &up->value) || !take_byte (in, &mode)
      || mode < RANK_MODE_INCREMENT || mode > RANK_MODE_SET
      || !take_be64 (in, &up->timestamp_ms) || up->timestamp_ms < 0
      || !take_byte (in, &nsub) || nsub > RANK_SUBSCORES_MAX)
    return FALSE;
  up->mode = (RankMode) mode;
  up->n_subscores = nsub;
  for (guint k = 0; k < nsub; k++)
    if (!take_be64 (in, &u->subscores[k]))
      return FALSE;
  up->subscores = nsub > 0 ? u->subscores : NULL;
  if (!take_byte (in, &given) || given > 1)
    return FALSE;
  up->data_given = given == 1;
  if (up->data_given)
    {
      const char *at;
      guint32 be;

      if (!take (in, 4, &at))
        return FALSE;
      memcpy (&be, at, 4);
      up->data_len = GUINT32_FROM_BE (be);
      if (!take (in, up->data_len, &up->data))
        return FALSE;
    }
  /* Nobody reads a drained update's answer, only whether it applied
   * (which implies no rank). */
  up->applied_only = TRUE;
  u->valid = TRUE;
  return TRUE;
}

/* ---- Enqueue ---- */

typedef struct
{
  RankStore *store;
  const RankContext *ctx;
  const RankUpdate *const *updates;
  guint n;
  guint *shard;     /* of each update */
  guint shards;     /* the board's */
  char **entry_ids; /* of each shard's entry, once in */
  StoreCountdown countdown;
  gint64 backlog;
  RankStoreIdsFunc func;
  gpointer data;
} EnqueueTask;

static void
enqueue_deliver (EnqueueTask *task)
{
  g_autofree const char **ids = g_new0 (const char *, task->n + 1);
  gboolean ok = task->countdown.error == NULL;

  for (guint i = 0; ok && i < task->n; i++)
    ids[i] = task->entry_ids[task->shard[i]];
  task->func (ids, ok ? task->n : 0, task->countdown.error, task->data);
  g_clear_error (&task->countdown.error);
  /* ctx may be gone with the call. */
  if (task->entry_ids != NULL)
    for (guint s = 0; s < task->shards; s++)
      g_free (task->entry_ids[s]);
  g_free (task->entry_ids);
  g_free (task->shard);
  g_free (task);
}

static void
enqueue_joined (const RankReply *reply, const GError *error, gpointer data)
{
  EnqueueTask *task = data;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && reply->type != RANK_REPLY_INTEGER)
    error = bad = store_unexpected (reply, "the board's score in rk:queues");
  if (error != NULL)
    task->countdown.error = g_error_copy (error);
  enqueue_deliver (task);
}

/* Every entry is in (or one failed): the drains find the board in
 * rk:queues. Only now: a drain that found the streams empty before takes
 * the board off the list only if no join moved its score since
 * (queues.lua), so joining after the entries are in leaves none behind. */
static void
enqueue_join (EnqueueTask *task)
{
  RankCommand cmd;

  if (task->countdown.error != NULL)
    {
      enqueue_deliver (task);
      return;
    }
  queues_script (&cmd, "join", task->ctx->board);
  rank_backend_send (task->store->backend, 0, &cmd, 0, enqueue_joined, task);
}

static void
enqueue_added (const RankReply *reply, const GError *error, gpointer data)
{
  StorePart *part = data;
  EnqueueTask *task = part->task;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && reply->type != RANK_REPLY_STRING)
    error = bad = store_unexpected (reply, "an entry's id");
  if (error == NULL)
    task->entry_ids[part->index] = g_strndup (reply->str, reply->len);
  g_free (part);
  if (store_countdown_done (&task->countdown, error))
    enqueue_join (task);
}

/* The backlog is known: too much, or every update goes in, one entry per
 * shard. */
static void
enqueue_add (EnqueueTask *task)
{
  const RankBoardOptions *o = task->ctx->options;
  g_autofree GByteArray **packed = g_new0 (GByteArray *, o->shards);
  g_autofree guint *count = g_new0 (guint, o->shards);
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
  task->entry_ids = g_new0 (char *, o->shards);
  task->countdown.pending = 1;
  for (guint i = 0; i < task->n; i++)
    {
      const RankUpdate *u = task->updates[i];
      guint shard = task->shard[i];

      if (packed[shard] == NULL)
        packed[shard] = g_byte_array_new ();
      pack_update (packed[shard], u);
      count[shard]++;
    }
  for (guint shard = 0; shard < o->shards; shard++)
    {
      StorePart *part;

      if (packed[shard] == NULL)
        continue;
      part = g_new0 (StorePart, 1);
      part->task = task;
      part->index = shard;
      task->countdown.pending++;
      queue_script (&cmd, task->ctx, shard, "add", FALSE);
      rank_command_add_int (&cmd, count[shard]);
      rank_command_add (&cmd, packed[shard]->data, packed[shard]->len);
      g_byte_array_unref (packed[shard]);
      rank_backend_send (task->store->backend,
                         store_node_of (task->store, shard), &cmd,
                         RANK_SEND_REPLICATED, enqueue_added, part);
    }
  if (store_countdown_done (&task->countdown, NULL))
    enqueue_join (task);
}

static void
backlog_read (const RankReply *reply, const GError *error, gpointer data)
{
  EnqueueTask *task = data;
  QueueCounts c;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && !counts_of (reply, &c))
    error = bad = store_unexpected (reply, "the queue's counts");
  if (error == NULL)
    task->backlog += counts_backlog (&c);
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
  task->shards = ctx->options->shards;
  task->shard = g_new (guint, n);
  for (guint i = 0; i < n; i++)
    task->shard[i]
        = store_shard_of (ctx, updates[i]->member, strlen (updates[i]->member));
  task->func = func;
  task->data = data;
  /* The backlog of every shard first: a call that would pass the cap
   * queues nothing. Calls at once may pass it by what they carry. */
  task->countdown.pending = ctx->options->shards;
  for (guint shard = 0; shard < ctx->options->shards; shard++)
    send_counts (store, ctx, shard, backlog_read, task);
}

/* ---- the streams a board's updates may wait in ---- */

/* A board's shards under the options in force and, when its stored layout
 * names another number (a reload changed shards: the board refuses calls
 * until they agree again), the stored layout's too: what was queued
 * before the change waits there, counts in the backlog, and keeps the
 * board in rk:queues. Lives in a task, beside the caller's ctx. */
typedef struct
{
  RankBoardOptions stored_options;
  RankContext stored_ctx; /* the caller's, with stored_options */
  guint n;
  struct
  {
    const RankContext *ctx;
    guint shard;
  } at[2 * RANK_SHARDS_MAX];
} QueueStreams;

static void
queue_streams_add (QueueStreams *qs, const RankContext *ctx, guint from,
                   guint to)
{
  for (guint shard = from; shard < to; shard++)
    {
      qs->at[qs->n].ctx = ctx;
      qs->at[qs->n].shard = shard;
      qs->n++;
    }
}

/* qs from the board's descriptor (a GET's reply: NULL or nil if none). */
static void
queue_streams_set (QueueStreams *qs, const RankContext *ctx,
                   const char *descriptor)
{
  guint now = ctx->options->shards;
  guint stored = rank_layout_stored_shards (descriptor, now);

  qs->n = 0;
  queue_streams_add (qs, ctx, 0, now);
  if (stored == now)
    return;
  qs->stored_options = *ctx->options;
  qs->stored_options.shards = stored;
  qs->stored_ctx = *ctx;
  qs->stored_ctx.options = &qs->stored_options;
  /* Sharded keys are named by their shard alone, unsharded ones apart. */
  queue_streams_add (qs, &qs->stored_ctx, now > 1 && stored > 1 ? now : 0,
                     stored);
}

typedef struct
{
  QueueStreams *qs;
  const RankContext *ctx;
  RankStoreDoneFunc func;
  gpointer data;
} StreamsTask;

static void
descriptor_read (const RankReply *reply, const GError *error, gpointer data)
{
  StreamsTask *task = data;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && reply->type != RANK_REPLY_STRING
      && reply->type != RANK_REPLY_NIL)
    error = bad = store_unexpected (reply, "the board's layout descriptor");
  if (error == NULL)
    queue_streams_set (task->qs, task->ctx,
                       reply->type == RANK_REPLY_STRING ? reply->str : NULL);
  task->func (error, task->data);
  g_free (task);
}

/* Fills qs (which, like ctx, outlives func) with the streams of ctx's
 * board. */
static void
queue_streams_read (RankStore *store, const RankContext *ctx, QueueStreams *qs,
                    RankStoreDoneFunc func, gpointer data)
{
  StreamsTask *task = g_new0 (StreamsTask, 1);
  char key[RANK_STORE_KEY_MAX];
  RankCommand cmd;

  task->qs = qs;
  task->ctx = ctx;
  task->func = func;
  task->data = data;
  rank_command_init (&cmd, "GET");
  rank_command_add (&cmd, key,
                    store_board_key (key, ctx->board, RANK_KEY_SUFFIX_LAYOUT));
  rank_backend_send (store->backend, 0, &cmd, 0, descriptor_read, task);
}

/* ---- GetQueueStatus ---- */

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

  if (error == NULL && !counts_of (reply, &c))
    error = bad = store_unexpected (reply, "the queue's counts");
  if (error == NULL)
    {
      task->stats.backlog += counts_backlog (&c);
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
      send_counts (task->store, qs->at[i].ctx, qs->at[i].shard,
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

/* ---- the drain ---- */

void
rank_queue_batch_free (RankQueueBatch *batch)
{
  if (batch == NULL)
    return;
  g_free (batch->entries);
  g_free (batch->updates);
  if (batch->reply != NULL)
    rank_reply_free (batch->reply);
  g_free (batch);
}

/* The count of an entry [id, [field, value, ...]] (its field n), and its
 * packed updates (p); FALSE if it is not such an entry (a deleted one has
 * no fields). */
static gboolean
entry_fields (const RankReply *r, const RankReply **id, guint *count,
              const RankReply **packed)
{
  const RankReply *fields;
  gint64 n = -1;

  *packed = NULL;
  *count = 0;
  if (r->type != RANK_REPLY_ARRAY || r->elements != 2
      || (*id = rank_reply_string_at (r, 0)) == NULL)
    return FALSE;
  fields = r->element[1];
  if (fields->type != RANK_REPLY_ARRAY || fields->elements % 2 != 0)
    return FALSE;
  for (gsize i = 0; i + 1 < fields->elements; i += 2)
    {
      const RankReply *f = fields->element[i], *v = fields->element[i + 1];

      if (f->type != RANK_REPLY_STRING || v->type != RANK_REPLY_STRING)
        continue;
      if (strcmp (f->str, F_COUNT) == 0
          && !g_ascii_string_to_signed (v->str, 10, 1, RANK_ENQUEUE_MAX, &n,
                                        NULL))
        n = -1;
      else if (strcmp (f->str, F_PACKED) == 0)
        *packed = v;
    }
  *count = n > 0 ? (guint) n : 0;
  return TRUE;
}

/* The updates of entry k of batch, from its fields; an entry that cannot
 * be read is one update, not valid. */
static void
entry_unpack (RankQueueBatch *batch, guint k, const RankReply *packed)
{
  RankQueueEntry *e = &batch->entries[k];
  Unpack in = { packed != NULL ? packed->str : NULL,
                packed != NULL ? packed->len : 0 };

  e->first = batch->n;
  while (packed != NULL && e->n < e->count && in.left > 0)
    {
      RankQueueUpdate *u = &batch->updates[e->first + e->n];

      u->entry = k;
      if (!unpack_update (&in, u))
        break;
      e->n++;
    }
  if (packed == NULL || e->n != e->count || in.left > 0)
    {
      memset (&batch->updates[e->first], 0, sizeof *batch->updates);
      batch->updates[e->first].entry = k;
      e->n = 1;
    }
  batch->n += e->n;
}

typedef struct
{
  RankStore *store;
  RankStoreBatchFunc func;
  gpointer data;
  gboolean claim;
  gboolean redelivered;
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
      gsize updates = 0;

      batch->reply = rank_reply_copy (reply);
      list = task->claim ? batch->reply->element[1]
                         : batch->reply->element[0]->element[1];
      g_autofree const RankReply **packed
          = g_new0 (const RankReply *, list->elements);

      batch->entries = g_new0 (RankQueueEntry, list->elements);
      for (gsize i = 0; i < list->elements; i++)
        {
          const RankReply *id;
          RankQueueEntry *e = &batch->entries[batch->n_entries];

          if (!entry_fields (list->element[i], &id, &e->count,
                             &packed[batch->n_entries]))
            continue;
          e->id = id->str;
          updates += MAX (e->count, 1);
          batch->n_entries++;
        }
      batch->updates = g_new0 (RankQueueUpdate, MAX (updates, 1));
      for (guint k = 0; k < batch->n_entries; k++)
        entry_unpack (batch, k, packed[k]);
    }
  if (error != NULL)
    {
      rank_queue_batch_free (batch);
      batch = NULL;
    }
  else
    batch->redelivered = task->redelivered;
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
  task->redelivered = how != RANK_QUEUE_NEW;
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
  else if (how == RANK_QUEUE_NEW)
    {
      /* queue.lua counts what it delivers. */
      queue_script (&cmd, ctx, shard, "read", FALSE);
      rank_command_add_str (&cmd, RANK_QUEUE_GROUP);
      rank_command_add_str (&cmd, consumer);
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
      rank_command_add_str (&cmd, "0");
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
} DoneTask;

static void
acknowledged (const RankReply *reply, const GError *error, gpointer data)
{
  DoneTask *task = data;

  task->func (error, task->data);
  g_free (task);
}

/* One field of a dead letter, as queue.lua unpacks it: its length (4
 * bytes, big-endian), then its bytes. */
static void
pack_field (GByteArray *out, const char *text, gsize len)
{
  guint8 n[4] = { (guint8) (len >> 24), (guint8) (len >> 16),
                  (guint8) (len >> 8), (guint8) len };

  g_byte_array_append (out, n, sizeof n);
  g_byte_array_append (out, (const guint8 *) text, (guint) len);
}

static void
pack_int (GByteArray *out, gint64 value)
{
  char text[RANK_FORMAT_INT_MAX];

  pack_field (out, text, rank_format_int (text, value));
}

/* The dead letter of update u, with its reason, packed for queue.lua:
 * reason, member, request id, value, mode, time. */
static void
pack_dead_letter (GByteArray *out, const RankQueueUpdate *u, const char *reason)
{
  const RankUpdate *up = &u->update;
  const char *member = u->valid ? up->member : "";
  const char *request_id = u->valid ? up->request_id : "";

  pack_field (out, reason, strlen (reason));
  pack_field (out, member, strlen (member));
  pack_field (out, request_id, strlen (request_id));
  pack_int (out, up->value);
  pack_int (out, up->mode);
  pack_int (out, up->timestamp_ms);
}

/* The ack's arguments: the script's, its group, then 3 per entry. */
G_STATIC_ASSERT (5 + 3 * RANK_QUEUE_READ_COUNT <= RANK_COMMAND_MAX_ARGS);

void
rank_store_queue_done (RankStore *store, const RankContext *ctx, guint shard,
                       const RankQueueBatch *batch,
                       const RankQueueOutcome *outcomes, RankStoreDoneFunc func,
                       gpointer data)
{
  g_autoptr (GByteArray) letters = g_byte_array_new ();
  DoneTask *task;
  RankCommand ack;
  guint acked = 0;

  g_assert (batch->n_entries <= RANK_QUEUE_READ_COUNT);
  queue_script (&ack, ctx, shard, "ack", TRUE);
  rank_command_add_str (&ack, RANK_QUEUE_GROUP);
  for (guint k = 0; k < batch->n_entries; k++)
    {
      const RankQueueEntry *e = &batch->entries[k];
      const RankQueueOutcome *o = &outcomes[e->first];
      gboolean retry = FALSE;
      guint applied = 0, replayed = 0;
      char counts[3 * 11];

      for (guint i = 0; i < e->n; i++)
        retry = retry || o[i].retry;
      if (retry)
        continue;
      /* The dead letters go with the acknowledgement, in one script:
       * written only by the drain whose XACK counts the entry (two drains
       * can both have handled it, one after a claim), and never an entry
       * acknowledged without its letters. */
      g_byte_array_set_size (letters, 0);
      for (guint i = 0; i < e->n; i++)
        if (o[i].reason != NULL)
          pack_dead_letter (letters, &batch->updates[e->first + i],
                            o[i].reason);
        else if (o[i].replayed)
          replayed++;
        else
          applied++;
      /* Every update the entry held that did not apply is dead (those of
       * an entry that could not be read too). The three counts go in one
       * argument: an ack of RANK_QUEUE_READ_COUNT entries must fit in a
       * command. */
      g_snprintf (counts, sizeof counts, "%u %u %u", applied, replayed,
                  MAX (e->count, applied + replayed) - applied - replayed);
      rank_command_add_str (&ack, e->id);
      rank_command_add_str (&ack, counts);
      rank_command_add (&ack, letters->data, letters->len);
      acked++;
    }
  /* Acknowledged entries stay until rank_store_queue_trim: one XTRIM a
   * second costs Redis less than an XDEL of every batch. */
  if (acked == 0)
    {
      rank_command_clear (&ack);
      func (NULL, data);
      return;
    }
  task = g_new (DoneTask, 1);
  task->func = func;
  task->data = data;
  rank_backend_send (store->backend, store_node_of (store, shard), &ack, 0,
                     acknowledged, task);
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

/* ---- the list of queues with work (queues.lua) ---- */

typedef struct
{
  RankStoreCountFunc func;
  gpointer data;
  const char *what;
} CountTask;

static void
count_read (const RankReply *reply, const GError *error, gpointer data)
{
  CountTask *task = data;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && reply->type != RANK_REPLY_INTEGER)
    error = bad = store_unexpected (reply, task->what);
  task->func (error == NULL ? reply->integer : 0, error, task->data);
  g_free (task);
}

static CountTask *
count_task (RankStoreCountFunc func, gpointer data, const char *what)
{
  CountTask *task = g_new0 (CountTask, 1);

  task->func = func;
  task->data = data;
  task->what = what;
  return task;
}

typedef struct
{
  RankStore *store;
  QueueStreams streams;
  StoreCountdown countdown;
  gboolean idle;
  RankStoreCountFunc func;
  gpointer data;
} IdleTask;

static void
idle_done (IdleTask *task, const GError *error)
{
  if (!store_countdown_done (&task->countdown, error))
    return;
  task->func (task->idle, task->countdown.error, task->data);
  g_clear_error (&task->countdown.error);
  g_free (task);
}

static void
stream_idle_read (const RankReply *reply, const GError *error, gpointer data)
{
  IdleTask *task = data;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && reply->type != RANK_REPLY_INTEGER)
    error = bad = store_unexpected (reply, "queue.lua idle");
  if (error != NULL || reply->integer != 1)
    task->idle = FALSE;
  idle_done (task, error);
}

static void
idle_streams_read (const GError *error, gpointer data)
{
  IdleTask *task = data;
  const QueueStreams *qs = &task->streams;

  task->countdown.pending = 1 + (error == NULL ? qs->n : 0);
  for (guint i = 0; error == NULL && i < qs->n; i++)
    {
      RankCommand cmd;

      queue_script (&cmd, qs->at[i].ctx, qs->at[i].shard, "idle", FALSE);
      rank_command_add_str (&cmd, RANK_QUEUE_GROUP);
      rank_backend_send (task->store->backend,
                         store_node_of (task->store, qs->at[i].shard), &cmd, 0,
                         stream_idle_read, task);
    }
  idle_done (task, error);
}

void
rank_store_queue_idle (RankStore *store, const RankContext *ctx,
                       RankStoreCountFunc func, gpointer data)
{
  IdleTask *task = g_new0 (IdleTask, 1);

  task->store = store;
  task->idle = TRUE;
  task->func = func;
  task->data = data;
  queue_streams_read (store, ctx, &task->streams, idle_streams_read, task);
}

void
rank_store_queue_join (RankStore *store, const char *board,
                       RankStoreCountFunc func, gpointer data)
{
  RankCommand cmd;

  queues_script (&cmd, "join", board);
  rank_backend_send (store->backend, 0, &cmd, 0, count_read,
                     count_task (func, data, "queues.lua join"));
}

void
rank_store_queue_leave (RankStore *store, const char *board, const char *score,
                        RankStoreCountFunc func, gpointer data)
{
  RankCommand cmd;

  queues_script (&cmd, "leave", board);
  rank_command_add_str (&cmd, score);
  rank_backend_send (store->backend, 0, &cmd, 0, count_read,
                     count_task (func, data, "queues.lua leave"));
}

typedef struct
{
  RankStoreQueuesFunc func;
  gpointer data;
} QueuesTask;

/* ZRANGE WITHSCORES: [name, score, ...]. */
static void
queues_read (const RankReply *reply, const GError *error, gpointer data)
{
  QueuesTask *task = data;
  g_autoptr (GPtrArray) names = g_ptr_array_new ();
  g_autoptr (GPtrArray) scores = g_ptr_array_new ();
  g_autoptr (GError) bad = NULL;

  if (error == NULL
      && (reply->type != RANK_REPLY_ARRAY || reply->elements % 2 != 0))
    error = bad = store_unexpected (reply, "ZRANGE of the queues");
  for (gsize i = 0; error == NULL && i < reply->elements; i += 2)
    {
      const RankReply *name = rank_reply_string_at (reply, i);
      const RankReply *score = rank_reply_string_at (reply, i + 1);

      if (name != NULL && score != NULL)
        {
          g_ptr_array_add (names, name->str);
          g_ptr_array_add (scores, score->str);
        }
    }
  task->func ((const char *const *) names->pdata,
              (const char *const *) scores->pdata, error ? 0 : names->len,
              error, task->data);
  g_free (task);
}

void
rank_store_list_queues (RankStore *store, guint max, RankStoreQueuesFunc func,
                        gpointer data)
{
  QueuesTask *task = g_new0 (QueuesTask, 1);
  RankCommand cmd;

  task->func = func;
  task->data = data;
  rank_command_init (&cmd, "ZRANGE");
  rank_command_add_str (&cmd, RANK_QUEUES_KEY);
  rank_command_add_str (&cmd, "0");
  rank_command_add_int (&cmd, (gint64) max - 1);
  rank_command_add_str (&cmd, "WITHSCORES");
  rank_backend_send (store->backend, 0, &cmd, 0, queues_read, task);
}
