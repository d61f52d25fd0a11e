/* context.h -- a call's context, resolved once when the call is decoded.
 *
 * The configuration in force then (a reference: a SIGHUP in the middle of
 * a call of several rounds cannot mix two configurations), the board and
 * its options, the time of the call, and the period it reads or writes.
 * Every store operation takes it; nothing below the handler reads the
 * clock or the configuration again.
 */
#ifndef RANK_CONTEXT_H
#define RANK_CONTEXT_H

#include <glib.h>

#include "config.h"
#include "period.h"

typedef struct
{
  RankConfig *config;              /* a reference, for the call */
  const char *board;               /* the request's; lives as long */
  const RankBoardOptions *options; /* config's, for board */
  gint64 now_ms;                   /* the call's clock (Unix ms) */
  /* When the call was decoded (g_get_monotonic_time): what a worker learned
   * of the board before then holds, or not, for the whole call. */
  gint64 decoded_us;
  gint64 dedup_window_ms; /* the board's */
  guint periods_back;     /* a read's */
  RankPeriod period;      /* the period read or written */
  /* A read of the board's rolling window (IDL 1.8, window=true; board
   * option window=N): period.label is RANK_WINDOW_LABEL, so the store's
   * keys are the window's (rk:{board}:p:window:*), and period's start and
   * end are the current period's. */
  gboolean window;
  /* A read from a replica must see what this rankd acknowledged on the
   * board up to this time (g_get_monotonic_time; 0: nothing). */
  gint64 fresh_after_us;
} RankContext;

/* The context of a call on board at now_ms under config, decoded at
 * decoded_us (g_get_monotonic_time: a handler's call gives its start, so
 * every context of one call agrees); default_window_ms: --dedup-window, for
 * boards without their own. Every context of every call (reads, updates,
 * batches, queue drains, admin) is made here; on a board with a rolling
 * window it calls the window hook below. */
void rank_context_init (RankContext *ctx, RankConfig *config, const char *board,
                        gint64 now_ms, gint64 decoded_us,
                        gint64 default_window_ms);

/* A read of periods_back periods before the current one: checked against
 * the board's options (policy.h); sets ctx->period. */
gboolean rank_context_read (RankContext *ctx, gint64 periods_back,
                            GError **error);

/* A read of the request's periods_back and window (IDL 1.8): window false
 * is rank_context_read. Window true reads the board's rolling window: the
 * board must have one (board option window=N) and periods_back must be 0,
 * else InvalidArgument naming "window"; sets ctx->window and
 * ctx->period (the current period, labelled RANK_WINDOW_LABEL). */
gboolean rank_context_read_window (RankContext *ctx, gint64 periods_back,
                                   gboolean window, GError **error);

/* A write at timestamp_ms: the period it goes to, checked (policy.h). */
gboolean rank_context_write (RankContext *ctx, gint64 timestamp_ms,
                             GError **error);

/* Drops the reference to the configuration. */
void rank_context_clear (RankContext *ctx);

#endif /* RANK_CONTEXT_H */
