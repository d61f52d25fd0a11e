/* handler.c -- the Ranking methods (see handler.h).
 *
 * A call in flight is a Call: where its reply goes, the method, the
 * sequence id, the decoded arguments, and the context resolved for it once
 * (context.h). Each method has one row in the method table; its start
 * function checks the fields (validate.h) and what the board's options
 * refuse (policy.h), resolves the context, and hands the call to the store
 * once the board's stored layout is known to fit (store.h); its answer
 * function encodes the result. Every outcome (result, declared exception,
 * TApplicationException for an internal error or an unknown method) is
 * written by reply() or reply_rows() and ends with answered().
 */
#include "handler.h"
#include "handler_private.h"

#include <math.h>
#include <string.h>

#include <thrift/c_glib/protocol/thrift_binary_protocol.h>
#include <thrift/c_glib/thrift_application_exception.h>

#include "connbuf.h"
#include "constants.h"
#include "context.h"
#include "error.h"
#include "memberdata.h"
#include "metrics.h"
#include "policy.h"
#include "requestid.h"
#include "call_args.h"
#include "api.h"
#include "rank_ranking_types.h"
#include "validate.h"

/* ---- the methods ---- */

static void start_update (Call *call);
static void start_get_rank (Call *call);
static void start_get_top_n (Call *call);
static void start_get_around (Call *call);
static void start_get_ranks (Call *call);
static void start_remove (Call *call);
static void start_count (Call *call);
static void start_get_percentile (Call *call);
static void start_get_score_at_percentile (Call *call);
static void start_sample (Call *call);
static void start_set_member_data (Call *call);
static void start_get_member_data (Call *call);
static void start_update_batch (Call *call);
static void start_get_server_info (Call *call);

/* The largest replies, in bytes (binary protocol, framed; compact is
 * smaller): what a connection reserves for a call in flight (server.c).
 * An Entry: member, score, rank, three subscores, and member data at its
 * limits; a message: its header and result struct; an exception's message
 * names at most a board, a member and a few numbers. */
#define ENTRY_BYTES (3 + 4 + RANK_MEMBER_MAX_BYTES + 2 * 11 + 8 + 3 * 8 + 1)
#define ENTRY_DATA_BYTES                                                       \
  (9 + RANK_DATA_KEYS_MAX * 8 + RANK_DATA_TOTAL_MAX_BYTES)
#define MESSAGE_BYTES (4 + 12 + RANK_METHOD_NAME_MAX_BYTES + 16)
#define SMALL_REPLY_BYTES 1024

static gsize
bound_small (const ThriftStruct *args)
{
  return SMALL_REPLY_BYTES;
}

static gsize
entries_bound (gint64 n, gboolean with_data)
{
  n = CLAMP (n, 1, RANK_TOP_N_MAX);
  return MAX ((gsize) SMALL_REPLY_BYTES,
              MESSAGE_BYTES
                  + (gsize) n
                        * (ENTRY_BYTES + (with_data ? ENTRY_DATA_BYTES : 0)));
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
  return MESSAGE_BYTES + ENTRY_DATA_BYTES;
}

/* The busiest methods' arguments, read into plain structs (call_args.h)
 * that the call keeps as its state; and how large each reply can be. */
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
    *bound = MESSAGE_BYTES + (gsize) args->requests->len * SMALL_REPLY_BYTES;
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

/* One row per method of the IDL: its name, its generated argument and
 * result structs, what starts it, and how large its reply can be; or, for
 * the busiest, what reads its arguments into a plain struct (the state of
 * the call; its reply's bound SMALL_REPLY_BYTES unless it says) and frees
 * them. */
typedef struct
{
  const char *name;
  GType (*args_type) (void);
  GType (*result_type) (void);
  void (*start) (Call *call);
  gsize (*reply_bound) (const ThriftStruct *args); /* NULL: read */
  gpointer (*read) (ThriftProtocol *in, gsize *reply_bound, GError **error);
  GDestroyNotify free;
} MethodSpec;

static const MethodSpec methods[] = {
  [METHOD_UPDATE] = { "Update", rank_ranking_update_args_get_type,
                      rank_ranking_update_result_get_type, start_update, NULL,
                      read_update, (GDestroyNotify) rank_update_args_free },
  [METHOD_GET_RANK]
  = { "GetRank", rank_ranking_get_rank_args_get_type,
      rank_ranking_get_rank_result_get_type, start_get_rank, NULL,
      read_get_rank, (GDestroyNotify) rank_get_rank_args_free },
  [METHOD_GET_TOP_N]
  = { "GetTopN", rank_ranking_get_top_n_args_get_type,
      rank_ranking_get_top_n_result_get_type, start_get_top_n, NULL,
      read_get_top_n, (GDestroyNotify) rank_get_top_n_args_free },
  [METHOD_GET_AROUND]
  = { "GetAround", rank_ranking_get_around_args_get_type,
      rank_ranking_get_around_result_get_type, start_get_around, bound_around },
  [METHOD_GET_RANKS]
  = { "GetRanks", rank_ranking_get_ranks_args_get_type,
      rank_ranking_get_ranks_result_get_type, start_get_ranks, bound_ranks },
  [METHOD_REMOVE]
  = { "Remove", rank_ranking_remove_args_get_type,
      rank_ranking_remove_result_get_type, start_remove, bound_small },
  [METHOD_COUNT]
  = { "Count", rank_ranking_count_args_get_type,
      rank_ranking_count_result_get_type, start_count, bound_small },
  [METHOD_COUNT_BETWEEN]
  = { "CountBetween", rank_ranking_count_between_args_get_type,
      rank_ranking_count_between_result_get_type, start_count, bound_small },
  [METHOD_GET_PERCENTILE]
  = { "GetPercentile", rank_ranking_get_percentile_args_get_type,
      rank_ranking_get_percentile_result_get_type, start_get_percentile,
      bound_small },
  [METHOD_GET_SCORE_AT_PERCENTILE]
  = { "GetScoreAtPercentile",
      rank_ranking_get_score_at_percentile_args_get_type,
      rank_ranking_get_score_at_percentile_result_get_type,
      start_get_score_at_percentile, bound_small },
  [METHOD_SAMPLE]
  = { "Sample", rank_ranking_sample_args_get_type,
      rank_ranking_sample_result_get_type, start_sample, bound_sample },
  [METHOD_SET_MEMBER_DATA]
  = { "SetMemberData", rank_ranking_set_member_data_args_get_type,
      rank_ranking_set_member_data_result_get_type, start_set_member_data,
      bound_small },
  [METHOD_GET_MEMBER_DATA]
  = { "GetMemberData", rank_ranking_get_member_data_args_get_type,
      rank_ranking_get_member_data_result_get_type, start_get_member_data,
      bound_data },
  [METHOD_UPDATE_BATCH]
  = { "UpdateBatch", rank_ranking_update_batch_args_get_type,
      rank_ranking_update_batch_result_get_type, start_update_batch, NULL,
      read_update_batch, (GDestroyNotify) rank_update_batch_args_free },
  [METHOD_GET_SERVER_INFO]
  = { "GetServerInfo", rank_ranking_get_server_info_args_get_type,
      rank_ranking_get_server_info_result_get_type, start_get_server_info,
      bound_small },
  [METHOD_LIST_BOARDS]
  = { "ListBoards", rank_ranking_list_boards_args_get_type,
      rank_ranking_list_boards_result_get_type, handler_start_list_boards,
      handler_bound_list_boards },
  [METHOD_GET_BOARD_INFO]
  = { "GetBoardInfo", rank_ranking_get_board_info_args_get_type,
      rank_ranking_get_board_info_result_get_type, handler_start_get_board_info,
      handler_bound_board_info },
  [METHOD_DELETE_BOARD]
  = { "DeleteBoard", rank_ranking_delete_board_args_get_type,
      rank_ranking_delete_board_result_get_type, handler_start_delete_board,
      bound_small },
  [METHOD_RESET_BOARD] = { "ResetBoard", rank_ranking_reset_board_args_get_type,
                           rank_ranking_reset_board_result_get_type,
                           handler_start_reset_board, bound_small },
  [METHOD_EXPORT] = { "Export", rank_ranking_export_args_get_type,
                      rank_ranking_export_result_get_type, handler_start_export,
                      handler_bound_export },
  [METHOD_ENQUEUE] = { "Enqueue", rank_ranking_enqueue_args_get_type,
                       rank_ranking_enqueue_result_get_type,
                       handler_start_enqueue, handler_bound_enqueue },
  [METHOD_GET_QUEUE_STATUS]
  = { "GetQueueStatus", rank_ranking_get_queue_status_args_get_type,
      rank_ranking_get_queue_status_result_get_type,
      handler_start_get_queue_status, bound_small },
};

