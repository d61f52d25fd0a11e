/* store_query.c -- the queries of several rounds: GetAround, GetPercentile,
 * GetScoreAtPercentile, Sample (see store.h).
 *
 * Each is a task with typed state, built from the store's own operations
 * (store_read.c) round after round; every round reads the same context, so
 * the options, the period and the time cannot change between rounds.
 */
#include "store.h"

#include <math.h>
#include <string.h>

#include "error.h"
#include "orderkey.h"
#include "policy.h"
#include "store_private.h"

/* ---- GetAround ---- */

typedef struct
{
  RankStore *store;
  const RankContext *ctx;
  RankAroundQuery query;
  RankStoreRowsFunc func;
  gpointer data;
} AroundTask;

static void around_found (const RankRow *row, const GError *error,
                          gpointer data);
static void around_page (const RankRow *rows, gsize n, const GError *error,
                         gpointer data);

void
rank_store_get_around (RankStore *store, const RankContext *ctx,
                       const RankAroundQuery *query, RankStoreRowsFunc func,
                       gpointer data)
{
  AroundTask *task = g_new0 (AroundTask, 1);

  task->store = store;
  task->ctx = ctx;
  task->query = *query;
  task->func = func;
  task->data = data;
  /* Where the page starts: the ordinal position, whatever the rank kind. */
  rank_store_get_rank (store, ctx, query->member, RANK_KIND_ORDINAL,
                       around_found, task);
}

/* Round 1: the member's position. */
static void
around_found (const RankRow *row, const GError *error, gpointer data)
{
  AroundTask *task = data;
  g_autoptr (GError) deep = NULL;
  RankTopQuery page;

  if (error == NULL)
    {
      page.offset = MAX (0, row->rank - 1 - task->query.radius);
      page.n = (gint) (row->rank - page.offset + task->query.radius);
      page.with_data = task->query.with_data;
      if (rank_policy_depth (task->ctx->board, task->ctx->options, "offset+n",
                             page.offset, page.n, &deep))
        {
          rank_store_get_top (task->store, task->ctx, &page, around_page, task);
          return;
        }
      error = deep;
    }
  around_page (NULL, 0, error, task);
}

/* Round 2: the page around it. */
static void
around_page (const RankRow *rows, gsize n, const GError *error, gpointer data)
{
  AroundTask *task = data;

  task->func (rows, n, error, task->data);
  g_free (task);
}

/* ---- GetPercentile ---- */

typedef struct
{
  RankStore *store;
  const RankContext *ctx;
  RankStoreValueFunc func;
  gpointer data;
  gint64 score;  /* the member's */
  gint64 better; /* members with a better score */
  gint64 equal;  /* members with the member's score */
} PercentileTask;

static void percentile_found (const RankRow *row, const GError *error,
                              gpointer data);
static void percentile_equal (gint64 equal, const GError *error, gpointer data);
static void percentile_total (gint64 total, const GError *error, gpointer data);

void
rank_store_get_percentile (RankStore *store, const RankContext *ctx,
                           const char *member, RankStoreValueFunc func,
                           gpointer data)
{
  PercentileTask *task = g_new0 (PercentileTask, 1);

  task->store = store;
  task->ctx = ctx;
  task->func = func;
  task->data = data;
  rank_store_get_rank (store, ctx, member, RANK_KIND_COMPETITION,
                       percentile_found, task);
}

/* Round 1: the member's score, and how many are better (its competition
 * rank). */
static void
percentile_found (const RankRow *row, const GError *error, gpointer data)
{
  PercentileTask *task = data;
  RankCountQuery equal;

  if (error != NULL)
    {
      percentile_total (0, error, task);
      return;
    }
  task->score = row->score;
  task->better = row->rank - 1;
  equal = (RankCountQuery){ TRUE, row->score, row->score };
  rank_store_count (task->store, task->ctx, &equal, percentile_equal, task);
}

