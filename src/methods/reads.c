/* reads.c -- the methods that read members: GetRank, GetTopN, GetAround,
 * GetRanks and GetMemberData. Their entries are written by the codec
 * (codec.h) straight from the store's rows, without the generated structs:
 * a page of 1000 entries would otherwise be 1000 GObjects and 1000 string
 * copies per call. GetRank and GetTopN of boards with a read cache go
 * through cached_reads.c.
 */
#include "cached_reads.h"

#include <string.h>

#include "codec.h"
#include "constants.h"
#include "error.h"
#include "memberdata.h"
#include "policy.h"
#include "validate.h"

/* ---- rows ---- */

void
handler_reply_rows (Call *call, const RankRow *rows, gsize n, gboolean list)
{
  ThriftProtocol *out = handler_begin_reply (call);
  g_autoptr (GError) error = NULL;
  gboolean ok = rank_codec_write_reply_begin (out, handler_call_name (call),
                                              call->seqid,
                                              list ? T_LIST : T_STRUCT, &error)
                && (list ? rank_codec_write_entries (out, rows, n, &error)
                         : n == 0 || rank_codec_write_entry (out, rows, &error))
                && rank_codec_write_reply_end (out, &error);

  handler_finish (call, ok, error);
}

void
handler_rows_answered (const RankRow *rows, gsize n, const GError *error,
                       gpointer data)
{
  Call *call = data;

  if (error != NULL)
    handler_reply_error (call, error);
  else
    handler_reply_rows (call, rows, n, TRUE);
}

/* ---- GetRank ---- */

static void
rank_answered (const RankRow *row, const GError *error, gpointer data)
{
  CachedReadCall *read = data;
  Call *call = &read->call;
  const RankGetRankArgs *args = call->plain_args;
  RankRow named;

  if (error != NULL)
    {
      handler_land (read, error);
      handler_reply_error (call, error);
      return;
    }
  named = *row;
  named.member = args->member;
  named.member_len = strlen (args->member);
  named.data = NULL;
  if (read->cache_key != NULL)
    rank_read_cache_put (call->handler->cache, call->ctx.board, read->cache_key,
                         &read->ticket, &named, 1);
  handler_land (read, NULL);
  handler_reply_rows (call, &named, 1, FALSE);
}

static void
run_get_rank (Call *call)
{
  const RankGetRankArgs *args = call->plain_args;

  if (handler_cache_wanted (call)
      && handler_cached ((CachedReadCall *) call,
                         rank_read_cache_key_rank (call->ctx.board,
                                                   call->ctx.period.label,
                                                   args->member),
                         FALSE))
    return;
  rank_store_get_rank (call->handler->store, &call->ctx, args->member, 0,
                       rank_answered, call);
}

void
handler_start_get_rank (Call *call)
{
  const RankGetRankArgs *args = call->plain_args;
  g_autoptr (GError) error = NULL;

  if (rank_validate_board (args->board, &error)
      && rank_validate_member (args->member, &error))
    handler_resolve_read (call, args->board, args->periods_back, args->window,
                          &error);
  handler_checked (call, error, run_get_rank);
}

/* ---- GetTopN ---- */

/* GetTopN's page, kept when it may be. */
static void
top_answered (const RankRow *rows, gsize n, const GError *error, gpointer data)
{
  CachedReadCall *read = data;
  Call *call = &read->call;

  if (error == NULL)
    rank_read_cache_put (call->handler->cache, call->ctx.board, read->cache_key,
                         &read->ticket, rows, n);
  handler_land (read, error);
  handler_rows_answered (rows, n, error, data);
}

static void
run_get_top_n (Call *call)
{
  const RankGetTopNArgs *args = call->plain_args;
  RankTopQuery query = { args->offset, args->n, args->with_data };

  if (!handler_cache_wanted (call))
    {
      rank_store_get_top (call->handler->store, &call->ctx, &query,
                          handler_rows_answered, call);
      return;
    }
  if (handler_cached (
          (CachedReadCall *) call,
          rank_read_cache_key_top (call->ctx.board, call->ctx.period.label,
                                   args->offset, args->n, args->with_data),
          TRUE))
    return;
  rank_store_get_top (call->handler->store, &call->ctx, &query, top_answered,
                      call);
}

void
handler_start_get_top_n (Call *call)
{
  const RankGetTopNArgs *args = call->plain_args;
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
                             args->offset, args->n, &error)
          && rank_context_read_window (&call->ctx, args->periods_back,
                                       args->window, &error))
        handler_window_data (args->window, args->with_data, &error);
    }
  handler_checked (call, error, run_get_top_n);
}

/* ---- GetAround ---- */

static void
run_get_around (Call *call)
{
  rankGetAroundRequest *args
      = RANK_RANKING_GET_AROUND_ARGS (call->args)->request;
  RankAroundQuery query = { args->member, args->radius, args->with_data };

  rank_store_get_around (call->handler->store, &call->ctx, &query,
                         handler_rows_answered, call);
}

void
handler_start_get_around (Call *call)
{
  rankGetAroundRequest *args
      = RANK_RANKING_GET_AROUND_ARGS (call->args)->request;
  g_autoptr (GError) error = NULL;

  if (!rank_validate_board (args->board, &error)
      || !rank_validate_member (args->member, &error)
      || !handler_resolve_read (call, args->board, args->periods_back,
                                args->window, &error)
      || !handler_window_data (args->window, args->with_data, &error))
    ;
  else if (args->radius < 0 || args->radius > RANK_AROUND_RADIUS_MAX)
    g_set_error (&error, RANK_ERROR, RANK_ERROR_INVALID,
                 "radius: must be 0-%d, got %d", RANK_AROUND_RADIUS_MAX,
                 args->radius);
  handler_checked (call, error, run_get_around);
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
  handler_reply (call, THRIFT_STRUCT (result), 0, NULL);
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

void
handler_start_get_ranks (Call *call)
{
  rankGetRanksRequest *args = RANK_RANKING_GET_RANKS_ARGS (call->args)->request;
  g_autoptr (GError) error = NULL;
  guint n = args->members->len;

  if (handler_resolve_read (call, args->board, args->periods_back, args->window,
                            &error))
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
  handler_checked (call, error, run_get_ranks);
}

/* ---- GetMemberData ---- */

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

void
handler_start_get_member_data (Call *call)
{
  rankGetMemberDataRequest *args
      = RANK_RANKING_GET_MEMBER_DATA_ARGS (call->args)->request;
  g_autoptr (GError) error = NULL;

  if (rank_validate_board (args->board, &error)
      && rank_validate_member (args->member, &error))
    handler_resolve_read (call, args->board, args->periods_back, FALSE, &error);
  handler_checked (call, error, run_get_member_data);
}
