/* test_options.c -- board options (order, rank kinds, default mode, dedup
 * window) through the C client, each on an ordinary and a sharded board.
 *
 * One redis-server and one rankd with a config file that gives each option
 * to a pair of boards: NAME (ordinary) and NAME_sh (4 shards). Random
 * scores with many ties check order and rank kinds against a model of the
 * board kept here, page by page and member by member.
 */
#include <glib/gstdio.h>
#include <string.h>

#include "calls.h"
#include "constants.h"
#include "harness.h"

static RankTestProcess *redis;
static RankTestProcess *rankd;
static RankClient *client;

/* Boards and their options; each also as NAME_sh with shards=4. The m_*
 * boards belong to the model tests. */
static const char *const boards[][2] = {
  { "asc", "order=asc" },
  { "comp", "rank=competition" },
  { "dense", "rank=dense" },
  { "best", "mode=best" },
  { "short", "dedup_window=1" },
  { "m_asc", "order=asc" },
  { "m_comp", "rank=competition" },
  { "m_dense", "rank=dense" },
  { "m_asc_dense", "order=asc\nrank=dense" },
  { "cap", "cap=3" },
  { "cap_dense", "cap=3\nrank=dense" }, /* ordinary only (see config.c) */
  { "cap_busy", "cap=10\nmode=best" },
};

static char *
config_text (void)
{
  GString *text = g_string_new (NULL);

  for (gsize i = 0; i < G_N_ELEMENTS (boards); i++)
    {
      g_string_append_printf (text, "[board %s]\n%s\n", boards[i][0],
                              boards[i][1]);
      if (strcmp (boards[i][0], "cap_dense") != 0)
        g_string_append_printf (text, "[board %s_sh]\n%s\nshards=4\n",
                                boards[i][0], boards[i][1]);
    }
  return g_string_free (text, FALSE);
}

#define T0 G_GINT64_CONSTANT (1763800000000)

static char *
board_name (const char *base, gboolean sharded)
{
  return g_strconcat (base, sharded ? "_sh" : "", NULL);
}

static gint64
set_score (const char *board, const char *member, gint64 score, gint64 ts)
{
  g_autofree char *rid = g_strdup_printf (
      "%s-%" G_GINT64_FORMAT "-%" G_GINT64_FORMAT, member, score, ts);
  g_auto (Result) r
      = update_on (client, board, member, score, rid, RANK_UPDATE_MODE_SET, ts);

  assert_ok (&r);
  return r.has_rank ? r.rank : 0;
}

static void
assert_rank (const char *board, const char *member, gint64 score, gint64 rank)
{
  g_auto (Result) r = get_rank_on (client, board, member);

  assert_ok (&r);
  if (r.score != score || r.rank != rank)
    g_error ("%s/%s: score %" G_GINT64_FORMAT " rank %" G_GINT64_FORMAT
             ", expected %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT,
             board, member, r.score, r.rank, score, rank);
}

/* GetTopN(n, offset) is exactly members[] with ranks[]. */
static void
assert_page (const char *board, gint32 n, gint32 offset,
             const char *const *members, const gint64 *ranks)
{
  g_auto (Result) r = { 0 };
  g_autoptr (GPtrArray) page = top_on (client, board, n, offset, &r);
  guint len = g_strv_length ((char **) members);

  g_assert_nonnull (page);
  g_assert_cmpuint (page->len, ==, len);
  for (guint i = 0; i < len; i++)
    {
      rankEntry *e = g_ptr_array_index (page, i);

      g_assert_cmpstr (e->member, ==, members[i]);
      g_assert_cmpint (e->rank, ==, ranks[i]);
    }
}

/* ---- each option, by example ---- */

