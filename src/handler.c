/* handler.c -- Ranking methods (see handler.h).
 *
 * A call in flight is a Call: the connection, the method, the sequence id
 * and the decoded arguments. Every outcome (result, declared exception,
 * TApplicationException for an internal error or an unknown method) is
 * written by reply() and ends with sink->finished().
 */
#include "handler.h"

#include <math.h>
#include <string.h>

#include <thrift/c_glib/protocol/thrift_binary_protocol.h>
#include <thrift/c_glib/thrift_application_exception.h>

#include "connbuf.h"
#include "constants.h"
#include "error.h"
#include "memberdata.h"
#include "metrics.h"
#include "rank_ranking_types.h"
#include "validate.h"

struct _RankHandler
{
  RankStore *store;
  RankAnsweredFunc answered;
  /* Replies are encoded one at a time, each into its call's own buffer. */
  RankReplyWriter *writer;
  ThriftProtocol *out;
  RankMetricsCalls *metrics; /* this worker's call counters */
};

typedef enum
{
  METHOD_UPDATE,
  METHOD_GET_RANK,
  METHOD_GET_TOP_N,
  METHOD_GET_AROUND,
  METHOD_GET_RANKS,
  METHOD_REMOVE,
  METHOD_COUNT,
  METHOD_COUNT_BETWEEN,
  METHOD_GET_PERCENTILE,
  METHOD_GET_SCORE_AT_PERCENTILE,
  METHOD_SAMPLE,
  METHOD_SET_MEMBER_DATA,
  METHOD_GET_MEMBER_DATA,
  METHOD_UNKNOWN,
} Method;

typedef struct
{
  RankHandler *handler;
  gpointer request;  /* the server's, for answered() */
  GByteArray *reply; /* the server's buffer this call's reply goes to */
  Method method;
  gint32 seqid;
  ThriftStruct *args;
  char *unknown_name; /* METHOD_UNKNOWN only */
  gint64 step[3];     /* what a call of several steps learned so far */
  gint64 start_us;    /* monotonic: the request decoded */
  RankOutcome outcome;
} Call;

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
bound_top (const ThriftStruct *args)
{
  const rankRankingGetTopNArgs *a = (const rankRankingGetTopNArgs *) args;

  return entries_bound (a->n, a->with_data);
}

static gsize
bound_around (const ThriftStruct *args)
{
  const rankRankingGetAroundArgs *a = (const rankRankingGetAroundArgs *) args;

  return entries_bound (
      2 * (gint64) CLAMP (a->radius, 0, RANK_AROUND_RADIUS_MAX) + 1,
      a->with_data);
}

static gsize
bound_ranks (const ThriftStruct *args)
{
  const rankRankingGetRanksArgs *a = (const rankRankingGetRanksArgs *) args;

  /* A RankOf is an Entry without subscores or data, and found. */
  return entries_bound (MIN (a->members->len, RANK_RANKS_MAX), FALSE);
}

static gsize
bound_sample (const ThriftStruct *args)
{
  const rankRankingSampleArgs *a = (const rankRankingSampleArgs *) args;

  return entries_bound (CLAMP (a->count, 1, RANK_SAMPLE_COUNT_MAX), FALSE);
}

static gsize
bound_data (const ThriftStruct *args)
{
  return MESSAGE_BYTES + ENTRY_DATA_BYTES;
}

/* The board a call names. */
static const char *
board_of_update (const ThriftStruct *args)
{
  return ((const rankRankingUpdateArgs *) args)->request->board;
}

#define BOARD_OF(fn, type)                                                     \
  static const char *fn (const ThriftStruct *args)                             \
  {                                                                            \
    return ((const type *) args)->board;                                       \
  }
BOARD_OF (board_of_get_rank, rankRankingGetRankArgs)
BOARD_OF (board_of_get_top_n, rankRankingGetTopNArgs)
BOARD_OF (board_of_get_around, rankRankingGetAroundArgs)
BOARD_OF (board_of_get_ranks, rankRankingGetRanksArgs)
BOARD_OF (board_of_remove, rankRankingRemoveArgs)
BOARD_OF (board_of_count, rankRankingCountArgs)
BOARD_OF (board_of_count_between, rankRankingCountBetweenArgs)
BOARD_OF (board_of_get_percentile, rankRankingGetPercentileArgs)
BOARD_OF (board_of_get_score_at_percentile, rankRankingGetScoreAtPercentileArgs)
BOARD_OF (board_of_sample, rankRankingSampleArgs)
BOARD_OF (board_of_set_member_data, rankRankingSetMemberDataArgs)
BOARD_OF (board_of_get_member_data, rankRankingGetMemberDataArgs)

/* One row per method of the IDL: its name, its generated argument and
 * result structs, the board it names and whether it may change it, what
 * starts it, and how large its reply can be. */
typedef struct
{
  const char *name;
  GType (*args_type) (void);
  GType (*result_type) (void);
  const char *(*board) (const ThriftStruct *args);
  gboolean writes;
  void (*start) (Call *call);
  gsize (*reply_bound) (const ThriftStruct *args);
} MethodSpec;

