/* dispatch.c -- the method table (handler_private.h), how large each
 * method's reply can be, and the dispatch of a call: its arguments read,
 * its call struct made, its start function called. An unknown method, or
 * arguments that do not decode, are answered here.
 */
#include "handler.h"
#include "handler_private.h"

#include <string.h>

#include "constants.h"

/* ---- reply bounds ---- */

static gsize
bound_small (const ThriftStruct *args)
{
  return HANDLER_SMALL_REPLY_BYTES;
}

static gsize
entries_bound (gint64 n, gboolean with_data)
{
  n = CLAMP (n, 1, RANK_TOP_N_MAX);
  return MAX ((gsize) HANDLER_SMALL_REPLY_BYTES,
              HANDLER_MESSAGE_BYTES
                  + (gsize) n
                        * (HANDLER_ENTRY_BYTES
                           + (with_data ? HANDLER_ENTRY_DATA_BYTES : 0)));
}

static gsize
bound_around (const ThriftStruct *args)
{
  const rankGetAroundRequest *a
      = ((const rankRankingGetAroundArgs *) args)->request;

  return entries_bound (
      2 * (gint64) CLAMP (a->radius, 0, RANK_AROUND_RADIUS_MAX) + 1,
      a->with_data);
}

static gsize
bound_ranks (const ThriftStruct *args)
{
  const rankGetRanksRequest *a
      = ((const rankRankingGetRanksArgs *) args)->request;

  /* A RankOf is an Entry without subscores or data, and found. */
  return entries_bound (MIN (a->members->len, RANK_RANKS_MAX), FALSE);
}

static gsize
bound_sample (const ThriftStruct *args)
{
  const rankSampleRequest *a = ((const rankRankingSampleArgs *) args)->request;

  return entries_bound (CLAMP (a->count, 1, RANK_SAMPLE_COUNT_MAX), FALSE);
}

static gsize
bound_data (const ThriftStruct *args)
{
  return HANDLER_MESSAGE_BYTES + HANDLER_ENTRY_DATA_BYTES;
}

/* The busiest methods' arguments, read into plain structs
 * (codec_requests.h) that the call keeps; and how large each reply can
 * be. */
static gpointer
read_update (ThriftProtocol *in, gsize *bound, GError **error)
{
  return rank_update_args_read (in, error);
}

static gpointer
read_update_batch (ThriftProtocol *in, gsize *bound, GError **error)
{
  RankUpdateBatchArgs *args = rank_update_batch_args_read (in, error);

  /* An UpdateResult: an UpdateResponse with subscores, or an exception. */
  if (args != NULL)
    *bound = HANDLER_MESSAGE_BYTES
             + (gsize) args->requests->len * HANDLER_SMALL_REPLY_BYTES;
  return args;
}

static gpointer
read_get_rank (ThriftProtocol *in, gsize *bound, GError **error)
{
  return rank_get_rank_args_read (in, error);
}

static gpointer
read_get_top_n (ThriftProtocol *in, gsize *bound, GError **error)
{
  RankGetTopNArgs *args = rank_get_top_n_args_read (in, error);

  if (args != NULL)
    *bound = entries_bound (args->n, args->with_data);
  return args;
}

/* ---- the method table ---- */

#define METHOD(id, Name, role, lower, start, kind, bound)                      \
  [id] = { Name,                                                               \
           RANK_ROLE_##role,                                                   \
           rank_ranking_##lower##_args_get_type,                               \
           rank_ranking_##lower##_result_get_type,                             \
           start,                                                              \
           kind,                                                               \
           bound }
#define READ_METHOD(id, Name, role, lower, start, kind, reader, freer)         \
  [id] = { Name,                                                               \
           RANK_ROLE_##role,                                                   \
           rank_ranking_##lower##_args_get_type,                               \
           rank_ranking_##lower##_result_get_type,                             \
           start,                                                              \
           kind,                                                               \
           NULL,                                                               \
           reader,                                                             \
           (GDestroyNotify) freer }

