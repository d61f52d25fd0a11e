/* drain.c -- the drain of the update queue (see drain.h). */
#include "drain.h"

#include <string.h>
#include <unistd.h>

#include "constants.h"
#include "error.h"
#include "metrics.h"
#include "policy.h"

/* After an entry met Unavailable, its stream is read again this much
 * later (its own pending entries first). */
#define RETRY_MS 200

typedef struct _Stream Stream;

struct _RankQueue
{
  RankLoop *loop;
  RankStore *store;
  RankHandler *handler;
  char *consumer;
  GHashTable *streams; /* "board\nshard" -> Stream */
  GHashTable *boards;  /* board -> Board: those listed at the last refresh */
  gint64 next_refresh_us;
  gint64 next_unlisted_us; /* the next look at configured unlisted boards */
  gboolean refreshing;
  gboolean stopping;
  guint busy; /* streams with a read or batch in flight, looks at boards */
};

struct _Stream
{
  RankQueue *q;
  char *board;
  guint shard;
  gboolean busy;        /* a read, or its batch, in flight */
  gboolean created;     /* its group is there */
  gboolean own_pending; /* read this consumer's pending entries first */
  gboolean listed;      /* at the last refresh */
  gboolean idle;        /* its last read of new entries found none */
  gboolean left;        /* its board left rk:queues: not read any more */
  gboolean trimming;    /* an XTRIM in flight */
  gint64 next_trim_us;
  gint64 next_us; /* not read before (monotonic) */
  gint64 next_claim_us;
  RankContext ctx;       /* the board at the read: options, keys */
  struct Apply *held;    /* a batch partly applied, waiting for queue_rate */
  guint per_entry;       /* updates per entry at the last read (1 before) */
  RankQueueRead reading; /* the read in flight */
};

/* A board in rk:queues, as this drain saw it. Kept only while it is
 * listed: what the drain holds per board is bounded by
 * RANK_QUEUE_BOARDS_MAX, and freed once the board's queue is empty. */
typedef struct
{
  char *score;       /* in rk:queues, at the last refresh */
  gboolean checking; /* whether it can leave: a look in flight */
  /* queue_rate: its tokens, refilled each second. */
  gint64 second;
  guint used;
} Board;

/* A batch being applied, in slices as queue_rate allows. */
typedef struct Apply
{
  Stream *s;
  RankQueueBatch *batch;
  guint next;    /* updates started */
  guint pending; /* of the slice started last, not finished */
  struct QueuedEntry *items;
  gboolean retry; /* some met Unavailable: read them again */
  guint applied;  /* in the entries done with */
  guint dead;
} Apply;

/* What became of an entry of the batch. */
typedef enum
{
  ENTRY_APPLIED,
  ENTRY_REPLAYED, /* its request id had applied before */
  ENTRY_DEAD_LETTERED,
  ENTRY_TO_RETRY, /* met Unavailable: read again */
} EntryOutcome;

/* One entry of the batch being applied: an update. */
typedef struct QueuedEntry
{
  Apply *a;
  guint index;
  RankContext ctx;
  gboolean started; /* ctx initialised */
  EntryOutcome outcome;
  char *reason;
} QueuedEntry;

static void stream_step (Stream *s);

static gint64
now_us (void)
{
  return g_get_monotonic_time ();
}

static void apply_free (Apply *a);

static void
stream_free (gpointer data)
{
  Stream *s = data;

  apply_free (s->held);
  rank_context_clear (&s->ctx);
  g_free (s->board);
  g_free (s);
}

static void
board_free (gpointer data)
{
  Board *b = data;

  g_free (b->score);
  g_free (b);
}

static Board *
board_get (RankQueue *q, const char *board)
{
  Board *b = g_hash_table_lookup (q->boards, board);

  if (b == NULL)
    {
      b = g_new0 (Board, 1);
      g_hash_table_insert (q->boards, g_strdup (board), b);
    }
  return b;
}

/* ---- queue_rate ---- */

/* How many of board's updates this rankd may apply now (queue_rate):
 * G_MAXUINT when it has no rate. */
