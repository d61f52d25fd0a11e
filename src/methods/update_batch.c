/* update_batch.c -- UpdateBatch.
 *
 * Each update of the batch goes its own way (its board's context, layout
 * check and store operation), as an Update would; updates of one board
 * queued together leave in one script call (backend.c). The call answers
 * once every update has, written from their answers by the codec
 * (codec.h) without the generated structs: four GObjects an update were a
 * good part of rankd's CPU on an import (perf).
 *
 * A batch with a request_id is recorded as a whole: all its updates are
 * checked first, and leave together in one script call, or none does.
 */
#include "handler_private.h"

#include <string.h>

#include "codec.h"
#include "constants.h"
#include "error.h"
#include "requestid.h"
#include "validate.h"

/* Where an update of the batch is, and what its UpdateResult will say. */
typedef enum
{
  BATCH_UPDATE_UNANSWERED,  /* not started, or in flight */
  BATCH_UPDATE_ANSWERED,    /* answer: its UpdateResponse */
  BATCH_UPDATE_REFUSED,     /* message: its InvalidArgument; not applied */
  BATCH_UPDATE_UNAVAILABLE, /* message: its Unavailable; may have applied */
} BatchUpdateState;

typedef struct _UpdateBatchCall UpdateBatchCall;

/* One update of the batch. */
typedef struct
{
  UpdateBatchCall *batch;
  guint index;
  RankContext ctx;
  RankUpdate update;
  char *data;
  BatchUpdateState state;
  RankUpdateResult answer;
  char *message;
} BatchUpdate;

/* A call of UpdateBatch. */
struct _UpdateBatchCall
{
  Call call;
  BatchUpdate *items;
  guint n;
  guint pending; /* items not answered, plus one while they are started */
  gboolean without_rank; /* with_rank=false */
  /* A batch recorded as a whole (request_id set): its group argument. */
  guint8 group[RANK_UPDATE_GROUP_BYTES];
};

static void
update_batch_call_clear (Call *call)
{
  UpdateBatchCall *batch = (UpdateBatchCall *) call;

  for (guint i = 0; i < batch->n; i++)
    {
      rank_context_clear (&batch->items[i].ctx);
      g_free (batch->items[i].data);
      g_free (batch->items[i].message);
    }
  g_free (batch->items);
}

const CallKind handler_update_batch_calls
    = { sizeof (UpdateBatchCall), update_batch_call_clear };

/* The boards the batch changed, or may have: their cached answers go
 * (handler_board_written). */
static void
note_writes (UpdateBatchCall *batch)
{
  for (guint i = 0; i < batch->n; i++)
    {
      const BatchUpdate *item = &batch->items[i];

      /* Refused, never started (the call was refused) or a replay:
       * nothing changed. BATCH_UPDATE_UNAVAILABLE may have landed. */
      if ((item->state == BATCH_UPDATE_ANSWERED && item->answer.applied)
          || item->state == BATCH_UPDATE_UNAVAILABLE)
        handler_board_written (batch->call.handler, &item->ctx);
    }
}

/* An update's UpdateResult: its response, or its exception. */
static void
result_of (const BatchUpdate *item, RankCodecUpdateResult *r)
{
  g_assert (item->state != BATCH_UPDATE_UNANSWERED);
  if (item->state == BATCH_UPDATE_ANSWERED)
    *r = (RankCodecUpdateResult){
      .field = RANK_CODEC_UPDATE_RESPONSE,
      .response = {
        .score = item->answer.score,
        .rank = item->answer.rank,
        .applied = item->answer.applied,
        .n_subscores = item->answer.n_subscores,
        .subscores = item->answer.subscores,
      },
    };
  else
    *r = (RankCodecUpdateResult){
      .field = item->state == BATCH_UPDATE_REFUSED
                   ? RANK_CODEC_UPDATE_INVALID
                   : RANK_CODEC_UPDATE_UNAVAILABLE,
      .message = item->message,
    };
}

/* UpdateBatch's reply: success, an UpdateBatchResponse of the updates'
 * results in order. */
static void
reply_batch (UpdateBatchCall *batch)
{
  Call *call = &batch->call;
  ThriftProtocol *out = handler_begin_reply (call);
  g_autofree RankCodecUpdateResult *results
      = g_new (RankCodecUpdateResult, batch->n);
  g_autoptr (GError) error = NULL;
  gboolean ok;

  note_writes (batch);
  for (guint i = 0; i < batch->n; i++)
    result_of (&batch->items[i], &results[i]);
  ok = rank_codec_write_reply_begin (out, handler_call_name (call), call->seqid,
                                     T_STRUCT, &error)
       && rank_codec_write_update_batch_response (out, results, batch->n,
                                                  &error)
       && rank_codec_write_reply_end (out, &error);
  handler_finish (call, ok, error);
}

