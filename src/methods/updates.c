/* updates.c -- the methods that change one member: Update, Remove and
 * SetMemberData. Update's reply is written by the codec (codec.h), from
 * the store's answer, without the generated structs.
 */
#include "handler_private.h"

#include "codec.h"
#include "error.h"
#include "memberdata.h"
#include "policy.h"
#include "validate.h"

/* A call of Update, Remove or SetMemberData: what it decoded for its
 * store operation. */
typedef struct
{
  Call call;
  RankUpdate update; /* Update, Remove */
  char *data;        /* encoded member data (Update, SetMemberData) */
  gsize data_len;
} UpdateCall;

static void
update_call_clear (Call *call)
{
  g_free (((UpdateCall *) call)->data);
}

const CallKind handler_update_calls
    = { sizeof (UpdateCall), update_call_clear };

/* ---- Update ---- */

gboolean
handler_check_update (Call *call, const RankUpdateFields *request,
                      RankContext *ctx, RankUpdate *update, char **data,
                      GError **error)
{
  const RankBoardOptions *o;
  gsize data_len = 0;

  if (!rank_validate_board (request->board, error))
    return FALSE;
  handler_resolve_context (call, ctx, request->board);
  o = ctx->options;
  if (!rank_validate_member (request->member, error)
      || !rank_validate_request_id (request->request_id, error)
      || !rank_policy_mode (o, request->has_mode, request->mode, &update->mode,
                            error)
      || !rank_validate_score ("value", request->value, error))
    return FALSE;
  update->n_subscores
      = request->subscores != NULL ? request->subscores->len : 0;
  if (!rank_policy_subscores (request->board, o, update->mode,
                              update->n_subscores, error))
    return FALSE;
  update->subscores = update->n_subscores > 0
                          ? (const gint64 *) request->subscores->data
                          : NULL;
  if (request->data != NULL)
    {
      *data = rank_member_data_encode (request->data, "data", &data_len, error);
      if (*data == NULL)
        return FALSE;
      update->data_given = TRUE;
      update->data = *data;
      update->data_len = data_len;
    }
  update->member = request->member;
  update->request_id = request->request_id;
  update->without_rank = request->has_with_rank && !request->with_rank;
  update->value = request->value;
  update->timestamp_ms = ctx->now_ms;
  if (request->has_timestamp_ms
      && !rank_validate_timestamp ("timestamp_ms", request->timestamp_ms,
                                   error))
    return FALSE;
  if (request->has_timestamp_ms)
    update->timestamp_ms = request->timestamp_ms;
  return rank_context_write (ctx, update->timestamp_ms, error);
}

/* Update's reply, written straight from the result. */
static void
reply_update (Call *call, const RankUpdateResult *r)
{
  ThriftProtocol *out = handler_begin_reply (call);
  RankCodecUpdateResponse response = {
    .score = r->score,
    .rank = r->rank,
    .applied = r->applied,
    .n_subscores = r->n_subscores,
    .subscores = r->subscores,
  };
  g_autoptr (GError) error = NULL;
  gboolean ok = rank_codec_write_reply_begin (out, handler_call_name (call),
                                              call->seqid, T_STRUCT, &error)
                && rank_codec_write_update_response (out, &response, &error)
                && rank_codec_write_reply_end (out, &error);

  handler_finish (call, ok, error);
}

static void
update_answered (const RankUpdateResult *r, const GError *error, gpointer data)
{
  Call *call = data;

  if (error != NULL)
    handler_reply_error (call, error);
  else
    {
      call->changed = r->applied;
      reply_update (call, r);
    }
}

static void
run_update (Call *call)
{
  rank_store_update (call->handler->store, &call->ctx,
                     &((UpdateCall *) call)->update, update_answered, call);
}

void
handler_start_update (Call *call)
{
  UpdateCall *u = (UpdateCall *) call;
  g_autoptr (GError) error = NULL;

  call->writes = TRUE;
  handler_check_update (call, call->plain_args, &call->ctx, &u->update,
                        &u->data, &error);
  handler_checked (call, error, run_update);
}

/* ---- Remove ---- */

static void
set_remove_response (GObject *object, gpointer data)
{
  rankRankingRemoveResult *result = RANK_RANKING_REMOVE_RESULT (object);
  const RankUpdateResult *r = data;

  result->success->applied = r->applied;
  result->success->removed = r->applied && r->rank != 0;
  result->__isset_success = TRUE;
}

static void
remove_answered (const RankUpdateResult *r, const GError *error, gpointer data)
{
  Call *call = data;

  if (error != NULL)
    handler_reply_error (call, error);
  else
    {
      /* A member already absent: the request id is recorded, the board
       * is as it was. */
      call->changed = r->applied && r->rank != 0;
      handler_reply_result (call, set_remove_response, (gpointer) r);
    }
}

static void
run_remove (Call *call)
{
  rank_store_update (call->handler->store, &call->ctx,
                     &((UpdateCall *) call)->update, remove_answered, call);
}

void
handler_start_remove (Call *call)
{
  rankRemoveRequest *args = RANK_RANKING_REMOVE_ARGS (call->args)->request;
  g_autoptr (GError) error = NULL;

  call->writes = TRUE;
  if (!rank_validate_board (args->board, &error)
      || !rank_validate_member (args->member, &error)
      || !rank_validate_request_id (args->request_id, &error))
    {
      handler_reply_error (call, error);
      return;
    }
  handler_resolve (call, args->board);
  ((UpdateCall *) call)->update = (RankUpdate){
    .member = args->member,
    .request_id = args->request_id,
    .value = 0,
    .mode = RANK_MODE_REMOVE,
    .timestamp_ms = call->ctx.now_ms,
  };
  /* Now is in the current period: nothing to refuse. */
  rank_context_write (&call->ctx, call->ctx.now_ms, NULL);
  handler_proceed (call, run_remove);
}

/* ---- SetMemberData ---- */

static void
set_data_answered (const GError *error, gpointer data)
{
  Call *call = data;

  if (error != NULL)
    handler_reply_error (call, error);
  else
    {
      call->changed = TRUE;
      handler_reply_result (call, NULL, NULL);
    }
}

static void
run_set_member_data (Call *call)
{
  rankSetMemberDataRequest *args
      = RANK_RANKING_SET_MEMBER_DATA_ARGS (call->args)->request;
  UpdateCall *u = (UpdateCall *) call;

  rank_store_set_data (call->handler->store, &call->ctx, args->member, u->data,
                       u->data_len, set_data_answered, call);
}

void
handler_start_set_member_data (Call *call)
{
  rankSetMemberDataRequest *args
      = RANK_RANKING_SET_MEMBER_DATA_ARGS (call->args)->request;
  UpdateCall *u = (UpdateCall *) call;
  g_autoptr (GError) error = NULL;

  call->writes = TRUE;
  if (!rank_validate_board (args->board, &error)
      || !rank_validate_member (args->member, &error)
      || (u->data
          = rank_member_data_encode (args->data, "data", &u->data_len, &error))
             == NULL)
    {
      handler_reply_error (call, error);
      return;
    }
  handler_resolve (call, args->board);
  /* The member's data on the current period. */
  rank_context_read (&call->ctx, 0, NULL);
  handler_proceed (call, run_set_member_data);
}