G_STATIC_ASSERT (G_N_ELEMENTS (methods) == METHOD_UNKNOWN);

/* The names, in the table's order, for the metrics. */
static const char *const *
method_names (void)
{
  static const char *names[METHOD_UNKNOWN];
  static gsize once = 0;

  if (g_once_init_enter (&once))
    {
      for (guint m = 0; m < METHOD_UNKNOWN; m++)
        names[m] = methods[m].name;
      g_once_init_leave (&once, 1);
    }
  return names;
}

/* ---- replies ---- */

static const char *
call_name (const Call *call)
{
  return call->method == METHOD_UNKNOWN ? call->unknown_name
                                        : methods[call->method].name;
}

/* The protocol that writes the reply of call, into its own buffer. */
static ThriftProtocol *
begin_reply (Call *call)
{
  rank_reply_writer_begin (call->handler->writer, call->reply);
  return call->handler->out;
}

/* Ends a reply's message. */
static gboolean
end_message (ThriftProtocol *out, GError **error)
{
  return thrift_protocol_write_message_end (out, error) >= 0
         && thrift_transport_flush (out->transport, error);
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

static void batch_free (Batch *batch);
static void note_writes (Call *call);
static void land (Call *call, const GError *error);

/* Ends the call once its reply is written (ok) or could not be. A reply
 * over RANK_REPLY_MAX_BYTES becomes InvalidArgument instead. */
static void
finish_call (Call *call, gboolean ok, const GError *error)
{
  if (!ok && error != NULL && error->domain == THRIFT_TRANSPORT_ERROR
      && error->code == THRIFT_TRANSPORT_ERROR_SEND
      && call->method != METHOD_UNKNOWN && call->reply->len > 0)
    {
      g_autoptr (GError) big = g_error_new (
          RANK_ERROR, RANK_ERROR_INVALID,
          "%s: the reply would be over the %d-byte reply limit; ask for "
          "fewer entries, or without member data",
          methods[call->method].name, RANK_REPLY_MAX_BYTES);

      g_byte_array_set_size (call->reply, 0);
      handler_reply_error (call, big);
      return;
    }
  if (!ok)
    g_debug ("cannot encode the reply to %s: %s", call_name (call),
             error ? error->message : "?");
  if (call->method != METHOD_UNKNOWN)
    rank_metrics_call_done (call->handler->metrics, call->method, call->outcome,
                            g_get_monotonic_time () - call->start_us);
  if (call->writes)
    note_writes (call);
  call->handler->answered (call->request, ok);
  rank_context_clear (&call->ctx);
  g_clear_object (&call->args);
  g_free (call->unknown_name);
  g_free (call->cache_key);
  g_free (call->data);
  batch_free (call->batch);
  if (call->state_free != NULL)
    call->state_free (call->state);
  g_free (call);
}

/* Writes result (a generated *Result struct) or, when result is NULL, a
 * TApplicationException of type with message; then ends the call. */
static void
reply (Call *call, ThriftStruct *result, ThriftApplicationExceptionError type,
       const char *message)
{
  ThriftProtocol *out = begin_reply (call);
  g_autoptr (GError) error = NULL;
  gboolean ok;

  if (result != NULL)
    ok = thrift_protocol_write_message_begin (out, call_name (call), T_REPLY,
                                              call->seqid, &error)
             >= 0
         && thrift_struct_write (result, out, &error) >= 0
         && end_message (out, &error);
  else
    ok = rank_protocol_write_exception (out, call_name (call), call->seqid,
                                        type, message, &error);
  finish_call (call, ok, error);
}

/* Answers with a result struct of the call's method, success filled in by
 * set (NULL: nothing to fill). */
void
handler_reply_result (Call *call, void (*set) (GObject *result, gpointer data),
                      gpointer data)
{
  GObject *result = g_object_new (methods[call->method].result_type (), NULL);

  if (set != NULL)
    set (result, data);
  reply (call, THRIFT_STRUCT (result), 0, NULL);
  g_object_unref (result);
}

/* Puts err into the result's matching exception field; FALSE if the method
 * has none for it (then it is an internal error). */
static gboolean
set_exception (GObject *result, const GError *err)
{
  const char *field = NULL;
  GType type = G_TYPE_INVALID;
  GParamSpec *spec;
  GObject *x;

  if (err->domain == RANK_ERROR && err->code == RANK_ERROR_INVALID)
    field = "invalid", type = RANK_TYPE_INVALID_ARGUMENT;
  else if (err->domain == RANK_ERROR && err->code == RANK_ERROR_NOT_FOUND)
    field = "not_found", type = RANK_TYPE_NOT_FOUND;
  else if (err->domain == RANK_ERROR && err->code == RANK_ERROR_UNAVAILABLE)
    field = "unavailable", type = RANK_TYPE_UNAVAILABLE;
  if (field == NULL)
    return FALSE;
  spec = g_object_class_find_property (G_OBJECT_GET_CLASS (result), field);
  if (spec == NULL)
    return FALSE;
  x = g_object_new (type, "message", err->message, NULL);
  g_object_set (result, field, x, NULL);
  g_object_unref (x);
  return TRUE;
}

/* Whether err refuses a call before it changed anything: a check of rankd
 * or of a script (which refuses before it writes). Other failures (Redis
 * gone, a timeout) leave unknown whether a write landed. */
static gboolean
refused_unchanged (const GError *err)
{
  return err->domain == RANK_ERROR
         && (err->code == RANK_ERROR_INVALID
             || err->code == RANK_ERROR_NOT_FOUND);
}

/* Replies with err as the method's declared exception, or as an internal
 * error. */
void
handler_reply_error (Call *call, const GError *err)
{
  GObject *result = g_object_new (methods[call->method].result_type (), NULL);

  if (!refused_unchanged (err))
    call->changed = TRUE;
  call->outcome = set_exception (result, err) ? rank_metrics_outcome (err)
                                              : RANK_OUTCOME_INTERNAL;
  if (call->outcome != RANK_OUTCOME_INTERNAL)
    reply (call, THRIFT_STRUCT (result), 0, NULL);
  else
    reply (call, NULL, THRIFT_APPLICATION_EXCEPTION_ERROR_INTERNAL_ERROR,
           err->message);
  g_object_unref (result);
}

/* Writes one Entry as the generated rank_entry_write would, straight from
 * the Redis reply: a page of 1000 entries would otherwise be 1000 GObjects
 * and 1000 string copies per call. test_service and the Python client
 * check the encoding in both protocols. */
static gboolean
write_field_begin (ThriftProtocol *out, const char *name, ThriftType type,
                   gint16 id, GError **error)
{
  return thrift_protocol_write_field_begin (out, name, type, id, error) >= 0;
}

/* Field 4 of an Entry or an UpdateResponse: the subscores. */
static gboolean
write_subscores (ThriftProtocol *out, const gint64 *subscores, guint n,
                 GError **error)
{
  gboolean ok = write_field_begin (out, "subscores", T_LIST, 4, error)
                && thrift_protocol_write_list_begin (out, T_I64, n, error) >= 0;

  for (guint i = 0; ok && i < n; i++)
    ok = thrift_protocol_write_i64 (out, subscores[i], error) >= 0;
  return ok && thrift_protocol_write_list_end (out, error) >= 0
         && thrift_protocol_write_field_end (out, error) >= 0;
}

/* Entry.subscores (4) and Entry.data (5), when the entry has them. */
static gboolean
write_entry_extras (ThriftProtocol *out, const RankRow *e, GError **error)
{
  RankDataPair pairs[RANK_DATA_KEYS_MAX];
  guint n = 0;
  gboolean ok = TRUE;

  if (e->n_subscores > 0)
    ok = write_subscores (out, e->subscores, e->n_subscores, error);
  if (!ok || e->data == NULL)
    return ok;
  if (!rank_member_data_parse (e->data, e->data_len, pairs, &n))
    {
      /* Not written by rankd: leave it out rather than fail the page. */
      g_warning ("member data of '%.*s' is malformed; left out",
                 (int) e->member_len, e->member);
      return TRUE;
    }
  ok = write_field_begin (out, "data", T_MAP, 5, error)
       && thrift_protocol_write_map_begin (out, T_STRING, T_STRING, n, error)
              >= 0;
  for (guint i = 0; ok && i < n; i++)
    ok = thrift_protocol_write_binary (out, (gpointer) pairs[i].key,
                                       (guint32) pairs[i].key_len, error)
             >= 0
         && thrift_protocol_write_binary (out, (gpointer) pairs[i].value,
                                          (guint32) pairs[i].value_len, error)
                >= 0;
  return ok && thrift_protocol_write_map_end (out, error) >= 0
         && thrift_protocol_write_field_end (out, error) >= 0;
}

/* An Entry without subscores or data in the binary protocol, in one write:
 * the protocol's field-by-field writes were a fifth of rankd's CPU on a
 * pipelined GetTopN (perf). The same bytes as the generic path below. */
static gboolean
write_entry_binary (ThriftProtocol *out, const RankRow *e, GError **error)
{
  guint8 buf[3 + 4 + RANK_MEMBER_MAX_BYTES + 2 * (3 + 8) + 1];
  guint8 *p = buf;

  *p++ = T_STRING;
  p = rank_put_be (p, 1, 2);
  p = rank_put_be (p, e->member_len, 4);
  memcpy (p, e->member, e->member_len);
  p += e->member_len;
  *p++ = T_I64;
  p = rank_put_be (p, 2, 2);
  p = rank_put_be (p, (guint64) e->score, 8);
  *p++ = T_I64;
  p = rank_put_be (p, 3, 2);
  p = rank_put_be (p, (guint64) e->rank, 8);
  *p++ = T_STOP;
  return thrift_transport_write (out->transport, buf, (guint32) (p - buf),
                                 error);
}

/* binary: out is a binary protocol. */
static gboolean
write_entry (ThriftProtocol *out, gboolean binary, const RankRow *e,
             GError **error)
{
  if (binary && e->n_subscores == 0 && e->data == NULL
      && e->member_len <= RANK_MEMBER_MAX_BYTES)
    return write_entry_binary (out, e, error);
  return thrift_protocol_write_struct_begin (out, "Entry", error) >= 0
         && thrift_protocol_write_field_begin (out, "member", T_STRING, 1,
                                               error)
                >= 0
         && thrift_protocol_write_binary (out, (gpointer) e->member,
                                          (guint32) e->member_len, error)
                >= 0
         && thrift_protocol_write_field_end (out, error) >= 0
         && thrift_protocol_write_field_begin (out, "score", T_I64, 2, error)
                >= 0
         && thrift_protocol_write_i64 (out, e->score, error) >= 0
         && thrift_protocol_write_field_end (out, error) >= 0
         && thrift_protocol_write_field_begin (out, "rank", T_I64, 3, error)
                >= 0
         && thrift_protocol_write_i64 (out, e->rank, error) >= 0
         && thrift_protocol_write_field_end (out, error) >= 0
         && write_entry_extras (out, e, error)
         && thrift_protocol_write_field_stop (out, error) >= 0
         && thrift_protocol_write_struct_end (out, error) >= 0;
}

/* A reply written without the generated structs: its message, its result
 * struct and the start of its success field (field 0, of type), ... */
static gboolean
success_begin (ThriftProtocol *out, Call *call, ThriftType type, GError **error)
{
  if (call->handler->binary)
    {
      /* The same bytes in one write (the protocol's writes, one per
       * number and string, were 5% of rankd's instructions per GetRank):
       * the strict message header (version and type, name, seqid), then
       * field 0's. */
      const char *name = call_name (call);
      gsize len = strlen (name);
      guint8 buf[4 + 4 + RANK_METHOD_NAME_MAX_BYTES + 4 + 3];
      guint8 *p = buf;

      g_assert (len <= RANK_METHOD_NAME_MAX_BYTES);
      p = rank_put_be (p, 0x80010000u | T_REPLY, 4);
      p = rank_put_be (p, len, 4);
      memcpy (p, name, len);
      p += len;
      p = rank_put_be (p, (guint32) call->seqid, 4);
      *p++ = (guint8) type;
      p = rank_put_be (p, 0, 2);
      return thrift_transport_write (out->transport, buf, (guint32) (p - buf),
                                     error);
    }
  return thrift_protocol_write_message_begin (out, call_name (call), T_REPLY,
                                              call->seqid, error)
             >= 0
         && thrift_protocol_write_struct_begin (out, "Result", error) >= 0
         && thrift_protocol_write_field_begin (out, "success", type, 0, error)
                >= 0;
}

/* ... and their ends. */
static gboolean
success_end (ThriftProtocol *out, GError **error)
{
  return thrift_protocol_write_field_end (out, error) >= 0
         && thrift_protocol_write_field_stop (out, error) >= 0
         && thrift_protocol_write_struct_end (out, error) >= 0
         && end_message (out, error);
}

/* A result whose success (field 0) is a list<Entry> (GetTopN, GetAround,
 * Sample) or, when !list, one Entry (GetRank): written straight from the
 * rows, without the generated structs. */
static void
reply_rows (Call *call, const RankRow *rows, gsize n, gboolean list)
{
  ThriftProtocol *out = begin_reply (call);
  gboolean binary = call->handler->binary;
  g_autoptr (GError) error = NULL;
  gboolean ok = success_begin (out, call, list ? T_LIST : T_STRUCT, &error)
                && (!list
                    || thrift_protocol_write_list_begin (out, T_STRUCT,
                                                         (guint32) n, &error)
                           >= 0);

  for (gsize i = 0; ok && i < n; i++)
    ok = write_entry (out, binary, &rows[i], &error);
  ok = ok && (!list || thrift_protocol_write_list_end (out, &error) >= 0)
       && success_end (out, &error);
  finish_call (call, ok, error);
}

/* Store operations' answers that are a page (GetTopN, GetAround, Sample). */
static void
rows_answered (const RankRow *rows, gsize n, const GError *error, gpointer data)
{
  Call *call = data;

  if (error != NULL)
    handler_reply_error (call, error);
  else
    reply_rows (call, rows, n, TRUE);
}

/* ---- the call's context ---- */

/* Once the board's stored layout fits the options (store.h), the call
 * proper runs. */
static void
layout_checked (const GError *error, gpointer data)
{
  Call *call = data;

  if (error != NULL)
    handler_reply_error (call, error);
  else
    call->run (call);
}

/* Whether ctx's board's stored layout is known to fit its options now
 * (store.h): then the caller goes on at once. Otherwise checked gets the
 * answer with data: a refusal at once, or Redis's answer later. */
static gboolean
layout_fits (RankHandler *handler, const RankContext *ctx, gboolean writes,
             RankStoreDoneFunc checked, gpointer data)
{
  g_autoptr (GError) error = NULL;

  switch (rank_store_check_layout (handler->store, ctx, writes, &error, checked,
                                   data))
    {
    case RANK_LAYOUT_OK:
      return TRUE;
    case RANK_LAYOUT_REFUSED:
      checked (error, data);
      return FALSE;
    case RANK_LAYOUT_PENDING:
      break;
    }
  return FALSE;
}

/* The call's checks passed and its context is resolved: run is its store
 * operation. */
static void
proceed (Call *call, void (*run) (Call *call))
{
  call->run = run;
  if (layout_fits (call->handler, &call->ctx, call->writes, layout_checked,
                   call))
    run (call);
}

gint64
handler_now (Call *call)
{
  if (!call->clock_read)
    {
      call->now_ms = call->handler->clock (call->handler->clock_data);
      call->clock_read = TRUE;
    }
  return call->now_ms;
}

/* The context of call (or of an update of it) on board (already valid), at
 * the call's time, under the configuration in force. */
static void
resolve_context (Call *call, RankContext *ctx, const char *board)
{
  RankHandler *handler = call->handler;

  rank_context_init (ctx, handler->config, board, handler_now (call),
                     call->start_us, handler->default_window_ms);
  if (ctx->options->read_from_replica && handler->cache != NULL)
    ctx->fresh_after_us = rank_read_cache_written_at (handler->cache, board);
}

void
handler_resolve (Call *call, const char *board)
{
  resolve_context (call, &call->ctx, board);
}

/* The call's checks are done: error refuses it; else run is its store
 * operation. */
static void
checked (Call *call, const GError *error, void (*run) (Call *call))
{
  if (error != NULL)
    handler_reply_error (call, error);
  else
    proceed (call, run);
}

/* Validates board, resolves the context and checks periods_back. */
gboolean
handler_resolve_read (Call *call, const char *board, gint64 periods_back,
                      GError **error)
{
  if (!rank_validate_board (board, error))
    return FALSE;
  handler_resolve (call, board);
  return rank_context_read (&call->ctx, periods_back, error);
}

/* ---- Update ---- */

static void update_answered (const RankUpdateResult *r, const GError *error,
                             gpointer data);

static void
run_update (Call *call)
{
  rank_store_update (call->handler->store, &call->ctx, &call->update,
                     update_answered, call);
}

/* The fields of the request, then what the board's options say of them:
 * resolves ctx and fills update, which points into request and *data (the
 * encoded member data, the caller's to free). */
gboolean
handler_check_update (Call *call, const RankUpdateFields *request,
                      RankContext *ctx, RankUpdate *update, char **data,
                      GError **error)
{
  const RankBoardOptions *o;
  gsize data_len = 0;

  if (!rank_validate_board (request->board, error))
    return FALSE;
  resolve_context (call, ctx, request->board);
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

static void
start_update (Call *call)
{
  const RankUpdateFields *fields = call->state;
  g_autoptr (GError) error = NULL;

  call->writes = TRUE;
  handler_check_update (call, fields, &call->ctx, &call->update, &call->data,
                        &error);
  checked (call, error, run_update);
}

/* An UpdateResponse: Update's success, an UpdateResult's response. */
static gboolean
write_update_response (ThriftProtocol *out, const RankUpdateResult *r,
                       GError **error)
{
  gboolean ok
      = thrift_protocol_write_struct_begin (out, "UpdateResponse", error) >= 0
        && thrift_protocol_write_field_begin (out, "score", T_I64, 1, error)
               >= 0
        && thrift_protocol_write_i64 (out, r->score, error) >= 0
        && thrift_protocol_write_field_end (out, error) >= 0;

  if (ok && r->rank > 0)
    ok = thrift_protocol_write_field_begin (out, "rank", T_I64, 2, error) >= 0
         && thrift_protocol_write_i64 (out, r->rank, error) >= 0
         && thrift_protocol_write_field_end (out, error) >= 0;
  ok = ok
       && thrift_protocol_write_field_begin (out, "applied", T_BOOL, 3, error)
              >= 0
       && thrift_protocol_write_bool (out, r->applied, error) >= 0
       && thrift_protocol_write_field_end (out, error) >= 0;
  if (ok && r->n_subscores > 0)
    ok = write_subscores (out, r->subscores, r->n_subscores, error);
  return ok && thrift_protocol_write_field_stop (out, error) >= 0
         && thrift_protocol_write_struct_end (out, error) >= 0;
}

/* The fields of an UpdateResponse without subscores, and its stop, in the
 * binary protocol, at p (UPDATE_RESPONSE_BINARY_MAX bytes at most); returns
 * the end. Written in one write: the protocol's field-by-field writes were
 * a fifth of rankd's instructions per import entry (callgrind). The same
 * bytes as write_update_response. */
#define UPDATE_RESPONSE_BINARY_MAX (2 * (3 + 8) + (3 + 1) + 1)

static guint8 *
update_response_binary (guint8 *p, const RankUpdateResult *r)
{
  *p++ = T_I64;
  p = rank_put_be (p, 1, 2);
  p = rank_put_be (p, (guint64) r->score, 8);
  if (r->rank > 0)
    {
      *p++ = T_I64;
      p = rank_put_be (p, 2, 2);
      p = rank_put_be (p, (guint64) r->rank, 8);
    }
  *p++ = T_BOOL;
  p = rank_put_be (p, 3, 2);
  *p++ = r->applied ? 1 : 0;
  *p++ = T_STOP;
  return p;
}

/* An UpdateResult of a response without subscores in the binary protocol,
 * in one write. */
static gboolean
write_update_result_binary (ThriftProtocol *out, const RankUpdateResult *r,
                            GError **error)
{
  guint8 buf[3 + UPDATE_RESPONSE_BINARY_MAX + 1];
  guint8 *p = buf;

  *p++ = T_STRUCT; /* UpdateResult.response */
  p = rank_put_be (p, 1, 2);
  p = update_response_binary (p, r);
  *p++ = T_STOP; /* UpdateResult */
  return thrift_transport_write (out->transport, buf, (guint32) (p - buf),
                                 error);
}

/* Update's reply, written straight from the result, without the
 * generated structs (in the binary protocol, without subscores, the
 * response in one write). */
static void
reply_update (Call *call, const RankUpdateResult *r)
{
  ThriftProtocol *out = begin_reply (call);
  g_autoptr (GError) error = NULL;
  gboolean ok = success_begin (out, call, T_STRUCT, &error);

  if (ok && call->handler->binary && r->n_subscores == 0)
    {
      guint8 buf[UPDATE_RESPONSE_BINARY_MAX];

      ok = thrift_transport_write (
          out->transport, buf,
          (guint32) (update_response_binary (buf, r) - buf), &error);
    }
  else if (ok)
    ok = write_update_response (out, r, &error);
  ok = ok && success_end (out, &error);
  finish_call (call, ok, error);
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

/* ---- Remove ---- */

static void remove_answered (const RankUpdateResult *r, const GError *error,
                             gpointer data);

static void
run_remove (Call *call)
{
  rank_store_update (call->handler->store, &call->ctx, &call->update,
                     remove_answered, call);
}

static void
start_remove (Call *call)
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
  call->update = (RankUpdate){
    .member = args->member,
    .request_id = args->request_id,
    .value = 0,
    .mode = RANK_MODE_REMOVE,
    .timestamp_ms = call->ctx.now_ms,
  };
  /* Now is in the current period: nothing to refuse. */
  rank_context_write (&call->ctx, call->ctx.now_ms, NULL);
  proceed (call, run_remove);
}

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

/* ---- GetRank ---- */

static void
rank_answered (const RankRow *row, const GError *error, gpointer data)
{
  Call *call = data;
  const RankGetRankArgs *args = call->state;
  RankRow named;

  if (error != NULL)
    {
      land (call, error);
      handler_reply_error (call, error);
      return;
    }
  named = *row;
  named.member = args->member;
  named.member_len = strlen (args->member);
  named.data = NULL;
  if (call->cache_key != NULL)
    rank_read_cache_put (call->handler->cache, call->ctx.board, call->cache_key,
                         &call->ticket, &named, 1);
  land (call, NULL);
  reply_rows (call, &named, 1, FALSE);
}

/* A read of a cached board sent to Redis (the flight's leader), and the
 * calls for the same answer that wait for it instead of asking Redis too:
 * after an invalidation, the 64 reads in flight of a hot page would
 * otherwise all miss at once. Only calls that began while nothing of the
 * board had changed since the leader was sent may wait (generation and
 * epoch): a later one must see what changed. Per worker, no lock. */
typedef struct
{
  guint64 generation, epoch;
  GPtrArray *waiters; /* Call * */
} Flight;

static void
flight_free (gpointer data)
{
  Flight *f = data;

  g_ptr_array_unref (f->waiters);
  g_free (f);
}

/* The leader's answer came: those waiting for it read the cache again,
 * where it now is (or, if it could not be kept, one of them asks Redis);
 * an error is theirs too. */
static void
land (Call *call, const GError *error)
{
  Flight *f = NULL;
  char *key = NULL;

  if (call->leads)
    g_hash_table_steal_extended (call->handler->inflight, call->cache_key,
                                 (gpointer *) &key, (gpointer *) &f);
  g_free (key);
  if (f == NULL)
    return;
  for (guint i = 0; i < f->waiters->len; i++)
    {
      Call *w = f->waiters->pdata[i];

      if (error != NULL)
        handler_reply_error (w, error);
      else
        w->run (w);
    }
  flight_free (f);
}

/* A read of a board with a read cache (key: its answer's, taken): answered
 * from the cache (TRUE), waiting for the same read already in flight
 * (TRUE: it is answered then), or to be read, its answer kept if it may
 * be (FALSE). */
static gboolean
cached (Call *call, char *key, gboolean list)
{
  RankCacheEntry *e
      = rank_read_cache_get (call->handler->cache, call->ctx.board,
                             call->ctx.options, key, &call->ticket);
  const RankRow *rows;
  gsize n;

  if (e == NULL)
    {
      GHashTable *inflight = call->handler->inflight;
      Flight *f
          = call->ticket.keep ? g_hash_table_lookup (inflight, key) : NULL;

      if (f != NULL && f->generation == call->ticket.generation
          && f->epoch == call->ticket.epoch)
        {
          g_ptr_array_add (f->waiters, call);
          g_free (key);
          return TRUE;
        }
      if (call->ticket.keep && f == NULL)
        {
          f = g_new0 (Flight, 1);
          f->generation = call->ticket.generation;
          f->epoch = call->ticket.epoch;
          f->waiters = g_ptr_array_new ();
          g_hash_table_insert (inflight, g_strdup (key), f);
          call->leads = TRUE;
        }
      call->cache_key = key;
      return FALSE;
    }
  g_free (key);
  rows = rank_cache_entry_rows (e, &n);
  reply_rows (call, rows, n, list);
  rank_cache_entry_unref (e);
  return TRUE;
}

static gboolean
cache_wanted (Call *call)
{
  return call->handler->cache != NULL
         && rank_read_cache_wanted (call->ctx.options);
}

static void
run_get_rank (Call *call)
{
  const RankGetRankArgs *args = call->state;

  if (cache_wanted (call)
      && cached (call,
                 rank_read_cache_key_rank (
                     call->ctx.board, call->ctx.period.label, args->member),
                 FALSE))
    return;
  rank_store_get_rank (call->handler->store, &call->ctx, args->member, 0,
                       rank_answered, call);
}

static void
start_get_rank (Call *call)
{
  const RankGetRankArgs *args = call->state;
  g_autoptr (GError) error = NULL;

  if (rank_validate_board (args->board, &error)
      && rank_validate_member (args->member, &error))
    handler_resolve_read (call, args->board, args->periods_back, &error);
  checked (call, error, run_get_rank);
}

/* ---- GetTopN ---- */

/* GetTopN's page, kept when it may be. */
static void
top_answered (const RankRow *rows, gsize n, const GError *error, gpointer data)
{
  Call *call = data;

  if (error == NULL)
    rank_read_cache_put (call->handler->cache, call->ctx.board, call->cache_key,
                         &call->ticket, rows, n);
  land (call, error);
  rows_answered (rows, n, error, data);
}

static void
run_get_top_n (Call *call)
{
  const RankGetTopNArgs *args = call->state;
  RankTopQuery query = { args->offset, args->n, args->with_data };

  if (!cache_wanted (call))
    {
      rank_store_get_top (call->handler->store, &call->ctx, &query,
                          rows_answered, call);
      return;
    }
  if (cached (call,
              rank_read_cache_key_top (call->ctx.board, call->ctx.period.label,
                                       args->offset, args->n, args->with_data),
              TRUE))
    return;
  rank_store_get_top (call->handler->store, &call->ctx, &query, top_answered,
                      call);
}

static void
start_get_top_n (Call *call)
{
  const RankGetTopNArgs *args = call->state;
  g_autoptr (GError) error = NULL;

  if (!rank_validate_board (args->board, &error))
    ;
  else if (args->n < 1 || args->n > RANK_TOP_N_MAX)
    g_set_error (&error, RANK_ERROR, RANK_ERROR_INVALID,
                 "n: must be 1-%d, got %d", RANK_TOP_N_MAX, args->n);
  else if (args->offset < 0)
    g_set_error (&error, RANK_ERROR, RANK_ERROR_INVALID,
                 "offset: must be >= 0, got %d", args->offset);
  else
    {
      handler_resolve (call, args->board);
      if (rank_policy_depth (args->board, call->ctx.options, "offset+n",
                             args->offset, args->n, &error))
        rank_context_read (&call->ctx, args->periods_back, &error);
    }
  checked (call, error, run_get_top_n);
}

/* ---- GetAround ---- */

static void
run_get_around (Call *call)
{
  rankGetAroundRequest *args
      = RANK_RANKING_GET_AROUND_ARGS (call->args)->request;
  RankAroundQuery query = { args->member, args->radius, args->with_data };

  rank_store_get_around (call->handler->store, &call->ctx, &query,
                         rows_answered, call);
}

static void
start_get_around (Call *call)
{
  rankGetAroundRequest *args
      = RANK_RANKING_GET_AROUND_ARGS (call->args)->request;
  g_autoptr (GError) error = NULL;

  if (!rank_validate_board (args->board, &error)
      || !rank_validate_member (args->member, &error)
      || !handler_resolve_read (call, args->board, args->periods_back, &error))
    ;
  else if (args->radius < 0 || args->radius > RANK_AROUND_RADIUS_MAX)
    g_set_error (&error, RANK_ERROR, RANK_ERROR_INVALID,
                 "radius: must be 0-%d, got %d", RANK_AROUND_RADIUS_MAX,
                 args->radius);
  checked (call, error, run_get_around);
}

/* ---- GetRanks ---- */

static void
ranks_answered (const RankOfMember *results, guint n, const GError *error,
                gpointer data)
{
  Call *call = data;
  rankGetRanksRequest *args = RANK_RANKING_GET_RANKS_ARGS (call->args)->request;
  rankRankingGetRanksResult *result;

  if (error != NULL)
    {
      handler_reply_error (call, error);
      return;
    }
  result = g_object_new (RANK_TYPE_RANKING_GET_RANKS_RESULT, NULL);
  for (guint i = 0; i < n; i++)
    {
      rankRankOf *of = g_object_new (RANK_TYPE_RANK_OF, NULL);

      g_free (of->member);
      of->member = g_strdup (g_ptr_array_index (args->members, i));
      of->found = results[i].found;
      of->score = results[i].score;
      of->__isset_score = results[i].found;
      of->rank = results[i].rank;
      of->__isset_rank = results[i].found;
      g_ptr_array_add (result->success, of);
    }
  result->__isset_success = TRUE;
  reply (call, THRIFT_STRUCT (result), 0, NULL);
  g_object_unref (result);
}

static void
run_get_ranks (Call *call)
{
  rankGetRanksRequest *args = RANK_RANKING_GET_RANKS_ARGS (call->args)->request;

  rank_store_get_ranks (call->handler->store, &call->ctx,
                        (const char *const *) args->members->pdata,
                        args->members->len, ranks_answered, call);
}

static void
start_get_ranks (Call *call)
{
  rankGetRanksRequest *args = RANK_RANKING_GET_RANKS_ARGS (call->args)->request;
  g_autoptr (GError) error = NULL;
  guint n = args->members->len;

  if (handler_resolve_read (call, args->board, args->periods_back, &error))
    {
      if (n < 1 || n > RANK_RANKS_MAX)
        g_set_error (&error, RANK_ERROR, RANK_ERROR_INVALID,
                     "members: must list 1-%d members, got %u", RANK_RANKS_MAX,
                     n);
      for (guint i = 0; error == NULL && i < n; i++)
        if (!rank_validate_member (g_ptr_array_index (args->members, i),
                                   &error))
          g_prefix_error (&error, "members[%u]: ", i);
    }
  checked (call, error, run_get_ranks);
}

/* ---- Count, CountBetween ---- */

static void
set_count (GObject *result, gpointer data)
{
  /* The property setter marks success as set. */
  g_object_set (result, "success", *(const gint64 *) data, NULL);
}

static void
count_answered (gint64 count, const GError *error, gpointer data)
{
  Call *call = data;

  if (error != NULL)
    handler_reply_error (call, error);
  else
    handler_reply_result (call, set_count, &count);
}

static void
run_count (Call *call)
{
  RankCountQuery query = { FALSE, 0, 0 };

  if (call->method == METHOD_COUNT_BETWEEN)
    {
      rankCountBetweenRequest *args
          = RANK_RANKING_COUNT_BETWEEN_ARGS (call->args)->request;

      query = (RankCountQuery){ TRUE, args->min_score, args->max_score };
    }
  rank_store_count (call->handler->store, &call->ctx, &query, count_answered,
                    call);
}

static void
start_count (Call *call)
{
  g_autoptr (GError) error = NULL;
  gboolean range = call->method == METHOD_COUNT_BETWEEN;
  const char *board;
  gint32 back;
  gint64 min = 0, max = 0;

  if (range)
    {
      rankCountBetweenRequest *args
          = RANK_RANKING_COUNT_BETWEEN_ARGS (call->args)->request;

      board = args->board, back = args->periods_back;
      min = args->min_score, max = args->max_score;
    }
  else
    {
      rankCountRequest *args = RANK_RANKING_COUNT_ARGS (call->args)->request;

      board = args->board, back = args->periods_back;
    }
  if (!handler_resolve_read (call, board, back, &error)
      || (range
          && (!rank_validate_score ("min_score", min, &error)
              || !rank_validate_score ("max_score", max, &error))))
    ;
  else if (range && min > max)
    g_set_error (&error, RANK_ERROR, RANK_ERROR_INVALID,
                 "min_score: %" G_GINT64_FORMAT
                 " is above max_score %" G_GINT64_FORMAT,
                 min, max);
  else if (range)
    rank_policy_countable (board, call->ctx.options, "CountBetween", &error);
  checked (call, error, run_count);
}

/* ---- GetPercentile, GetScoreAtPercentile ---- */

static void
set_double (GObject *result, gpointer data)
{
  /* The property setter marks success as set. */
  g_object_set (result, "success", *(const double *) data, NULL);
}

static void
percentile_answered (double value, const GError *error, gpointer data)
{
  Call *call = data;

  if (error != NULL)
    handler_reply_error (call, error);
  else
    handler_reply_result (call, set_double, &value);
}

static void
run_get_percentile (Call *call)
{
  rankGetPercentileRequest *args
      = RANK_RANKING_GET_PERCENTILE_ARGS (call->args)->request;

  rank_store_get_percentile (call->handler->store, &call->ctx, args->member,
                             percentile_answered, call);
}

static void
start_get_percentile (Call *call)
{
  rankGetPercentileRequest *args
      = RANK_RANKING_GET_PERCENTILE_ARGS (call->args)->request;
  g_autoptr (GError) error = NULL;

  if (rank_validate_board (args->board, &error)
      && rank_validate_member (args->member, &error)
      && handler_resolve_read (call, args->board, args->periods_back, &error))
    rank_policy_countable (args->board, call->ctx.options, "GetPercentile",
                           &error);
  checked (call, error, run_get_percentile);
}

static void
score_at_answered (gint64 score, const GError *error, gpointer data)
{
  Call *call = data;

  if (error != NULL)
    handler_reply_error (call, error);
  else
    handler_reply_result (call, set_count, &score);
}

static void
run_get_score_at_percentile (Call *call)
{
  rankGetScoreAtPercentileRequest *args
      = RANK_RANKING_GET_SCORE_AT_PERCENTILE_ARGS (call->args)->request;

  rank_store_score_at_percentile (call->handler->store, &call->ctx, args->pct,
                                  score_at_answered, call);
}

static void
start_get_score_at_percentile (Call *call)
{
  rankGetScoreAtPercentileRequest *args
      = RANK_RANKING_GET_SCORE_AT_PERCENTILE_ARGS (call->args)->request;
  g_autoptr (GError) error = NULL;

  if (!handler_resolve_read (call, args->board, args->periods_back, &error))
    ;
  else if (!(args->pct >= 0 && args->pct <= 100))
    g_set_error (&error, RANK_ERROR, RANK_ERROR_INVALID,
                 "pct: must be 0-100, got %g", args->pct);
  checked (call, error, run_get_score_at_percentile);
}

/* ---- Sample ---- */

static void
run_sample (Call *call)
{
  rankSampleRequest *args = RANK_RANKING_SAMPLE_ARGS (call->args)->request;
  RankSampleQuery query = { args->min_score, args->max_score, args->count };

  rank_store_sample (call->handler->store, &call->ctx, &query, rows_answered,
                     call);
}

static void
start_sample (Call *call)
{
  rankSampleRequest *args = RANK_RANKING_SAMPLE_ARGS (call->args)->request;
  g_autoptr (GError) error = NULL;

  if (!handler_resolve_read (call, args->board, args->periods_back, &error)
      || !rank_validate_score ("min_score", args->min_score, &error)
      || !rank_validate_score ("max_score", args->max_score, &error)
      || !rank_policy_countable (args->board, call->ctx.options, "Sample",
                                 &error))
    ;
  else if (args->min_score > args->max_score)
    g_set_error (&error, RANK_ERROR, RANK_ERROR_INVALID,
                 "min_score: %" G_GINT64_FORMAT
                 " is above max_score %" G_GINT64_FORMAT,
                 args->min_score, args->max_score);
  else if (args->count < 1 || args->count > RANK_SAMPLE_COUNT_MAX)
    g_set_error (&error, RANK_ERROR, RANK_ERROR_INVALID,
                 "count: must be 1-%d, got %d", RANK_SAMPLE_COUNT_MAX,
                 args->count);
  checked (call, error, run_sample);
}

/* ---- SetMemberData, GetMemberData ---- */

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

  rank_store_set_data (call->handler->store, &call->ctx, args->member,
                       call->data, call->data_len, set_data_answered, call);
}

static void
start_set_member_data (Call *call)
{
  rankSetMemberDataRequest *args
      = RANK_RANKING_SET_MEMBER_DATA_ARGS (call->args)->request;
  g_autoptr (GError) error = NULL;

  call->writes = TRUE;
  if (!rank_validate_board (args->board, &error)
      || !rank_validate_member (args->member, &error)
      || (call->data = rank_member_data_encode (args->data, "data",
                                                &call->data_len, &error))
             == NULL)
    {
      handler_reply_error (call, error);
      return;
    }
  handler_resolve (call, args->board);
  /* The member's data on the current period. */
  rank_context_read (&call->ctx, 0, NULL);
  proceed (call, run_set_member_data);
}

static void
set_data_map (GObject *object, gpointer data)
{
  rankRankingGetMemberDataResult *result
      = RANK_RANKING_GET_MEMBER_DATA_RESULT (object);
  const RankDataPair *pairs = data;

  for (guint i = 0; pairs[i].key != NULL; i++)
    g_hash_table_insert (result->success,
                         g_strndup (pairs[i].key, pairs[i].key_len),
                         g_strndup (pairs[i].value, pairs[i].value_len));
  result->__isset_success = TRUE;
}

static void
get_data_answered (const char *data, gsize len, const GError *error,
                   gpointer user_data)
{
  Call *call = user_data;
  g_autoptr (GError) bad = NULL;
  RankDataPair pairs[RANK_DATA_KEYS_MAX + 1] = { 0 };
  guint n = 0;

  if (error == NULL && !rank_member_data_parse (data, len, pairs, &n))
    error = bad = g_error_new (RANK_ERROR, RANK_ERROR_INTERNAL,
                               "stored member data is malformed");
  if (error != NULL)
    handler_reply_error (call, error);
  else
    {
      pairs[n].key = NULL;
      handler_reply_result (call, set_data_map, pairs);
    }
}

static void
run_get_member_data (Call *call)
{
  rankGetMemberDataRequest *args
      = RANK_RANKING_GET_MEMBER_DATA_ARGS (call->args)->request;

  rank_store_get_data (call->handler->store, &call->ctx, args->member,
                       get_data_answered, call);
}

static void
start_get_member_data (Call *call)
{
  rankGetMemberDataRequest *args
      = RANK_RANKING_GET_MEMBER_DATA_ARGS (call->args)->request;
  g_autoptr (GError) error = NULL;

  if (rank_validate_board (args->board, &error)
      && rank_validate_member (args->member, &error))
    handler_resolve_read (call, args->board, args->periods_back, &error);
  checked (call, error, run_get_member_data);
}

/* ---- UpdateBatch ---- */

/* Each update of the batch goes its own way (its board's context, layout
 * check and store operation), as an Update would; updates of one board
 * queued together leave in one script call (backend.c). The call answers
 * once every item has, written from the items' answers (reply_batch)
 * without the generated structs: four GObjects an item were a good part
 * of rankd's CPU on an import (perf). */
typedef enum
{
  ITEM_PENDING,
  ITEM_ANSWERED,    /* answer */
  ITEM_INVALID,     /* message */
  ITEM_UNAVAILABLE, /* message */
} ItemState;

typedef struct
{
  Batch *batch;
  guint index;
  RankContext ctx;
  RankUpdate update;
  char *data;
  ItemState state;
  RankUpdateResult answer;
  char *message;
} BatchItem;

struct _Batch
{
  Call *call;
  BatchItem *items;
  guint n;
  guint pending; /* items not answered, plus one while they are started */
  gboolean without_rank; /* with_rank=false */
  /* A batch recorded as a whole (request_id set): its group argument. */
  guint8 group[RANK_UPDATE_GROUP_BYTES];
};

static void
batch_free (Batch *batch)
{
  if (batch == NULL)
    return;
  for (guint i = 0; i < batch->n; i++)
    {
      rank_context_clear (&batch->items[i].ctx);
      g_free (batch->items[i].data);
      g_free (batch->items[i].message);
    }
  g_free (batch->items);
  g_free (batch);
}

/* A write through this rankd on ctx's board changed it (or may have): the
 * answers cached for it go, and reads from replicas must see it, before
 * the client hears back, so that its next read through this rankd sees
 * the write. */
static void
board_written (RankReadCache *cache, const RankContext *ctx)
{
  if (ctx->options == NULL)
    return;
  if (rank_read_cache_wanted (ctx->options))
    rank_read_cache_changed (cache, ctx->board);
  if (ctx->options->read_from_replica)
    rank_read_cache_wrote (cache, ctx->board);
}

static void
note_writes (Call *call)
{
  RankReadCache *cache = call->handler->cache;

  if (cache == NULL)
    return;
  if (call->batch != NULL)
    for (guint i = 0; i < call->batch->n; i++)
      {
        const BatchItem *item = &call->batch->items[i];

        /* Refused (ITEM_INVALID), never started (ITEM_PENDING: the call
         * was refused) or a replay: nothing changed. ITEM_UNAVAILABLE may
         * have landed. */
        if ((item->state == ITEM_ANSWERED && item->answer.applied)
            || item->state == ITEM_UNAVAILABLE)
          board_written (cache, &item->ctx);
      }
  else if (call->changed)
    board_written (cache, &call->ctx);
}

/* An UpdateResult: the item's response, or its exception (1: message).
 * binary: out is a binary protocol. */
static gboolean
write_update_result (ThriftProtocol *out, gboolean binary,
                     const BatchItem *item, GError **error)
{
  gboolean answered = item->state == ITEM_ANSWERED;
  gint16 id = answered ? 1 : item->state == ITEM_INVALID ? 2 : 3;
  gboolean ok;

  g_assert (item->state != ITEM_PENDING);
  if (binary && answered && item->answer.n_subscores == 0)
    return write_update_result_binary (out, &item->answer, error);
  ok = thrift_protocol_write_struct_begin (out, "UpdateResult", error) >= 0
       && thrift_protocol_write_field_begin (out, "", T_STRUCT, id, error) >= 0;
  if (ok && answered)
    ok = write_update_response (out, &item->answer, error);
  else if (ok)
    ok = thrift_protocol_write_struct_begin (out, "", error) >= 0
         && thrift_protocol_write_field_begin (out, "message", T_STRING, 1,
                                               error)
                >= 0
         && thrift_protocol_write_string (out, item->message, error) >= 0
         && thrift_protocol_write_field_end (out, error) >= 0
         && thrift_protocol_write_field_stop (out, error) >= 0
         && thrift_protocol_write_struct_end (out, error) >= 0;
  return ok && thrift_protocol_write_field_end (out, error) >= 0
         && thrift_protocol_write_field_stop (out, error) >= 0
         && thrift_protocol_write_struct_end (out, error) >= 0;
}

/* UpdateBatch's reply: success, an UpdateBatchResponse of the items'
 * results in order. */
static void
reply_batch (Call *call)
{
  Batch *batch = call->batch;
  ThriftProtocol *out = begin_reply (call);
  gboolean binary = call->handler->binary;
  g_autoptr (GError) error = NULL;
  gboolean ok
      = success_begin (out, call, T_STRUCT, &error)
        && thrift_protocol_write_struct_begin (out, "UpdateBatchResponse",
                                               &error)
               >= 0
        && thrift_protocol_write_field_begin (out, "results", T_LIST, 1, &error)
               >= 0
        && thrift_protocol_write_list_begin (out, T_STRUCT, batch->n, &error)
               >= 0;

  for (guint i = 0; ok && i < batch->n; i++)
    ok = write_update_result (out, binary, &batch->items[i], &error);
  ok = ok && thrift_protocol_write_list_end (out, &error) >= 0
       && thrift_protocol_write_field_end (out, &error) >= 0
       && thrift_protocol_write_field_stop (out, &error) >= 0
       && thrift_protocol_write_struct_end (out, &error) >= 0
       && success_end (out, &error);
  finish_call (call, ok, error);
}

static void
batch_item_done (Batch *batch)
{
  if (--batch->pending == 0)
    reply_batch (batch->call);
}

/* The item's refusal or failure, as the exception of its result; an error
 * that is neither (internal) answers as Unavailable, naming it. */
static void
batch_item_failed (BatchItem *item, const GError *error)
{
  item->state = error->domain == RANK_ERROR && error->code == RANK_ERROR_INVALID
                    ? ITEM_INVALID
                    : ITEM_UNAVAILABLE;
  item->message
      = g_strdup_printf ("requests[%u]: %s", item->index, error->message);
  batch_item_done (item->batch);
}

static void
batch_item_answered (const RankUpdateResult *r, const GError *error,
                     gpointer data)
{
  BatchItem *item = data;

  if (error != NULL)
    {
      batch_item_failed (item, error);
      return;
    }
  item->state = ITEM_ANSWERED;
  item->answer = *r;
  batch_item_done (item->batch);
}

static void
batch_item_run (BatchItem *item)
{
  rank_store_update (item->batch->call->handler->store, &item->ctx,
                     &item->update, batch_item_answered, item);
}

static void
batch_item_layout_checked (const GError *error, gpointer data)
{
  BatchItem *item = data;

  if (error != NULL)
    batch_item_failed (item, error);
  else
    batch_item_run (item);
}

static void
batch_item_start (BatchItem *item, const RankUpdateFields *request)
{
  RankHandler *handler = item->batch->call->handler;
  g_autoptr (GError) error = NULL;

  if (!handler_check_update (item->batch->call, request, &item->ctx,
                             &item->update, &item->data, &error))
    {
      batch_item_failed (item, error);
      return;
    }
  /* Either the request's with_rank=false or the batch's leaves it out. */
  item->update.without_rank |= item->batch->without_rank;
  if (layout_fits (handler, &item->ctx, TRUE, batch_item_layout_checked, item))
    batch_item_run (item);
}

/* ---- UpdateBatch with a request_id: one record for the batch ---- */

/* Tells apart the batches recorded as a whole that one backend has open at
 * once (requestid.h): their updates must not share a script call. */
static gint group_tokens;

static void
group_layout_checked (const GError *error, gpointer data)
{
  Batch *batch = data;

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
check_group (Batch *batch, guint checked, const RankUpdateBatchArgs *args,
             GError **error)
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
refuse_group (Batch *batch, guint refused, const GError *refusal)
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
  Batch *batch = call->batch;
  RankHandler *handler = call->handler;
  const RankUpdate *updates[RANK_GROUP_MAX_ITEMS];
  gint64 buckets[RANK_REQUEST_BUCKET_ARGS];
  g_autoptr (GError) error = NULL, rules = NULL;
  guint refused = 0;

  while (refused < batch->n)
    {
      BatchItem *item = &batch->items[refused];

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
      BatchItem *item = &batch->items[i];

      /* One clock (handler_now), one head: the items share a script
       * call. */
      item->update.without_rank = TRUE;
      item->update.group = batch->group;
      updates[i] = &item->update;
    }
  rank_request_group (args->request_id, updates, batch->n, buckets[0],
                      (guint64) (guint) g_atomic_int_add (&group_tokens, 1),
                      batch->group);
  if (layout_fits (handler, &batch->items[0].ctx, TRUE, group_layout_checked,
                   batch))
    group_layout_checked (NULL, batch);
}

static void
start_update_batch (Call *call)
{
  const RankUpdateBatchArgs *args = call->state;
  GArray *requests = args->requests;
  Batch *batch;

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
  batch = call->batch = g_new0 (Batch, 1);
  batch->call = call;
  batch->without_rank = args->has_with_rank && !args->with_rank;
  batch->n = requests->len;
  batch->items = g_new0 (BatchItem, batch->n);
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

/* ---- dispatch ---- */

/* The call's arguments, and how large its reply can be. The busiest
 * methods' are read into plain structs (call_args.h: the generated ones
 * were half of rankd's work per import entry and a fifth per GetRank), the
 * call's state; every other method's into its generated struct. */
static gboolean
read_args (Call *call, ThriftProtocol *in, gsize *reply_bound, GError **error)
{
  const MethodSpec *m = &methods[call->method];

  if (m->read != NULL)
    {
      call->state = m->read (in, reply_bound, error);
      if (call->state == NULL)
        return FALSE;
      call->state_free = m->free;
      return TRUE;
    }
  call->args = g_object_new (m->args_type (), NULL);
  if (thrift_struct_read (call->args, in, error) < 0)
    return FALSE;
  *reply_bound = m->reply_bound (call->args);
  return TRUE;
}

RankDispatch
rank_handler_dispatch (RankHandler *handler, gpointer request,
                       GByteArray *reply_buf, const char *method, gint32 seqid,
                       ThriftProtocol *in, gsize *reply_bound, GError **error)
{
  Call *call = g_new0 (Call, 1);

  call->handler = handler;
  call->request = request;
  call->reply = reply_buf;
  call->seqid = seqid;
  call->method = METHOD_UNKNOWN;
  for (int m = 0; m < METHOD_UNKNOWN; m++)
    if (strcmp (method, methods[m].name) == 0)
      call->method = (Method) m;
  *reply_bound = SMALL_REPLY_BYTES;

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
      reply (call, NULL, THRIFT_APPLICATION_EXCEPTION_ERROR_UNKNOWN_METHOD,
             message);
      return RANK_DISPATCH_PENDING;
    }

  if (!read_args (call, in, reply_bound, error)
      || thrift_protocol_read_message_end (in, error) < 0)
    {
      g_clear_object (&call->args);
      if (call->state_free != NULL)
        call->state_free (call->state);
      g_free (call);
      return RANK_DISPATCH_FAILED;
    }
  thrift_transport_read_end (in->transport, NULL);
  call->start_us = g_get_monotonic_time ();
  methods[call->method].start (call);
  return RANK_DISPATCH_PENDING;
}

/* ---- GetServerInfo ---- */

/* When the process started (monotonic), for uptime_seconds. */
static gint64 started_us;

static void
set_server_info (GObject *object, gpointer data)
{
  rankRankingGetServerInfoResult *result
      = RANK_RANKING_GET_SERVER_INFO_RESULT (object);
  RankHandler *handler = data;
  rankServerInfo *info = result->success;
  g_auto (GStrv) boards = rank_config_board_names (handler->config);

  g_free (info->version);
  info->version = g_strdup (RANKD_VERSION);
  g_free (info->idl_version);
  info->idl_version = g_strdup (RANK_API_IDL_VERSION);
  info->configured_boards = g_strv_length (boards);
  info->uptime_seconds
      = (g_get_monotonic_time () - started_us) / G_USEC_PER_SEC;
  result->__isset_success = TRUE;
}

static void
start_get_server_info (Call *call)
{
  handler_reply_result (call, set_server_info, call->handler);
}

static gint64
real_clock (gpointer data)
{
  return g_get_real_time () / 1000;
}

RankHandler *
rank_handler_new (RankStore *store, RankConfig *config,
                  gint64 default_window_ms, RankProtocolKind protocol,
                  gboolean framed, RankAnsweredFunc answered)
{
  RankHandler *handler = g_new0 (RankHandler, 1);
  static gsize once = 0;

  if (g_once_init_enter (&once))
    {
      started_us = g_get_monotonic_time ();
      g_once_init_leave (&once, 1);
    }

  handler->store = store;
  handler->config = rank_config_ref (config);
  handler->default_window_ms = default_window_ms;
  handler->clock = real_clock;
  handler->answered = answered;
  handler->writer = rank_reply_writer_new (framed);
  handler->out
      = rank_protocol_new (protocol, THRIFT_TRANSPORT (handler->writer));
  handler->binary = THRIFT_IS_BINARY_PROTOCOL (handler->out);
  handler->metrics = rank_metrics_calls_new (method_names (), METHOD_UNKNOWN);
  handler->inflight
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, flight_free);
  return handler;
}

void
rank_handler_set_cache (RankHandler *handler, RankReadCache *cache)
{
  handler->cache = cache;
}

void
rank_handler_set_clock (RankHandler *handler, RankClockFunc clock,
                        gpointer data)
{
  handler->clock = clock != NULL ? clock : real_clock;
  handler->clock_data = data;
}

void
rank_handler_set_config (RankHandler *handler, RankConfig *config)
{
  RankConfig *old = handler->config;

  handler->config = rank_config_ref (config);
  rank_config_unref (old);
  rank_store_forget_layouts (handler->store);
}

gint64
rank_handler_now (RankHandler *handler)
{
  return handler->clock (handler->clock_data);
}

gint64
rank_handler_default_window_ms (RankHandler *handler)
{
  return handler->default_window_ms;
}

RankConfig *
rank_handler_config (RankHandler *handler)
{
  return handler->config;
}

void
rank_handler_free (RankHandler *handler)
{
  if (handler == NULL)
    return;
  rank_metrics_calls_free (handler->metrics);
  g_hash_table_unref (handler->inflight);
  g_object_unref (handler->out);
  g_object_unref (handler->writer);
  rank_config_unref (handler->config);
  g_free (handler);
}
