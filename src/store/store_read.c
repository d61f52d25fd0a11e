/* store_read.c -- the reads of one round or two: GetRank, GetRanks, Count,
 * GetTopN, member data (see store.h).
 *
 * GetRank of an ordinal rank on an ordinary board takes two rounds and no
 * script: HMGET of the member's prefix, then one transaction of its score
 * and rank (both batched with the board's other GetRanks of the loop
 * iteration). Every other GetRank is one EVALSHA of rank.lua per node
 * holding the board: the node of the member's shard finds the member and
 * counts the entries ahead of it there, then every other node counts those
 * ahead of it in its shards.
 * GetTopN is one ZRANGE on an ordinary board; on a sharded one, one ZRANGE
 * of the top offset+n per shard (all sent at once: they share each node's
 * round trip, and the nodes work in parallel), merged here.
 */
#include "store.h"

#include <string.h>

#include "error.h"
#include "orderkey.h"
#include "shard.h"
#include "store_private.h"

/* ---- what is ahead of an entry ---- */

/* Summed over nodes: a count (ordinal and competition ranks, one-shard
 * dense ranks), or on a sharded dense board the set of distinct better
 * sorted-set scores, whose size is the count. */
typedef struct
{
  gint64 count;
  GHashTable *distinct; /* gint64 set; NULL unless sharded dense */
} Ahead;

static void
ahead_init (Ahead *a, const RankBoardOptions *o, RankKind kind)
{
  a->count = 0;
  a->distinct
      = kind == RANK_KIND_DENSE && o->shards > 1
            ? g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL)
            : NULL;
}

static void
ahead_clear (Ahead *a)
{
  g_clear_pointer (&a->distinct, g_hash_table_unref);
}

/* Adds one node's answer to rank.lua count (or find's list): an integer,
 * or the list of distinct scores. FALSE if it is neither. */
static gboolean
ahead_add (Ahead *a, const RankReply *reply)
{
  if (a->distinct == NULL)
    {
      if (reply->type != RANK_REPLY_INTEGER)
        return FALSE;
      a->count += reply->integer;
      return TRUE;
    }
  if (reply->type != RANK_REPLY_ARRAY)
    return FALSE;
  for (gsize i = 0; i < reply->elements; i++)
    {
      const RankReply *e = reply->element[i];
      gint64 zscore;

      if (e->type != RANK_REPLY_STRING
          || !rank_orderkey_parse_zscore (e->str, e->len, &zscore))
        return FALSE;
      g_hash_table_add (a->distinct, g_memdup2 (&zscore, sizeof zscore));
    }
  return TRUE;
}

static gint64
ahead_total (const Ahead *a)
{
  return a->distinct != NULL ? g_hash_table_size (a->distinct) : a->count;
}

/* Sharded dense boards merge at most max_top_depth distinct scores. */
static gboolean
ahead_too_deep (const Ahead *a, const RankBoardOptions *o)
{
  return a->distinct != NULL
         && g_hash_table_size (a->distinct) > o->max_top_depth;
}

/* rank.lua's name for a way of counting ranks. */
static const char *
rank_script_kind (const RankBoardOptions *o, RankKind kind)
{
  if (kind == RANK_KIND_DENSE)
    return o->shards > 1 ? "dense-list" : "dense";
  return store_kind_name (kind);
}

/* rank.lua's ARGV up to the member or score: op, kind, limit, the length
 * of the board's prefixes. */
static void
add_rank_args (RankCommand *cmd, const char *op, const RankBoardOptions *o,
               RankKind kind)
{
  rank_command_add_str (cmd, op);
  rank_command_add_str (cmd, rank_script_kind (o, kind));
  rank_command_add_int (cmd, o->max_top_depth);
  rank_command_add_int (cmd, (gint64) store_prefix_len (o));
}

/* Asks every node holding shards of the board, but skip_node, for what is
 * ahead of (zscore, key) there: rank.lua count over its shards' sorted
 * sets, or distinct-score sets when counting dense. Each answer goes to
 * func with task; returns how many were sent. */
static guint
send_counts (RankStore *store, const RankContext *ctx, RankKind kind,
             guint skip_node, const char *zscore, gsize zscore_len,
             const char *key, gsize key_len, RankBackendFunc func,
             gpointer task)
{
  const RankBoardOptions *o = ctx->options;
  guint sent = 0;

  for (guint node = 0; node < MIN (store->nodes, o->shards); node++)
    {
      RankCommand cmd;

      if (node == skip_node)
        continue;
      rank_command_init_script (&cmd, RANK_SCRIPT_RANK);
      store_add_node_keys (&cmd, store, ctx, node, -1,
                           kind == RANK_KIND_DENSE ? RANK_KEY_SUFFIX_DISTINCT
                                                   : RANK_KEY_SUFFIX_SCORES);
      rank_command_keys_done (&cmd);
      add_rank_args (&cmd, "count", o, kind);
      rank_command_add (&cmd, zscore, zscore_len);
      rank_command_add (&cmd, key, key_len);
      store_read_from (&cmd, ctx);
      rank_backend_send (store->backend, node, &cmd, 0, func, task);
      sent++;
    }
  return sent;
}