/* Round 2: how many share the member's score. */
static void
percentile_equal (gint64 equal, const GError *error, gpointer data)
{
  PercentileTask *task = data;
  static const RankCountQuery all = { FALSE, 0, 0 };

  if (error != NULL)
    {
      percentile_total (0, error, task);
      return;
    }
  task->equal = equal;
  rank_store_count (task->store, task->ctx, &all, percentile_total, task);
}

/* Round 3: the board's size; the share behind is what is neither better
 * nor equal. */
static void
percentile_total (gint64 total, const GError *error, gpointer data)
{
  PercentileTask *task = data;

  task->func (error == NULL && total > 0
                  ? 100.0 * (double) (total - task->better - task->equal)
                        / (double) total
                  : 0,
              error, task->data);
  g_free (task);
}

/* ---- GetScoreAtPercentile ---- */

typedef struct
{
  RankStore *store;
  const RankContext *ctx;
  double pct;
  RankStoreCountFunc func;
  gpointer data;
} ScoreAtTask;

static void score_at_total (gint64 total, const GError *error, gpointer data);
static void score_at_entry (const RankRow *rows, gsize n, const GError *error,
                            gpointer data);

void
rank_store_score_at_percentile (RankStore *store, const RankContext *ctx,
                                double pct, RankStoreCountFunc func,
                                gpointer data)
{
  ScoreAtTask *task = g_new0 (ScoreAtTask, 1);
  static const RankCountQuery all = { FALSE, 0, 0 };

  task->store = store;
  task->ctx = ctx;
  task->pct = pct;
  task->func = func;
  task->data = data;
  rank_store_count (store, ctx, &all, score_at_total, task);
}

/* Round 1: the board's size gives the position. */
static void
score_at_total (gint64 total, const GError *error, gpointer data)
{
  ScoreAtTask *task = data;
  g_autoptr (GError) deep = NULL;
  RankTopQuery one = { 0, 1, FALSE };
  gint64 position;

  if (error != NULL || total == 0)
    {
      score_at_entry (NULL, 0, error, task);
      return;
    }
  position = (gint64) ceil ((double) total * (100.0 - task->pct) / 100.0);
  position = CLAMP (position, 1, total);
  one.offset = position - 1;
  if (!rank_policy_depth (task->ctx->board, task->ctx->options, "offset+n",
                          one.offset, one.n, &deep))
    {
      score_at_entry (NULL, 0, deep, task);
      return;
    }
  rank_store_get_top (task->store, task->ctx, &one, score_at_entry, task);
}

/* Round 2: the entry at that position. */
static void
score_at_entry (const RankRow *rows, gsize n, const GError *error,
                gpointer data)
{
  ScoreAtTask *task = data;
  g_autoptr (GError) empty = NULL;

  if (error == NULL && n == 0)
    error = empty = g_error_new (RANK_ERROR, RANK_ERROR_NOT_FOUND,
                                 "the board has no members");
  task->func (error == NULL ? rows[0].score : 0, error, task->data);
  g_free (task);
}

/* ---- Sample ---- */

typedef struct
{
  RankStore *store;
  const RankContext *ctx;
  RankSampleQuery query;
  RankStoreRowsFunc func;
  gpointer data;
  StoreCountdown countdown;
  /* Round 1, per shard: entries before the range, and in it. */
  gint64 below[RANK_SHARDS_MAX];
  gint64 in_range[RANK_SHARDS_MAX];
  StorePart count_parts[2 * RANK_SHARDS_MAX];
  /* Round 2: the drawn entries (NULL: gone since round 1). */
  guint n;
  char *keys[RANK_SAMPLE_COUNT_MAX];
  gsize key_lens[RANK_SAMPLE_COUNT_MAX];
  gint64 zscores[RANK_SAMPLE_COUNT_MAX];
  StorePart pick_parts[RANK_SAMPLE_COUNT_MAX];
  /* Round 3: their ranks. */
  RankRow rows[RANK_SAMPLE_COUNT_MAX];
  char *members[RANK_SAMPLE_COUNT_MAX];
} SampleTask;