static guint
rate_allows (RankQueue *q, const Stream *s)
{
  guint rate = s->ctx.options->queue_rate;
  gint64 second = g_get_real_time () / G_USEC_PER_SEC;
  Board *r;

  if (rate == 0)
    return G_MAXUINT;
  r = board_get (q, s->board);
  if (r->second != second)
    r->second = second, r->used = 0;
  return rate - MIN (rate, r->used);
}

static void
rate_take (RankQueue *q, const Stream *s, guint n)
{
  Board *r = g_hash_table_lookup (q->boards, s->board);

  if (r != NULL)
    r->used += n;
}

/* ---- applying a batch ---- */

static void
apply_free (Apply *a)
{
  if (a == NULL)
    return;
  for (guint i = 0; a->batch != NULL && i < a->batch->n; i++)
    {
      if (a->items[i].started)
        rank_context_clear (&a->items[i].ctx);
      g_free (a->items[i].reason);
    }
  g_free (a->items);
  rank_queue_batch_free (a->batch);
  g_free (a);
}

/* The stream is free again: when to read it next. */
static void
stream_done (Stream *s, gboolean retry, gboolean more)
{
  RankQueue *q = s->q;

  s->busy = FALSE;
  q->busy--;
  if (retry)
    {
      s->own_pending = TRUE;
      s->next_us = now_us () + RETRY_MS * 1000;
    }
  else
    s->next_us = more ? 0 : now_us () + RANK_QUEUE_IDLE_POLL_MS * 1000;
}

static void
batch_acknowledged (const GError *error, gpointer data)
{
  Apply *a = data;
  Stream *s = a->s;

  if (error != NULL)
    {
      /* Applied but still pending: claimed again later, and recognised by
       * their request ids then. */
      g_debug ("queue of %s: acknowledging failed: %s", s->board,
               error->message);
      stream_done (s, TRUE, FALSE);
    }
  else
    {
      rank_metrics_queue_done (s->board, a->applied, a->dead);
      stream_done (s, a->retry, TRUE);
    }
  apply_free (a);
}

/* Every update of the batch is applied, dead, or to retry: the entries
 * without one to retry are done with. */
static void
batch_applied (Apply *a)
{
  Stream *s = a->s;
  const RankQueueBatch *batch = a->batch;
  g_autofree RankQueueOutcome *outcomes
      = g_new0 (RankQueueOutcome, MAX (batch->n, 1));

  for (guint k = 0; k < batch->n_entries; k++)
    {
      const RankQueueEntry *e = &batch->entries[k];
      guint applied = 0, dead = 0;
      gboolean retry = FALSE;

      for (guint i = e->first; i < e->first + e->n; i++)
        {
          const QueuedEntry *it = &a->items[i];

          outcomes[i].retry = it->outcome == ENTRY_TO_RETRY;
          outcomes[i].replayed = it->outcome == ENTRY_REPLAYED;
          outcomes[i].reason
              = it->outcome == ENTRY_DEAD_LETTERED ? it->reason : NULL;
          retry = retry || outcomes[i].retry;
          applied += it->outcome == ENTRY_APPLIED;
          dead += it->outcome == ENTRY_DEAD_LETTERED;
        }
      if (retry)
        a->retry = TRUE;
      else
        a->applied += applied, a->dead += dead;
    }
  if (s->q->stopping)
    {
      stream_done (s, TRUE, FALSE);
      apply_free (a);
      return;
    }
  rank_store_queue_done (s->q->store, &s->ctx, s->shard, batch, outcomes,
                         batch_acknowledged, a);
}

/* The slice started last is applied: the next one waits for queue_rate,
 * or the batch is done. */
static void
slice_applied (Apply *a)
{
  Stream *s = a->s;

  if (a->next < a->batch->n && !s->q->stopping)
    {
      s->held = a;
      stream_done (s, FALSE, TRUE);
      return;
    }
  batch_applied (a);
}

static void
item_finish (QueuedEntry *it)
{
  Apply *a = it->a;

  g_assert (a->pending > 0);
  if (--a->pending == 0)
    slice_applied (a);
}

