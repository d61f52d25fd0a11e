/* context.c -- a call's context (see context.h). */
#include "context.h"

#include <string.h>

#include "constants.h"
#include "error.h"
#include "policy.h"

void
rank_context_init (RankContext *ctx, RankConfig *config, const char *board,
                   gint64 now_ms, gint64 decoded_us, gint64 default_window_ms)
{
  ctx->config = rank_config_ref (config);
  ctx->board = board;
  ctx->options = rank_config_board (config, board);
  ctx->now_ms = now_ms;
  ctx->decoded_us = decoded_us;
  ctx->dedup_window_ms = ctx->options->dedup_window_s != 0
                             ? (gint64) ctx->options->dedup_window_s * 1000
                             : default_window_ms;
  ctx->periods_back = 0;
  ctx->window = FALSE;
  ctx->fresh_after_us = 0;
  /* Set by rank_context_read or rank_context_write. */
  memset (&ctx->period, 0, sizeof ctx->period);
}

gboolean
rank_context_read (RankContext *ctx, gint64 periods_back, GError **error)
{
  if (!rank_policy_periods_back (ctx->board, ctx->options, periods_back, error))
    return FALSE;
  ctx->periods_back = (guint) periods_back;
  rank_period_back (&ctx->options->period, ctx->now_ms, ctx->periods_back,
                    &ctx->period);
  return TRUE;
}

gboolean
rank_context_read_window (RankContext *ctx, gint64 periods_back,
                          gboolean window, GError **error)
{
  if (!window)
    return rank_context_read (ctx, periods_back, error);
  if (ctx->options->window == 0)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "window: board '%s' has no rolling window (board option "
                   "window=N)",
                   ctx->board);
      return FALSE;
    }
  if (periods_back != 0)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "window: reads the current window; periods_back must be 0, "
                   "got %" G_GINT64_FORMAT,
                   periods_back);
      return FALSE;
    }
  if (!rank_context_read (ctx, 0, error))
    return FALSE;
  ctx->window = TRUE;
  G_STATIC_ASSERT (sizeof RANK_WINDOW_LABEL <= RANK_PERIOD_LABEL_MAX);
  memcpy (ctx->period.label, RANK_WINDOW_LABEL, sizeof RANK_WINDOW_LABEL);
  return TRUE;
}

gboolean
rank_context_write (RankContext *ctx, gint64 timestamp_ms, GError **error)
{
  return rank_policy_write_period (ctx->board, ctx->options, timestamp_ms,
                                   ctx->now_ms, &ctx->period, error);
}

void
rank_context_clear (RankContext *ctx)
{
  g_clear_pointer (&ctx->config, rank_config_unref);
}
