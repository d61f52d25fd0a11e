/* store.h -- boards in Redis: key layout, scripts, and the three core
 * operations.
 *
 * Inputs are assumed valid (the handler validates); the store checks only
 * what needs the stored data (an increment's result range, a reused request
 * id). Errors are RANK_ERROR_*: INVALID, NOT_FOUND, UNAVAILABLE, INTERNAL.
 */
#ifndef RANK_STORE_H
#define RANK_STORE_H

#include <glib.h>

#include "redis_link.h"

typedef struct _RankStore RankStore;

typedef enum
{
  RANK_MODE_INCREMENT = 1,
  RANK_MODE_BEST = 2,
  RANK_MODE_SET = 3,
} RankMode;

typedef struct
{
  const char *board;
  const char *member;
  const char *request_id;
  gint64 value;
  RankMode mode;
  gint64 timestamp_ms;
} RankUpdate;

typedef struct
{
  gint64 score;
  gint64 rank; /* 0: not ranked */
  gboolean applied;
} RankUpdateResult;

/* Called for each entry of a page, best first. member is not
 * NUL-terminated. */
typedef void (*RankEntryFunc) (const char *member, gsize member_len,
                               gint64 score, gint64 rank, gpointer data);

/* The store uses link (not owned) and registers its scripts on it; call
 * before rank_redis_link_start. */
RankStore *rank_store_new (RankRedisLink *link, gint64 dedup_window_ms);
void rank_store_free (RankStore *store);

gboolean rank_store_update (RankStore *store, const RankUpdate *update,
                            RankUpdateResult *result, GError **error);

gboolean rank_store_get_rank (RankStore *store, const char *board,
                              const char *member, gint64 *score, gint64 *rank,
                              GError **error);

gboolean rank_store_get_top (RankStore *store, const char *board, gint64 offset,
                             gint n, RankEntryFunc func, gpointer data,
                             GError **error);

#endif /* RANK_STORE_H */
