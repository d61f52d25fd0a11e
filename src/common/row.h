/* row.h -- one member's place on a board: what the store reads and the
 * wire codec writes as an Entry (codec.h), with no copy in between.
 */
#ifndef RANK_ROW_H
#define RANK_ROW_H

#include <glib.h>

#include "constants.h"

/* One row of an answer: a member's place. member (not NUL-terminated) and
 * data live only during the store's callback. */
typedef struct
{
  const char *member;
  gsize member_len;
  gint64 score;
  gint64 rank;
  guint n_subscores; /* the board's */
  gint64 subscores[RANK_SUBSCORES_MAX];
  const char *data; /* with data: the member's, encoded (memberdata.h); NULL
                       if none */
  gsize data_len;
  gint64 time_ms; /* when it reached its score: the tie-break */
} RankRow;

#endif /* RANK_ROW_H */