static const MethodSpec methods[] = {
  [METHOD_UPDATE] = { "Update", rank_ranking_update_args_get_type,
                      rank_ranking_update_result_get_type, board_of_update,
                      TRUE, start_update, bound_small },
  [METHOD_GET_RANK] = { "GetRank", rank_ranking_get_rank_args_get_type,
                        rank_ranking_get_rank_result_get_type,
                        board_of_get_rank, FALSE, start_get_rank, bound_small },
  [METHOD_GET_TOP_N]
  = { "GetTopN", rank_ranking_get_top_n_args_get_type,
      rank_ranking_get_top_n_result_get_type, board_of_get_top_n, FALSE,
      start_get_top_n, bound_top },
  [METHOD_GET_AROUND]
  = { "GetAround", rank_ranking_get_around_args_get_type,
      rank_ranking_get_around_result_get_type, board_of_get_around, FALSE,
      start_get_around, bound_around },
  [METHOD_GET_RANKS]
  = { "GetRanks", rank_ranking_get_ranks_args_get_type,
      rank_ranking_get_ranks_result_get_type, board_of_get_ranks, FALSE,
      start_get_ranks, bound_ranks },
  [METHOD_REMOVE] = { "Remove", rank_ranking_remove_args_get_type,
                      rank_ranking_remove_result_get_type, board_of_remove,
                      TRUE, start_remove, bound_small },
  [METHOD_COUNT] = { "Count", rank_ranking_count_args_get_type,
                     rank_ranking_count_result_get_type, board_of_count, FALSE,
                     start_count, bound_small },
  [METHOD_COUNT_BETWEEN]
  = { "CountBetween", rank_ranking_count_between_args_get_type,
      rank_ranking_count_between_result_get_type, board_of_count_between, FALSE,
      start_count, bound_small },
  [METHOD_GET_PERCENTILE]
  = { "GetPercentile", rank_ranking_get_percentile_args_get_type,
      rank_ranking_get_percentile_result_get_type, board_of_get_percentile,
      FALSE, start_get_percentile, bound_small },
  [METHOD_GET_SCORE_AT_PERCENTILE]
  = { "GetScoreAtPercentile",
      rank_ranking_get_score_at_percentile_args_get_type,
      rank_ranking_get_score_at_percentile_result_get_type,
      board_of_get_score_at_percentile, FALSE, start_get_score_at_percentile,
      bound_small },
  [METHOD_SAMPLE] = { "Sample", rank_ranking_sample_args_get_type,
                      rank_ranking_sample_result_get_type, board_of_sample,
                      FALSE, start_sample, bound_sample },
  [METHOD_SET_MEMBER_DATA]
  = { "SetMemberData", rank_ranking_set_member_data_args_get_type,
      rank_ranking_set_member_data_result_get_type, board_of_set_member_data,
      TRUE, start_set_member_data, bound_small },
  [METHOD_GET_MEMBER_DATA]
  = { "GetMemberData", rank_ranking_get_member_data_args_get_type,
      rank_ranking_get_member_data_result_get_type, board_of_get_member_data,
      FALSE, start_get_member_data, bound_data },
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

static GType
method_result_type (Method m)
{
  return methods[m].result_type ();
}

/* ---- replies ---- */

static void reply_entries (Call *call, const RankEntry *entries, gsize n,
                           gboolean list);

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

static gboolean
write_exception (ThriftProtocol *out, const char *method, gint32 seqid,
                 ThriftApplicationExceptionError type, const char *message,
                 GError **error)
{
  ThriftApplicationException *x
      = g_object_new (THRIFT_TYPE_APPLICATION_EXCEPTION, "type", type,
                      "message", message, NULL);
  gboolean ok = thrift_protocol_write_message_begin (out, method, T_EXCEPTION,
                                                     seqid, error)
                    >= 0
                && thrift_struct_write (THRIFT_STRUCT (x), out, error) >= 0
                && end_message (out, error);

  g_object_unref (x);
  return ok;
}

gboolean
rank_handler_write_exception (RankHandler *handler, GByteArray *reply,
                              const char *method, gint32 seqid,
                              ThriftApplicationExceptionError type,
                              const char *message)
{
  g_autoptr (GError) error = NULL;

  rank_reply_writer_begin (handler->writer, reply);
  if (write_exception (handler->out, method, seqid, type, message, &error))
    return TRUE;
  g_debug ("cannot write the exception for %s: %s", method, error->message);
  return FALSE;
}

static void reply_error (Call *call, GType result_type, const GError *err);

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
      reply_error (call, method_result_type (call->method), big);
      return;
    }
  if (!ok)
    g_debug ("cannot encode the reply to %s: %s", call_name (call),
             error ? error->message : "?");
  if (call->method != METHOD_UNKNOWN)
    rank_metrics_call_done (call->handler->metrics, call->method, call->outcome,
                            g_get_monotonic_time () - call->start_us);
  call->handler->answered (call->request, ok);
  g_clear_object (&call->args);
  g_free (call->unknown_name);
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
    ok = write_exception (out, call_name (call), call->seqid, type, message,
                          &error);
  finish_call (call, ok, error);
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

/* Replies with err as the method's declared exception, or as an internal
 * error. */
static void
reply_error (Call *call, GType result_type, const GError *err)
{
  GObject *result = g_object_new (result_type, NULL);

  call->outcome = set_exception (result, err) ? rank_metrics_outcome (err)
                                              : RANK_OUTCOME_INTERNAL;
  if (call->outcome != RANK_OUTCOME_INTERNAL)
    reply (call, THRIFT_STRUCT (result), 0, NULL);
  else
    reply (call, NULL, THRIFT_APPLICATION_EXCEPTION_ERROR_INTERNAL_ERROR,
           err->message);
  g_object_unref (result);
}