static void
test_ascending (gconstpointer sharded)
{
  g_autofree char *b = board_name ("asc", GPOINTER_TO_INT (sharded));

  set_score (b, "a", 30, T0);
  set_score (b, "b", 10, T0 + 1);
  set_score (b, "c", 20, T0);
  set_score (b, "d", 10, T0 + 2); /* ties b, later: behind it */
  assert_page (b, 10, 0, (const char *[]){ "b", "d", "c", "a", NULL },
               (const gint64[]){ 1, 2, 3, 4 });
  assert_rank (b, "a", 30, 4);
  /* BEST keeps the lower score. */
  {
    g_auto (Result) worse
        = update_on (client, b, "a", 40, "best-1", RANK_UPDATE_MODE_BEST, T0);
    g_auto (Result) better
        = update_on (client, b, "a", 5, "best-2", RANK_UPDATE_MODE_BEST, T0);

    assert_ok (&worse);
    g_assert_cmpint (worse.score, ==, 30);
    assert_ok (&better);
    g_assert_cmpint (better.score, ==, 5);
  }
  assert_rank (b, "a", 5, 1);
}

/* a 50; b, c, e 40 (in that order of time); d 30. */
static void
fill_ties (const char *b)
{
  set_score (b, "a", 50, T0);
  set_score (b, "b", 40, T0 + 1);
  set_score (b, "c", 40, T0 + 2);
  set_score (b, "d", 30, T0);
  set_score (b, "e", 40, T0 + 3);
}

static void
test_competition (gconstpointer sharded)
{
  g_autofree char *b = board_name ("comp", GPOINTER_TO_INT (sharded));
  gint64 rank;

  fill_ties (b);
  assert_page (b, 10, 0, (const char *[]){ "a", "b", "c", "e", "d", NULL },
               (const gint64[]){ 1, 2, 2, 2, 5 });
  assert_page (b, 2, 2, (const char *[]){ "c", "e", NULL },
               (const gint64[]){ 2, 2 });
  assert_page (b, 2, 4, (const char *[]){ "d", NULL }, (const gint64[]){ 5 });
  assert_rank (b, "e", 40, 2);
  assert_rank (b, "d", 30, 5);
  /* Update answers with the same kind of rank (ordinary boards). */
  rank = set_score (b, "f", 40, T0 + 4);
  if (!GPOINTER_TO_INT (sharded))
    g_assert_cmpint (rank, ==, 2);
  assert_rank (b, "d", 30, 6);
}

static void
test_dense (gconstpointer sharded)
{
  g_autofree char *b = board_name ("dense", GPOINTER_TO_INT (sharded));
  gint64 rank;

  fill_ties (b);
  assert_page (b, 10, 0, (const char *[]){ "a", "b", "c", "e", "d", NULL },
               (const gint64[]){ 1, 2, 2, 2, 3 });
  assert_page (b, 2, 3, (const char *[]){ "e", "d", NULL },
               (const gint64[]){ 2, 3 });
  assert_rank (b, "d", 30, 3);
  /* a leaves 50: the distinct scores shrink, d moves up. */
  rank = set_score (b, "a", 40, T0 + 9);
  if (!GPOINTER_TO_INT (sharded))
    g_assert_cmpint (rank, ==, 1);
  assert_rank (b, "d", 30, 2);
  assert_rank (b, "a", 40, 1);
}

static void
test_default_mode (gconstpointer sharded)
{
  g_autofree char *b = board_name ("best", GPOINTER_TO_INT (sharded));
  g_auto (Result) first = update_on (client, b, "ann", 10, "m1", NO_MODE, T0);
  g_auto (Result) lower = update_on (client, b, "ann", 3, "m2", NO_MODE, T0);
  g_auto (Result) incr
      = update_on (client, b, "ann", 3, "m3", RANK_UPDATE_MODE_INCREMENT, T0);

  assert_ok (&first);
  g_assert_cmpint (first.score, ==, 10);
  /* The board's mode is BEST: a lower value does not replace the score. */
  assert_ok (&lower);
  g_assert_cmpint (lower.score, ==, 10);
  /* A request's own mode still wins. */
  assert_ok (&incr);
  g_assert_cmpint (incr.score, ==, 13);
}