/* ---- GetRank ---- */

typedef struct
{
  RankStore *store;
  const RankContext *ctx;
  RankKind kind; /* the board's, or the one asked for */
  char *member;
  RankStoreRowFunc func;
  gpointer data;
  StoreCountdown countdown;
  guint node; /* the member's */
  gint64 score;
  guint n_subscores;
  gint64 subscores[RANK_SUBSCORES_MAX];
  Ahead ahead; /* entries ahead of the member, over the nodes */
  /* Without a script: the board's hash tag; in store->rank_reads while the
   * first round is out; fenced: a write came meanwhile and rank.lua reads
   * instead, the first round's reply is dropped. refs: the rounds that
   * will still call back. */
  char *tag;
  GList link;
  gboolean fenced;
  guint refs;
  /* The member's prefix read in round 1, which round 2 must find again. */
  guint8 prefix[RANK_ORDERKEY_PREFIX_BYTES (RANK_SUBSCORES_MAX)];
} RankTask;

static void rank_found (const RankReply *reply, const GError *error,
                        gpointer data);
static void rank_counted (const RankReply *reply, const GError *error,
                          gpointer data);
static void rank_prefixed (const RankReply *reply, const GError *error,
                           gpointer data);
static void rank_ranked (const RankReply *reply, const GError *error,
                         gpointer data);
static void rank_finish (RankTask *task);
static void rank_find (RankTask *task);
static void rank_reads_add (RankStore *store, RankTask *task);

/* The not-found answer of a GetRank. */
static GError *
rank_absent (const RankTask *task)
{
  return g_error_new (RANK_ERROR, RANK_ERROR_NOT_FOUND,
                      "member '%s' is not on board '%s'", task->member,
                      task->ctx->board);
}

void
rank_store_get_rank (RankStore *store, const RankContext *ctx,
                     const char *member, RankKind kind, RankStoreRowFunc func,
                     gpointer data)
{
  const RankBoardOptions *o = ctx->options;
  gsize member_len = strlen (member);
  RankTask *task = g_new0 (RankTask, 1);
  RankCommand head, item;

  task->store = store;
  task->ctx = ctx;
  task->kind = kind != 0 ? kind : o->rank;
  task->member = g_strdup (member);
  task->func = func;
  task->data = data;
  task->countdown.pending = 1;
  task->refs = 1;
  task->node = store_node_of (store, store_shard_of (ctx, member, member_len));
  ahead_init (&task->ahead, o, task->kind);
  if (o->shards > 1 || task->kind != RANK_KIND_ORDINAL)
    {
      rank_find (task);
      return;
    }
  /* An ordinal rank on an ordinary board, without a script: the member's
   * prefix (HMGET, with the other GetRanks of the board queued in this loop
   * iteration), then its score and rank in one transaction with theirs
   * (backend.h, RANK_SEND_RANKS). rank.lua costs Redis more than twice as
   * much for the same batch: bench/README.md of 4968f11, "GetRank". */
  rank_command_init (&head, "HMGET");
  store_add_key (&head, ctx, 0, RANK_KEY_SUFFIX_TIMES);
  {
    gsize key_len, tag_len;
    const char *key = rank_command_key (&head, &key_len);
    const char *tag = rank_command_hash_tag (key, key_len, &tag_len);

    task->tag = g_strndup (tag, tag_len);
  }
  rank_reads_add (store, task);
  rank_command_init_args (&item);
  rank_command_add (&item, member, member_len);
  store_read_from (&item, ctx);
  rank_backend_send_item (store->backend, task->node, &head, &item, 0,
                          rank_prefixed, task);
  rank_command_clear (&head);
}

/* A write of the board with tag is about to be queued: the GetRanks whose
 * first round is out read with rank.lua, sent before the write (a GetRank
 * pipelined before an Update on one connection does not see it). */
void
store_fence_rank_reads (const char *tag, gsize tag_len, gpointer data)
{
  RankStore *store = data;
  g_autofree char *key = NULL;
  char *stolen;
  GQueue *waiting;
  GList *l;

  if (g_hash_table_size (store->rank_reads) == 0)
    return;
  key = g_strndup (tag, tag_len);
  if (!g_hash_table_steal_extended (
          store->rank_reads, key, (gpointer *) &stolen, (gpointer *) &waiting))
    return;
  g_free (stolen);
  while ((l = g_queue_pop_head_link (waiting)) != NULL)
    {
      RankTask *task = l->data;

      task->fenced = TRUE;
      task->refs++;
      rank_find (task);
    }
  g_queue_free (waiting);
}

