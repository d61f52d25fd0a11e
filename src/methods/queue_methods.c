/* queue_methods.c -- the queue's methods, Enqueue and GetQueueStatus
 * (see call.c for the calls, dispatch.c for the method table,
 * src/store/queue_store*.c for the streams, drain.c for the drain).
 *
 * Enqueue checks each update as Update would, now: its time is fixed (the
 * server's clock when unset), so it picks the same period whenever it is
 * applied. The valid ones are queued board by board; a board whose backlog
 * would pass its cap fails the call (Unavailable) and none of that board's
 * updates is queued.
 */
#include <string.h>

#include "api.h"
#include "constants.h"
#include "error.h"
#include "handler_private.h"
#include "rank_ranking_types.h"

gsize
handler_bound_enqueue (const ThriftStruct *args)
{
  const rankEnqueueRequest *a
      = ((const rankRankingEnqueueArgs *) args)->request;

  /* An id, or an InvalidArgument naming a field. */
  return 1024 + (gsize) MIN (a->requests->len, RANK_ENQUEUE_MAX) * 512;
}

/* ---- Enqueue ---- */

typedef struct
{
  RankContext ctx;
  gboolean resolved; /* ctx initialised */
  RankUpdate update;
  char *data;
  char *invalid; /* refused: why */
  char *id;      /* queued: its entry's id */
} Item;

/* The valid updates of one board, queued together. */
typedef struct
{
  Call *call;
  const RankContext *ctx; /* its first item's */
  GPtrArray *items;       /* Item *, in order */
  GPtrArray *updates;     /* const RankUpdate *, as items */
} Group;

/* A call of Enqueue. */
typedef struct
{
  Call call;
  Item *items;
  guint n;
  GHashTable *groups; /* board -> Group */
  guint pending;
  GError *error;
} EnqueueCall;

static void
group_free (gpointer data)
{
  Group *g = data;

  g_ptr_array_unref (g->items);
  g_ptr_array_unref (g->updates);
  g_free (g);
}

static void
enqueue_call_clear (Call *call)
{
  EnqueueCall *state = (EnqueueCall *) call;

  for (guint i = 0; i < state->n; i++)
    {
      Item *it = &state->items[i];

      if (it->resolved)
        rank_context_clear (&it->ctx);
      g_free (it->data);
      g_free (it->invalid);
      g_free (it->id);
    }
  g_free (state->items);
  if (state->groups != NULL)
    g_hash_table_unref (state->groups);
  g_clear_error (&state->error);
}

const CallKind handler_enqueue_calls
    = { sizeof (EnqueueCall), enqueue_call_clear };

static void
set_enqueue_response (GObject *object, gpointer data)
{
  rankRankingEnqueueResult *result = RANK_RANKING_ENQUEUE_RESULT (object);
  EnqueueCall *state = data;

  for (guint i = 0; i < state->n; i++)
    {
      const Item *it = &state->items[i];
      rankEnqueueResult *r = g_object_new (RANK_TYPE_ENQUEUE_RESULT, NULL);

      if (it->invalid != NULL)
        {
          r->invalid = g_object_new (RANK_TYPE_INVALID_ARGUMENT, "message",
                                     it->invalid, NULL);
          r->__isset_invalid = TRUE;
        }
      else
        {
          r->id = g_strdup (it->id);
          r->__isset_id = TRUE;
        }
      g_ptr_array_add (result->success->results, r);
    }
  result->__isset_success = TRUE;
}

static void
enqueue_part_done (Call *call)
{
  EnqueueCall *state = (EnqueueCall *) call;

  g_assert (state->pending > 0);
  if (--state->pending > 0)
    return;
  if (state->error != NULL)
    handler_reply_error (call, state->error);
  else
    handler_reply_result (call, set_enqueue_response, state);
}

static void
group_queued (const char *const *ids, guint n, const GError *error,
              gpointer data)
{
  Group *g = data;
  EnqueueCall *state = (EnqueueCall *) g->call;

  if (error != NULL && state->error == NULL)
    state->error = g_error_copy (error);
  for (guint i = 0; error == NULL && i < n; i++)
    ((Item *) g->items->pdata[i])->id = g_strdup (ids[i]);
  enqueue_part_done (g->call);
}

