/* store.h -- boards in Redis: key layout, scripts, and the core operations.
 *
 * A store belongs to one event loop and talks to Redis through that loop's
 * link. Operations are asynchronous: each calls its callback exactly once,
 * in the loop's thread, never from inside the call that started it.
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

/* One entry of a page; member is not NUL-terminated and lives only during
 * the callback. */
typedef struct
{
  const char *member;
  gsize member_len;
  gint64 score;
  gint64 rank;
} RankEntry;

typedef void (*RankStoreUpdateFunc) (const RankUpdateResult *result,
                                     const GError *error, gpointer data);
typedef void (*RankStoreRankFunc) (gint64 score, gint64 rank,
                                   const GError *error, gpointer data);
typedef void (*RankStoreTopFunc) (const RankEntry *entries, gsize n,
                                  const GError *error, gpointer data);

/* Registers the scripts on link (call before rank_redis_link_start). */
RankStore *rank_store_new (RankRedisLink *link, gint64 dedup_window_ms);
void rank_store_free (RankStore *store);

void rank_store_update (RankStore *store, const RankUpdate *update,
                        RankStoreUpdateFunc func, gpointer data);

void rank_store_get_rank (RankStore *store, const char *board,
                          const char *member, RankStoreRankFunc func,
                          gpointer data);

void rank_store_get_top (RankStore *store, const char *board, gint64 offset,
                         gint n, RankStoreTopFunc func, gpointer data);

#endif /* RANK_STORE_H */
