/* policy.c -- what a board's options refuse (see policy.h). */
#include "policy.h"

#include "error.h"

gboolean
rank_policy_mode (const RankBoardOptions *o, gboolean given, gint64 value,
                  RankMode *mode, GError **error)
{
  if (!given)
    {
      *mode = o->mode;
      return TRUE;
    }
  switch (value)
    {
    case RANK_MODE_INCREMENT:
    case RANK_MODE_BEST:
    case RANK_MODE_SET:
      *mode = (RankMode) value;
      return TRUE;
    default:
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "mode: %" G_GINT64_FORMAT
                   " is not an UpdateMode (INCREMENT=1, BEST=2, SET=3)",
                   value);
      return FALSE;
    }
}

gboolean
rank_policy_subscores (const char *board, const RankBoardOptions *o,
                       RankMode mode, guint given, GError **error)
{
  if (given > 0 && o->n_subscores == 0)
    g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                 "subscores: board '%s' has none (config subscores=), got %u",
                 board, given);
  else if (given != o->n_subscores
           && !(given == 0 && mode == RANK_MODE_INCREMENT))
    g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                 "subscores: board '%s' ranks by %u subscores; %s must give "
                 "all %u, got %u",
                 board, o->n_subscores,
                 mode == RANK_MODE_INCREMENT ? "INCREMENT" : "BEST and SET",
                 o->n_subscores, given);
  else
    return TRUE;
  return FALSE;
}

gboolean
rank_policy_write_period (const char *board, const RankBoardOptions *o,
                          gint64 timestamp_ms, gint64 now_ms,
                          RankPeriod *period, GError **error)
{
  RankPeriod current, oldest;

  rank_period_of (&o->period, timestamp_ms, period);
  if (o->period.kind == RANK_PERIOD_NONE)
    return TRUE;
  rank_period_of (&o->period, now_ms, &current);
  rank_period_back (&o->period, now_ms, o->retention, &oldest);
  if (period->start_ms > current.start_ms)
    g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                 "timestamp_ms: %" G_GINT64_FORMAT " is in period %s, after "
                 "the current period %s of board '%s'",
                 timestamp_ms, period->label, current.label, board);
  else if (period->start_ms < current.start_ms && !o->accept_late)
    g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                 "timestamp_ms: %" G_GINT64_FORMAT " is in the closed period "
                 "%s of board '%s' (current: %s), which does not accept late "
                 "updates (accept_late)",
                 timestamp_ms, period->label, board, current.label);
  else if (period->start_ms < oldest.start_ms)
    g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                 "timestamp_ms: %" G_GINT64_FORMAT " is in period %s, older "
                 "than the %u past periods board '%s' keeps (retention)",
                 timestamp_ms, period->label, o->retention, board);
  else
    return TRUE;
  return FALSE;
}

gboolean
rank_policy_periods_back (const char *board, const RankBoardOptions *o,
                          gint64 periods_back, GError **error)
{
  if (periods_back < 0)
    g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                 "periods_back: must be >= 0, got %" G_GINT64_FORMAT,
                 periods_back);
  else if (periods_back > 0 && o->period.kind == RANK_PERIOD_NONE)
    g_set_error (
        error, RANK_ERROR, RANK_ERROR_INVALID,
        "periods_back: board '%s' has no periods, got %" G_GINT64_FORMAT, board,
        periods_back);
  else if (periods_back > (gint64) o->retention)
    g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                 "periods_back: board '%s' keeps %u past periods, got "
                 "%" G_GINT64_FORMAT,
                 board, o->retention, periods_back);
  else
    return TRUE;
  return FALSE;
}

gboolean
rank_policy_depth (const char *board, const RankBoardOptions *o,
                   const char *what, gint64 offset, gint64 n, GError **error)
{
  if (o->shards > 1 && offset + n > (gint64) o->max_top_depth)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "%s: must be at most %u on sharded board '%s' "
                   "(its max_top_depth), got %" G_GINT64_FORMAT,
                   what, o->max_top_depth, board, offset + n);
      return FALSE;
    }
  return TRUE;
}

gboolean
rank_policy_countable (const char *board, const RankBoardOptions *o,
                       const char *what, GError **error)
{
  if (o->cap > 0 && o->shards > 1)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "board: %s is not available on capped sharded board '%s'",
                   what, board);
      return FALSE;
    }
  return TRUE;
}
