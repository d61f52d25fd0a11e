/* store.h -- boards in Redis: key layout, scripts, and the core operations.
 *
 * A store belongs to one event loop and talks to Redis through that loop's
 * link. Operations are asynchronous: each calls its callback exactly once,
 * in the loop's thread, never from inside the call that started it.
 *
 * A board is ordinary or sharded, as the configuration says (config.h);
 * the store hides the difference, except that a sharded update's result
 * has no rank (rank 0).
 *
 * Inputs are assumed valid (the handler validates, with
 * rank_store_check_top for what depends on the board's options); the store
 * checks only what needs the stored data (an increment's result range, a
 * reused request id). Errors are RANK_ERROR_*: INVALID, NOT_FOUND,
 * UNAVAILABLE, INTERNAL. A call that needs several Redis nodes fails as a
 * whole when any of them fails: no partial answers.
 */
#ifndef RANK_STORE_H
#define RANK_STORE_H

#include <glib.h>

#include "config.h"
#include "constants.h"
#include "redis_link.h"

typedef struct _RankStore RankStore;

typedef struct
{
  const char *board;
  const char *member;
  const char *request_id;
  gint64 value;
  RankMode mode;
  gint64 timestamp_ms;
  /* The board's subscores, or none (n_subscores 0: an INCREMENT keeps the
   * member's own). */
  const gint64 *subscores;
  guint n_subscores;
  /* data_given: replace the member's data with data (memberdata.h's
   * encoding; empty: delete it). */
  gboolean data_given;
  const char *data;
  gsize data_len;
} RankUpdate;

typedef struct
{
  gint64 score;
  gint64 rank; /* 0: not ranked; RANK_MODE_REMOVE: 1 if it was removed */
  gboolean applied;
  /* The member's subscores after the update (boards with subscores). */
  guint n_subscores;
  gint64 subscores[RANK_SUBSCORES_MAX];
} RankUpdateResult;

/* One entry of a page; member (not NUL-terminated) and data live only during
 * the callback. */
typedef struct
{
  const char *member;
  gsize member_len;
  gint64 score;
  gint64 rank;
  guint n_subscores; /* the board's */
  gint64 subscores[RANK_SUBSCORES_MAX];
  const char *data; /* with_data: the member's, encoded; NULL if none */
  gsize data_len;
} RankEntry;

typedef void (*RankStoreUpdateFunc) (const RankUpdateResult *result,
                                     const GError *error, gpointer data);
/* entry: the member's place (NULL on error). */
typedef void (*RankStoreRankFunc) (const RankEntry *entry, const GError *error,
                                   gpointer data);
typedef void (*RankStoreCountFunc) (gint64 count, const GError *error,
                                    gpointer data);

/* One member's answer in rank_store_get_ranks. */
typedef struct
{
  gboolean found;
  gint64 score;
  gint64 rank;
} RankOfMember;

/* results[i] answers members[i]; they live only during the callback. */
typedef void (*RankStoreRanksFunc) (const RankOfMember *results, guint n,
                                    const GError *error, gpointer data);
typedef void (*RankStoreTopFunc) (const RankEntry *entries, gsize n,
                                  const GError *error, gpointer data);

/* links: one per Redis node (ordinary boards live on the first). Registers
 * the scripts on every link (call before rank_redis_link_start). The store
 * keeps a reference to config. */
RankStore *rank_store_new (RankRedisLink *const *links, guint n_links,
                           RankConfig *config, gint64 dedup_window_ms,
                           guint32 seed);

/* The same on Redis Cluster: every command goes to the master of its
 * first key's slot (cluster.h); each shard of a sharded board is a node of
 * its own, since one command may not name keys of two slots. */
typedef struct _RankCluster RankCluster;
RankStore *rank_store_new_cluster (RankCluster *cluster, RankConfig *config,
                                   gint64 dedup_window_ms, guint32 seed);

/* Every update then waits (Redis WAIT) until replicas replicas have it,
 * at most timeout_ms; fewer is Unavailable. 0: no waiting (the default). */
void rank_store_set_wait_replicas (RankStore *store, guint replicas,
                                   int timeout_ms);

/* Board options for calls from now on (a reload); loop thread only. Calls
 * in flight finish with the options they started with. */
void rank_store_set_config (RankStore *store, RankConfig *config);
void rank_store_free (RankStore *store);

/* Before a call touches board (write: it may change it), its stored
 * layout must match the options in force (layout.h): OK, known now;
 * REFUSED, known now, with error (Unavailable naming the option); or
 * PENDING: func says, later. What a worker learned holds for
 * RANK_LAYOUT_RECHECK_MS; a write on a board with no descriptor records
 * one. */
typedef enum
{
  RANK_LAYOUT_OK,
  RANK_LAYOUT_REFUSED,
  RANK_LAYOUT_PENDING,
} RankLayoutCheck;

