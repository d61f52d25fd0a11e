/* store.h -- boards in Redis: the key layout and every operation.
 *
 * A store belongs to one event loop and talks to Redis through its backend
 * (backend.h). Every operation takes the call's context (context.h: the
 * board, its options, the period, the time), which must live until the
 * operation's callback has returned; it reads neither the clock nor the
 * configuration itself. Operations are asynchronous: each calls its
 * callback exactly once, in the loop's thread, never from inside the call
 * that started it.
 *
 * A board is ordinary or sharded, as its options say; the store hides the
 * difference, except that a sharded update's result has no rank (rank 0).
 *
 * Inputs are assumed valid: the handler checks the fields (validate.h) and
 * what the board's options refuse (policy.h). The store checks only what
 * needs the stored data (an increment's result range, a reused request id,
 * depth that only the data tells). Errors are RANK_ERROR_*: INVALID,
 * NOT_FOUND, UNAVAILABLE, INTERNAL. A call that needs several Redis nodes
 * fails as a whole when any of them fails: no partial answers.
 *
 * The operations live in store_update.c (Update, Remove), store_read.c
 * (GetRank, GetRanks, Count, GetTopN, member data), store_query.c (the
 * queries of several rounds: GetAround, GetPercentile, GetScoreAtPercentile,
 * Sample), store_admin.c (ListBoards, GetBoardInfo, DeleteBoard,
 * ResetBoard, Export) and queue_store*.c (the update queue's streams);
 * store.c holds the keys, the layout checks and what they share.
 */
#ifndef RANK_STORE_H
#define RANK_STORE_H

#include <glib.h>

#include "backend.h"
#include "config.h"
#include "constants.h"
#include "context.h"
#include "row.h"

typedef struct _RankStore RankStore;

/* One update. The strings belong to the caller and live as long as the
 * call. */
