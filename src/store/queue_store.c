/* queue_store.c -- the update queue's storage in Redis (see store.h; the
 * drain is in src/methods): a board's updates wait in a Redis stream per
 * shard, "rk:{board}:u" ("rk:s:{board/i}:u"), under the shard's own hash
 * tag, so on a Redis Cluster each stream lives with the keys it updates.
 *
 * An entry holds the updates of one Enqueue call to one shard, packed
 * (queue_store_entries.c), each with its time fixed when it was queued, so
 * that it picks the same period whenever it is applied: the stream's
 * commands cost Redis once a call, not once an update. Every rankd reads
 * its streams as a consumer of the group RANK_QUEUE_GROUP; an entry is
 * acknowledged once every update of it is applied or dead, and trimmed
 * after. What could not apply goes to the dead-letter stream "...:v"
 * with its reason. The hash "...:n" counts updates queued, delivered,
 * applied, replayed (a request id applied before) and dead, each moved by
 * queue.lua with the stream: the backlog, in updates, comes from it.
 * rk:queues lists the boards whose streams hold work (queues.lua):
 * Enqueue adds its board, a drain takes it off once they are empty.
 *
 * This file holds what the others share (queue_store.h): the calls of
 * queue.lua and queues.lua, the counts, and the streams of a board. A
 * stream's state, GetQueueStatus and trimming are queue_store_status.c's;
 * the entries (packing, Enqueue, the drain's reads and acknowledgements)
 * queue_store_entries.c's; rk:queues queue_store_index.c's.
 */
#include <string.h>

#include "error.h"
#include "layout.h"
#include "queue_store.h"

/* ---- a board's counts (queue.lua), in updates ---- */

/* A call of queue.lua (op) on shard's stream and counts, and its dead
 * letters if dead_letters. */
void
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
void
queues_script (RankCommand *cmd, const char *op, const char *board)
{
  rank_command_init_script (cmd, RANK_SCRIPT_QUEUES);
  rank_command_add_str (cmd, RANK_QUEUES_KEY);
  rank_command_keys_done (cmd);
  rank_command_add_str (cmd, op);
  rank_command_add_str (cmd, board);
}

void
queue_send_counts (RankStore *store, const RankContext *ctx, guint shard,
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
gboolean
queue_counts_of (const RankReply *reply, QueueCounts *c)
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
gint64
queue_counts_done (const QueueCounts *c)
{
  return c->applied + c->replayed + c->dead;
}

/* Updates queued and not acknowledged. */
gint64
queue_counts_backlog (const QueueCounts *c)
{
  return MAX (0, c->queued - queue_counts_done (c));
}

/* ---- the streams a board's updates may wait in ---- */

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
void
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