typedef void (*RankStoreLayoutFunc) (const GError *error, gpointer data);
RankLayoutCheck rank_store_check_layout (RankStore *store, const char *board,
                                         gboolean write, GError **error,
                                         RankStoreLayoutFunc func,
                                         gpointer data);

/* Reads the stored layout of every board the configuration names, so that
 * the log says at once which do not match (at start, after a reload). */
void rank_store_check_configured_layouts (RankStore *store);

void rank_store_update (RankStore *store, const RankUpdate *update,
                        RankStoreUpdateFunc func, gpointer data);

/* periods_back: on a periodic board, how many periods before the current
 * one to read (checked by rank_store_check_period); 0 otherwise. */
void rank_store_get_rank (RankStore *store, const char *board,
                          const char *member, guint periods_back,
                          RankStoreRankFunc func, gpointer data);

/* The member's rank counted as kind, whatever the board's: ordinal is its
 * position (where GetAround's page starts), competition is 1 + those with a
 * better score (GetPercentile). */
void rank_store_get_rank_as (RankStore *store, const char *board,
                             const char *member, guint periods_back,
                             RankKind kind, RankStoreRankFunc func,
                             gpointer data);

/* GetRank of each of members[0..n) at once (they share the round trips);
 * absent ones are found=FALSE. Fails as a whole on any other error. */
void rank_store_get_ranks (RankStore *store, const char *board,
                           const char *const *members, guint n,
                           guint periods_back, RankStoreRanksFunc func,
                           gpointer data);

/* Members on the board (a capped board: at most its cap); with range, those
 * with min <= score <= max. */
void rank_store_count (RankStore *store, const char *board, gboolean range,
                       gint64 min, gint64 max, guint periods_back,
                       RankStoreCountFunc func, gpointer data);

/* The board's options as configured now (loop thread; valid until the
 * loop runs a reload: copy what must last). */
const RankBoardOptions *rank_store_board (RankStore *store, const char *board);

/* A periodic board takes an update for its current period, or with
 * accept_late for a past one it still keeps. */
gboolean rank_store_check_update (RankStore *store, const RankUpdate *update,
                                  GError **error);

/* periods_back within what board keeps. */
gboolean rank_store_check_period (RankStore *store, const char *board,
                                  gint64 periods_back, GError **error);

/* offset+n within what board may serve (sharded boards: max_top_depth). */
gboolean rank_store_check_top (RankStore *store, const char *board,
                               gint64 offset, gint n, GError **error);

/* with_data: each entry carries its member's data (one more round trip). */
void rank_store_get_top (RankStore *store, const char *board, gint64 offset,
                         gint n, guint periods_back, gboolean with_data,
                         RankStoreTopFunc func, gpointer data);

/* Up to count distinct members drawn uniformly from those with
 * min <= score <= max: the entries come without ranks (rank 0), in no
 * particular order. seed of rank_store_new makes the draws repeatable. */
void rank_store_sample (RankStore *store, const char *board, gint64 min,
                        gint64 max, gint count, guint periods_back,
                        RankStoreTopFunc func, gpointer data);

/* SetMemberData: replaces the data of a member on the board's current
 * period (data as memberdata.h encodes it; empty deletes it). NotFound if
 * the member is not on it. */
typedef void (*RankStoreDoneFunc) (const GError *error, gpointer user_data);
void rank_store_set_data (RankStore *store, const char *board,
                          const char *member, const char *data, gsize len,
                          RankStoreDoneFunc func, gpointer user_data);

/* GetMemberData: func gets the encoded data (empty if none), or NotFound. */
typedef void (*RankStoreDataFunc) (const char *data, gsize len,
                                   const GError *error, gpointer user_data);
void rank_store_get_data (RankStore *store, const char *board,
                          const char *member, guint periods_back,
                          RankStoreDataFunc func, gpointer user_data);

/* What update.lua gets to record a request id: the 4-byte fingerprint of
 * what the update stands for, and the request id's 10-byte hash and record
 * hash selector. Public for tests that write records as an older rankd did. */
void rank_store_fingerprint (const RankUpdate *update, guint8 out[4]);
void rank_store_request_id_hash (const char *request_id, guint8 field[10],
                                 guint32 *selector);

/* update.lua's last arguments: the request-id buckets an update at now_ms
 * looks in, with a dedup window of window_ms (out[0] the current bucket,
 * out[i] the one i before it), and out[RANK_DEDUP_BUCKETS + 1], when the
 * current bucket's records expire (Unix ms). Public for the load
 * generator's direct baseline and for tests that run update.lua. */
#define RANK_STORE_BUCKET_ARGS (RANK_DEDUP_BUCKETS + 2)
void rank_store_request_buckets (gint64 window_ms, gint64 now_ms,
                                 gint64 out[RANK_STORE_BUCKET_ARGS]);

#endif /* RANK_STORE_H */
