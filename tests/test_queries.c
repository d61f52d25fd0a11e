/* test_queries.c -- GetAround, GetRanks, Remove, Count and CountBetween
 * against a model of the board kept here, on ordinary and sharded boards
 * (and an ascending competition board), through the C client.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calls.h"
#include "constants.h"
#include "harness.h"

static RankTestBed bed;

static const char config_text[] = "[board s_sh]\n"
                                  "shards=4\n"
                                  "[board q_sh]\n"
                                  "shards=4\n"
                                  "[board q_asc]\n"
                                  "order=asc\n"
                                  "rank=competition\n"
                                  "[board q_asc_sh]\n"
                                  "order=asc\n"
                                  "rank=competition\n"
                                  "shards=4\n"
                                  "[board hist]\n"
                                  "period=custom\n"
                                  "period_seconds=604800\n"
                                  "retention=2\n"
                                  "accept_late=true\n"
                                  "[board hist_sh]\n"
                                  "period=custom\n"
                                  "period_seconds=604800\n"
                                  "retention=2\n"
                                  "accept_late=true\n"
                                  "shards=4\n";

#define MEMBERS 200
#define T0 G_GINT64_CONSTANT (1763800000000)

typedef struct
{
  char member[16];
  gint64 score;
  gint64 ts;
  gboolean present;
} Item;

static Item items[MEMBERS];
static Item sorted[MEMBERS];
static int n_sorted;
static gboolean ascending, competition;

static int
model_cmp (gconstpointer pa, gconstpointer pb)
{
  const Item *a = pa, *b = pb;

  if (a->score != b->score)
    return (a->score < b->score) == ascending ? -1 : 1;
  if (a->ts != b->ts)
    return a->ts < b->ts ? -1 : 1;
  return strcmp (a->member, b->member);
}

static void
model_sort (void)
{
  n_sorted = 0;
  for (int i = 0; i < MEMBERS; i++)
    if (items[i].present)
      sorted[n_sorted++] = items[i];
  qsort (sorted, (gsize) n_sorted, sizeof sorted[0], model_cmp);
}

static gint64
model_rank (int i)
{
  if (!competition)
    return i + 1;
  while (i > 0 && sorted[i - 1].score == sorted[i].score)
    i--;
  return i + 1;
}

static int
model_find (const char *member)
{
  for (int i = 0; i < n_sorted; i++)
    if (strcmp (sorted[i].member, member) == 0)
      return i;
  return -1;
}

/* Fills board with MEMBERS members: few scores, many ties. */
static void
fill (const char *board)
{
  GRand *rand = g_rand_new_with_seed (11);

  for (int i = 0; i < MEMBERS; i++)
    {
      g_autofree char *rid = g_strdup_printf ("fill-%d", i);
      g_auto (Result) r = { 0 };

      g_snprintf (items[i].member, sizeof items[i].member, "q%03d", i);
      items[i].score = g_rand_int_range (rand, -5, 6) * 7;
      items[i].ts = T0 + g_rand_int_range (rand, 0, 4);
      items[i].present = TRUE;
      r = update_on (bed.client, board, items[i].member, items[i].score, rid,
                     RANK_UPDATE_MODE_SET, items[i].ts);
      assert_ok (&r);
    }
  g_rand_free (rand);
  model_sort ();
}

static void
check_around (const char *board, const char *member, gint32 radius)
{
  rankInvalidArgument *invalid = NULL;
  rankNotFound *not_found = NULL;
  rankUnavailable *unavailable = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) page = g_ptr_array_new_with_free_func (g_object_unref);
  int at = model_find (member);
  int first = MAX (0, at - radius), last = MIN (n_sorted - 1, at + radius);

  g_assert_true (positional_get_around (
      rank_client_iface (bed.client), &page, board, member, radius, 0, FALSE,
      &invalid, &not_found, &unavailable, &error));
  g_assert_cmpint (page->len, ==, last - first + 1);
  for (int i = first; i <= last; i++)
    {
      rankEntry *e = g_ptr_array_index (page, i - first);

      g_assert_cmpstr (e->member, ==, sorted[i].member);
      g_assert_cmpint (e->score, ==, sorted[i].score);
      g_assert_cmpint (e->rank, ==, model_rank (i));
    }
}