static void
batch_item_done (UpdateBatchCall *batch)
{
  if (--batch->pending == 0)
    reply_batch (batch);
}

/* The item's refusal or failure, as the exception of its result; an error
 * that is neither (internal) answers as Unavailable, naming it. */
static void
batch_item_failed (BatchUpdate *item, const GError *error)
{
  item->state = error->domain == RANK_ERROR && error->code == RANK_ERROR_INVALID
                    ? BATCH_UPDATE_REFUSED
                    : BATCH_UPDATE_UNAVAILABLE;
  item->message
      = g_strdup_printf ("requests[%u]: %s", item->index, error->message);
  batch_item_done (item->batch);
}

static void
batch_item_answered (const RankUpdateResult *r, const GError *error,
                     gpointer data)
{
  BatchUpdate *item = data;

  if (error != NULL)
    {
      batch_item_failed (item, error);
      return;
    }
  item->state = BATCH_UPDATE_ANSWERED;
  item->answer = *r;
  batch_item_done (item->batch);
}

static void
batch_item_run (BatchUpdate *item)
{
  /* As every call on a board with a window (call.c run_call): the first
   * after a period ends starts its roll. */
  rank_store_window_ensure (item->batch->call.handler->store, &item->ctx);
  rank_store_update (item->batch->call.handler->store, &item->ctx,
                     &item->update, batch_item_answered, item);
}

static void
batch_item_layout_checked (const GError *error, gpointer data)
{
  BatchUpdate *item = data;

  if (error != NULL)
    batch_item_failed (item, error);
  else
    batch_item_run (item);
}

static void
batch_item_start (BatchUpdate *item, const RankUpdateFields *request)
{
  RankHandler *handler = item->batch->call.handler;
  g_autoptr (GError) error = NULL;

  if (!handler_check_update (&item->batch->call, request, &item->ctx,
                             &item->update, &item->data, &error))
    {
      batch_item_failed (item, error);
      return;
    }
  /* Either the request's with_rank=false or the batch's leaves it out. */
  item->update.without_rank |= item->batch->without_rank;
  if (handler_layout_fits (handler, &item->ctx, TRUE, batch_item_layout_checked,
                           item))
    batch_item_run (item);
}

/* ---- UpdateBatch with a request_id: one record for the batch ---- */

/* Tells apart the batches recorded as a whole that one backend has open at
 * once (requestid.h): their updates must not share a script call. */
static gint group_tokens;

static void
group_layout_checked (const GError *error, gpointer data)
{
  UpdateBatchCall *batch = data;

  for (guint i = 0; i < batch->n; i++)
    if (error != NULL)
      batch_item_failed (&batch->items[i], error);
    else
      batch_item_run (&batch->items[i]);
  batch_item_done (batch);
}

/* Checks what a batch recorded as a whole needs (the IDL says it), of its
 * first checked items (the checks of the one after failed, or all passed:
 * their contexts are resolved). */
static gboolean
check_group (UpdateBatchCall *batch, guint checked,
             const RankUpdateBatchArgs *args, GError **error)
{
  const RankContext *first = &batch->items[0].ctx;
  const RankBoardOptions *o = first->options;

  if (!rank_validate_request_id (args->request_id, error))
    return FALSE;
  if (batch->n > RANK_GROUP_MAX_ITEMS)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "requests: %u updates; a batch with a request_id takes 1 "
                   "to %d",
                   batch->n, RANK_GROUP_MAX_ITEMS);
      return FALSE;
    }
  if (!batch->without_rank)
    {
      g_set_error_literal (error, RANK_ERROR, RANK_ERROR_INVALID,
                           "with_rank: a batch with a request_id answers no "
                           "ranks: set with_rank=false");
      return FALSE;
    }
  if (checked == 0)
    return TRUE;
  if (o->shards > 1 || o->cap > 0 || o->rank == RANK_KIND_DENSE)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "request_id: board '%s' has %s; a batch with a request_id "
                   "needs a board without shards, cap or rank=dense",
                   first->board,
                   o->shards > 1 ? "shards"
                   : o->cap > 0  ? "a cap"
                                 : "rank=dense");
      return FALSE;
    }
  for (guint i = 1; i < checked; i++)
    {
      const RankContext *ctx = &batch->items[i].ctx;

      if (strcmp (ctx->board, first->board) != 0)
        {
          g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                       "requests[%u].board: '%s'; a batch with a request_id "
                       "updates one board ('%s')",
                       i, ctx->board, first->board);
          return FALSE;
        }
      if (ctx->period.start_ms != first->period.start_ms)
        {
          g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                       "requests[%u].timestamp_ms: in period %s; a batch with "
                       "a request_id updates one period of its board (%s)",
                       i, ctx->period.label, first->period.label);
          return FALSE;
        }
    }
  return TRUE;
}