/* ---- Update ---- */

/* The request's mode, or the board's default mode when it sets none. */
static gboolean
parse_mode (const rankUpdateRequest *request, RankMode board_mode,
            RankMode *mode, GError **error)
{
  if (!request->__isset_mode)
    {
      *mode = board_mode;
      return TRUE;
    }
  switch (request->mode)
    {
    case RANK_UPDATE_MODE_INCREMENT:
      *mode = RANK_MODE_INCREMENT;
      return TRUE;
    case RANK_UPDATE_MODE_BEST:
      *mode = RANK_MODE_BEST;
      return TRUE;
    case RANK_UPDATE_MODE_SET:
      *mode = RANK_MODE_SET;
      return TRUE;
    default:
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "mode: %d is not an UpdateMode (INCREMENT=1, BEST=2, SET=3)",
                   (int) request->mode);
      return FALSE;
    }
}

/* Subscores: all the board's, or (INCREMENT) none. */
static gboolean
check_subscores (const rankUpdateRequest *request, const RankBoardOptions *o,
                 RankUpdate *update, GError **error)
{
  guint n = request->__isset_subscores ? request->subscores->len : 0;

  if (n > 0 && o->n_subscores == 0)
    g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                 "subscores: board '%s' has none (config subscores=), got %u",
                 request->board, n);
  else if (n != o->n_subscores
           && !(n == 0 && update->mode == RANK_MODE_INCREMENT))
    g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                 "subscores: board '%s' ranks by %u subscores; %s must give "
                 "all %u, got %u",
                 request->board, o->n_subscores,
                 update->mode == RANK_MODE_INCREMENT ? "INCREMENT"
                                                     : "BEST and SET",
                 o->n_subscores, n);
  else
    {
      update->n_subscores = n;
      update->subscores
          = n > 0 ? (const gint64 *) request->subscores->data : NULL;
      return TRUE;
    }
  return FALSE;
}

/* On success, *data_buf holds the encoded data (g_free it). */
static gboolean
check_update (RankStore *store, const rankUpdateRequest *request,
              RankUpdate *update, char **data_buf, GError **error)
{
  const RankBoardOptions *o;

  if (!rank_validate_board (request->board, error))
    return FALSE;
  o = rank_store_board (store, request->board);
  if (!rank_validate_member (request->member, error)
      || !rank_validate_request_id (request->request_id, error)
      || !parse_mode (request, o->mode, &update->mode, error)
      || !rank_validate_score ("value", request->value, error)
      || !check_subscores (request, o, update, error))
    return FALSE;
  if (request->__isset_data)
    {
      *data_buf = rank_member_data_encode (request->data, "data",
                                           &update->data_len, error);
      if (*data_buf == NULL)
        return FALSE;
      update->data_given = TRUE;
      update->data = *data_buf;
    }
  update->board = request->board;
  update->member = request->member;
  update->request_id = request->request_id;
  update->value = request->value;
  if (request->__isset_timestamp_ms)
    {
      if (!rank_validate_timestamp ("timestamp_ms", request->timestamp_ms,
                                    error))
        return FALSE;
      update->timestamp_ms = request->timestamp_ms;
    }
  else
    update->timestamp_ms = g_get_real_time () / 1000;
  return TRUE;
}

static void
update_done (const RankUpdateResult *r, const GError *error, gpointer data)
{
  Call *call = data;
  rankRankingUpdateResult *result;

  if (error != NULL)
    {
      reply_error (call, RANK_TYPE_RANKING_UPDATE_RESULT, error);
      return;
    }
  result = g_object_new (RANK_TYPE_RANKING_UPDATE_RESULT, NULL);
  result->success->score = r->score;
  result->success->applied = r->applied;
  result->success->rank = r->rank;
  result->success->__isset_rank = r->rank > 0;
  g_array_append_vals (result->success->subscores, r->subscores,
                       r->n_subscores);
  result->success->__isset_subscores = r->n_subscores > 0;
  result->__isset_success = TRUE;
  reply (call, THRIFT_STRUCT (result), 0, NULL);
  g_object_unref (result);
}

static void
start_update (Call *call)
{
  rankRankingUpdateArgs *args = RANK_RANKING_UPDATE_ARGS (call->args);
  g_autoptr (GError) error = NULL;
  g_autofree char *data = NULL;
  RankUpdate update = { 0 };

  if (!check_update (call->handler->store, args->request, &update, &data,
                     &error)
      || !rank_store_check_update (call->handler->store, &update, &error))
    {
      update_done (NULL, error, call);
      return;
    }
  rank_store_update (call->handler->store, &update, update_done, call);
}

/* ---- GetRank ---- */

static void
rank_done (const RankEntry *e, const GError *error, gpointer data)
{
  Call *call = data;
  rankRankingGetRankArgs *args = RANK_RANKING_GET_RANK_ARGS (call->args);

  if (error != NULL)
    {
      reply_error (call, RANK_TYPE_RANKING_GET_RANK_RESULT, error);
      return;
    }
  {
    RankEntry named = *e;

    named.member = args->member;
    named.member_len = strlen (args->member);
    named.data = NULL;
    reply_entries (call, &named, 1, FALSE);
  }
}