/* dedup_window=1: a request id is forgotten after 1 to 1.25 s. */
static void
test_dedup_window (gconstpointer sharded)
{
  g_autofree char *b = board_name ("short", GPOINTER_TO_INT (sharded));
  gint64 start = g_get_monotonic_time (), took;
  gint64 score = 0;

  for (int attempt = 0;; attempt++)
    {
      g_auto (Result) r
          = update_on (client, b, "ann", 1, "again", NO_MODE, NO_TIME);

      assert_ok (&r);
      if (attempt == 0)
        g_assert_true (r.applied);
      else if (r.applied)
        {
          score = r.score;
          break;
        }
      if (g_get_monotonic_time () - start > 10 * G_USEC_PER_SEC)
        g_error ("request id still remembered after 10 s");
      g_usleep (50 * 1000); /* the client's retry pace, not a wait */
    }
  took = g_get_monotonic_time () - start;
  g_assert_cmpint (score, ==, 2);
  g_assert_cmpint (took, >=, 900 * 1000);
  g_assert_cmpint (took, <, 3 * G_USEC_PER_SEC);
}

/* cap=3: the board keeps its best 3; an update that does not make the cut
 * is applied but not ranked; a tie loses to who got there first. */
static void
test_cap (gconstpointer sharded)
{
  g_autofree char *b = board_name ("cap", GPOINTER_TO_INT (sharded));
  gboolean sh = GPOINTER_TO_INT (sharded);

  set_score (b, "a", 10, T0);
  set_score (b, "b", 20, T0);
  set_score (b, "c", 30, T0);
  {
    g_auto (Result) d
        = update_on (client, b, "d", 5, "cap-d", RANK_UPDATE_MODE_SET, T0);
    g_auto (Result) gone = get_rank_on (client, b, "d");

    assert_ok (&d);
    g_assert_true (d.applied);
    g_assert_false (d.has_rank);
    assert_fails (&gone, NOT_FOUND, NULL);
  }
  /* e makes the cut, a drops out. */
  g_assert_cmpint (set_score (b, "e", 25, T0), ==, sh ? 0 : 2);
  assert_page (b, 10, 0, (const char *[]){ "c", "e", "b", NULL },
               (const gint64[]){ 1, 2, 3 });
  {
    g_auto (Result) gone = get_rank_on (client, b, "a");

    assert_fails (&gone, NOT_FOUND, NULL);
  }
  /* f ties b, later: f does not make it. */
  {
    g_auto (Result) f
        = update_on (client, b, "f", 20, "cap-f", RANK_UPDATE_MODE_SET, T0 + 5);

    assert_ok (&f);
    g_assert_false (f.has_rank);
  }
  assert_page (b, 10, 0, (const char *[]){ "c", "e", "b", NULL },
               (const gint64[]){ 1, 2, 3 });
  assert_page (b, 10, 3, (const char *[]){ NULL }, NULL);
  assert_rank (b, "b", 20, 3);
}

/* A dense capped board keeps its distinct-score counts right when members
 * are dropped. */
static void
test_cap_dense (void)
{
  set_score ("cap_dense", "a", 30, T0);
  set_score ("cap_dense", "b", 30, T0 + 1);
  set_score ("cap_dense", "c", 20, T0);
  set_score ("cap_dense", "d", 40, T0); /* drops c: 20 is gone */
  set_score ("cap_dense", "e", 10, T0); /* does not make it */
  assert_page ("cap_dense", 10, 0, (const char *[]){ "d", "a", "b", NULL },
               (const gint64[]){ 1, 2, 2 });
  set_score ("cap_dense", "d", 35, T0 + 2); /* 40 is gone too */
  assert_page ("cap_dense", 10, 0, (const char *[]){ "d", "a", "b", NULL },
               (const gint64[]){ 1, 2, 2 });
  set_score ("cap_dense", "d", 25, T0 + 3);
  assert_rank ("cap_dense", "d", 25, 2);
}

/* Concurrent BEST updates never leave more than cap members, and the
 * survivors are the best values sent. */
typedef struct
{
  int index;
  gint64 best[40];
} CapSender;

#define CAP_THREADS 6
#define CAP_UPDATES 300

static gint cap_done; /* senders finished (atomic) */