/* task waits for its first round: in store->rank_reads under its tag. */
static void
rank_reads_add (RankStore *store, RankTask *task)
{
  GQueue *waiting = g_hash_table_lookup (store->rank_reads, task->tag);

  if (waiting == NULL)
    {
      waiting = g_queue_new ();
      g_hash_table_insert (store->rank_reads, g_strdup (task->tag), waiting);
    }
  task->link.data = task;
  g_queue_push_tail_link (waiting, &task->link);
}

/* task's first round answered: out of store->rank_reads. */
static void
rank_reads_remove (RankStore *store, RankTask *task)
{
  GQueue *waiting = g_hash_table_lookup (store->rank_reads, task->tag);

  g_queue_unlink (waiting, &task->link);
  if (g_queue_is_empty (waiting))
    g_hash_table_remove (store->rank_reads, task->tag);
}

static void
rank_task_unref (RankTask *task)
{
  if (--task->refs > 0)
    return;
  ahead_clear (&task->ahead);
  g_free (task->tag);
  g_free (task->member);
  g_free (task);
}

/* A failure of the script-free reads that is not Redis being away (a key
 * of another type, the member moving between the two rounds, a Cluster's
 * redirect): rank.lua reads the member again, and names what it finds. */
static gboolean
rank_retry_with_script (RankTask *task, const GError *error)
{
  if (error != NULL && error->domain == RANK_ERROR
      && error->code == RANK_ERROR_UNAVAILABLE)
    return FALSE;
  rank_find (task);
  return TRUE;
}

/* Whether reply is a member's value in the times hash of a board with
 * prefix_len (orderkey.h): its prefix, then a sorted-set score within
 * RANK_SCORE_MAX, which goes to zscore. */
static gboolean
place_read (const RankReply *reply, gsize prefix_len, gint64 *zscore)
{
  if (reply->type != RANK_REPLY_STRING
      || reply->len != prefix_len + RANK_PLACE_SCORE_BYTES)
    return FALSE;
  *zscore = rank_orderkey_decode_place_score ((const guint8 *) reply->str
                                              + prefix_len);
  return *zscore >= -RANK_SCORE_MAX && *zscore <= RANK_SCORE_MAX;
}

/* Round 1: the member's value in the times hash (its prefix, then its
 * sorted-set score: update.lua), or nil when it is not on the board. The
 * score is read again with the rank in round 2: an update in the same
 * millisecond changes it under the same sorted-set key. */
static void
rank_prefixed (const RankReply *reply, const GError *error, gpointer data)
{
  RankTask *task = data;
  const RankBoardOptions *o = task->ctx->options;
  gsize member_len = strlen (task->member);
  gsize prefix_len = store_prefix_len (o);
  g_autoptr (GError) absent = NULL;
  g_autofree char *key = NULL;
  RankCommand head, item;
  gint64 zscore;

  if (task->fenced)
    {
      rank_task_unref (task);
      return;
    }
  rank_reads_remove (task->store, task);
  if (error == NULL && reply->type == RANK_REPLY_NIL)
    error = absent = rank_absent (task);
  if (error != NULL || !place_read (reply, prefix_len, &zscore))
    {
      if (absent != NULL || !rank_retry_with_script (task, error))
        {
          store_countdown_done (&task->countdown, error);
          rank_finish (task);
        }
      return;
    }
  store_decode_subscores (o, reply->str, &task->n_subscores, task->subscores);
  key = g_malloc (prefix_len + member_len);
  memcpy (key, reply->str, prefix_len);
  memcpy (key + prefix_len, task->member, member_len);
  memcpy (task->prefix, reply->str, prefix_len);
  rank_command_init (&head, "HMGET");
  store_add_key (&head, task->ctx, 0, RANK_KEY_SUFFIX_TIMES);
  store_add_key (&head, task->ctx, 0, RANK_KEY_SUFFIX_SCORES);
  {
    guint8 len_byte = (guint8) prefix_len;

    rank_command_add (&head, (const char *) &len_byte, 1);
  }
  rank_command_init_args (&item);
  rank_command_add (&item, key, prefix_len + member_len);
  store_read_from (&item, task->ctx);
  rank_backend_send_item (task->store->backend, task->node, &head, &item,
                          RANK_SEND_RANKS, rank_ranked, task);
  rank_command_clear (&head);
}

/* Round 2: {the member's value in the times hash, the rank of its key}; a
 * nil in either, or a prefix other than round 1's, means the member moved
 * since round 1. The rank.lua sent then goes after
 * any write queued meanwhile: if another client moved this very member
 * between the rounds and the same connection pipelined a write of the
 * board behind this GetRank, the answer includes that write (no fence
 * covers the second round). */
static void
rank_ranked (const RankReply *reply, const GError *error, gpointer data)
{
  RankTask *task = data;
  const RankBoardOptions *o = task->ctx->options;
  gsize prefix_len = store_prefix_len (o);
  const RankReply *place = error == NULL ? reply->element[0] : NULL;
  const RankReply *rank = error == NULL ? reply->element[1] : NULL;
  gint64 zscore;

  if (error == NULL && place_read (place, prefix_len, &zscore)
      && memcmp (place->str, task->prefix, prefix_len) == 0
      && rank->type == RANK_REPLY_INTEGER)
    {
      /* A descending board stores -score. */
      task->score = o->order == RANK_ORDER_ASC ? zscore : -zscore;
      task->ahead.count = rank->integer;
      store_countdown_done (&task->countdown, NULL);
      rank_finish (task);
      return;
    }
  if (!rank_retry_with_script (task, error))
    {
      store_countdown_done (&task->countdown, error);
      rank_finish (task);
    }
}