static void
item_dead (QueuedEntry *it, const char *reason)
{
  it->outcome = ENTRY_DEAD_LETTERED;
  it->reason = g_strdup (reason);
  item_finish (it);
}

static void
item_updated (const RankUpdateResult *r, const GError *error, gpointer data)
{
  QueuedEntry *it = data;

  /* A repeated request id counts once (QueueStatus.applied), but an
   * entry read again may hold this drain's own earlier try, applied and
   * never acknowledged (so never counted): that one counts now. */
  if (error == NULL)
    it->outcome = r->applied || it->a->batch->redelivered ? ENTRY_APPLIED
                                                          : ENTRY_REPLAYED;
  else if (g_error_matches (error, RANK_ERROR, RANK_ERROR_UNAVAILABLE))
    it->outcome = ENTRY_TO_RETRY;
  else
    {
      /* Refused (a request id reused for another update, an increment
       * out of range) or damaged data: it will not apply later either. */
      item_dead (it, error->message);
      return;
    }
  item_finish (it);
}

static void
item_update (QueuedEntry *it)
{
  RankQueueUpdate *u = &it->a->batch->updates[it->index];

  /* As every call on a board with a window (call.c run_call). */
  rank_store_window_ensure (it->a->s->q->store, &it->ctx);
  rank_store_update (it->a->s->q->store, &it->ctx, &u->update, item_updated,
                     it);
}

static void
item_layout_checked (const GError *error, gpointer data)
{
  QueuedEntry *it = data;

  if (it->a->s->q->stopping)
    {
      it->outcome = ENTRY_TO_RETRY;
      item_finish (it);
    }
  else if (error != NULL)
    {
      /* Redis out of reach, or the stored layout does not fit the options
       * any more: the next read tells which (the refusal is remembered). */
      it->outcome = ENTRY_TO_RETRY;
      item_finish (it);
    }
  else
    item_update (it);
}

/* Checks update i as Update would, now, and applies it. */
static void
item_start (Apply *a, guint i)
{
  RankQueue *q = a->s->q;
  QueuedEntry *it = &a->items[i];
  RankQueueUpdate *u = &a->batch->updates[i];
  g_autoptr (GError) error = NULL;

  it->a = a;
  it->index = i;
  if (!u->valid)
    {
      item_dead (it, "not an update rankd queued (fields missing)");
      return;
    }
  rank_context_init (&it->ctx, rank_handler_config (q->handler), a->s->board,
                     rank_handler_now (q->handler), g_get_monotonic_time (),
                     rank_handler_default_window_ms (q->handler));
  it->started = TRUE;
  if (!rank_policy_subscores (a->s->board, it->ctx.options, u->update.mode,
                              u->update.n_subscores, &error)
      || !rank_context_write (&it->ctx, u->update.timestamp_ms, &error))
    {
      item_dead (it, error->message);
      return;
    }
  switch (rank_store_check_layout (q->store, &it->ctx, TRUE, &error,
                                   item_layout_checked, it))
    {
    case RANK_LAYOUT_OK:
      item_update (it);
      break;
    case RANK_LAYOUT_REFUSED:
      item_dead (it, error->message);
      break;
    case RANK_LAYOUT_PENDING:
      break;
    }
}

/* Starts the next allowed updates of a (queue_rate). Every update of a
 * slice starts in this loop turn: those of one board and period leave
 * together, in order, in the store's batches. */
static void
apply_slice (Apply *a, guint allowed)
{
  guint end = a->next + MIN (allowed, a->batch->n - a->next);

  rate_take (a->s->q, a->s, end - a->next);
  a->pending = end - a->next + 1;
  for (; a->next < end; a->next++)
    item_start (a, a->next);
  item_finish (&(QueuedEntry){ .a = a });
}