static void
start_get_rank (Call *call)
{
  rankRankingGetRankArgs *args = RANK_RANKING_GET_RANK_ARGS (call->args);
  g_autoptr (GError) error = NULL;

  if (!rank_validate_board (args->board, &error)
      || !rank_validate_member (args->member, &error)
      || !rank_store_check_period (call->handler->store, args->board,
                                   args->periods_back, &error))
    {
      rank_done (NULL, error, call);
      return;
    }
  rank_store_get_rank (call->handler->store, args->board, args->member,
                       (guint) args->periods_back, rank_done, call);
}

/* ---- GetTopN ---- */

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

/* Entry.subscores (4) and Entry.data (5), when the entry has them. */
static gboolean
write_entry_extras (ThriftProtocol *out, const RankEntry *e, GError **error)
{
  RankDataPair pairs[RANK_DATA_KEYS_MAX];
  guint n = 0;
  gboolean ok = TRUE;

  if (e->n_subscores > 0)
    {
      ok = write_field_begin (out, "subscores", T_LIST, 4, error)
           && thrift_protocol_write_list_begin (out, T_I64, e->n_subscores,
                                                error)
                  >= 0;
      for (guint i = 0; ok && i < e->n_subscores; i++)
        ok = thrift_protocol_write_i64 (out, e->subscores[i], error) >= 0;
      ok = ok && thrift_protocol_write_list_end (out, error) >= 0
           && thrift_protocol_write_field_end (out, error) >= 0;
    }
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

static guint8 *
put_be (guint8 *p, guint64 v, int bytes)
{
  for (int i = bytes - 1; i >= 0; i--)
    *p++ = (guint8) (v >> (8 * i));
  return p;
}

/* An Entry without subscores or data in the binary protocol, in one write:
 * the protocol's field-by-field writes were a fifth of rankd's CPU on a
 * pipelined GetTopN (perf). The same bytes as the generic path below. */
static gboolean
write_entry_binary (ThriftProtocol *out, const RankEntry *e, GError **error)
{
  guint8 buf[3 + 4 + RANK_MEMBER_MAX_BYTES + 2 * (3 + 8) + 1];
  guint8 *p = buf;

  *p++ = T_STRING;
  p = put_be (p, 1, 2);
  p = put_be (p, e->member_len, 4);
  memcpy (p, e->member, e->member_len);
  p += e->member_len;
  *p++ = T_I64;
  p = put_be (p, 2, 2);
  p = put_be (p, (guint64) e->score, 8);
  *p++ = T_I64;
  p = put_be (p, 3, 2);
  p = put_be (p, (guint64) e->rank, 8);
  *p++ = T_STOP;
  return thrift_transport_write (out->transport, buf, (guint32) (p - buf),
                                 error);
}

/* binary: out is a binary protocol. */
static gboolean
write_entry (ThriftProtocol *out, gboolean binary, const RankEntry *e,
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

/* A result whose success (field 0) is a list<Entry> (GetTopN, GetAround,
 * Sample) or, when !list, one Entry (GetRank): written straight from the
 * entries, without the generated structs. */
static void
reply_entries (Call *call, const RankEntry *entries, gsize n, gboolean list)
{
  ThriftProtocol *out = begin_reply (call);
  gboolean binary = THRIFT_IS_BINARY_PROTOCOL (out);
  g_autoptr (GError) error = NULL;
  gboolean ok
      = thrift_protocol_write_message_begin (out, call_name (call), T_REPLY,
                                             call->seqid, &error)
            >= 0
        && thrift_protocol_write_struct_begin (out, "Result", &error) >= 0
        && thrift_protocol_write_field_begin (
               out, "success", list ? T_LIST : T_STRUCT, 0, &error)
               >= 0
        && (!list
            || thrift_protocol_write_list_begin (out, T_STRUCT, (guint32) n,
                                                 &error)
                   >= 0);

  for (gsize i = 0; ok && i < n; i++)
    ok = write_entry (out, binary, &entries[i], &error);
  ok = ok && (!list || thrift_protocol_write_list_end (out, &error) >= 0)
       && thrift_protocol_write_field_end (out, &error) >= 0
       && thrift_protocol_write_field_stop (out, &error) >= 0
       && thrift_protocol_write_struct_end (out, &error) >= 0
       && end_message (out, &error);
  finish_call (call, ok, error);
}

static void
top_done (const RankEntry *entries, gsize n, const GError *error, gpointer data)
{
  Call *call = data;

  if (error != NULL)
    {
      reply_error (call, RANK_TYPE_RANKING_GET_TOP_N_RESULT, error);
      return;
    }
  reply_entries (call, entries, n, TRUE);
}

static gboolean
check_top (RankStore *store, const rankRankingGetTopNArgs *args, GError **error)
{
  if (!rank_validate_board (args->board, error))
    return FALSE;
  if (args->n < 1 || args->n > RANK_TOP_N_MAX)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "n: must be 1-%d, got %d", RANK_TOP_N_MAX, args->n);
      return FALSE;
    }
  if (args->offset < 0)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "offset: must be >= 0, got %d", args->offset);
      return FALSE;
    }
  return rank_store_check_top (store, args->board, args->offset, args->n, error)
         && rank_store_check_period (store, args->board, args->periods_back,
                                     error);
}

