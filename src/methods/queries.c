/* queries.c -- the methods that ask about a board as a whole rather than
 * one member's place: Count, CountBetween, GetPercentile,
 * GetScoreAtPercentile and Sample (store_query.c: several rounds to Redis
 * on a sharded board).
 */
#include "handler_private.h"

#include "constants.h"
#include "error.h"
#include "policy.h"
#include "validate.h"

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

void
handler_start_count (Call *call)
{
  g_autoptr (GError) error = NULL;
  gboolean range = call->method == METHOD_COUNT_BETWEEN;
  const char *board;
  gint32 back;
  gboolean window;
  gint64 min = 0, max = 0;

  if (range)
    {
      rankCountBetweenRequest *args
          = RANK_RANKING_COUNT_BETWEEN_ARGS (call->args)->request;

      board = args->board, back = args->periods_back, window = args->window;
      min = args->min_score, max = args->max_score;
    }
  else
    {
      rankCountRequest *args = RANK_RANKING_COUNT_ARGS (call->args)->request;

      board = args->board, back = args->periods_back, window = args->window;
    }
  if (!handler_resolve_read (call, board, back, window, &error)
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
  handler_checked (call, error, run_count);
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

void
handler_start_get_percentile (Call *call)
{
  rankGetPercentileRequest *args
      = RANK_RANKING_GET_PERCENTILE_ARGS (call->args)->request;
  g_autoptr (GError) error = NULL;

  if (rank_validate_board (args->board, &error)
      && rank_validate_member (args->member, &error)
      && handler_resolve_read (call, args->board, args->periods_back,
                               args->window, &error))
    rank_policy_countable (args->board, call->ctx.options, "GetPercentile",
                           &error);
  handler_checked (call, error, run_get_percentile);
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

void
handler_start_get_score_at_percentile (Call *call)
{
  rankGetScoreAtPercentileRequest *args
      = RANK_RANKING_GET_SCORE_AT_PERCENTILE_ARGS (call->args)->request;
  g_autoptr (GError) error = NULL;

  if (!handler_resolve_read (call, args->board, args->periods_back,
                             args->window, &error))
    ;
  else if (!(args->pct >= 0 && args->pct <= 100))
    g_set_error (&error, RANK_ERROR, RANK_ERROR_INVALID,
                 "pct: must be 0-100, got %g", args->pct);
  handler_checked (call, error, run_get_score_at_percentile);
}

/* ---- Sample ---- */

static void
run_sample (Call *call)
{
  rankSampleRequest *args = RANK_RANKING_SAMPLE_ARGS (call->args)->request;
  RankSampleQuery query = { args->min_score, args->max_score, args->count };

  rank_store_sample (call->handler->store, &call->ctx, &query,
                     handler_rows_answered, call);
}

void
handler_start_sample (Call *call)
{
  rankSampleRequest *args = RANK_RANKING_SAMPLE_ARGS (call->args)->request;
  g_autoptr (GError) error = NULL;

  if (!handler_resolve_read (call, args->board, args->periods_back,
                             args->window, &error)
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
  handler_checked (call, error, run_sample);
}