static gpointer
cap_send (gpointer data)
{
  CapSender *s = data;
  g_autoptr (RankClient) c
      = rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY);
  GRand *rand = g_rand_new_with_seed ((guint32) s->index);

  for (int i = 0; i < CAP_UPDATES; i++)
    {
      int m = g_rand_int_range (rand, 0, 40);
      g_autofree char *member = g_strdup_printf ("m%02d", m);
      g_autofree char *rid = g_strdup_printf ("busy-%d-%d", s->index, i);
      /* Unique values: no ties, so the survivors are determined. */
      gint64 value
          = g_rand_int_range (rand, 0, 100000) * CAP_THREADS + s->index;
      g_auto (Result) r
          = update_on (c, "cap_busy", member, value, rid, NO_MODE, T0);

      assert_ok (&r);
      s->best[m] = MAX (s->best[m], value);
    }
  g_rand_free (rand);
  g_atomic_int_inc (&cap_done);
  return NULL;
}

static int
cmp_desc (gconstpointer a, gconstpointer b)
{
  gint64 x = *(const gint64 *) a, y = *(const gint64 *) b;

  return x > y ? -1 : x < y;
}

static void
test_cap_concurrent (void)
{
  CapSender senders[CAP_THREADS];
  GThread *threads[CAP_THREADS];
  redisContext *r = redis_connect (redis->port);
  gint64 best[40] = { 0 };
  long long most = 0;

  memset (senders, 0, sizeof senders);
  for (int t = 0; t < CAP_THREADS; t++)
    {
      senders[t].index = t;
      threads[t] = g_thread_new ("cap", cap_send, &senders[t]);
    }
  /* Watch the sorted set while they run. */
  while (g_atomic_int_get (&cap_done) < CAP_THREADS)
    {
      redisReply *n = redisCommand (r, "ZCARD rk:{cap_busy}:z");

      most = MAX (most, n->integer);
      g_assert_cmpint (n->integer, <=, 10);
      freeReplyObject (n);
      g_usleep (1000); /* a watcher's pace; the loop ends on a condition */
    }
  g_assert_cmpint (most, ==, 10);
  for (int t = 0; t < CAP_THREADS; t++)
    {
      g_thread_join (threads[t]);
      for (int m = 0; m < 40; m++)
        best[m] = MAX (best[m], senders[t].best[m]);
    }
  qsort (best, 40, sizeof best[0], cmp_desc);
  {
    g_auto (Result) res = { 0 };
    g_autoptr (GPtrArray) page = top_on (client, "cap_busy", 100, 0, &res);

    g_assert_cmpuint (page->len, ==, 10);
    for (guint i = 0; i < page->len; i++)
      g_assert_cmpint (((rankEntry *) g_ptr_array_index (page, i))->score, ==,
                       best[i]);
  }
  redisFree (r);
}

/* ---- every option against a model ---- */

typedef struct
{
  char member[16];
  gint64 score;
  gint64 ts;
} Item;

static gboolean ascending_model;

static int
model_cmp (gconstpointer pa, gconstpointer pb)
{
  const Item *a = pa, *b = pb;

  if (a->score != b->score)
    return (a->score < b->score) == ascending_model ? -1 : 1;
  if (a->ts != b->ts)
    return a->ts < b->ts ? -1 : 1;
  return strcmp (a->member, b->member);
}

/* The model's rank of sorted[i] for kind. */
static gint64
model_rank (const Item *sorted, int i, const char *kind)
{
  gint64 rank = 1;

  if (strcmp (kind, "ordinal") == 0)
    return i + 1;
  for (int j = 0; j < i; j++)
    if (sorted[j].score != sorted[i].score
        && (strcmp (kind, "competition") == 0 || j == 0
            || sorted[j].score != sorted[j - 1].score))
      rank++;
  return rank;
}