/* rank.lua find on the member's node, then the counts of the others. */
static void
rank_find (RankTask *task)
{
  RankStore *store = task->store;
  const RankContext *ctx = task->ctx;
  const RankBoardOptions *o = ctx->options;
  gsize member_len = strlen (task->member);
  guint shard = store_shard_of (ctx, task->member, member_len);
  RankCommand cmd, item;

  rank_command_init_script (&cmd, RANK_SCRIPT_RANK);
  store_add_key (&cmd, ctx, shard, RANK_KEY_SUFFIX_TIMES);
  store_add_key (&cmd, ctx, shard, RANK_KEY_SUFFIX_SCORES);
  if (task->kind == RANK_KIND_DENSE && o->shards == 1)
    store_add_key (&cmd, ctx, shard, RANK_KEY_SUFFIX_DISTINCT);
  else if (task->kind == RANK_KIND_DENSE)
    store_add_node_keys (&cmd, store, ctx, task->node, -1,
                         RANK_KEY_SUFFIX_DISTINCT);
  else
    store_add_node_keys (&cmd, store, ctx, task->node, (gint) shard,
                         RANK_KEY_SUFFIX_SCORES);
  rank_command_keys_done (&cmd);
  add_rank_args (&cmd, "find", o, task->kind);
  /* With the other finds on the same keys queued in this loop iteration. */
  rank_command_init_args (&item);
  rank_command_add (&item, task->member, member_len);
  store_read_from (&item, ctx);
  rank_backend_send_item (store->backend, task->node, &cmd, &item, 0,
                          rank_found, task);
  rank_command_clear (&cmd);
}

/* The member's node answered: its score, and who is ahead of it there. Now
 * every other node holding shards counts who is ahead of it in them. */
static void
rank_found (const RankReply *reply, const GError *error, gpointer data)
{
  RankTask *task = data;
  const RankBoardOptions *o = task->ctx->options;
  g_autoptr (GError) bad = NULL;
  const RankReply *key = NULL, *zscore = NULL;
  gint64 score = 0;

  if (error == NULL && reply->type == RANK_REPLY_NIL)
    error = bad = rank_absent (task);
  /* find: {ahead on this node, key, zscore[, distinct scores ahead]} */
  else if (error == NULL
           && ((key = rank_reply_string_at (reply, 1)) == NULL
               || (zscore = rank_reply_string_at (reply, 2)) == NULL
               || !rank_orderkey_parse_zscore (zscore->str, zscore->len, &score)
               || reply->elements < (task->ahead.distinct != NULL ? 4u : 3u)
               || !ahead_add (
                   &task->ahead,
                   reply->element[task->ahead.distinct != NULL ? 3 : 0])))
    error = bad = store_unexpected (reply, "rank.lua find");
  else if (error == NULL && key->len <= store_prefix_len (o))
    error = bad = store_unexpected (reply, "rank.lua find (short key)");
  if (error != NULL)
    {
      store_countdown_done (&task->countdown, error);
      rank_finish (task);
      return;
    }
  /* The parse gives -zscore: the score of a descending board. */
  task->score = o->order == RANK_ORDER_ASC ? -score : score;
  store_decode_subscores (o, key->str, &task->n_subscores, task->subscores);
  task->countdown.pending += send_counts (
      task->store, task->ctx, task->kind, task->node, zscore->str, zscore->len,
      key->str, key->len, rank_counted, task);
  if (store_countdown_done (&task->countdown, NULL))
    rank_finish (task);
}

static void
rank_counted (const RankReply *reply, const GError *error, gpointer data)
{
  RankTask *task = data;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && !ahead_add (&task->ahead, reply))
    error = bad = store_unexpected (reply, "rank.lua count");
  if (store_countdown_done (&task->countdown, error))
    rank_finish (task);
}

static void
rank_finish (RankTask *task)
{
  const RankContext *ctx = task->ctx;
  const RankBoardOptions *o = ctx->options;
  gint64 rank = ahead_total (&task->ahead) + 1;
  GError **error = &task->countdown.error;

  if (*error == NULL && ahead_too_deep (&task->ahead, o))
    *error = g_error_new (
        RANK_ERROR, RANK_ERROR_INVALID,
        "rank: more than %u distinct scores are ahead of member '%s' on "
        "sharded dense board '%s' (its max_top_depth)",
        o->max_top_depth, task->member, ctx->board);
  /* A capped sharded board stores each shard's best cap; past the board's
   * cap a member is not on it. */
  if (*error == NULL && o->cap > 0 && o->shards > 1 && rank > (gint64) o->cap)
    *error = g_error_new (RANK_ERROR, RANK_ERROR_NOT_FOUND,
                          "member '%s' is not among the best %u of board '%s'",
                          task->member, o->cap, ctx->board);
  if (*error != NULL)
    task->func (NULL, *error, task->data);
  else
    {
      RankRow row = { .member = task->member,
                      .member_len = strlen (task->member),
                      .score = task->score,
                      .rank = rank,
                      .n_subscores = task->n_subscores };

      memcpy (row.subscores, task->subscores, sizeof row.subscores);
      task->func (&row, NULL, task->data);
    }
  g_clear_error (error);
  rank_task_unref (task);
}