static void
start_get_top_n (Call *call)
{
  rankRankingGetTopNArgs *args = RANK_RANKING_GET_TOP_N_ARGS (call->args);
  g_autoptr (GError) error = NULL;

  if (!check_top (call->handler->store, args, &error))
    {
      top_done (NULL, 0, error, call);
      return;
    }
  rank_store_get_top (call->handler->store, args->board, args->offset, args->n,
                      (guint) args->periods_back, args->with_data, top_done,
                      call);
}

/* ---- GetAround ---- */

static void
around_page (const RankEntry *entries, gsize n, const GError *error,
             gpointer data)
{
  Call *call = data;

  if (error != NULL)
    {
      reply_error (call, RANK_TYPE_RANKING_GET_AROUND_RESULT, error);
      return;
    }
  reply_entries (call, entries, n, TRUE);
}

/* The member's position is known: read the page around it. */
static void
around_found (const RankEntry *e, const GError *error, gpointer data)
{
  Call *call = data;
  rankRankingGetAroundArgs *args = RANK_RANKING_GET_AROUND_ARGS (call->args);
  g_autoptr (GError) deep = NULL;
  gint64 offset, position;
  gint n;

  if (error != NULL)
    {
      reply_error (call, RANK_TYPE_RANKING_GET_AROUND_RESULT, error);
      return;
    }
  position = e->rank;
  offset = MAX (0, position - 1 - args->radius);
  n = (gint) (position - offset + args->radius);
  if (!rank_store_check_top (call->handler->store, args->board, offset, n,
                             &deep))
    {
      reply_error (call, RANK_TYPE_RANKING_GET_AROUND_RESULT, deep);
      return;
    }
  rank_store_get_top (call->handler->store, args->board, offset, n,
                      (guint) args->periods_back, args->with_data, around_page,
                      call);
}

static void
start_get_around (Call *call)
{
  rankRankingGetAroundArgs *args = RANK_RANKING_GET_AROUND_ARGS (call->args);
  g_autoptr (GError) error = NULL;

  if (!rank_validate_board (args->board, &error)
      || !rank_validate_member (args->member, &error)
      || !rank_store_check_period (call->handler->store, args->board,
                                   args->periods_back, &error))
    ;
  else if (args->radius < 0 || args->radius > RANK_AROUND_RADIUS_MAX)
    g_set_error (&error, RANK_ERROR, RANK_ERROR_INVALID,
                 "radius: must be 0-%d, got %d", RANK_AROUND_RADIUS_MAX,
                 args->radius);
  if (error != NULL)
    {
      reply_error (call, RANK_TYPE_RANKING_GET_AROUND_RESULT, error);
      return;
    }
  /* Where the page starts: the ordinal position, whatever the rank kind. */
  rank_store_get_rank_as (call->handler->store, args->board, args->member,
                          (guint) args->periods_back, RANK_KIND_ORDINAL,
                          around_found, call);
}

/* ---- GetRanks ---- */