static void
batch_read (RankQueueBatch *batch, const GError *error, gpointer data)
{
  Stream *s = data;
  Apply *a;

  s->idle = error == NULL && batch->n == 0 && s->reading == RANK_QUEUE_NEW;
  if (error != NULL)
    {
      if (g_error_matches (error, RANK_ERROR, RANK_ERROR_NOT_FOUND))
        s->created = FALSE; /* the stream went (DeleteBoard) */
      else
        g_debug ("queue of %s: %s", s->board, error->message);
      stream_done (s, FALSE, FALSE);
      return;
    }
  if (batch->n == 0)
    {
      gboolean was_pending = s->own_pending;

      s->own_pending = FALSE;
      rank_queue_batch_free (batch);
      /* No own pending left: the new ones at once. */
      stream_done (s, FALSE, was_pending);
      return;
    }
  if (s->q->stopping)
    {
      rank_queue_batch_free (batch);
      stream_done (s, TRUE, FALSE);
      return;
    }
  s->per_entry = MAX (1, batch->n / MAX (batch->n_entries, 1));
  a = g_new0 (Apply, 1);
  a->s = s;
  a->batch = batch;
  a->items = g_new0 (QueuedEntry, batch->n);
  apply_slice (a, rate_allows (s->q, s));
}

/* ---- the streams ---- */

static void
stream_trimmed (const GError *error, gpointer data)
{
  Stream *s = data;

  s->trimming = FALSE;
  if (error != NULL)
    g_debug ("queue of %s: trimming failed: %s", s->board, error->message);
}

static void
group_created (const GError *error, gpointer data)
{
  Stream *s = data;

  if (error != NULL)
    {
      g_debug ("queue of %s: cannot create its group: %s", s->board,
               error->message);
      stream_done (s, FALSE, FALSE);
      return;
    }
  s->created = TRUE;
  stream_done (s, FALSE, TRUE);
}

/* Starts the stream's next read, if it is due. */
static void
stream_step (Stream *s)
{
  RankQueue *q = s->q;
  gint64 now = now_us ();
  guint allowed, count;

  if (s->busy || s->left || q->stopping || now < s->next_us)
    return;
  rank_context_clear (&s->ctx);
  rank_context_init (&s->ctx, rank_handler_config (q->handler), s->board,
                     rank_handler_now (q->handler), g_get_monotonic_time (),
                     rank_handler_default_window_ms (q->handler));
  if (s->shard >= s->ctx.options->shards)
    return; /* the board has fewer shards now: dropped at the refresh */
  s->busy = TRUE;
  q->busy++;
  if (!s->created)
    {
      rank_store_queue_create (q->store, &s->ctx, s->shard, group_created, s);
      return;
    }
  allowed = rate_allows (q, s);
  if (allowed == 0)
    {
      s->busy = FALSE;
      q->busy--;
      s->next_us = (g_get_real_time () / G_USEC_PER_SEC + 1) * G_USEC_PER_SEC
                   - g_get_real_time () + now;
      return;
    }
  if (s->held != NULL)
    {
      Apply *a = g_steal_pointer (&s->held);

      apply_slice (a, allowed);
      return;
    }
  /* Entries hold the updates of one Enqueue call: about as many entries
   * as make RANK_QUEUE_READ_COUNT updates; under a rate, one at a time,
   * so that each is acknowledged (and counted) once its slices are
   * applied. */
  count = allowed == G_MAXUINT ? MAX (1, RANK_QUEUE_READ_COUNT / s->per_entry)
                               : 1;
  if (now >= s->next_claim_us)
    {
      guint idle_ms = s->ctx.options->queue_claim_after_s * 1000;

      s->next_claim_us = now + (gint64) MAX (idle_ms / 2, 500) * 1000;
      s->reading = RANK_QUEUE_CLAIM;
      rank_store_queue_read (q->store, &s->ctx, s->shard, q->consumer,
                             RANK_QUEUE_CLAIM, count, idle_ms, batch_read, s);
      return;
    }
  s->reading = s->own_pending ? RANK_QUEUE_OWN_PENDING : RANK_QUEUE_NEW;
  rank_store_queue_read (q->store, &s->ctx, s->shard, q->consumer, s->reading,
                         count, 0, batch_read, s);
}