static void sample_counted (const RankReply *reply, const GError *error,
                            gpointer data);
static void sample_draw (SampleTask *task);
static void sample_picked (const RankReply *reply, const GError *error,
                           gpointer data);
static void sample_rank (SampleTask *task);
static void sample_ranked (const RankOfMember *results, guint n,
                           const GError *error, gpointer data);
static void sample_finish (SampleTask *task, const RankRow *rows, gsize n,
                           const GError *error);

void
rank_store_sample (RankStore *store, const RankContext *ctx,
                   const RankSampleQuery *query, RankStoreRowsFunc func,
                   gpointer data)
{
  SampleTask *task = g_new0 (SampleTask, 1);
  const RankBoardOptions *o = ctx->options;
  gint64 lo, hi;

  task->store = store;
  task->ctx = ctx;
  task->query = *query;
  task->query.count = MIN (query->count, RANK_SAMPLE_COUNT_MAX);
  task->func = func;
  task->data = data;
  store_zscore_bounds (o, query->min, query->max, &lo, &hi);
  task->countdown.pending = 2 * o->shards;
  for (guint shard = 0; shard < o->shards; shard++)
    for (guint which = 0; which < 2; which++)
      {
        StorePart *part = &task->count_parts[shard * 2 + which];
        char from[24];
        RankCommand cmd;

        part->task = task;
        part->index = shard * 2 + which;
        g_snprintf (from, sizeof from, "(%" G_GINT64_FORMAT, lo);
        rank_command_init (&cmd, "ZCOUNT");
        store_add_key (&cmd, ctx, shard, RANK_KEY_SUFFIX_SCORES);
        if (which == 0)
          {
            rank_command_add_str (&cmd, "-inf");
            rank_command_add_str (&cmd, from);
          }
        else
          {
            rank_command_add_int (&cmd, lo);
            rank_command_add_int (&cmd, hi);
          }
        store_read_from (&cmd, ctx);
        rank_backend_send (store->backend, store_node_of (store, shard), &cmd,
                           0, sample_counted, part);
      }
}

/* Round 1: per shard, the entries before the range and in it. */
static void
sample_counted (const RankReply *reply, const GError *error, gpointer data)
{
  StorePart *part = data;
  SampleTask *task = part->task;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && reply->type != RANK_REPLY_INTEGER)
    error = bad = store_unexpected (reply, "ZCOUNT");
  if (error == NULL)
    (part->index % 2 ? task->in_range : task->below)[part->index / 2]
        = reply->integer;
  if (!store_countdown_done (&task->countdown, error))
    return;
  if (task->countdown.error != NULL)
    sample_finish (task, NULL, 0, task->countdown.error);
  else
    sample_draw (task);
}

/* Draws count distinct positions among all the entries in range (Floyd's
 * algorithm: uniform, no rejection loop), then reads each by its index in
 * its shard's sorted set. */
static void
sample_draw (SampleTask *task)
{
  const RankBoardOptions *o = task->ctx->options;
  gint64 total = 0;
  gint64 picks[RANK_SAMPLE_COUNT_MAX];
  guint k;
  GHashTable *chosen;

  for (guint i = 0; i < o->shards; i++)
    total += task->in_range[i];
  k = (guint) MIN ((gint64) task->query.count, total);
  chosen = g_hash_table_new (g_int64_hash, g_int64_equal);
  for (gint64 j = total - k, m = 0; j < total; j++)
    {
      gint64 t
          = (gint64) (g_rand_double (task->store->rand) * (double) (j + 1));

      t = MIN (t, j);
      picks[m] = g_hash_table_contains (chosen, &t) ? j : t;
      g_hash_table_add (chosen, &picks[m]);
      m++;
    }
  g_hash_table_unref (chosen);
  task->n = k;
  task->countdown.pending = k + 1;
  for (guint p = 0; p < k; p++)
    {
      gint64 at = picks[p];
      guint shard = 0;
      RankCommand cmd;

      while (at >= task->in_range[shard])
        at -= task->in_range[shard++];
      task->pick_parts[p].task = task;
      task->pick_parts[p].index = p;
      rank_command_init (&cmd, "ZRANGE");
      store_add_key (&cmd, task->ctx, shard, RANK_KEY_SUFFIX_SCORES);
      rank_command_add_int (&cmd, task->below[shard] + at);
      rank_command_add_int (&cmd, task->below[shard] + at);
      rank_command_add_str (&cmd, "WITHSCORES");
      store_read_from (&cmd, task->ctx);
      rank_backend_send (task->store->backend,
                         store_node_of (task->store, shard), &cmd, 0,
                         sample_picked, &task->pick_parts[p]);
    }
  if (store_countdown_done (&task->countdown, NULL))
    sample_rank (task);
}