static void
ranks_done (const RankOfMember *results, guint n, const GError *error,
            gpointer data)
{
  Call *call = data;
  rankRankingGetRanksArgs *args = RANK_RANKING_GET_RANKS_ARGS (call->args);
  rankRankingGetRanksResult *result;

  if (error != NULL)
    {
      reply_error (call, RANK_TYPE_RANKING_GET_RANKS_RESULT, error);
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
start_get_ranks (Call *call)
{
  rankRankingGetRanksArgs *args = RANK_RANKING_GET_RANKS_ARGS (call->args);
  g_autoptr (GError) error = NULL;
  guint n = args->members->len;

  if (rank_validate_board (args->board, &error)
      && rank_store_check_period (call->handler->store, args->board,
                                  args->periods_back, &error))
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
  if (error != NULL)
    {
      reply_error (call, RANK_TYPE_RANKING_GET_RANKS_RESULT, error);
      return;
    }
  rank_store_get_ranks (call->handler->store, args->board,
                        (const char *const *) args->members->pdata, n,
                        (guint) args->periods_back, ranks_done, call);
}

/* ---- Remove ---- */

static void
remove_done (const RankUpdateResult *r, const GError *error, gpointer data)
{
  Call *call = data;
  rankRankingRemoveResult *result;

  if (error != NULL)
    {
      reply_error (call, RANK_TYPE_RANKING_REMOVE_RESULT, error);
      return;
    }
  result = g_object_new (RANK_TYPE_RANKING_REMOVE_RESULT, NULL);
  result->success->applied = r->applied;
  result->success->removed = r->applied && r->rank != 0;
  result->__isset_success = TRUE;
  reply (call, THRIFT_STRUCT (result), 0, NULL);
  g_object_unref (result);
}

static void
start_remove (Call *call)
{
  rankRankingRemoveArgs *args = RANK_RANKING_REMOVE_ARGS (call->args);
  g_autoptr (GError) error = NULL;
  RankUpdate update = {
    .board = args->board,
    .member = args->member,
    .request_id = args->request_id,
    .value = 0,
    .mode = RANK_MODE_REMOVE,
    .timestamp_ms = g_get_real_time () / 1000,
  };

  if (!rank_validate_board (args->board, &error)
      || !rank_validate_member (args->member, &error)
      || !rank_validate_request_id (args->request_id, &error))
    {
      reply_error (call, RANK_TYPE_RANKING_REMOVE_RESULT, error);
      return;
    }
  rank_store_update (call->handler->store, &update, remove_done, call);
}

/* ---- Count, CountBetween ---- */

static gboolean check_countable (RankStore *store, const char *board,
                                 const char *what, GError **error);

static void
count_done (gint64 count, const GError *error, gpointer data)
{
  Call *call = data;
  GType type = call->method == METHOD_COUNT
                   ? RANK_TYPE_RANKING_COUNT_RESULT
                   : RANK_TYPE_RANKING_COUNT_BETWEEN_RESULT;
  GObject *result;

  if (error != NULL)
    {
      reply_error (call, type, error);
      return;
    }
  /* The property setter marks success as set. */
  result = g_object_new (type, "success", count, NULL);
  reply (call, THRIFT_STRUCT (result), 0, NULL);
  g_object_unref (result);
}

static void
start_count (Call *call)
{
  RankStore *store = call->handler->store;
  g_autoptr (GError) error = NULL;
  gboolean range = call->method == METHOD_COUNT_BETWEEN;
  const char *board;
  gint32 back;
  gint64 min = 0, max = 0;

  if (range)
    {
      rankRankingCountBetweenArgs *args
          = RANK_RANKING_COUNT_BETWEEN_ARGS (call->args);

      board = args->board, back = args->periods_back;
      min = args->min_score, max = args->max_score;
    }
  else
    {
      rankRankingCountArgs *args = RANK_RANKING_COUNT_ARGS (call->args);

      board = args->board, back = args->periods_back;
    }
  if (!rank_validate_board (board, &error)
      || !rank_store_check_period (store, board, back, &error)
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
    check_countable (store, board, "CountBetween", &error);
  if (error != NULL)
    {
      count_done (0, error, call);
      return;
    }
  rank_store_count (store, board, range, min, max, (guint) back, count_done,
                    call);
}

/* ---- GetPercentile, GetScoreAtPercentile ---- */

/* Capped sharded boards store more than they show: their counts by score
 * are not the board's. */
static gboolean
check_countable (RankStore *store, const char *board, const char *what,
                 GError **error)
{
  const RankBoardOptions *o = rank_store_board (store, board);

  if (o->cap > 0 && o->shards > 1)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "board: %s is not available on capped sharded board '%s'",
                   what, board);
      return FALSE;
    }
  return TRUE;
}

static void
percentile_reply (Call *call, GType type, const GError *error,
                  const char *property, const GValue *value)
{
  GObject *result;

  if (error != NULL)
    {
      reply_error (call, type, error);
      return;
    }
  result = g_object_new (type, NULL);
  /* The property setter marks success as set. */
  g_object_set_property (result, property, value);
  reply (call, THRIFT_STRUCT (result), 0, NULL);
  g_object_unref (result);
}

/* Step 3: the board's size; the share behind is what is neither better nor
 * equal. */
static void
percentile_total (gint64 total, const GError *error, gpointer data)
{
  Call *call = data;
  g_auto (GValue) v = G_VALUE_INIT;

  g_value_init (&v, G_TYPE_DOUBLE);
  if (error == NULL)
    g_value_set_double (
        &v, total > 0 ? 100.0 * (double) (total - call->step[0] - call->step[1])
                            / (double) total
                      : 0);
  percentile_reply (call, RANK_TYPE_RANKING_GET_PERCENTILE_RESULT, error,
                    "success", &v);
}

/* Step 2: how many share the member's score. */
static void
percentile_equal (gint64 equal, const GError *error, gpointer data)
{
  Call *call = data;
  rankRankingGetPercentileArgs *args
      = RANK_RANKING_GET_PERCENTILE_ARGS (call->args);

  if (error != NULL)
    {
      percentile_total (0, error, call);
      return;
    }
  call->step[1] = equal;
  rank_store_count (call->handler->store, args->board, FALSE, 0, 0,
                    (guint) args->periods_back, percentile_total, call);
}

/* Step 1: the member's score, and how many are better (competition rank). */
static void
percentile_found (const RankEntry *e, const GError *error, gpointer data)
{
  Call *call = data;
  rankRankingGetPercentileArgs *args
      = RANK_RANKING_GET_PERCENTILE_ARGS (call->args);

  if (error != NULL)
    {
      percentile_total (0, error, call);
      return;
    }
  call->step[0] = e->rank - 1;
  rank_store_count (call->handler->store, args->board, TRUE, e->score, e->score,
                    (guint) args->periods_back, percentile_equal, call);
}

static void
start_get_percentile (Call *call)
{
  rankRankingGetPercentileArgs *args
      = RANK_RANKING_GET_PERCENTILE_ARGS (call->args);
  RankStore *store = call->handler->store;
  g_autoptr (GError) error = NULL;

  if (!rank_validate_board (args->board, &error)
      || !rank_validate_member (args->member, &error)
      || !rank_store_check_period (store, args->board, args->periods_back,
                                   &error)
      || !check_countable (store, args->board, "GetPercentile", &error))
    {
      percentile_total (0, error, call);
      return;
    }
  rank_store_get_rank_as (store, args->board, args->member,
                          (guint) args->periods_back, RANK_KIND_COMPETITION,
                          percentile_found, call);
}

/* Step 2: the entry at that position. */
static void
score_at_entry (const RankEntry *entries, gsize n, const GError *error,
                gpointer data)
{
  Call *call = data;
  g_autoptr (GError) empty = NULL;
  g_auto (GValue) v = G_VALUE_INIT;

  g_value_init (&v, G_TYPE_INT64);
  if (error == NULL && n == 0)
    error = empty = g_error_new (RANK_ERROR, RANK_ERROR_NOT_FOUND,
                                 "the board has no members");
  if (error == NULL)
    g_value_set_int64 (&v, entries[0].score);
  percentile_reply (call, RANK_TYPE_RANKING_GET_SCORE_AT_PERCENTILE_RESULT,
                    error, "success", &v);
}

/* Step 1: the board's size gives the position. */
static void
score_at_total (gint64 total, const GError *error, gpointer data)
{
  Call *call = data;
  rankRankingGetScoreAtPercentileArgs *args
      = RANK_RANKING_GET_SCORE_AT_PERCENTILE_ARGS (call->args);
  g_autoptr (GError) deep = NULL;
  gint64 position;

  if (error != NULL || total == 0)
    {
      score_at_entry (NULL, 0, error, call);
      return;
    }
  position = (gint64) ceil ((double) total * (100.0 - args->pct) / 100.0);
  position = CLAMP (position, 1, total);
  if (!rank_store_check_top (call->handler->store, args->board, position - 1, 1,
                             &deep))
    {
      score_at_entry (NULL, 0, deep, call);
      return;
    }
  rank_store_get_top (call->handler->store, args->board, position - 1, 1, FALSE,
                      (guint) args->periods_back, score_at_entry, call);
}

static void
start_get_score_at_percentile (Call *call)
{
  rankRankingGetScoreAtPercentileArgs *args
      = RANK_RANKING_GET_SCORE_AT_PERCENTILE_ARGS (call->args);
  RankStore *store = call->handler->store;
  g_autoptr (GError) error = NULL;

  if (!rank_validate_board (args->board, &error)
      || !rank_store_check_period (store, args->board, args->periods_back,
                                   &error))
    ;
  else if (!(args->pct >= 0 && args->pct <= 100))
    g_set_error (&error, RANK_ERROR, RANK_ERROR_INVALID,
                 "pct: must be 0-100, got %g", args->pct);
  if (error != NULL)
    {
      score_at_entry (NULL, 0, error, call);
      return;
    }
  rank_store_count (store, args->board, FALSE, 0, 0, (guint) args->periods_back,
                    score_at_total, call);
}

/* ---- Sample ---- */

/* The drawn members, waiting for their ranks. */
typedef struct
{
  Call *call;
  guint n;
  RankEntry entries[RANK_SAMPLE_COUNT_MAX];
  char *members[RANK_SAMPLE_COUNT_MAX];
} Drawn;

static void
drawn_ranked (const RankOfMember *results, guint n, const GError *error,
              gpointer data)
{
  Drawn *drawn = data;
  RankEntry entries[RANK_SAMPLE_COUNT_MAX];
  gsize kept = 0;

  if (error != NULL)
    reply_error (drawn->call, RANK_TYPE_RANKING_SAMPLE_RESULT, error);
  else
    {
      /* A member removed between the draw and its rank is left out. */
      for (guint i = 0; i < n; i++)
        if (results[i].found)
          {
            entries[kept] = drawn->entries[i];
            entries[kept].score = results[i].score;
            entries[kept++].rank = results[i].rank;
          }
      reply_entries (drawn->call, entries, kept, TRUE);
    }
  for (guint i = 0; i < drawn->n; i++)
    g_free (drawn->members[i]);
  g_free (drawn);
}

/* The draw is in: rank each drawn member. */
static void
sample_drawn (const RankEntry *entries, gsize n, const GError *error,
              gpointer data)
{
  Call *call = data;
  rankRankingSampleArgs *args = RANK_RANKING_SAMPLE_ARGS (call->args);
  Drawn *drawn;

  if (error != NULL)
    {
      reply_error (call, RANK_TYPE_RANKING_SAMPLE_RESULT, error);
      return;
    }
  if (n == 0)
    {
      reply_entries (call, NULL, 0, TRUE);
      return;
    }
  drawn = g_new0 (Drawn, 1);
  drawn->call = call;
  drawn->n = (guint) n;
  for (guint i = 0; i < n; i++)
    {
      drawn->members[i] = g_strndup (entries[i].member, entries[i].member_len);
      drawn->entries[i] = entries[i];
      drawn->entries[i].member = drawn->members[i];
    }
  rank_store_get_ranks (call->handler->store, args->board,
                        (const char *const *) drawn->members, drawn->n,
                        (guint) args->periods_back, drawn_ranked, drawn);
}

static void
start_sample (Call *call)
{
  rankRankingSampleArgs *args = RANK_RANKING_SAMPLE_ARGS (call->args);
  RankStore *store = call->handler->store;
  g_autoptr (GError) error = NULL;

  if (!rank_validate_board (args->board, &error)
      || !rank_store_check_period (store, args->board, args->periods_back,
                                   &error)
      || !rank_validate_score ("min_score", args->min_score, &error)
      || !rank_validate_score ("max_score", args->max_score, &error)
      || !check_countable (store, args->board, "Sample", &error))
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
  if (error != NULL)
    {
      reply_error (call, RANK_TYPE_RANKING_SAMPLE_RESULT, error);
      return;
    }
  rank_store_sample (store, args->board, args->min_score, args->max_score,
                     args->count, (guint) args->periods_back, sample_drawn,
                     call);
}

/* ---- SetMemberData, GetMemberData ---- */

static void
set_data_done (const GError *error, gpointer data)
{
  Call *call = data;
  rankRankingSetMemberDataResult *result;

  if (error != NULL)
    {
      reply_error (call, RANK_TYPE_RANKING_SET_MEMBER_DATA_RESULT, error);
      return;
    }
  result = g_object_new (RANK_TYPE_RANKING_SET_MEMBER_DATA_RESULT, NULL);
  reply (call, THRIFT_STRUCT (result), 0, NULL);
  g_object_unref (result);
}

static void
start_set_member_data (Call *call)
{
  rankRankingSetMemberDataArgs *args
      = RANK_RANKING_SET_MEMBER_DATA_ARGS (call->args);
  g_autoptr (GError) error = NULL;
  g_autofree char *encoded = NULL;
  gsize len = 0;

  if (!rank_validate_board (args->board, &error)
      || !rank_validate_member (args->member, &error)
      || (encoded = rank_member_data_encode (args->data, "data", &len, &error))
             == NULL)
    {
      set_data_done (error, call);
      return;
    }
  rank_store_set_data (call->handler->store, args->board, args->member, encoded,
                       len, set_data_done, call);
}

static void
get_data_done (const char *data, gsize len, const GError *error,
               gpointer user_data)
{
  Call *call = user_data;
  g_autoptr (GError) bad = NULL;
  rankRankingGetMemberDataResult *result;
  RankDataPair pairs[RANK_DATA_KEYS_MAX];
  guint n = 0;

  if (error == NULL && !rank_member_data_parse (data, len, pairs, &n))
    error = bad = g_error_new (RANK_ERROR, RANK_ERROR_INTERNAL,
                               "stored member data is malformed");
  if (error != NULL)
    {
      reply_error (call, RANK_TYPE_RANKING_GET_MEMBER_DATA_RESULT, error);
      return;
    }
  result = g_object_new (RANK_TYPE_RANKING_GET_MEMBER_DATA_RESULT, NULL);
  for (guint i = 0; i < n; i++)
    g_hash_table_insert (result->success,
                         g_strndup (pairs[i].key, pairs[i].key_len),
                         g_strndup (pairs[i].value, pairs[i].value_len));
  result->__isset_success = TRUE;
  reply (call, THRIFT_STRUCT (result), 0, NULL);
  g_object_unref (result);
}

static void
start_get_member_data (Call *call)
{
  rankRankingGetMemberDataArgs *args
      = RANK_RANKING_GET_MEMBER_DATA_ARGS (call->args);
  g_autoptr (GError) error = NULL;

  if (!rank_validate_board (args->board, &error)
      || !rank_validate_member (args->member, &error)
      || !rank_store_check_period (call->handler->store, args->board,
                                   args->periods_back, &error))
    {
      get_data_done (NULL, 0, error, call);
      return;
    }
  rank_store_get_data (call->handler->store, args->board, args->member,
                       (guint) args->periods_back, get_data_done, call);
}

/* ---- dispatch ---- */

/* The board's stored layout is known to match: the call proper starts. */
static void
layout_checked (const GError *error, gpointer data)
{
  Call *call = data;

  if (error != NULL)
    reply_error (call, methods[call->method].result_type (), error);
  else
    methods[call->method].start (call);
}

/* A call starts once the board it names may be touched in the layout the
 * configuration says (a bad board name is refused by the call itself). */
static void
begin_call (Call *call)
{
  const MethodSpec *m = &methods[call->method];
  const char *board = m->board (call->args);
  g_autoptr (GError) error = NULL;

  if (!rank_validate_board (board, NULL))
    {
      m->start (call);
      return;
    }
  switch (rank_store_check_layout (call->handler->store, board, m->writes,
                                   &error, layout_checked, call))
    {
    case RANK_LAYOUT_OK:
      m->start (call);
      break;
    case RANK_LAYOUT_REFUSED:
      reply_error (call, m->result_type (), error);
      break;
    case RANK_LAYOUT_PENDING:
      break;
    }
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

  call->args = g_object_new (methods[call->method].args_type (), NULL);
  if (thrift_struct_read (call->args, in, error) < 0
      || thrift_protocol_read_message_end (in, error) < 0)
    {
      g_object_unref (call->args);
      g_free (call);
      return RANK_DISPATCH_FAILED;
    }
  thrift_transport_read_end (in->transport, NULL);
  call->start_us = g_get_monotonic_time ();
  *reply_bound = methods[call->method].reply_bound (call->args);
  begin_call (call);
  return RANK_DISPATCH_PENDING;
}

RankHandler *
rank_handler_new (RankStore *store, RankProtocolKind protocol, gboolean framed,
                  RankAnsweredFunc answered)
{
  RankHandler *handler = g_new0 (RankHandler, 1);

  handler->store = store;
  handler->answered = answered;
  handler->writer = rank_reply_writer_new (framed);
  handler->out
      = rank_protocol_new (protocol, THRIFT_TRANSPORT (handler->writer));
  handler->metrics = rank_metrics_calls_new (method_names (), METHOD_UNKNOWN);
  return handler;
}

void
rank_handler_free (RankHandler *handler)
{
  rank_metrics_calls_free (handler->metrics);
  g_object_unref (handler->out);
  g_object_unref (handler->writer);
  g_free (handler);
}