static void
stream_want (RankQueue *q, const char *board, guint shard)
{
  g_autofree char *key = g_strdup_printf ("%s\n%u", board, shard);
  Stream *s = g_hash_table_lookup (q->streams, key);

  if (s == NULL)
    {
      s = g_new0 (Stream, 1);
      s->q = q;
      s->board = g_strdup (board);
      s->shard = shard;
      s->per_entry = 1;
      /* Entries a rankd left pending when it stopped are claimed once
       * idle for queue_claim_after: look at once. */
      s->next_claim_us = 0;
      g_hash_table_insert (q->streams, g_steal_pointer (&key), s);
    }
  s->listed = TRUE;
  if (s->left)
    s->left = s->idle = FALSE; /* work was added since it left */
}

static void
board_want (RankQueue *q, RankConfig *config, const char *board)
{
  const RankBoardOptions *o = rank_config_board (config, board);

  for (guint shard = 0; shard < o->shards; shard++)
    stream_want (q, board, shard);
}

/* A board's backlog and oldest entry, for the metrics. */
typedef struct
{
  RankContext ctx;
} StatusAsk;

static void
status_read (const RankQueueStats *stats, const GError *error, gpointer data)
{
  StatusAsk *ask = data;

  if (error == NULL)
    rank_metrics_queue_status (ask->ctx.board, stats->backlog,
                               stats->oldest_ms > 0
                                   ? MAX (0, ask->ctx.now_ms - stats->oldest_ms)
                                         / 1000.0
                                   : 0.0);
  g_free ((char *) ask->ctx.board);
  rank_context_clear (&ask->ctx);
  g_free (ask);
}

static void
status_ask (RankQueue *q, RankConfig *config, const char *board)
{
  StatusAsk *ask = g_new0 (StatusAsk, 1);

  rank_context_init (&ask->ctx, config, g_strdup (board),
                     g_get_real_time () / 1000, g_get_monotonic_time (),
                     rank_handler_default_window_ms (q->handler));
  rank_store_queue_stats (q->store, &ask->ctx, status_read, ask);
}

/* ---- leaving rk:queues ---- */

/* Whether a listed board's queue is empty, and if so taking it off the
 * list: a look at its streams (queue.lua idle), then queues.lua leave with the
 * score the listing gave, so that an Enqueue since keeps it listed (see
 * rank_store_queue_leave). */
typedef struct
{
  RankQueue *q;
  RankContext ctx; /* its board name is the task's */
  char *score;     /* NULL: a look at an unlisted board (below) */
} LeaveTask;

static LeaveTask *
leave_task_new (RankQueue *q, RankConfig *config, const char *board,
                const char *score)
{
  LeaveTask *t = g_new0 (LeaveTask, 1);

  t->q = q;
  t->score = g_strdup (score);
  rank_context_init (&t->ctx, config, g_strdup (board),
                     g_get_real_time () / 1000, g_get_monotonic_time (),
                     rank_handler_default_window_ms (q->handler));
  q->busy++;
  return t;
}

static void
leave_task_free (LeaveTask *t)
{
  char *board = (char *) t->ctx.board;
  Board *b = g_hash_table_lookup (t->q->boards, board);

  if (b != NULL && t->score != NULL)
    b->checking = FALSE;
  t->q->busy--;
  rank_context_clear (&t->ctx);
  g_free (board);
  g_free (t->score);
  g_free (t);
}

static void
board_left (gint64 left, const GError *error, gpointer data)
{
  LeaveTask *t = data;

  if (error != NULL)
    g_debug ("queue of %s: cannot leave rk:queues: %s", t->ctx.board,
             error->message);
  else if (left)
    {
      /* Not read from now on; dropped at the next refresh unless work
       * was added since. */
      for (guint shard = 0; shard < t->ctx.options->shards; shard++)
        {
          g_autofree char *key
              = g_strdup_printf ("%s\n%u", t->ctx.board, shard);
          Stream *s = g_hash_table_lookup (t->q->streams, key);

          if (s != NULL)
            s->left = TRUE;
        }
      rank_metrics_queue_status (t->ctx.board, 0, 0.0);
    }
  leave_task_free (t);
}