/* ---- GetRanks ---- */

typedef struct
{
  RankStoreRanksFunc func;
  gpointer data;
  StoreCountdown countdown; /* records the first failure but NotFound */
  guint n;
  RankOfMember *results;
  StorePart parts[];
} RanksTask;

static void
rank_of_done (const RankRow *row, const GError *error, gpointer data)
{
  StorePart *part = data;
  RanksTask *task = part->task;
  RankOfMember *r = &task->results[part->index];
  gboolean absent = error != NULL && error->domain == RANK_ERROR
                    && error->code == RANK_ERROR_NOT_FOUND;

  if (error == NULL)
    {
      r->found = TRUE;
      r->score = row->score;
      r->rank = row->rank;
    }
  if (!store_countdown_done (&task->countdown, absent ? NULL : error))
    return;
  task->func (task->countdown.error == NULL ? task->results : NULL,
              task->countdown.error == NULL ? task->n : 0,
              task->countdown.error, task->data);
  g_clear_error (&task->countdown.error);
  g_free (task->results);
  g_free (task);
}

void
rank_store_get_ranks (RankStore *store, const RankContext *ctx,
                      const char *const *members, guint n,
                      RankStoreRanksFunc func, gpointer data)
{
  RanksTask *task = g_malloc0 (sizeof (RanksTask) + n * sizeof (StorePart));

  g_assert (n > 0);
  task->func = func;
  task->data = data;
  task->n = n;
  task->countdown.pending = n;
  task->results = g_new0 (RankOfMember, n);
  for (guint i = 0; i < n; i++)
    {
      task->parts[i].task = task;
      task->parts[i].index = i;
      rank_store_get_rank (store, ctx, members[i], 0, rank_of_done,
                           &task->parts[i]);
    }
}

/* ---- Count, CountBetween ---- */

typedef struct
{
  RankStoreCountFunc func;
  gpointer data;
  StoreCountdown countdown;
  gint64 count;
  guint cap;
} CountTask;

static void counted (const RankReply *reply, const GError *error,
                     gpointer data);

void
rank_store_count (RankStore *store, const RankContext *ctx,
                  const RankCountQuery *query, RankStoreCountFunc func,
                  gpointer data)
{
  const RankBoardOptions *o = ctx->options;
  CountTask *task = g_new0 (CountTask, 1);
  gint64 lo, hi;

  store_zscore_bounds (o, query->min, query->max, &lo, &hi);
  task->func = func;
  task->data = data;
  task->cap = query->range ? 0 : o->cap;
  task->countdown.pending = o->shards;
  for (guint shard = 0; shard < o->shards; shard++)
    {
      RankCommand cmd;

      rank_command_init (&cmd, query->range ? "ZCOUNT" : "ZCARD");
      store_add_key (&cmd, ctx, shard, RANK_KEY_SUFFIX_SCORES);
      if (query->range)
        {
          rank_command_add_int (&cmd, lo);
          rank_command_add_int (&cmd, hi);
        }
      store_read_from (&cmd, ctx);
      rank_backend_send (store->backend, store_node_of (store, shard), &cmd, 0,
                         counted, task);
    }
}

static void
counted (const RankReply *reply, const GError *error, gpointer data)
{
  CountTask *task = data;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && reply->type != RANK_REPLY_INTEGER)
    error = bad = store_unexpected (reply, "ZCARD/ZCOUNT");
  if (error == NULL)
    task->count += reply->integer;
  if (!store_countdown_done (&task->countdown, error))
    return;
  if (task->countdown.error != NULL)
    task->func (0, task->countdown.error, task->data);
  else
    task->func (task->cap > 0 ? MIN (task->count, (gint64) task->cap)
                              : task->count,
                NULL, task->data);
  g_clear_error (&task->countdown.error);
  g_free (task);
}

/* ---- GetTopN ---- */

/* One shard's page, copied out of its reply (replies do not outlive their
 * callback, and the merge needs every shard's). */
typedef struct
{
  StorePart part;
  RankShardEntry *entries;
  gsize len;
  char *keys;
} Page;

