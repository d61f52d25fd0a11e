/* store_private.h -- what the store's files share (store.c, store_update.c,
 * store_read.c, store_query.c): the store itself, the key layout, and the
 * helpers of fan-outs. Not for other modules.
 */
#ifndef RANK_STORE_PRIVATE_H
#define RANK_STORE_PRIVATE_H

#include "requestid.h"
#include "store.h"

struct _RankStore
{
  RankBackend *backend;
  guint nodes; /* rank_backend_nodes: shard i lives on node i mod nodes */
  GRand *rand; /* Sample */
  /* What this worker learned of boards' stored layouts (layout.h): board
   * -> LayoutEntry, for the options in force. */
  GHashTable *layouts;
  /* The newest check in flight of each board: board, options described ->
   * the check, which also answers the calls that ask the same of it while
   * it is the newest (so their answers keep their order). */
  GHashTable *layout_asks;
  /* GetRanks waiting for their first round without a script (store_read.c),
   * by their board's hash tag (-> GQueue): a write of their board queued
   * meanwhile sends rank.lua for them first, so that no GetRank sees a
   * write queued after it. */
  GHashTable *rank_reads;
  /* The script call's head of the newest batch recorded as a whole (NULL
   * until the first), the group argument it was made for, and its node:
   * the batch's updates share it (store_update.c). */
  RankCommand *group_head;
  guint8 group_of_head[RANK_UPDATE_GROUP_BYTES];
  gint64 group_now_ms;
  guint group_node;
  /* Rolling windows (store_window.c): "board/shard" -> its roll. */
  GHashTable *windows;
  GHashTable *windows_fresh; /* board -> WindowFresh (store_window.c) */
};

/* ---- rolling windows (store_window.c) ---- */

void store_windows_init (RankStore *store);
void store_windows_free (RankStore *store);
/* What this worker learned of board's windows no longer holds (a
 * ResetBoard or DeleteBoard took their state). */
void store_forget_windows (RankStore *store, const char *board, guint shards);
/* update.lua's window argument: "" (no window), "sum" or "best". */
const char *store_window_combine (const RankBoardOptions *o);

/* The backend's write watcher (rank_backend_watch_writes): store_read.c. */
void store_fence_rank_reads (const char *tag, gsize tag_len, gpointer data);

/* ---- keys (README "Key layout in Redis") ---- */

/* The key of suffix of ctx's board, or of its shard when it has shards, in
 * ctx's period; the request-id records (RANK_KEY_SUFFIX_REQUEST) are the
 * board's across periods (a retry after midnight is still a retry). */
void store_add_key (RankCommand *cmd, const RankContext *ctx, guint shard,
                    const char *suffix);
/* The same key, into out (room for RANK_STORE_KEY_MAX); returns its
 * length. */
gsize store_key (char *out, const RankContext *ctx, guint shard,
                 const char *suffix);

/* The keys with suffix of the board's shards that live on node, but skip
 * (-1: none skipped). */
void store_add_node_keys (RankCommand *cmd, const RankStore *store,
                          const RankContext *ctx, guint node, gint skip,
                          const char *suffix);

guint store_shard_of (const RankContext *ctx, const char *member, gsize len);

/* cmd is a read of ctx's board: a replica may answer it if the board's
 * options say so (read_from=replica), fresh enough for ctx. */
void store_read_from (RankCommand *cmd, const RankContext *ctx);
guint store_node_of (const RankStore *store, guint shard);

/* The key of suffix under board's own tag ("rk:{board}:suffix"), into
 * out (room for RANK_STORE_KEY_MAX); returns its length. */
#define RANK_STORE_KEY_MAX                                                     \
  (sizeof RANK_SHARD_KEY_PREFIX + RANK_BOARD_MAX_BYTES + RANK_PERIOD_LABEL_MAX \
   + 80)
gsize store_board_key (char *out, const char *board, const char *suffix);

/* What this worker learned of board's stored layout no longer holds (it
 * was deleted). */
void store_forget_layout (RankStore *store, const char *board);

/* ---- replies ---- */

/* An unexpected reply to what: an internal error (and a warning). */
GError *store_unexpected (const RankReply *reply, const char *what);

/* A row (rank 0, no data) from its order key and sorted-set score. */
void store_row_from_key (const RankBoardOptions *o, const char *key,
                         gsize key_len, gint64 zscore, RankRow *row);

/* The subscores an order-key prefix starts with. */
void store_decode_subscores (const RankBoardOptions *o, const char *prefix,
                             guint *n, gint64 *out);

/* The order-key prefix bytes of the board: subscores, then time. */
gsize store_prefix_len (const RankBoardOptions *o);

/* The sorted-set score range of scores min..max: -score, or score on asc
 * boards. */
void store_zscore_bounds (const RankBoardOptions *o, gint64 min, gint64 max,
                          gint64 *lo, gint64 *hi);

const char *store_order_name (RankOrder order);
const char *store_kind_name (RankKind kind);

/* ---- fan-outs ---- */

/* A fan-out's countdown: records the first error of its commands. TRUE
 * when the last one is done. */
typedef struct
{
  guint pending;
  GError *error;
} StoreCountdown;

gboolean store_countdown_done (StoreCountdown *c, const GError *error);

/* One command of a fan-out: its task, and which of its parts it is. */
typedef struct
{
  gpointer task;
  guint index;
} StorePart;

#endif /* RANK_STORE_PRIVATE_H */
