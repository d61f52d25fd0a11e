/* queue_store_index.c -- rk:queues, the boards whose queue streams hold
 * work (queues.lua): Enqueue adds its board, a drain takes it off once
 * its streams are empty. See queue_store.c for how the queue is kept. */
#include <string.h>

#include "error.h"
#include "layout.h"
#include "queue_store.h"

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