/* A request of a batch recorded as a whole was refused (refusal): it
 * answers that, the others that they were not applied; nothing is sent. */
static void
refuse_group (UpdateBatchCall *batch, guint refused, const GError *refusal)
{
  g_autoptr (GError) others = g_error_new (
      RANK_ERROR, RANK_ERROR_INVALID,
      "not applied: requests[%u] of the same batch was refused, and a batch "
      "with a request_id applies all or nothing",
      refused);

  for (guint i = 0; i < batch->n; i++)
    batch_item_failed (&batch->items[i], i == refused ? refusal : others);
  batch_item_done (batch);
}

/* UpdateBatch with a request_id: every item is checked first (a refused
 * one leaves the batch unapplied), then the batch's own rules (a breach
 * refuses the call); then all leave together, with the batch's group
 * argument, in one script call. */
static void
start_update_group (Call *call, const RankUpdateBatchArgs *args)
{
  UpdateBatchCall *batch = (UpdateBatchCall *) call;
  RankHandler *handler = call->handler;
  const RankUpdate *updates[RANK_GROUP_MAX_ITEMS];
  gint64 buckets[RANK_REQUEST_BUCKET_ARGS];
  g_autoptr (GError) error = NULL, rules = NULL;
  guint refused = 0;

  while (refused < batch->n)
    {
      BatchUpdate *item = &batch->items[refused];

      if (!handler_check_update (
              call, &g_array_index (args->requests, RankUpdateFields, refused),
              &item->ctx, &item->update, &item->data, &error))
        break;
      refused++;
    }
  /* The batch's rules first: a breach is the call's mistake. */
  if (!check_group (batch, refused, args, &rules))
    {
      handler_reply_error (call, rules);
      return;
    }
  if (refused < batch->n)
    {
      refuse_group (batch, refused, error);
      return;
    }
  rank_request_buckets (batch->items[0].ctx.dedup_window_ms,
                        batch->items[0].ctx.now_ms, buckets);
  for (guint i = 0; i < batch->n; i++)
    {
      BatchUpdate *item = &batch->items[i];

      /* One clock (handler_now), one head: the items share a script
       * call. */
      item->update.without_rank = TRUE;
      item->update.group = batch->group;
      updates[i] = &item->update;
    }
  rank_request_group (args->request_id, updates, batch->n, buckets[0],
                      (guint64) (guint) g_atomic_int_add (&group_tokens, 1),
                      batch->group);
  if (handler_layout_fits (handler, &batch->items[0].ctx, TRUE,
                           group_layout_checked, batch))
    group_layout_checked (NULL, batch);
}

void
handler_start_update_batch (Call *call)
{
  const RankUpdateBatchArgs *args = call->plain_args;
  GArray *requests = args->requests;
  UpdateBatchCall *batch = (UpdateBatchCall *) call;

  call->writes = TRUE;
  if (requests->len < 1 || requests->len > RANK_UPDATE_BATCH_MAX)
    {
      g_autoptr (GError) error
          = g_error_new (RANK_ERROR, RANK_ERROR_INVALID,
                         "requests: %u updates; UpdateBatch takes 1 to %d",
                         requests->len, RANK_UPDATE_BATCH_MAX);

      handler_reply_error (call, error);
      return;
    }
  batch->without_rank = args->has_with_rank && !args->with_rank;
  batch->n = requests->len;
  batch->items = g_new0 (BatchUpdate, batch->n);
  batch->pending = batch->n + 1;
  for (guint i = 0; i < batch->n; i++)
    {
      batch->items[i].batch = batch;
      batch->items[i].index = i;
    }
  if (args->request_id != NULL)
    {
      start_update_group (call, args);
      return;
    }
  for (guint i = 0; i < batch->n; i++)
    batch_item_start (&batch->items[i],
                      &g_array_index (requests, RankUpdateFields, i));
  batch_item_done (batch);
}