typedef struct
{
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
  /* The caller has no use for the rank (with_rank=false on the
   * UpdateRequest or its UpdateBatch): the script leaves it out (rank 0),
   * which costs Redis a ZRANK less. */
  gboolean without_rank;
  /* The caller reads only whether the update applied (the queue's drain;
   * implies without_rank): update.lua answers each update with that one
   * element, not four, which costs Redis less, and such updates leave in
   * script calls of up to RANK_GROUP_MAX_ITEMS, not RANK_BATCH_MAX_ITEMS,
   * as no caller waits behind them (backend.c, batch_max_items). The
   * result's score, rank and subscores are 0. Not with group. */
  gboolean applied_only;
  /* Set: the update is one of a batch recorded as a whole
   * (UpdateBatchRequest.request_id): these RANK_UPDATE_GROUP_BYTES go
   * to update.lua as its group argument, the same for every update of the
   * batch, and the update's own request id is not recorded. */
  const guint8 *group;
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

/* One member's answer in rank_store_get_ranks. */
typedef struct
{
  gboolean found;
  gint64 score;
  gint64 rank;
} RankOfMember;

typedef void (*RankStoreUpdateFunc) (const RankUpdateResult *result,
                                     const GError *error, gpointer data);
/* row: the member's place (NULL on error). */
typedef void (*RankStoreRowFunc) (const RankRow *row, const GError *error,
                                  gpointer data);
/* rows[0..n) live only during the callback. */
typedef void (*RankStoreRowsFunc) (const RankRow *rows, gsize n,
                                   const GError *error, gpointer data);
/* results[i] answers members[i]; they live only during the callback. */
typedef void (*RankStoreRanksFunc) (const RankOfMember *results, guint n,
                                    const GError *error, gpointer data);
typedef void (*RankStoreCountFunc) (gint64 count, const GError *error,
                                    gpointer data);
typedef void (*RankStoreValueFunc) (double value, const GError *error,
                                    gpointer data);
typedef void (*RankStoreDoneFunc) (const GError *error, gpointer data);
/* data: the member's data, encoded (empty if none). */
typedef void (*RankStoreDataFunc) (const char *data, gsize len,
                                   const GError *error, gpointer user_data);

/* A page of a board: offset+1 .. offset+n in its order; with_data: each
 * row carries its member's data (one more round trip). */
typedef struct
{
  gint64 offset;
  gint n;
  gboolean with_data;
} RankTopQuery;

/* Members on the board (a capped board: at most its cap); range: those
 * with min <= score <= max. */
typedef struct
{
  gboolean range;
  gint64 min;
  gint64 max;
} RankCountQuery;

/* The member and up to radius entries above and below it. */
typedef struct
{
  const char *member;
  gint radius;
  gboolean with_data;
} RankAroundQuery;

/* Up to count distinct members drawn uniformly from those with
 * min <= score <= max, with their ranks. */
typedef struct
{
  gint64 min;
  gint64 max;
  gint count;
} RankSampleQuery;

/* seed makes Sample's draws repeatable (0: unpredictable). The store uses
 * backend for every command. */
RankStore *rank_store_new (RankBackend *backend, guint32 seed);
void rank_store_free (RankStore *store);

/* ---- the board's stored layout (layout.h) ---- */

/* Before a call touches the board of ctx (write: it may change it), its
 * stored layout must match the options in force: OK, known now; REFUSED,
 * known now, with error (Unavailable naming the option); or PENDING: func
 * says, later. What a worker learned holds for RANK_LAYOUT_RECHECK_MS,
 * counted to the call's decoding (ctx->decoded_us), so the updates of one
 * call are checked again all or none; a write on a board with no
 * descriptor records one. */
typedef enum
{
  RANK_LAYOUT_OK,
  RANK_LAYOUT_REFUSED,
  RANK_LAYOUT_PENDING,
} RankLayoutCheck;

RankLayoutCheck rank_store_check_layout (RankStore *store,
                                         const RankContext *ctx, gboolean write,
                                         GError **error, RankStoreDoneFunc func,
                                         gpointer data);

/* The options changed (a reload): what was learned no longer holds. */
void rank_store_forget_layouts (RankStore *store);

/* Reads the stored layout of every board config names, so that the log
 * says at once which do not match (at start, after a reload). */
void rank_store_check_configured_layouts (RankStore *store, RankConfig *config,
                                          gint64 now_ms);

/* ---- Update, Remove (store_update.c) ---- */

/* An update in ctx's period; RANK_MODE_REMOVE removes the member. */
void rank_store_update (RankStore *store, const RankContext *ctx,
                        const RankUpdate *update, RankStoreUpdateFunc func,
                        gpointer data);

/* What rank_store_update sends (update.lua's keys and arguments), for nodes
 * over which shards spread: head, the batch's part (keys, then its
 * arguments), and item, the update's own arguments; a call of update.lua
 * is a head and one or more items. For the load generator's direct
 * baseline and for tests that run update.lua on their own. Returns the
 * node it goes to. */
guint rank_store_update_command (const RankContext *ctx,
                                 const RankUpdate *update, guint nodes,
                                 RankCommand *head, RankCommand *item);

/* update.lua's arguments after its keys, by name, in their order: the
 * batch's, then each update's, and the header bytes of an update's second
 * argument and of a packed SET's (tests check the script reads them so). */
extern const char *const rank_store_update_batch_arg_names[];
extern const guint rank_store_update_n_batch_args;
extern const char *const rank_store_update_per_update_arg_names[];
extern const guint rank_store_update_n_per_update_args;
extern const char *const rank_store_update_what_names[];
extern const guint rank_store_update_n_what_bytes;
extern const char *const rank_store_update_set_names[];
extern const guint rank_store_update_n_set_bytes;

/* ---- reads (store_read.c) ---- */

/* The member's place, ranked as kind (0: the board's kind). ordinal is its
 * position (where GetAround's page starts), competition is 1 + those with
 * a better score (GetPercentile). NotFound if it is not on the board. */
void rank_store_get_rank (RankStore *store, const RankContext *ctx,
                          const char *member, RankKind kind,
                          RankStoreRowFunc func, gpointer data);

/* GetRank of each of members[0..n) at once (they share the round trips);
 * absent ones are found=FALSE. Fails as a whole on any other error. */
void rank_store_get_ranks (RankStore *store, const RankContext *ctx,
                           const char *const *members, guint n,
                           RankStoreRanksFunc func, gpointer data);

void rank_store_count (RankStore *store, const RankContext *ctx,
                       const RankCountQuery *query, RankStoreCountFunc func,
                       gpointer data);

void rank_store_get_top (RankStore *store, const RankContext *ctx,
                         const RankTopQuery *query, RankStoreRowsFunc func,
                         gpointer data);

/* SetMemberData: replaces the data of a member on ctx's period (encoded as
 * memberdata.h says; empty deletes it). NotFound if the member is not on
 * it. */
void rank_store_set_data (RankStore *store, const RankContext *ctx,
                          const char *member, const char *data, gsize len,
                          RankStoreDoneFunc func, gpointer user_data);

/* GetMemberData: the encoded data (empty if none), or NotFound. */
void rank_store_get_data (RankStore *store, const RankContext *ctx,
                          const char *member, RankStoreDataFunc func,
                          gpointer user_data);

/* ---- queries of several rounds (store_query.c) ---- */

/* Ranked as the board ranks; the page starts at the member's ordinal
 * position minus radius. */
void rank_store_get_around (RankStore *store, const RankContext *ctx,
                            const RankAroundQuery *query,
                            RankStoreRowsFunc func, gpointer data);

/* The share (%) of members with a strictly worse score than member's. */
void rank_store_get_percentile (RankStore *store, const RankContext *ctx,
                                const char *member, RankStoreValueFunc func,
                                gpointer data);

/* The score at position ceil(count * (100 - pct) / 100) (at least 1);
 * NotFound on an empty board. */
void rank_store_score_at_percentile (RankStore *store, const RankContext *ctx,
                                     double pct, RankStoreCountFunc func,
                                     gpointer data);

void rank_store_sample (RankStore *store, const RankContext *ctx,
                        const RankSampleQuery *query, RankStoreRowsFunc func,
                        gpointer data);

/* ---- board administration and export (store_admin.c) ---- */

/* A page of the boards written to (RANK_BOARDS_KEY), names after after
 * (bytewise; "" from the first), at most limit. names[0..n) live only
 * during the callback. */
typedef void (*RankStoreNamesFunc) (const char *const *names, guint n,
                                    const GError *error, gpointer data);
void rank_store_list_boards (RankStore *store, const char *after, guint limit,
                             RankStoreNamesFunc func, gpointer data);

/* A call on ctx's board, which has a rolling window (options->window):
 * makes sure its window is rolled to ctx's period, in the background
 * (store_window.c); nothing to do when this worker saw it done within the
 * last second. */
void rank_store_window_ensure (RankStore *store, const RankContext *ctx);

/* What Redis holds of a board: every key of it (shards, periods, request
 * ids), named from what the board records of itself (store_admin.c). */
typedef struct
{
  gint64 keys;
  gint64 memory_bytes;       /* MEMORY USAGE, summed */
  GPtrArray *periods;        /* labels (char *) with keys, newest first */
  const char *stored_layout; /* the descriptor; NULL: none */
} RankBoardStats;

typedef void (*RankStoreStatsFunc) (const RankBoardStats *stats,
                                    const GError *error, gpointer data);
void rank_store_board_stats (RankStore *store, const RankContext *ctx,
                             RankStoreStatsFunc func, gpointer data);

typedef enum
{
  RANK_CLEAR_DELETE, /* every key of the board */
  RANK_CLEAR_RESET,  /* its entries: the layout and request ids stay */
} RankClearKind;

/* applied FALSE: request_id did this before, and keys_removed is what it
 * removed then. A request_id used for the other kind is Invalid. */
typedef void (*RankStoreClearFunc) (gboolean applied, gint64 keys_removed,
                                    const GError *error, gpointer data);

/* DeleteBoard, ResetBoard: removes the board's keys, its request-id record
 * hashes by UNLINK, at most RANK_ADMIN_UNLINK_MAX a command, then each
 * scope (its own keys under a tag, one period's) whole in one call of
 * clear.lua; idempotent by request_id for ctx's dedup window. */
void rank_store_clear_board (RankStore *store, const RankContext *ctx,
                             RankClearKind kind, const char *request_id,
                             RankStoreClearFunc func, gpointer data);

/* Where an export is: the shard, and HSCAN's cursor in its times hash. */
typedef struct
{
  guint shard;
  guint64 cursor;
} RankExportCursor;

/* rows[0..n) (with data and time_ms; rank 0) live only during the
 * callback; next NULL: that was the last page. */
typedef void (*RankStoreExportFunc) (const RankRow *rows, gsize n,
                                     const RankExportCursor *next,
                                     const GError *error, gpointer data);

/* One page of about count entries of ctx's period from cursor on
 * ({0, 0}: the start; cursor->shard below the board's shards). */
void rank_store_export (RankStore *store, const RankContext *ctx,
                        const RankExportCursor *cursor, guint count,
                        RankStoreExportFunc func, gpointer data);

/* ---- the update queue (queue_store*.c; queue.h drains it) ---- */

/* ids[0..n) (the stream entries' ids: the updates of one shard share
 * one) live only during the callback. */
typedef void (*RankStoreIdsFunc) (const char *const *ids, guint n,
                                  const GError *error, gpointer data);

/* Enqueue: updates[0..n) of ctx's board (checked, with their times fixed)
 * into the streams of their shards, one entry a shard, after WAIT with
 * --wait-replicas; then the board joins the list of queues with work (an
 * error there fails the call, the entries in: a retry with the same
 * request ids applies them once). Unavailable ("queue full") and nothing queued
 * when the board's backlog would pass its queue_max_backlog. updates must live
 * until func. */
void rank_store_enqueue (RankStore *store, const RankContext *ctx,
                         const RankUpdate *const *updates, guint n,
                         RankStoreIdsFunc func, gpointer data);

/* In updates, whatever the size of the entries; of the streams of the
 * board's shards, and of its stored layout's if that names another number
 * of shards (updates queued before a reload changed them wait there). */
typedef struct
{
  gint64 backlog;   /* updates not acknowledged yet */
  gint64 pending;   /* of those, read and not acknowledged */
  gint64 oldest_ms; /* Unix ms the oldest was queued; 0: none */
  gint64 applied;
  gint64 dead;
} RankQueueStats;

typedef void (*RankStoreQueueStatsFunc) (const RankQueueStats *stats,
                                         const GError *error, gpointer data);
void rank_store_queue_stats (RankStore *store, const RankContext *ctx,
                             RankStoreQueueStatsFunc func, gpointer data);

/* One entry of a stream: the updates of one Enqueue call to one shard,
 * updates[first..first+n) of its batch. count: how many it says it
 * holds. */
typedef struct
{
  const char *id;
  guint count;
  guint first;
  guint n;
} RankQueueEntry;

/* One update of an entry. valid: it could be read (else it goes to the
 * dead letters; an entry that cannot be read at all is one such update).
 * Its strings point into the batch. */
typedef struct
{
  guint entry; /* its entry's index in the batch */
  RankUpdate update;
  gint64 subscores[RANK_SUBSCORES_MAX];
  gboolean valid;
} RankQueueUpdate;

/* Entries read from a stream, their updates, and the reply they point
 * into. */
typedef struct
{
  RankQueueEntry *entries;
  guint n_entries;
  RankQueueUpdate *updates;
  guint n;
  struct _RankReply *reply;
  /* Read before (own pending, claimed): an update of it found already
   * applied may be its own earlier try, never acknowledged. */
  gboolean redelivered;
} RankQueueBatch;

void rank_queue_batch_free (RankQueueBatch *batch);

/* batch (NULL on error) is the callee's, to free. */
typedef void (*RankStoreBatchFunc) (RankQueueBatch *batch, const GError *error,
                                    gpointer data);

typedef enum
{
  RANK_QUEUE_NEW,         /* entries no consumer has read */
  RANK_QUEUE_OWN_PENDING, /* this consumer's, read and not acknowledged */
  RANK_QUEUE_CLAIM,       /* anyone's, pending for min_idle_ms or more */
} RankQueueRead;

/* Reads up to count entries of shard's stream as consumer of the group.
 * NotFound: the stream has no group (rank_store_queue_create). */
void rank_store_queue_read (RankStore *store, const RankContext *ctx,
                            guint shard, const char *consumer,
                            RankQueueRead how, guint count, guint min_idle_ms,
                            RankStoreBatchFunc func, gpointer data);

/* What became of an update of a batch: applied (reason NULL), a replay
 * of a request id already applied (replayed), dead with reason, or to
 * retry (its entry stays pending). */
typedef struct
{
  gboolean retry;
  gboolean replayed;
  const char *reason;
} RankQueueOutcome;

/* The entries of batch done with (outcomes: one per update): those with
 * an update to retry stay pending; the others are acknowledged, and those
 * this acknowledgement counts (not another drain's before it) have their
 * updates counted and their dead updates put in the dead letters, in the
 * same script. */
void rank_store_queue_done (RankStore *store, const RankContext *ctx,
                            guint shard, const RankQueueBatch *batch,
                            const RankQueueOutcome *outcomes,
                            RankStoreDoneFunc func, gpointer data);

/* The group of shard's stream (and the stream), if not there yet. */
void rank_store_queue_create (RankStore *store, const RankContext *ctx,
                              guint shard, RankStoreDoneFunc func,
                              gpointer data);

/* Removes shard's acknowledged entries from its stream (XTRIM MINID:
 * those before the oldest pending, or all delivered when none is). */
void rank_store_queue_trim (RankStore *store, const RankContext *ctx,
                            guint shard, RankStoreDoneFunc func, gpointer data);

/* 1 if the streams of ctx's board hold nothing to apply (no entry
 * undelivered, none pending on any drain), their acknowledged entries then
 * removed; 0 if one holds some. The streams are those of its shards, and
 * of its stored layout's if that names another number of shards (queued
 * before a reload changed them). */
void rank_store_queue_idle (RankStore *store, const RankContext *ctx,
                            RankStoreCountFunc func, gpointer data);

/* names[0..n) and their scores (as Redis wrote them) live only during the
 * callback. */
typedef void (*RankStoreQueuesFunc) (const char *const *names,
                                     const char *const *scores, guint n,
                                     const GError *error, gpointer data);

/* The boards whose queue has work (rk:queues), at most max of them, those
 * whose work was added longest ago first, with their scores for
 * rank_store_queue_leave. */
void rank_store_list_queues (RankStore *store, guint max,
                             RankStoreQueuesFunc func, gpointer data);

/* Lists board among the queues with work (the count: its score). */
void rank_store_queue_join (RankStore *store, const char *board,
                            RankStoreCountFunc func, gpointer data);

/* Takes board off the list of queues with work if its score is still score
 * (1; 0: work was added since, it stays). Call it after every stream of
 * the board was found idle (rank_store_queue_idle), that look having begun
 * after the list was read: an Enqueue lists its board again after its
 * entries are in, so it moved the score or the look saw its entries. */
void rank_store_queue_leave (RankStore *store, const char *board,
                             const char *score, RankStoreCountFunc func,
                             gpointer data);

#endif /* RANK_STORE_H */