static void
test_model (gconstpointer data)
{
  const char *base = data;
  enum
  {
    MEMBERS = 300,
    UPDATES = 900
  };
  Item items[MEMBERS], sorted[MEMBERS];
  GRand *rand = g_rand_new_with_seed (7);
  const char *kind = strstr (base, "dense")  ? "dense"
                     : strstr (base, "comp") ? "competition"
                                             : "ordinal";

  ascending_model = strstr (base, "asc") != NULL;
  for (int i = 0; i < MEMBERS; i++)
    {
      g_snprintf (items[i].member, sizeof items[i].member, "w%03d", i);
      items[i].score = 0;
      items[i].ts = 0;
    }
  for (int step = 0; step < UPDATES; step++)
    {
      int i = step < MEMBERS ? step : g_rand_int_range (rand, 0, MEMBERS);

      items[i].score = g_rand_int_range (rand, -6, 7) * 10;
      items[i].ts = T0 + 1000 + g_rand_int_range (rand, 0, 5);
    }
  g_rand_free (rand);
  /* Each member's last update, written to both boards. */
  for (int sh = 0; sh < 2; sh++)
    {
      g_autofree char *b = board_name (base, sh);

      for (int i = 0; i < MEMBERS; i++)
        set_score (b, items[i].member, items[i].score, items[i].ts);
    }
  memcpy (sorted, items, sizeof items);
  qsort (sorted, MEMBERS, sizeof sorted[0], model_cmp);
  for (int sh = 0; sh < 2; sh++)
    {
      g_autofree char *b = board_name (base, sh);

      for (gint32 offset = 0; offset < MEMBERS; offset += 37)
        {
          g_auto (Result) r = { 0 };
          g_autoptr (GPtrArray) page = top_on (client, b, 50, offset, &r);

          g_assert_nonnull (page);
          g_assert_cmpuint (page->len, ==, MIN (50, MEMBERS - offset));
          for (guint k = 0; k < page->len; k++)
            {
              rankEntry *e = g_ptr_array_index (page, k);
              int i = offset + (int) k;

              g_assert_cmpstr (e->member, ==, sorted[i].member);
              g_assert_cmpint (e->score, ==, sorted[i].score);
              if (e->rank != model_rank (sorted, i, kind))
                g_error ("%s page at %d: %s has rank %" G_GINT64_FORMAT
                         ", model %" G_GINT64_FORMAT,
                         b, offset, e->member, e->rank,
                         model_rank (sorted, i, kind));
            }
        }
      for (int i = 0; i < MEMBERS; i++)
        assert_rank (b, sorted[i].member, sorted[i].score,
                     model_rank (sorted, i, kind));
    }
}

int
main (int argc, char **argv)
{
  g_autofree char *text = config_text ();
  RankTestBed bed;
  int status;

  g_test_init (&argc, &argv, NULL);
  rank_test_bed_start (&bed, text);
  redis = bed.redis;
  rankd = bed.rankd;
  client = bed.client;
  for (int sh = 0; sh < 2; sh++)
    {
      gconstpointer p = GINT_TO_POINTER (sh);
      const char *where = sh ? "sharded" : "ordinary";
      g_autofree char *a = g_strdup_printf ("/options/order-asc/%s", where);
      g_autofree char *c
          = g_strdup_printf ("/options/rank-competition/%s", where);
      g_autofree char *d = g_strdup_printf ("/options/rank-dense/%s", where);
      g_autofree char *m = g_strdup_printf ("/options/mode-best/%s", where);
      g_autofree char *w = g_strdup_printf ("/options/dedup-window/%s", where);
      g_autofree char *k = g_strdup_printf ("/options/cap/%s", where);

      g_test_add_data_func (a, p, test_ascending);
      g_test_add_data_func (c, p, test_competition);
      g_test_add_data_func (d, p, test_dense);
      g_test_add_data_func (m, p, test_default_mode);
      g_test_add_data_func (w, p, test_dedup_window);
      g_test_add_data_func (k, p, test_cap);
    }
  g_test_add_func ("/options/cap/dense-counts", test_cap_dense);
  g_test_add_func ("/options/cap/concurrent-never-over", test_cap_concurrent);
  g_test_add_data_func ("/options/model/asc", "m_asc", test_model);
  g_test_add_data_func ("/options/model/competition", "m_comp", test_model);
  g_test_add_data_func ("/options/model/dense", "m_dense", test_model);
  g_test_add_data_func ("/options/model/asc-dense", "m_asc_dense", test_model);
  status = g_test_run ();
  rank_test_bed_stop (&bed);
  return status;
}