static void
check_ranks (const char *board)
{
  rankInvalidArgument *invalid = NULL;
  rankUnavailable *unavailable = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) asked = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) answers
      = g_ptr_array_new_with_free_func (g_object_unref);

  for (int i = 0; i < MEMBERS; i += 3)
    g_ptr_array_add (asked, g_strdup (items[i].member));
  g_ptr_array_add (asked, g_strdup ("nobody"));
  g_assert_true (positional_get_ranks (rank_client_iface (bed.client), &answers,
                                       board, asked, 0, &invalid, &unavailable,
                                       &error));
  g_assert_cmpuint (answers->len, ==, asked->len);
  for (guint k = 0; k < asked->len; k++)
    {
      rankRankOf *of = g_ptr_array_index (answers, k);
      int at = model_find (g_ptr_array_index (asked, k));

      g_assert_cmpstr (of->member, ==, g_ptr_array_index (asked, k));
      g_assert_cmpint (of->found, ==, at >= 0);
      if (at >= 0)
        {
          g_assert_cmpint (of->score, ==, sorted[at].score);
          g_assert_cmpint (of->rank, ==, model_rank (at));
        }
      else
        g_assert_false (of->__isset_rank);
    }
}

static gint64
count (const char *board, gboolean range, gint64 min, gint64 max)
{
  rankInvalidArgument *invalid = NULL;
  rankUnavailable *unavailable = NULL;
  g_autoptr (GError) error = NULL;
  gint64 n = -1;
  gboolean ok
      = range ? positional_count_between (rank_client_iface (bed.client), &n,
                                          board, min, max, 0, &invalid,
                                          &unavailable, &error)
              : positional_count (rank_client_iface (bed.client), &n, board, 0,
                                  &invalid, &unavailable, &error);

  g_assert_true (ok);
  return n;
}

static void
check_counts (const char *board)
{
  g_assert_cmpint (count (board, FALSE, 0, 0), ==, n_sorted);
  for (gint64 lo = -35; lo <= 35; lo += 14)
    for (gint64 hi = lo; hi <= 35; hi += 21)
      {
        gint64 want = 0;

        for (int i = 0; i < n_sorted; i++)
          want += sorted[i].score >= lo && sorted[i].score <= hi;
        g_assert_cmpint (count (board, TRUE, lo, hi), ==, want);
      }
}

static double
percentile (const char *board, const char *member)
{
  rankInvalidArgument *invalid = NULL;
  rankNotFound *not_found = NULL;
  rankUnavailable *unavailable = NULL;
  g_autoptr (GError) error = NULL;
  double pct = -1;

  if (!positional_get_percentile (rank_client_iface (bed.client), &pct, board,
                                  member, 0, &invalid, &not_found, &unavailable,
                                  &error))
    g_error ("GetPercentile(%s, %s): %s", board, member,
             error       ? error->message
             : invalid   ? invalid->message
             : not_found ? not_found->message
                         : "Unavailable");
  return pct;
}

static gint64
score_at (const char *board, double pct)
{
  rankInvalidArgument *invalid = NULL;
  rankNotFound *not_found = NULL;
  rankUnavailable *unavailable = NULL;
  g_autoptr (GError) error = NULL;
  gint64 score = G_MININT64;

  g_assert_true (positional_get_score_at_percentile (
      rank_client_iface (bed.client), &score, board, pct, 0, &invalid,
      &not_found, &unavailable, &error));
  return score;
}

/* Percentile: the share strictly behind; score at pct: the entry at
 * position ceil(count * (100 - pct) / 100), at least 1. */
static void
check_percentiles (const char *board)
{
  static const double pcts[] = { 0, 1, 10, 33.3, 50, 90, 99.9, 100 };

  for (int i = 0; i < n_sorted; i += 9)
    {
      int behind = 0;

      for (int j = 0; j < n_sorted; j++)
        behind += ascending ? sorted[j].score > sorted[i].score
                            : sorted[j].score < sorted[i].score;
      g_assert_cmpfloat_with_epsilon (percentile (board, sorted[i].member),
                                      100.0 * behind / n_sorted, 1e-9);
    }
  for (gsize k = 0; k < G_N_ELEMENTS (pcts); k++)
    {
      gint64 position = (gint64) ceil (n_sorted * (100 - pcts[k]) / 100);

      position = CLAMP (position, 1, n_sorted);
      g_assert_cmpint (score_at (board, pcts[k]), ==,
                       sorted[position - 1].score);
    }
}