typedef struct
{
  RankStore *store;
  const RankContext *ctx;
  RankStoreRowsFunc func;
  gpointer data;
  gint64 offset;
  gint n;
  StoreCountdown countdown;
  /* After the merge: the page (n entries at most; sized for n, not for
   * RANK_TOP_N_MAX: zeroing that per call was a fifth of rankd's
   * instructions per GetTopN), and for competition and dense ranks the
   * number of entries (or distinct scores) better than its first entry. */
  const RankShardEntry **merged;
  gsize merged_len;
  Ahead better;
  /* with_data: each merged entry's shard, and its data once read (NULL:
   * none). */
  gboolean with_data;
  guint8 *shard_of;
  char **member_data;
  gsize *member_data_len;
  StorePart data_parts[RANK_SHARDS_MAX];
  guint n_pages;
  Page pages[]; /* one per shard; pages[0] only on an ordinary board */
} TopTask;

static void top_read (const RankReply *reply, const GError *error,
                      gpointer data);
static void top_merge (TopTask *task);
static void top_count_better (TopTask *task);
static void top_counted (const RankReply *reply, const GError *error,
                         gpointer data);
static void top_ready (TopTask *task);
static void top_data_read (const RankReply *reply, const GError *error,
                           gpointer data);
static void top_deliver (TopTask *task);

void
rank_store_get_top (RankStore *store, const RankContext *ctx,
                    const RankTopQuery *query, RankStoreRowsFunc func,
                    gpointer data)
{
  const RankBoardOptions *o = ctx->options;
  gint64 offset = query->offset;
  gint n = query->n;
  TopTask *task;

  /* A capped board shows its best cap only (a sharded one stores more). */
  if (o->cap > 0 && offset + n > (gint64) o->cap)
    n = offset >= (gint64) o->cap ? 0 : (gint) (o->cap - offset);
  task = g_malloc0 (sizeof (TopTask) + o->shards * sizeof (Page));
  task->store = store;
  task->ctx = ctx;
  task->func = func;
  task->data = data;
  task->offset = offset;
  task->n = n;
  task->merged = g_new (const RankShardEntry *, MAX (n, 1));
  task->with_data = query->with_data;
  task->n_pages = o->shards;
  task->countdown.pending = o->shards;
  for (guint shard = 0; shard < o->shards; shard++)
    {
      /* An ordinary board reads its page; a shard, all it may contribute. */
      gint64 first = o->shards > 1 ? 0 : offset;
      RankCommand cmd;

      task->pages[shard].part.task = task;
      task->pages[shard].part.index = shard;
      rank_command_init (&cmd, "ZRANGE");
      store_add_key (&cmd, ctx, shard, RANK_KEY_SUFFIX_SCORES);
      rank_command_add_int (&cmd, first);
      rank_command_add_int (&cmd, offset + n - 1);
      rank_command_add_str (&cmd, "WITHSCORES");
      store_read_from (&cmd, ctx);
      rank_backend_send (store->backend, store_node_of (store, shard), &cmd, 0,
                         top_read, &task->pages[shard].part);
    }
}

/* Copies a ZRANGE ... WITHSCORES reply into page; every key must be longer
 * than the board's prefix (min_key_len). */
static GError *
page_read (Page *page, const RankReply *reply, gsize min_key_len)
{
  gsize bytes = 0, n;

  if (reply->type != RANK_REPLY_ARRAY || reply->elements % 2 != 0)
    return store_unexpected (reply, "ZRANGE");
  n = reply->elements / 2;
  for (gsize i = 0; i < reply->elements; i += 2)
    if (reply->element[i]->type == RANK_REPLY_STRING)
      bytes += reply->element[i]->len;
  page->entries = g_new (RankShardEntry, n);
  page->keys = g_malloc (bytes + 1);
  bytes = 0;
  for (gsize i = 0; i < n; i++)
    {
      const RankReply *key = reply->element[2 * i],
                      *sc = reply->element[2 * i + 1];
      RankShardEntry *e = &page->entries[i];

      if (key->type != RANK_REPLY_STRING || sc->type != RANK_REPLY_STRING
          || key->len <= min_key_len
          || !rank_orderkey_parse_zscore (sc->str, sc->len, &e->zscore))
        return store_unexpected (reply, "ZRANGE (malformed entry)");
      e->zscore = -e->zscore;
      memcpy (page->keys + bytes, key->str, key->len);
      e->key = page->keys + bytes;
      e->key_len = key->len;
      bytes += key->len;
      page->len++;
    }
  return NULL;
}

static void
top_read (const RankReply *reply, const GError *error, gpointer data)
{
  Page *page = (Page *) data;
  TopTask *task = page->part.task;
  g_autoptr (GError) bad = NULL;

  if (error == NULL)
    error = bad
        = page_read (page, reply, store_prefix_len (task->ctx->options));
  if (store_countdown_done (&task->countdown, error))
    top_merge (task);
}

