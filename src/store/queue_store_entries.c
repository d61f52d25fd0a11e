/* queue_store_entries.c -- the queue's entries: their packing, Enqueue
 * (XADD), and the drain's side (reads, acknowledgements, dead letters,
 * the consumer group). See queue_store.c for how the queue is kept. */
#include <string.h>

#include "error.h"
#include "layout.h"
#include "queue_store.h"

/* Field names of an entry: its count and its packed updates. */
#define F_COUNT "n"
#define F_PACKED "p"
/* A dead letter's fields are queue.lua's. */

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

  if (error == NULL && !queue_counts_of (reply, &c))
    error = bad = store_unexpected (reply, "the queue's counts");
  if (error == NULL)
    task->backlog += queue_counts_backlog (&c);
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
    queue_send_counts (store, ctx, shard, backlog_read, task);
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