void
handler_start_enqueue (Call *call)
{
  const rankEnqueueRequest *request
      = RANK_RANKING_ENQUEUE_ARGS (call->args)->request;
  GPtrArray *requests = request->requests;
  EnqueueCall *state = (EnqueueCall *) call;
  GHashTableIter it;
  gpointer value;

  if (requests->len < 1 || requests->len > RANK_ENQUEUE_MAX)
    {
      g_autoptr (GError) error
          = g_error_new (RANK_ERROR, RANK_ERROR_INVALID,
                         "requests: must be 1-%d updates, got %u",
                         RANK_ENQUEUE_MAX, requests->len);

      handler_reply_error (call, error);
      return;
    }
  state->n = requests->len;
  state->items = g_new0 (Item, state->n);
  state->groups
      = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, group_free);
  for (guint i = 0; i < state->n; i++)
    {
      const rankUpdateRequest *r = requests->pdata[i];
      Item *item = &state->items[i];
      g_autoptr (GError) error = NULL;
      RankUpdateFields fields;
      Group *g;

      rank_update_fields_of (r, &fields);
      if (handler_check_update (call, &fields, &item->ctx, &item->update,
                                &item->data, &error)
          && !item->ctx.options->queue)
        g_set_error (&error, RANK_ERROR, RANK_ERROR_INVALID,
                     "board: '%s' has no queue: Enqueue takes updates for "
                     "boards configured with queue=on (use Update)",
                     r->board);
      /* handler_check_update resolves ctx once the board is valid. */
      item->resolved = item->ctx.config != NULL;
      if (error != NULL)
        {
          item->invalid
              = g_strdup_printf ("requests[%u]: %s", i, error->message);
          continue;
        }
      g = g_hash_table_lookup (state->groups, r->board);
      if (g == NULL)
        {
          g = g_new0 (Group, 1);
          g->call = call;
          g->ctx = &item->ctx;
          g->items = g_ptr_array_new ();
          g->updates = g_ptr_array_new ();
          g_hash_table_insert (state->groups, r->board, g);
        }
      g_ptr_array_add (g->items, item);
      g_ptr_array_add (g->updates, &item->update);
    }
  state->pending = g_hash_table_size (state->groups) + 1;
  g_hash_table_iter_init (&it, state->groups);
  while (g_hash_table_iter_next (&it, NULL, &value))
    {
      Group *g = value;

      rank_store_enqueue (call->handler->store, g->ctx,
                          (const RankUpdate *const *) g->updates->pdata,
                          g->updates->len, group_queued, g);
    }
  enqueue_part_done (call);
}

/* ---- GetQueueStatus ---- */

/* What GetQueueStatus answers. */
typedef struct
{
  const Call *call;
  const RankQueueStats *stats;
} QueueStatus;

static void
set_queue_status (GObject *object, gpointer data)
{
  rankRankingGetQueueStatusResult *result
      = RANK_RANKING_GET_QUEUE_STATUS_RESULT (object);
  const QueueStatus *q = data;
  const Call *call = q->call;
  const RankQueueStats *stats = q->stats;
  rankQueueStatus *status = result->success;

  status->queued = call->ctx.options->queue;
  status->backlog = stats->backlog;
  status->pending = stats->pending;
  status->oldest_age_ms
      = stats->oldest_ms > 0 ? MAX (0, call->ctx.now_ms - stats->oldest_ms) : 0;
  status->applied = stats->applied;
  status->dead_lettered = stats->dead;
  result->__isset_success = TRUE;
}

static void
queue_stats_read (const RankQueueStats *stats, const GError *error,
                  gpointer data)
{
  Call *call = data;
  QueueStatus q = { call, stats };

  if (error != NULL)
    {
      handler_reply_error (call, error);
      return;
    }
  handler_reply_result (call, set_queue_status, &q);
}

void
handler_start_get_queue_status (Call *call)
{
  const rankGetQueueStatusRequest *request
      = RANK_RANKING_GET_QUEUE_STATUS_ARGS (call->args)->request;
  g_autoptr (GError) error = NULL;

  if (!handler_resolve_read (call, request->board, 0, FALSE, &error))
    {
      handler_reply_error (call, error);
      return;
    }
  rank_store_queue_stats (call->handler->store, &call->ctx, queue_stats_read,
                          call);
}