static void
top_merge (TopTask *task)
{
  const RankBoardOptions *o = task->ctx->options;
  const RankShardEntry *pages[RANK_SHARDS_MAX];
  gsize lens[RANK_SHARDS_MAX];
  /* An ordinary board's page starts at offset already. */
  gsize skip = o->shards > 1 ? (gsize) task->offset : 0;

  if (task->countdown.error != NULL)
    {
      top_deliver (task);
      return;
    }
  for (guint i = 0; i < o->shards; i++)
    {
      pages[i] = task->pages[i].entries;
      lens[i] = task->pages[i].len;
    }
  task->merged_len = rank_shard_merge (pages, lens, o->shards, skip,
                                       (gsize) task->n, task->merged);
  if (o->rank != RANK_KIND_ORDINAL && task->offset > 0 && task->merged_len > 0)
    top_count_better (task);
  else
    top_ready (task);
}

/* Competition and dense ranks of a page that does not start at the top
 * need the count of what is better than its first entry: one more round,
 * on every node holding the board. */
static void
top_count_better (TopTask *task)
{
  const RankShardEntry *first = task->merged[0];
  char zscore[24];
  gsize len = (gsize) g_snprintf (zscore, sizeof zscore, "%" G_GINT64_FORMAT,
                                  first->zscore);

  ahead_init (&task->better, task->ctx->options, task->ctx->options->rank);
  /* Every node: G_MAXUINT skips none. */
  task->countdown.pending
      = 1
        + send_counts (task->store, task->ctx, task->ctx->options->rank,
                       G_MAXUINT, zscore, len, first->key, first->key_len,
                       top_counted, task);
  if (store_countdown_done (&task->countdown, NULL))
    top_ready (task);
}

static void
top_counted (const RankReply *reply, const GError *error, gpointer data)
{
  TopTask *task = data;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && !ahead_add (&task->better, reply))
    error = bad = store_unexpected (reply, "rank.lua count");
  if (store_countdown_done (&task->countdown, error))
    top_ready (task);
}

/* The page is known; with_data, read its members' data (one HMGET per
 * shard with entries on the page, all sent at once), then answer. */
static void
top_ready (TopTask *task)
{
  const RankBoardOptions *o = task->ctx->options;
  gsize skip = store_prefix_len (o);
  gboolean used[RANK_SHARDS_MAX] = { FALSE };

  if (!task->with_data || task->countdown.error != NULL
      || task->merged_len == 0)
    {
      top_deliver (task);
      return;
    }
  task->member_data = g_new0 (char *, task->merged_len);
  task->member_data_len = g_new0 (gsize, task->merged_len);
  task->shard_of = g_new (guint8, task->merged_len);
  task->countdown.pending = 1;
  for (gsize i = 0; i < task->merged_len; i++)
    {
      const RankShardEntry *e = task->merged[i];

      task->shard_of[i] = (guint8) rank_shard_of (e->key + skip,
                                                  e->key_len - skip, o->shards);
      used[task->shard_of[i]] = TRUE;
    }
  for (guint shard = 0; shard < o->shards; shard++)
    {
      RankCommand cmd;

      if (!used[shard])
        continue;
      rank_command_init (&cmd, "HMGET");
      store_add_key (&cmd, task->ctx, shard, RANK_KEY_SUFFIX_DATA);
      for (gsize i = 0; i < task->merged_len; i++)
        if (task->shard_of[i] == shard)
          rank_command_add (&cmd, task->merged[i]->key + skip,
                            task->merged[i]->key_len - skip);
      task->countdown.pending++;
      task->data_parts[shard].task = task;
      task->data_parts[shard].index = shard;
      store_read_from (&cmd, task->ctx);
      rank_backend_send (task->store->backend,
                         store_node_of (task->store, shard), &cmd, 0,
                         top_data_read, &task->data_parts[shard]);
    }
  if (store_countdown_done (&task->countdown, NULL))
    top_deliver (task);
}

/* One shard's HMGET of its members' data: the values in the order of the
 * page's entries from that shard. */
static void
top_data_read (const RankReply *reply, const GError *error, gpointer data)
{
  StorePart *part = data;
  TopTask *task = part->task;
  g_autoptr (GError) bad = NULL;
  gsize next = 0;

  if (error == NULL && reply->type != RANK_REPLY_ARRAY)
    error = bad = store_unexpected (reply, "HMGET");
  for (gsize i = 0; error == NULL && i < task->merged_len; i++)
    {
      const RankReply *v;

      if (task->shard_of[i] != part->index)
        continue;
      if (next >= reply->elements)
        {
          error = bad = store_unexpected (reply, "HMGET (short)");
          break;
        }
      v = reply->element[next++];
      if (v->type == RANK_REPLY_STRING)
        {
          task->member_data[i] = g_memdup2 (v->str, v->len);
          task->member_data_len[i] = v->len;
        }
    }
  if (store_countdown_done (&task->countdown, error))
    top_deliver (task);
}

