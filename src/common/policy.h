/* policy.h -- what a board's options refuse.
 *
 * Every rule that depends on how a board is configured, in one place and
 * taking the options: the mode an update takes (its own, or the board's),
 * the subscores it must give, the periods it may write or read, how deep a
 * sharded board may be paged, what a capped sharded board cannot count.
 * (Rules on the fields themselves, whatever the board -- name lengths,
 * score range -- are validate.h's.) Each failure is RANK_ERROR_INVALID
 * with a message naming the field, the board and the option.
 */
#ifndef RANK_POLICY_H
#define RANK_POLICY_H

#include <glib.h>

#include "config.h"
#include "period.h"

/* The mode of an update: its own (given: the IDL's UpdateMode value), or
 * the board's. */
gboolean rank_policy_mode (const RankBoardOptions *o, gboolean given,
                           gint64 value, RankMode *mode, GError **error);

/* An update gives all of the board's subscores, or (INCREMENT) none. */
gboolean rank_policy_subscores (const char *board, const RankBoardOptions *o,
                                RankMode mode, guint given, GError **error);

/* The period an update at timestamp_ms writes, at now_ms: the current one,
 * or with accept_late a past one the board still keeps. */
gboolean rank_policy_write_period (const char *board, const RankBoardOptions *o,
                                   gint64 timestamp_ms, gint64 now_ms,
                                   RankPeriod *period, GError **error);

/* periods_back within what the board keeps (0 on boards without periods). */
gboolean rank_policy_periods_back (const char *board, const RankBoardOptions *o,
                                   gint64 periods_back, GError **error);

/* A page at offset+n (0-based position of its last entry + 1) within what
 * the board serves (sharded boards: max_top_depth). what names the field
 * in the message ("offset+n", "rank + radius", "the position"). */
gboolean rank_policy_depth (const char *board, const RankBoardOptions *o,
                            const char *what, gint64 offset, gint64 n,
                            GError **error);

/* Capped sharded boards store more than they show: their counts by score
 * are not the board's, so what (a method's name) is refused there. */
gboolean rank_policy_countable (const char *board, const RankBoardOptions *o,
                                const char *what, GError **error);

#endif /* RANK_POLICY_H */
