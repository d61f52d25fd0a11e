/* layout.h -- a board's storage layout, recorded with the board.
 *
 * Some board options decide where and how a board's data is stored: shards
 * (which keys), order (the sign of the sorted-set scores), rank=dense (a set
 * of distinct scores kept beside), subscores (the order-key prefix), the
 * period settings (the period keys' names) and cap (what was dropped). The
 * first write to a board records them, with the layout version of this
 * rankd, in the board's descriptor key (RANK_KEY_SUFFIX_LAYOUT); rankd never
 * reads or writes a board whose descriptor says otherwise than the
 * configuration in force: every call on it answers Unavailable naming the
 * board and the option, until the configuration matches again or the board
 * is reset (its keys deleted).
 *
 * The descriptor is text: "rankd-layout 4 shards=10 order=desc ...". rank
 * is recorded as dense or not: ordinal and competition ranks store the same
 * and may change freely. max_top_depth, mode, dedup_window, retention and
 * accept_late decide nothing about storage.
 */
#ifndef RANK_LAYOUT_H
#define RANK_LAYOUT_H

#include <glib.h>

#include "config.h"

/* Bumped by every change to what rankd stores for a board; a rankd reads
 * only boards of its own version. */
#define RANK_LAYOUT_VERSION 7

/* The descriptor of a board with options o. */
char *rank_layout_describe (const RankBoardOptions *o);

/* NULL when a board stored as stored (a descriptor) may be read and written
 * by options described as wanted (rank_layout_describe); else why not,
 * naming board and the first option that differs (or the layout version).
 * Free with g_free. */
char *rank_layout_mismatch (const char *board, const char *stored,
                            const char *wanted);

/* The shards a descriptor records (1 to RANK_SHARDS_MAX), or fallback if
 * descriptor is NULL or records none. The descriptor's format is this
 * module's: callers that need the stored shards ask here. */
guint rank_layout_stored_shards (const char *descriptor, guint fallback);

/* Logs board's verdict when it changes (mismatch NULL: it matches), once
 * for the whole process whatever the number of workers that see it. */
void rank_layout_report (const char *board, const char *mismatch);

#endif /* RANK_LAYOUT_H */