/* After the callback: the context may be gone. */
static void
top_free (TopTask *task)
{
  for (guint i = 0; i < task->n_pages; i++)
    {
      g_free (task->pages[i].entries);
      g_free (task->pages[i].keys);
    }
  if (task->member_data != NULL)
    for (gsize i = 0; i < task->merged_len; i++)
      g_free (task->member_data[i]);
  g_free (task->member_data);
  g_free (task->member_data_len);
  g_free (task->shard_of);
  g_free (task->merged);
  g_clear_error (&task->countdown.error);
  ahead_clear (&task->better);
  g_free (task);
}

/* Answers with the merged page, numbering it by the board's rank kind:
 * equal scores share a rank; the next score's rank is its position
 * (competition) or one more (dense). */
static void
top_deliver (TopTask *task)
{
  const RankBoardOptions *o = task->ctx->options;
  RankRow rows[RANK_TOP_N_MAX];

  if (task->countdown.error == NULL && ahead_too_deep (&task->better, o))
    task->countdown.error = g_error_new (
        RANK_ERROR, RANK_ERROR_INVALID,
        "offset: more than %u distinct scores are ahead of offset "
        "%" G_GINT64_FORMAT " on sharded dense board '%s' (its max_top_depth)",
        o->max_top_depth, task->offset, task->ctx->board);
  if (task->countdown.error != NULL)
    {
      task->func (NULL, 0, task->countdown.error, task->data);
      top_free (task);
      return;
    }
  for (gsize i = 0; i < task->merged_len; i++)
    {
      const RankShardEntry *e = task->merged[i];
      gint64 position = task->offset + (gint64) i + 1;

      store_row_from_key (o, e->key, e->key_len, e->zscore, &rows[i]);
      if (task->member_data != NULL)
        {
          rows[i].data = task->member_data[i];
          rows[i].data_len = task->member_data_len[i];
        }
      if (o->rank == RANK_KIND_ORDINAL)
        rows[i].rank = position;
      else if (i == 0)
        rows[i].rank = ahead_total (&task->better) + 1;
      else if (e->zscore == task->merged[i - 1]->zscore)
        rows[i].rank = rows[i - 1].rank;
      else
        rows[i].rank = o->rank == RANK_KIND_COMPETITION ? position
                                                        : rows[i - 1].rank + 1;
    }
  task->func (rows, task->merged_len, NULL, task->data);
  top_free (task);
}

/* ---- member data ---- */

typedef struct
{
  RankStoreDoneFunc set_func;
  RankStoreDataFunc get_func;
  gpointer data;
  const RankContext *ctx;
  char *member;
} DataTask;

static void data_replied (const RankReply *reply, const GError *error,
                          gpointer data);

static void
data_send (RankStore *store, DataTask *task, const char *value, gsize len)
{
  const RankContext *ctx = task->ctx;
  gsize member_len = strlen (task->member);
  guint shard = store_shard_of (ctx, task->member, member_len);
  RankCommand cmd;

  rank_command_init_script (&cmd, RANK_SCRIPT_DATA);
  store_add_key (&cmd, ctx, shard, RANK_KEY_SUFFIX_TIMES);
  store_add_key (&cmd, ctx, shard, RANK_KEY_SUFFIX_DATA);
  rank_command_keys_done (&cmd);
  rank_command_add_str (&cmd, value != NULL ? "set" : "get");
  rank_command_add (&cmd, task->member, member_len);
  if (value != NULL)
    rank_command_add (&cmd, value, len);
  if (value == NULL)
    store_read_from (&cmd, ctx);
  rank_backend_send (store->backend, store_node_of (store, shard), &cmd, 0,
                     data_replied, task);
}

void
rank_store_set_data (RankStore *store, const RankContext *ctx,
                     const char *member, const char *data, gsize len,
                     RankStoreDoneFunc func, gpointer user_data)
{
  DataTask *task = g_new0 (DataTask, 1);

  task->set_func = func;
  task->data = user_data;
  task->ctx = ctx;
  task->member = g_strdup (member);
  data_send (store, task, data != NULL ? data : "", len);
}

void
rank_store_get_data (RankStore *store, const RankContext *ctx,
                     const char *member, RankStoreDataFunc func,
                     gpointer user_data)
{
  DataTask *task = g_new0 (DataTask, 1);

  task->get_func = func;
  task->data = user_data;
  task->ctx = ctx;
  task->member = g_strdup (member);
  data_send (store, task, NULL, 0);
}

static void
data_replied (const RankReply *reply, const GError *error, gpointer data)
{
  DataTask *task = data;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && reply->type == RANK_REPLY_NIL)
    error = bad = g_error_new (RANK_ERROR, RANK_ERROR_NOT_FOUND,
                               "member '%s' is not on board '%s'", task->member,
                               task->ctx->board);
  else if (error == NULL
           && reply->type
                  != (task->get_func != NULL ? RANK_REPLY_STRING
                                             : RANK_REPLY_INTEGER))
    error = bad = store_unexpected (reply, "data.lua");
  if (task->get_func != NULL)
    task->get_func (error == NULL ? reply->str : NULL,
                    error == NULL ? reply->len : 0, error, task->data);
  else
    task->set_func (error, task->data);
  g_free (task->member);
  g_free (task);
}
