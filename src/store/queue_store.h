/* queue_store.h -- what the files of the update queue's storage share
 * (queue_store.c says how the queue is kept in Redis):
 * queue_store_status.c (a stream's state, GetQueueStatus, trimming),
 * queue_store_entries.c (Enqueue, the drain's reads and acknowledgements)
 * and queue_store_index.c (rk:queues, the boards with work). Private to
 * src/store. */
#ifndef RANK_QUEUE_STORE_H
#define RANK_QUEUE_STORE_H

#include "store_private.h"

static inline void
add_queue_key (RankCommand *cmd, const RankContext *ctx, guint shard,
               const char *suffix)
{
  store_add_key (cmd, ctx, shard, suffix);
}

/* A call of queue.lua (op) on shard's stream and counts, and its dead
 * letters if dead_letters. */
void queue_script (RankCommand *cmd, const RankContext *ctx, guint shard,
                   const char *op, gboolean dead_letters);

/* A call of queues.lua (op) on rk:queues for board. */
void queues_script (RankCommand *cmd, const char *op, const char *board);

/* ---- a board's counts (queue.lua), in updates ---- */

typedef struct
{
  gint64 queued;
  gint64 delivered;
  gint64 applied;
  gint64 replayed;
  gint64 dead;
} QueueCounts;

/* HMGET of shard's counts, answered to func. */
void queue_send_counts (RankStore *store, const RankContext *ctx, guint shard,
                        RankBackendFunc func, gpointer data);

/* HMGET's answer into c (an absent count is 0); FALSE if it is none. */
gboolean queue_counts_of (const RankReply *reply, QueueCounts *c);

/* Updates of entries acknowledged. */
gint64 queue_counts_done (const QueueCounts *c);

/* Updates queued and not acknowledged. */
gint64 queue_counts_backlog (const QueueCounts *c);

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

/* Fills qs (which, like ctx, outlives func) with the streams of ctx's
 * board. */
void queue_streams_read (RankStore *store, const RankContext *ctx,
                         QueueStreams *qs, RankStoreDoneFunc func,
                         gpointer data);

#endif /* RANK_QUEUE_STORE_H */