/* Sized by its last row: a method left out at the end conflicts with the
 * declaration (handler_private.h). */
const MethodSpec handler_methods[] = {
  READ_METHOD (METHOD_UPDATE, "Update", WRITE, update, handler_start_update,
               &handler_update_calls, read_update, rank_update_args_free),
  READ_METHOD (METHOD_GET_RANK, "GetRank", READ, get_rank,
               handler_start_get_rank, &handler_cached_read_calls,
               read_get_rank, rank_get_rank_args_free),
  READ_METHOD (METHOD_GET_TOP_N, "GetTopN", READ, get_top_n,
               handler_start_get_top_n, &handler_cached_read_calls,
               read_get_top_n, rank_get_top_n_args_free),
  METHOD (METHOD_GET_AROUND, "GetAround", READ, get_around,
          handler_start_get_around, NULL, bound_around),
  METHOD (METHOD_GET_RANKS, "GetRanks", READ, get_ranks,
          handler_start_get_ranks, NULL, bound_ranks),
  METHOD (METHOD_REMOVE, "Remove", WRITE, remove, handler_start_remove,
          &handler_update_calls, bound_small),
  METHOD (METHOD_COUNT, "Count", READ, count, handler_start_count, NULL,
          bound_small),
  METHOD (METHOD_COUNT_BETWEEN, "CountBetween", READ, count_between,
          handler_start_count, NULL, bound_small),
  METHOD (METHOD_GET_PERCENTILE, "GetPercentile", READ, get_percentile,
          handler_start_get_percentile, NULL, bound_small),
  METHOD (METHOD_GET_SCORE_AT_PERCENTILE, "GetScoreAtPercentile", READ,
          get_score_at_percentile, handler_start_get_score_at_percentile, NULL,
          bound_small),
  METHOD (METHOD_SAMPLE, "Sample", READ, sample, handler_start_sample, NULL,
          bound_sample),
  METHOD (METHOD_SET_MEMBER_DATA, "SetMemberData", WRITE, set_member_data,
          handler_start_set_member_data, &handler_update_calls, bound_small),
  METHOD (METHOD_GET_MEMBER_DATA, "GetMemberData", READ, get_member_data,
          handler_start_get_member_data, NULL, bound_data),
  READ_METHOD (METHOD_UPDATE_BATCH, "UpdateBatch", WRITE, update_batch,
               handler_start_update_batch, &handler_update_batch_calls,
               read_update_batch, rank_update_batch_args_free),
  METHOD (METHOD_GET_SERVER_INFO, "GetServerInfo", NONE, get_server_info,
          handler_start_get_server_info, NULL, bound_small),
  METHOD (METHOD_LIST_BOARDS, "ListBoards", ADMIN, list_boards,
          handler_start_list_boards, &handler_list_boards_calls,
          handler_bound_list_boards),
  METHOD (METHOD_GET_BOARD_INFO, "GetBoardInfo", ADMIN, get_board_info,
          handler_start_get_board_info, &handler_board_info_calls,
          handler_bound_board_info),
  METHOD (METHOD_DELETE_BOARD, "DeleteBoard", ADMIN, delete_board,
          handler_start_delete_board, NULL, bound_small),
  METHOD (METHOD_RESET_BOARD, "ResetBoard", ADMIN, reset_board,
          handler_start_reset_board, NULL, bound_small),
  METHOD (METHOD_EXPORT, "Export", ADMIN, export, handler_start_export, NULL,
          handler_bound_export),
  METHOD (METHOD_ENQUEUE, "Enqueue", WRITE, enqueue, handler_start_enqueue,
          &handler_enqueue_calls, handler_bound_enqueue),
  METHOD (METHOD_GET_QUEUE_STATUS, "GetQueueStatus", READ, get_queue_status,
          handler_start_get_queue_status, NULL, bound_small),
};