static void
board_idle (gint64 idle, const GError *error, gpointer data)
{
  LeaveTask *t = data;

  if (error != NULL)
    g_debug ("queue of %s: %s", t->ctx.board, error->message);
  if (error != NULL || !idle || t->q->stopping)
    {
      leave_task_free (t);
      return;
    }
  rank_store_queue_leave (t->q->store, t->ctx.board, t->score, board_left, t);
}

/* A listed board whose every stream found nothing new at its last read
 * may have an empty queue: look. Sent after the list was read, as
 * rank_store_queue_leave wants. */
static void
leave_check (RankQueue *q, RankConfig *config, const char *board, Board *b)
{
  const RankBoardOptions *o = rank_config_board (config, board);
  LeaveTask *t;

  if (b->checking)
    return;
  for (guint shard = 0; shard < o->shards; shard++)
    {
      g_autofree char *key = g_strdup_printf ("%s\n%u", board, shard);
      Stream *s = g_hash_table_lookup (q->streams, key);

      if (s == NULL || !s->idle || s->held != NULL)
        return;
    }
  t = leave_task_new (q, config, board, b->score);
  b->checking = TRUE;
  rank_store_queue_idle (q->store, &t->ctx, board_idle, t);
}

/* ---- configured boards not listed ---- */

static void
unlisted_joined (gint64 score, const GError *error, gpointer data)
{
  LeaveTask *t = data;

  if (error != NULL)
    g_debug ("queue of %s: cannot join rk:queues: %s", t->ctx.board,
             error->message);
  else
    g_message ("queue of %s: updates waited in its streams without the "
               "board in %s; listed it",
               t->ctx.board, RANK_QUEUES_KEY);
  leave_task_free (t);
}

static void
unlisted_looked (gint64 idle, const GError *error, gpointer data)
{
  LeaveTask *t = data;

  if (error != NULL || idle || t->q->stopping)
    {
      leave_task_free (t);
      return;
    }
  rank_store_queue_join (t->q->store, t->ctx.board, unlisted_joined, t);
}

/* The configured boards with queue=on that rk:queues does not list are
 * looked at every RANK_QUEUE_UNLISTED_LOOK_MS (and at the start), and
 * listed if their streams hold work: an Enqueue whose join failed after
 * its entries were in (the call failed; its client may never send it
 * again), or whose join a DeleteBoard's removal from the list crossed,
 * leaves entries there. Bounded by the configuration. */
static void
unlisted_look (RankQueue *q, RankConfig *config, GHashTable *listed)
{
  g_auto (GStrv) configured = rank_config_board_names (config);

  for (char **b = configured; *b != NULL; b++)
    if (rank_config_board (config, *b)->queue
        && !g_hash_table_contains (listed, *b))
      {
        LeaveTask *t = leave_task_new (q, config, *b, NULL);

        rank_store_queue_idle (q->store, &t->ctx, unlisted_looked, t);
      }
}

/* The boards to drain: those rk:queues lists, with work (an Enqueue put
 * them there; they leave once their queues are empty). */
static void
queues_listed (const char *const *names, const char *const *scores, guint n,
               const GError *error, gpointer data)
{
  RankQueue *q = data;
  RankConfig *config = rank_handler_config (q->handler);
  g_autoptr (GHashTable) listed = g_hash_table_new (g_str_hash, g_str_equal);
  GHashTableIter it;
  gpointer key, value;

  q->refreshing = FALSE;
  if (error != NULL || q->stopping)
    return;
  g_hash_table_iter_init (&it, q->streams);
  while (g_hash_table_iter_next (&it, NULL, &value))
    ((Stream *) value)->listed = FALSE;
  for (guint i = 0; i < n; i++)
    {
      Board *b = board_get (q, names[i]);

      g_free (b->score);
      b->score = g_strdup (scores[i]);
      g_hash_table_add (listed, (gpointer) names[i]);
      board_want (q, config, names[i]);
      leave_check (q, config, names[i], b);
      status_ask (q, config, names[i]);
    }
  /* Not while the list is longer than a drain takes: a board past the
   * bound would be moved to its end by a join. */
  if (n < RANK_QUEUE_BOARDS_MAX && now_us () >= q->next_unlisted_us)
    {
      q->next_unlisted_us = now_us () + RANK_QUEUE_UNLISTED_LOOK_MS * 1000;
      unlisted_look (q, config, listed);
    }
  g_hash_table_iter_init (&it, q->streams);
  while (g_hash_table_iter_next (&it, NULL, &value))
    if (!((Stream *) value)->listed && !((Stream *) value)->busy
        && !((Stream *) value)->trimming)
      g_hash_table_iter_remove (&it);
  g_hash_table_iter_init (&it, q->boards);
  while (g_hash_table_iter_next (&it, &key, &value))
    if (!g_hash_table_contains (listed, key) && !((Board *) value)->checking)
      g_hash_table_iter_remove (&it);
}