/* Remove, retried: removed once; the member is gone from every answer. */
static void
check_remove (const char *board, int victim)
{
  rankInvalidArgument *invalid = NULL;
  rankUnavailable *unavailable = NULL;
  g_autoptr (GError) error = NULL;

  for (int attempt = 0; attempt < 2; attempt++)
    {
      rankRemoveResponse *r = g_object_new (RANK_TYPE_REMOVE_RESPONSE, NULL);

      g_assert_true (positional_remove (rank_client_iface (bed.client), &r,
                                        board, items[victim].member, "remove-1",
                                        &invalid, &unavailable, &error));
      g_assert_cmpint (r->applied, ==, attempt == 0);
      g_assert_cmpint (r->removed, ==, attempt == 0);
      g_object_unref (r);
    }
  items[victim].present = FALSE;
  model_sort ();
  {
    g_auto (Result) gone
        = get_rank_on (bed.client, board, items[victim].member);
    /* The request id is taken: reusing it for an update is refused. */
    g_auto (Result) reuse = update_on (bed.client, board, items[victim].member,
                                       1, "remove-1", NO_MODE, NO_TIME);

    assert_fails (&gone, NOT_FOUND, NULL);
    assert_fails (&reuse, INVALID, "request_id: already used");
  }
}

static void
test_queries (gconstpointer data)
{
  const char *board = data;

  ascending = strstr (board, "asc") != NULL;
  competition = ascending;
  fill (board);
  for (int i = 0; i < n_sorted; i += 7)
    for (gint32 radius = 0; radius <= 5; radius += 5)
      check_around (board, sorted[i].member, radius);
  check_around (board, sorted[0].member, 3);
  check_around (board, sorted[n_sorted - 1].member, 3);
  check_ranks (board);
  check_counts (board);
  check_percentiles (board);
  check_remove (board, 42);
  check_around (board, sorted[41].member, 2);
  check_ranks (board);
  check_counts (board);
}

static GPtrArray *
sample (const char *board, gint64 min, gint64 max, gint32 n)
{
  rankInvalidArgument *invalid = NULL;
  rankUnavailable *unavailable = NULL;
  g_autoptr (GError) error = NULL;
  GPtrArray *page = g_ptr_array_new_with_free_func (g_object_unref);

  g_assert_true (positional_sample (rank_client_iface (bed.client), &page,
                                    board, min, max, n, 0, &invalid,
                                    &unavailable, &error));
  return page;
}

/* 50 members scored 0..49. 600 draws of 5 from the 30 scored 10..39: each
 * drawn in range, distinct within a draw, ranked; and uniform: the
 * chi-square statistic of the counts stays under 58.3 (p = 0.001 at 29
 * degrees of freedom; the seed is fixed, so the outcome is too). A sampler
 * biased to any part of the range fails it by far. */
static void
test_sample (gconstpointer data)
{
  const char *board = data;
  int hits[50] = { 0 };
  double chi2 = 0;

  for (int i = 0; i < 50; i++)
    {
      g_autofree char *m = g_strdup_printf ("u%02d", i);
      g_auto (Result) r
          = update_on (bed.client, board, m, i, m, RANK_UPDATE_MODE_SET, T0);

      assert_ok (&r);
    }
  for (int call = 0; call < 600; call++)
    {
      g_autoptr (GPtrArray) page = sample (board, 10, 39, 5);
      gboolean seen[50] = { FALSE };

      g_assert_cmpuint (page->len, ==, 5);
      for (guint k = 0; k < page->len; k++)
        {
          rankEntry *e = g_ptr_array_index (page, k);
          int i = atoi (e->member + 1);

          g_assert_cmpint (e->score, ==, i);
          g_assert_cmpint (e->score, >=, 10);
          g_assert_cmpint (e->score, <=, 39);
          g_assert_cmpint (e->rank, ==, 50 - i);
          g_assert_false (seen[i]);
          seen[i] = TRUE;
          hits[i]++;
        }
    }
  for (int i = 10; i <= 39; i++)
    chi2 += (hits[i] - 100.0) * (hits[i] - 100.0) / 100.0;
  g_test_message ("%s: chi-square %.1f", board, chi2);
  g_assert_cmpfloat (chi2, <, 58.3);
  {
    g_autoptr (GPtrArray) few = sample (board, 0, 2, 10);
    g_autoptr (GPtrArray) none = sample (board, 100, 200, 10);

    g_assert_cmpuint (few->len, ==, 3);
    g_assert_cmpuint (none->len, ==, 0);
  }
}

/* The longest board name over 64 shards: a GetRank's command carries 64
 * keys of over 200 bytes each, more than a command's inline buffer. */