const char *const *
handler_method_names (void)
{
  static const char *names[METHOD_UNKNOWN];
  static gsize once = 0;

  if (g_once_init_enter (&once))
    {
      for (guint m = 0; m < METHOD_UNKNOWN; m++)
        names[m] = handler_methods[m].name;
      g_once_init_leave (&once, 1);
    }
  return names;
}

/* ---- dispatch ---- */

/* A new call of method (METHOD_UNKNOWN: a plain Call), zeroed. */
static Call *
call_new (Method method)
{
  const CallKind *kind
      = method == METHOD_UNKNOWN ? NULL : handler_methods[method].kind;

  return g_malloc0 (kind != NULL ? kind->size : sizeof (Call));
}

/* The call's arguments, and how large its reply can be. The busiest
 * methods' are read into plain structs (codec_requests.h: the generated
 * ones were half of rankd's work per import entry and a fifth per
 * GetRank); every other method's into its generated struct. */
static gboolean
read_args (Call *call, ThriftProtocol *in, gsize *reply_bound, GError **error)
{
  const MethodSpec *m = &handler_methods[call->method];

  if (m->read != NULL)
    return (call->plain_args = m->read (in, reply_bound, error)) != NULL;
  call->args = g_object_new (m->args_type (), NULL);
  if (thrift_struct_read (call->args, in, error) < 0)
    return FALSE;
  *reply_bound = m->reply_bound (call->args);
  return TRUE;
}

RankDispatch
rank_handler_dispatch (RankHandler *handler, gpointer request,
                       const RankPeer *peer, GByteArray *reply_buf,
                       const char *method, gint32 seqid, ThriftProtocol *in,
                       gsize *reply_bound, GError **error)
{
  Method id = METHOD_UNKNOWN;
  Call *call;

  for (int m = 0; m < METHOD_UNKNOWN; m++)
    if (strcmp (method, handler_methods[m].name) == 0)
      id = (Method) m;
  call = call_new (id);
  call->handler = handler;
  call->request = request;
  call->peer = peer;
  call->reply = reply_buf;
  call->seqid = seqid;
  call->method = id;
  *reply_bound = HANDLER_SMALL_REPLY_BYTES;

  if (call->method == METHOD_UNKNOWN)
    {
      g_autofree char *message
          = g_strdup_printf ("Invalid method name: '%s'", method);

      if (thrift_protocol_skip (in, T_STRUCT, error) < 0
          || thrift_protocol_read_message_end (in, error) < 0)
        {
          g_free (call);
          return RANK_DISPATCH_FAILED;
        }
      thrift_transport_read_end (in->transport, NULL);
      call->unknown_name = g_strdup (method);
      handler_reply (call, NULL,
                     THRIFT_APPLICATION_EXCEPTION_ERROR_UNKNOWN_METHOD,
                     message);
      return RANK_DISPATCH_PENDING;
    }

  if (!read_args (call, in, reply_bound, error)
      || thrift_protocol_read_message_end (in, error) < 0)
    {
      g_clear_object (&call->args);
      if (call->plain_args != NULL)
        handler_methods[call->method].free (call->plain_args);
      g_free (call);
      return RANK_DISPATCH_FAILED;
    }
  thrift_transport_read_end (in->transport, NULL);
  call->start_us = g_get_monotonic_time ();
  if (handler_authorize (call))
    handler_methods[call->method].start (call);
  return RANK_DISPATCH_PENDING;
}

gboolean
rank_handler_write_exception (RankHandler *handler, GByteArray *reply,
                              const char *method, gint32 seqid,
                              ThriftApplicationExceptionError type,
                              const char *message)
{
  g_autoptr (GError) error = NULL;

  rank_reply_writer_begin (handler->writer, reply);
  if (rank_protocol_write_exception (handler->out, method, seqid, type, message,
                                     &error))
    return TRUE;
  g_debug ("cannot write the exception for %s: %s", method, error->message);
  return FALSE;
}