/* Round 2: one drawn entry, {key, score} (none: gone since round 1). */
static void
sample_picked (const RankReply *reply, const GError *error, gpointer data)
{
  StorePart *part = data;
  SampleTask *task = part->task;
  gsize min_key_len = store_prefix_len (task->ctx->options);
  g_autoptr (GError) bad = NULL;

  if (error == NULL
      && (reply->type != RANK_REPLY_ARRAY
          || (reply->elements != 0 && reply->elements != 2)))
    error = bad = store_unexpected (reply, "ZRANGE");
  if (error == NULL && reply->elements == 2)
    {
      const RankReply *key = reply->element[0], *score = reply->element[1];
      gint64 zscore;

      if (key->type != RANK_REPLY_STRING || key->len <= min_key_len
          || score->type != RANK_REPLY_STRING
          || !rank_orderkey_parse_zscore (score->str, score->len, &zscore))
        error = bad = store_unexpected (reply, "ZRANGE (malformed entry)");
      else
        {
          task->keys[part->index] = g_memdup2 (key->str, key->len);
          task->key_lens[part->index] = key->len;
          task->zscores[part->index] = -zscore;
        }
    }
  if (store_countdown_done (&task->countdown, error))
    sample_rank (task);
}

/* Round 3: the rank of each drawn member (the board's kind). */
static void
sample_rank (SampleTask *task)
{
  guint n = 0;

  if (task->countdown.error != NULL)
    {
      sample_finish (task, NULL, 0, task->countdown.error);
      return;
    }
  for (guint i = 0; i < task->n; i++)
    if (task->keys[i] != NULL)
      {
        RankRow *row = &task->rows[n];

        store_row_from_key (task->ctx->options, task->keys[i],
                            task->key_lens[i], task->zscores[i], row);
        task->members[n] = g_strndup (row->member, row->member_len);
        row->member = task->members[n++];
      }
  task->n = n;
  if (n == 0)
    {
      sample_finish (task, NULL, 0, NULL);
      return;
    }
  rank_store_get_ranks (task->store, task->ctx,
                        (const char *const *) task->members, n, sample_ranked,
                        task);
}

static void
sample_ranked (const RankOfMember *results, guint n, const GError *error,
               gpointer data)
{
  SampleTask *task = data;
  RankRow rows[RANK_SAMPLE_COUNT_MAX];
  gsize kept = 0;

  /* A member removed between the draw and its rank is left out. */
  for (guint i = 0; error == NULL && i < n; i++)
    if (results[i].found)
      {
        rows[kept] = task->rows[i];
        rows[kept].score = results[i].score;
        rows[kept++].rank = results[i].rank;
      }
  sample_finish (task, rows, kept, error);
}

static void
sample_finish (SampleTask *task, const RankRow *rows, gsize n,
               const GError *error)
{
  task->func (error == NULL ? rows : NULL, error == NULL ? n : 0, error,
              task->data);
  for (guint i = 0; i < RANK_SAMPLE_COUNT_MAX; i++)
    {
      g_free (task->keys[i]);
      g_free (task->members[i]);
    }
  g_clear_error (&task->countdown.error);
  g_free (task);
}