/* Before the loop sleeps: every due stream is read; the sleep ends when
 * the next one is due. */
static int
queue_prepare (gpointer data)
{
  RankQueue *q = data;
  gint64 now = now_us (), next = now + RANK_QUEUE_REFRESH_MS * 1000;
  gboolean sent = FALSE;
  GHashTableIter it;
  gpointer value;

  if (q->stopping)
    return -1;
  if (now >= q->next_refresh_us && !q->refreshing)
    {
      q->refreshing = TRUE;
      q->next_refresh_us = now + RANK_QUEUE_REFRESH_MS * 1000;
      rank_store_list_queues (q->store, RANK_QUEUE_BOARDS_MAX, queues_listed,
                              q);
      sent = TRUE;
    }
  next = MIN (next, q->next_refresh_us);
  g_hash_table_iter_init (&it, q->streams);
  while (g_hash_table_iter_next (&it, NULL, &value))
    {
      Stream *s = value;
      gboolean was_busy = s->busy;

      if (s->left)
        continue;
      stream_step (s);
      /* A command sent now may wait in its link until the next turn of the
       * loop (the links flush before this runs): no sleep then. */
      if (s->busy && !was_busy)
        sent = TRUE;
      /* What the drains acknowledged goes, once a second. */
      if (s->created && !s->trimming && s->ctx.config != NULL
          && now >= s->next_trim_us)
        {
          s->trimming = TRUE;
          s->next_trim_us = now + RANK_QUEUE_REFRESH_MS * 1000;
          rank_store_queue_trim (q->store, &s->ctx, s->shard, stream_trimmed,
                                 s);
          sent = TRUE;
        }
      if (!s->busy)
        next = MIN (next, MAX (s->next_us, now));
    }
  if (sent)
    return 0;
  return (int) MAX (0, (next - now + 999) / 1000);
}

RankQueue *
rank_queue_new (RankLoop *loop, RankStore *store, RankHandler *handler)
{
  RankQueue *q = g_new0 (RankQueue, 1);
  char host[256] = "";

  gethostname (host, sizeof host - 1);
  q->loop = loop;
  q->store = store;
  q->handler = handler;
  /* Unique to this process: what it leaves pending is claimed by others,
   * or by its successor, after queue_claim_after. */
  q->consumer
      = g_strdup_printf ("%s:%d:%08x", host, (int) getpid (), g_random_int ());
  q->streams
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, stream_free);
  q->boards
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, board_free);
  /* The first look a refresh period after the start, when the links are
   * up: a command sent while they connect fails (and counts as an
   * error). */
  q->next_refresh_us = now_us () + RANK_QUEUE_REFRESH_MS * 1000;
  rank_loop_add_prepare (loop, queue_prepare, q);
  return q;
}

gboolean
rank_queue_stop (RankQueue *queue)
{
  if (queue == NULL)
    return TRUE;
  queue->stopping = TRUE;
  return queue->busy == 0;
}

void
rank_queue_free (RankQueue *queue)
{
  if (queue == NULL)
    return;
  g_hash_table_unref (queue->streams);
  g_hash_table_unref (queue->boards);
  g_free (queue->consumer);
  g_free (queue);
}