static void
test_long_keys (void)
{
  g_autofree char *board = rank_test_repeat ('L', RANK_BOARD_MAX_BYTES);

  for (int i = 0; i < 100; i++)
    {
      g_autofree char *m = g_strdup_printf ("k%03d", i);
      g_auto (Result) r
          = update_on (bed.client, board, m, i, m, RANK_UPDATE_MODE_SET, T0);

      assert_ok (&r);
    }
  for (int i = 0; i < 100; i++)
    {
      g_autofree char *m = g_strdup_printf ("k%03d", i);
      g_auto (Result) r = get_rank_on (bed.client, board, m);

      assert_ok (&r);
      g_assert_cmpint (r.score, ==, i);
      g_assert_cmpint (r.rank, ==, 100 - i);
    }
  {
    g_auto (Result) r = { 0 };
    g_autoptr (GPtrArray) page = top_on (bed.client, board, 10, 45, &r);

    g_assert_nonnull (page);
    g_assert_cmpuint (page->len, ==, 10);
    g_assert_cmpstr (((rankEntry *) g_ptr_array_index (page, 0))->member, ==,
                     "k054");
  }
}

/* The queries of several rounds read a past period whole when asked to
 * (periods_back 1): the week before holds alice 500, carol 300, erin 200,
 * dave 100; this week bob 7 only. GetScoreAtPercentile read this week's
 * page in its second round (its periods_back went into with_data). */
static void
test_periods_back (gconstpointer data)
{
  const char *board = data;
  gint64 now = g_get_real_time () / 1000, last_week = now - 604800000;
  static const struct
  {
    const char *member;
    gint64 score;
  } before[] = {
    { "alice", 500 }, { "carol", 300 }, { "erin", 200 }, { "dave", 100 }
  };
  rankInvalidArgument *invalid = NULL;
  rankNotFound *not_found = NULL;
  rankUnavailable *unavailable = NULL;
  g_autoptr (GError) error = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (before); i++)
    {
      g_autofree char *rid = g_strdup_printf ("%s-%s", board, before[i].member);
      g_auto (Result) r
          = update_on (bed.client, board, before[i].member, before[i].score,
                       rid, RANK_UPDATE_MODE_SET, last_week);

      assert_ok (&r);
    }
  {
    g_autofree char *rid = g_strdup_printf ("%s-bob", board);
    g_auto (Result) r = update_on (bed.client, board, "bob", 7, rid,
                                   RANK_UPDATE_MODE_SET, now);

    assert_ok (&r);
  }
  for (int back = 0; back < 2; back++)
    {
      static const double pcts[] = { 100, 50, 0 };
      static const gint64 want[2][3] = { { 7, 7, 7 }, { 500, 300, 100 } };

      for (gsize k = 0; k < G_N_ELEMENTS (pcts); k++)
        {
          gint64 score = G_MININT64;

          g_assert_true (positional_get_score_at_percentile (
              rank_client_iface (bed.client), &score, board, pcts[k], back,
              &invalid, &not_found, &unavailable, &error));
          g_assert_cmpint (score, ==, want[back][k]);
        }
    }
  {
    double pct = -1;

    g_assert_true (positional_get_percentile (
        rank_client_iface (bed.client), &pct, board, "carol", 1, &invalid,
        &not_found, &unavailable, &error));
    g_assert_cmpfloat_with_epsilon (pct, 50.0, 1e-9);
    g_assert_false (positional_get_percentile (
        rank_client_iface (bed.client), &pct, board, "carol", 0, &invalid,
        &not_found, &unavailable, &error));
    g_assert_nonnull (not_found);
    g_clear_object (&not_found);
    g_clear_error (&error);
  }
  {
    g_autoptr (GPtrArray) page
        = g_ptr_array_new_with_free_func (g_object_unref);
    static const char *const around[] = { "alice", "carol", "erin" };

    g_assert_true (positional_get_around (rank_client_iface (bed.client), &page,
                                          board, "carol", 1, 1, FALSE, &invalid,
                                          &not_found, &unavailable, &error));
    g_assert_cmpuint (page->len, ==, 3);
    for (guint i = 0; i < page->len; i++)
      {
        rankEntry *e = g_ptr_array_index (page, i);

        g_assert_cmpstr (e->member, ==, around[i]);
        g_assert_cmpint (e->rank, ==, i + 1);
      }
  }
  {
    g_autoptr (GPtrArray) page
        = g_ptr_array_new_with_free_func (g_object_unref);
    gint64 seen = 0;

    g_assert_true (positional_sample (rank_client_iface (bed.client), &page,
                                      board, 0, 1000, 10, 1, &invalid,
                                      &unavailable, &error));
    g_assert_cmpuint (page->len, ==, G_N_ELEMENTS (before));
    for (guint i = 0; i < page->len; i++)
      {
        rankEntry *e = g_ptr_array_index (page, i);

        for (gsize k = 0; k < G_N_ELEMENTS (before); k++)
          if (strcmp (e->member, before[k].member) == 0)
            {
              g_assert_cmpint (e->score, ==, before[k].score);
              g_assert_cmpint (e->rank, ==, k + 1);
              seen |= 1 << k;
            }
      }
    g_assert_cmpint (seen, ==, 15);
  }
}

/* Bad arguments name the field. */
static void
test_invalid (void)
{
  rankInvalidArgument *invalid = NULL;
  rankNotFound *not_found = NULL;
  rankUnavailable *unavailable = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) page = g_ptr_array_new_with_free_func (g_object_unref);
  g_autoptr (GPtrArray) none = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) answers
      = g_ptr_array_new_with_free_func (g_object_unref);
  gint64 n;

  g_assert_false (positional_get_around (rank_client_iface (bed.client), &page,
                                         "q", "x", 101, 0, FALSE, &invalid,
                                         &not_found, &unavailable, &error));
  g_assert_nonnull (invalid);
  g_assert_nonnull (strstr (invalid->message, "radius: must be 0-100"));
  g_clear_object (&invalid);
  g_clear_error (&error);
  g_assert_false (positional_get_around (rank_client_iface (bed.client), &page,
                                         "q", "nobody", 1, 0, FALSE, &invalid,
                                         &not_found, &unavailable, &error));
  g_assert_nonnull (not_found);
  g_clear_object (&not_found);
  g_clear_error (&error);
  g_assert_false (positional_get_ranks (rank_client_iface (bed.client),
                                        &answers, "q", none, 0, &invalid,
                                        &unavailable, &error));
  g_assert_nonnull (invalid);
  g_assert_nonnull (strstr (invalid->message, "members: must list 1-1000"));
  g_clear_object (&invalid);
  g_clear_error (&error);
  g_assert_false (positional_count_between (rank_client_iface (bed.client), &n,
                                            "q", 5, 4, 0, &invalid,
                                            &unavailable, &error));
  g_assert_nonnull (invalid);
  g_assert_nonnull (strstr (invalid->message, "min_score: 5 is above"));
  g_clear_object (&invalid);
  g_clear_error (&error);
  {
    double pct;
    gint64 score;

    g_assert_false (positional_get_score_at_percentile (
        rank_client_iface (bed.client), &score, "q", 101, 0, &invalid,
        &not_found, &unavailable, &error));
    g_assert_nonnull (invalid);
    g_assert_nonnull (strstr (invalid->message, "pct: must be 0-100"));
    g_clear_object (&invalid);
    g_clear_error (&error);
    g_assert_false (positional_get_score_at_percentile (
        rank_client_iface (bed.client), &score, "empty-board", 50, 0, &invalid,
        &not_found, &unavailable, &error));
    g_assert_nonnull (not_found);
    g_clear_object (&not_found);
    g_clear_error (&error);
    g_assert_false (positional_get_percentile (
        rank_client_iface (bed.client), &pct, "q", "nobody", 0, &invalid,
        &not_found, &unavailable, &error));
    g_assert_nonnull (not_found);
    g_clear_object (&not_found);
  }
}

int
main (int argc, char **argv)
{
  int status;

  g_autofree char *long_board = rank_test_repeat ('L', RANK_BOARD_MAX_BYTES);
  g_autofree char *text
      = g_strdup_printf ("%s[board %s]\nshards=64\n", config_text, long_board);

  g_test_init (&argc, &argv, NULL);
  rank_test_bed_start (&bed, text);
  g_test_add_data_func ("/queries/ordinary", "q", test_queries);
  g_test_add_data_func ("/queries/sharded", "q_sh", test_queries);
  g_test_add_data_func ("/queries/asc-competition", "q_asc", test_queries);
  g_test_add_data_func ("/queries/asc-competition-sharded", "q_asc_sh",
                        test_queries);
  g_test_add_func ("/queries/invalid", test_invalid);
  g_test_add_func ("/queries/long-keys-64-shards", test_long_keys);
  g_test_add_data_func ("/queries/sample/ordinary", "s", test_sample);
  g_test_add_data_func ("/queries/sample/sharded", "s_sh", test_sample);
  g_test_add_data_func ("/queries/periods-back/ordinary", "hist",
                        test_periods_back);
  g_test_add_data_func ("/queries/periods-back/sharded", "hist_sh",
                        test_periods_back);
  status = g_test_run ();
  rank_test_bed_stop (&bed);
  return status;
}
