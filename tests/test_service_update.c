/* test_service_update.c -- the methods' behaviour, end to end (a real
 * redis-server, a real rankd, the generated c_glib client): Update's modes,
 * ties and bounds, the names' limits, GetRank and GetTopN.
 */
#include "constants.h"
#include "service.h"

/* Asserts the board's members, best first, are exactly `members`. */
static void
assert_order (const char *board, const char *const *members)
{
  g_autoptr (GPtrArray) page = top (board, RANK_TOP_N_MAX, 0);
  guint n = g_strv_length ((char **) members);

  g_assert_cmpuint (page->len, ==, n);
  for (guint i = 0; i < n; i++)
    {
      rankEntry *e = g_ptr_array_index (page, i);

      g_assert_cmpstr (e->member, ==, members[i]);
      g_assert_cmpint (e->rank, ==, i + 1);
    }
}

static void
test_modes (void)
{
  g_autofree char *b = rank_test_unique ("modes");

  assert_update (update (b, "ann", 10, "r1", NO_MODE, NO_TIME), 10, 1, TRUE);
  assert_update (
      update (b, "ann", -3, "r2", RANK_UPDATE_MODE_INCREMENT, NO_TIME), 7, 1,
      TRUE);
  assert_update (update (b, "ann", 5, "r3", RANK_UPDATE_MODE_BEST, NO_TIME), 7,
                 1, TRUE);
  assert_update (update (b, "ann", 12, "r4", RANK_UPDATE_MODE_BEST, NO_TIME),
                 12, 1, TRUE);
  assert_update (update (b, "ann", -40, "r5", RANK_UPDATE_MODE_SET, NO_TIME),
                 -40, 1, TRUE);
  assert_update (update (b, "bob", 0, "r6", NO_MODE, NO_TIME), 0, 1, TRUE);
  assert_update (update (b, "cid", -41, "r7", RANK_UPDATE_MODE_BEST, NO_TIME),
                 -41, 3, TRUE);
  assert_rank (b, "ann", -40, 2);
  assert_order (b, (const char *[]){ "bob", "ann", "cid", NULL });
}

static void
test_invalid_mode (void)
{
  g_autofree char *b = rank_test_unique ("mode");
  g_auto (Result) r = update (b, "ann", 1, "r1", 7, NO_TIME);
  g_auto (Result) gone = get_rank (b, "ann");

  assert_fails (&r, INVALID, "mode: 7 is not an UpdateMode");
  assert_fails (&gone, NOT_FOUND, NULL);
}

/* Equal scores: who got there first ranks higher; equal time: member id. */
static void
test_ties (void)
{
  g_autofree char *b = rank_test_unique ("ties");
  const gint64 t = 1763800000000;

  assert_update (update (b, "late", 50, "1", RANK_UPDATE_MODE_SET, t + 1), 50,
                 1, TRUE);
  assert_update (update (b, "early", 50, "2", RANK_UPDATE_MODE_SET, t), 50, 1,
                 TRUE);
  assert_update (update (b, "b", 50, "3", RANK_UPDATE_MODE_SET, t), 50, 1,
                 TRUE);
  assert_update (update (b, "ab", 50, "4", RANK_UPDATE_MODE_SET, t), 50, 1,
                 TRUE);
  assert_update (update (b, "a", 50, "5", RANK_UPDATE_MODE_SET, t), 50, 1,
                 TRUE);
  assert_update (update (b, "top", 51, "6", RANK_UPDATE_MODE_SET, t + 5), 51, 1,
                 TRUE);
  /* Time beats member id: "aaa" sorts first by name but got there 1 ms
   * after "early". */
  assert_update (update (b, "aaa", 50, "7", RANK_UPDATE_MODE_SET, t + 1), 50, 6,
                 TRUE);
  assert_order (b, (const char *[]){ "top", "a", "ab", "b", "early", "aaa",
                                     "late", NULL });
  assert_rank (b, "late", 50, 7);
}

/* An update that leaves the score unchanged keeps the old time. */
static void
test_unchanged_keeps_time (void)
{
  g_autofree char *b = rank_test_unique ("keep");
  const gint64 t = 1763800000000;

  assert_update (update (b, "first", 10, "1", NO_MODE, t), 10, 1, TRUE);
  assert_update (update (b, "second", 10, "2", NO_MODE, t + 1000), 10, 2, TRUE);
  assert_update (update (b, "first", 0, "3", NO_MODE, t + 2000), 10, 1, TRUE);
  assert_update (update (b, "first", 10, "4", RANK_UPDATE_MODE_SET, t + 3000),
                 10, 1, TRUE);
  assert_update (update (b, "first", 9, "5", RANK_UPDATE_MODE_BEST, t + 4000),
                 10, 1, TRUE);
  assert_update (update (b, "first", 10, "6", RANK_UPDATE_MODE_BEST, t + 4000),
                 10, 1, TRUE);
  /* A real change takes the new time: now "second" was there first. */
  assert_update (update (b, "first", 11, "7", RANK_UPDATE_MODE_SET, t + 5000),
                 11, 1, TRUE);
  assert_update (update (b, "first", 10, "8", RANK_UPDATE_MODE_SET, t + 6000),
                 10, 2, TRUE);
  assert_order (b, (const char *[]){ "second", "first", NULL });
}

static void
test_exact_extremes (void)
{
  g_autofree char *b = rank_test_unique ("exact");
  const gint64 max = RANK_SCORE_MAX;
  const gint64 t = RANK_TIMESTAMP_MAX_MS;
  g_autoptr (GPtrArray) page = NULL;
  const gint64 want[] = { max, max - 1, 1, 0, -1, -max + 1, -max };
  const char *names[]
      = { "max", "max-1", "one", "zero", "minus-one", "min+1", "min" };

  /* All at the last valid millisecond and the first: time at both ends. */
  for (gsize i = 0; i < G_N_ELEMENTS (want); i++)
    {
      g_autofree char *rid = g_strdup_printf ("r%zu", i);
      g_auto (Result) r = update (b, names[i], want[i], rid,
                                  RANK_UPDATE_MODE_SET, i % 2 ? 0 : t);

      assert_ok (&r);
      g_assert_cmpint (r.score, ==, want[i]);
    }
  page = top (b, 10, 0);
  g_assert_cmpuint (page->len, ==, G_N_ELEMENTS (want));
  for (gsize i = 0; i < G_N_ELEMENTS (want); i++)
    {
      rankEntry *e = g_ptr_array_index (page, i);

      g_assert_cmpstr (e->member, ==, names[i]);
      g_assert_cmpint (e->score, ==, want[i]);
    }
  /* Ties at the extremes, 1 ms apart, at the far end of the time range. */
  assert_update (
      update (b, "max-tie", max, "tie1", RANK_UPDATE_MODE_SET, t - 1), max, 1,
      TRUE);
  assert_rank (b, "max", max, 2);
  assert_update (update (b, "max-tie2", max, "tie2", RANK_UPDATE_MODE_SET, t),
                 max, 3, TRUE);
  /* Increments up to the edge are exact. */
  assert_update (update (b, "edge", max - 2, "e1", NO_MODE, t), max - 2, 5,
                 TRUE);
  assert_update (update (b, "edge", 2, "e2", NO_MODE, t), max, 2, TRUE);
}

static void
test_range_refused (void)
{
  g_autofree char *b = rank_test_unique ("range");
  const gint64 max = RANK_SCORE_MAX;

  assert_update (update (b, "m", max - 1, "r1", RANK_UPDATE_MODE_SET, NO_TIME),
                 max - 1, 1, TRUE);
  {
    g_auto (Result) r = update (b, "m", 2, "r2", NO_MODE, NO_TIME);
    assert_fails (&r, INVALID,
                  "value: current score 9007199254740990 + 2 is outside");
  }
  {
    g_auto (Result) r
        = update (b, "m", -max - 1, "r3", RANK_UPDATE_MODE_SET, NO_TIME);
    assert_fails (&r, INVALID, "value: -9007199254740992 is outside");
  }
  {
    g_auto (Result) r
        = update (b, "m", max + 1, "r4", RANK_UPDATE_MODE_BEST, NO_TIME);
    assert_fails (&r, INVALID, "value");
  }
  {
    g_auto (Result) r = update (b, "m", 1, "r5", NO_MODE, -1);
    assert_fails (&r, INVALID, "timestamp_ms: -1 is outside");
  }
  {
    g_auto (Result) r
        = update (b, "m", 1, "r6", NO_MODE, RANK_TIMESTAMP_MAX_MS + 1);
    assert_fails (&r, INVALID, "timestamp_ms");
  }
  /* Nothing changed, and the refused request ids were not recorded. */
  assert_rank (b, "m", max - 1, 1);
  assert_update (update (b, "m", -5, "r2", NO_MODE, NO_TIME), max - 6, 1, TRUE);
}

/* ---- names ---- */

static void
test_name_limits (void)
{
  g_autofree char *board200 = rank_test_repeat ('B', RANK_BOARD_MAX_BYTES);
  g_autofree char *board201 = rank_test_repeat ('B', RANK_BOARD_MAX_BYTES + 1);
  g_autofree char *member256 = rank_test_repeat ('m', RANK_MEMBER_MAX_BYTES);
  g_autofree char *member257
      = rank_test_repeat ('m', RANK_MEMBER_MAX_BYTES + 1);
  g_autofree char *rid128 = rank_test_repeat ('r', RANK_REQUEST_ID_MAX_BYTES);
  g_autofree char *rid129
      = rank_test_repeat ('r', RANK_REQUEST_ID_MAX_BYTES + 1);
  g_autofree char *b = rank_test_unique ("names");

  assert_update (update (board200, member256, 1, rid128, NO_MODE, NO_TIME), 1,
                 1, TRUE);
  assert_rank (board200, member256, 1, 1);
  struct
  {
    const char *board, *member, *rid, *want;
  } bad[] = {
    { board201, "m", "r", "board: must be 1-200 bytes, got 201" },
    { "", "m", "r", "board: must be 1-200 bytes" },
    { "a{b}", "m", "r", "board: must not contain '{' or '}'" },
    { "tab\there", "m", "r", "board: must not contain control characters" },
    { "bad\xff", "m", "r", "board: must be valid UTF-8" },
    { b, member257, "r", "member: must be 1-256 bytes, got 257" },
    { b, "", "r", "member: must be 1-256 bytes" },
    { b, "bad\xc3", "r", "member: must be valid UTF-8" },
    { b, "m", rid129, "request_id: must be 1-128 bytes, got 129" },
    { b, "m", "", "request_id: must be 1-128 bytes" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_auto (Result) r = update (bad[i].board, bad[i].member, 1, bad[i].rid,
                                  NO_MODE, NO_TIME);
      assert_fails (&r, INVALID, bad[i].want);
    }
  {
    g_auto (Result) r = get_rank (board201, "m");
    assert_fails (&r, INVALID, "board");
  }
  {
    g_auto (Result) r = get_rank (b, member257);
    assert_fails (&r, INVALID, "member");
  }
  {
    g_auto (Result) r = { 0 };
    g_assert_null (top_on (client, "x}", 1, 0, &r));
    assert_fails (&r, INVALID, "board");
  }
  /* None of the refused updates created anything. */
  {
    g_autoptr (GPtrArray) page = top (b, 10, 0);
    g_assert_cmpuint (page->len, ==, 0);
  }
}

/* ---- reads ---- */

static void
test_get_rank_not_found (void)
{
  g_autofree char *b = rank_test_unique ("nf");
  g_auto (Result) empty = get_rank (b, "nobody");

  assert_fails (&empty, NOT_FOUND, "member 'nobody' is not on board");
  assert_update (update (b, "ann", 1, "1", NO_MODE, NO_TIME), 1, 1, TRUE);
  {
    g_auto (Result) r = get_rank (b, "nobody");
    assert_fails (&r, NOT_FOUND, "nobody");
  }
}

static void
test_top_bounds (void)
{
  g_autofree char *b = rank_test_unique ("bounds");
  struct
  {
    gint32 n, offset;
    const char *want;
  } bad[] = {
    { 0, 0, "n: must be 1-1000, got 0" },
    { 1001, 0, "n: must be 1-1000, got 1001" },
    { -5, 0, "n: must be 1-1000" },
    { 10, -1, "offset: must be >= 0, got -1" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_auto (Result) r = { 0 };

      g_assert_null (top_on (client, b, bad[i].n, bad[i].offset, &r));
      assert_fails (&r, INVALID, bad[i].want);
    }
  {
    g_autoptr (GPtrArray) page = top (b, RANK_TOP_N_MAX, 0);
    g_assert_cmpuint (page->len, ==, 0);
  }
  assert_update (update (b, "ann", 1, "1", NO_MODE, NO_TIME), 1, 1, TRUE);
  {
    g_autoptr (GPtrArray) page = top (b, 10, 1);
    g_assert_cmpuint (page->len, ==, 0);
  }
  {
    g_autoptr (GPtrArray) page = top (b, 10, G_MAXINT32);
    g_assert_cmpuint (page->len, ==, 0);
  }
}

static void
test_top_paging (void)
{
  g_autofree char *b = rank_test_unique ("paging");
  g_autoptr (GPtrArray) all = NULL;
  guint seen = 0;

  for (int i = 0; i < 25; i++)
    {
      g_autofree char *m = g_strdup_printf ("member-%02d", i);
      g_autofree char *rid = g_strdup_printf ("p%d", i);
      g_auto (Result) r
          = update (b, m, (i * 7) % 5, rid, NO_MODE, 1763800000000 + i % 3);
      assert_ok (&r);
    }
  all = top (b, 1000, 0);
  g_assert_cmpuint (all->len, ==, 25);
  for (gint32 offset = 0; offset < 25; offset += 10)
    {
      g_autoptr (GPtrArray) page = top (b, 10, offset);

      for (guint i = 0; i < page->len; i++, seen++)
        {
          rankEntry *e = g_ptr_array_index (page, i);
          rankEntry *want = g_ptr_array_index (all, seen);

          g_assert_cmpstr (e->member, ==, want->member);
          g_assert_cmpint (e->score, ==, want->score);
          g_assert_cmpint (e->rank, ==, seen + 1);
          assert_rank (b, e->member, e->score, e->rank);
        }
    }
  g_assert_cmpuint (seen, ==, 25);
  for (guint i = 1; i < all->len; i++)
    {
      rankEntry *prev = g_ptr_array_index (all, i - 1);
      rankEntry *cur = g_ptr_array_index (all, i);

      g_assert_cmpint (prev->score, >=, cur->score);
    }
}

int
main (int argc, char **argv)
{
  service_start (&argc, &argv);

  g_test_add_func ("/update/modes", test_modes);
  g_test_add_func ("/update/invalid-mode", test_invalid_mode);
  g_test_add_func ("/update/ties-first-come", test_ties);
  g_test_add_func ("/update/unchanged-keeps-time", test_unchanged_keeps_time);
  g_test_add_func ("/update/exact-extremes", test_exact_extremes);
  g_test_add_func ("/update/range-refused", test_range_refused);
  g_test_add_func ("/names/limits", test_name_limits);
  g_test_add_func ("/read/get-rank-not-found", test_get_rank_not_found);
  g_test_add_func ("/read/top-bounds", test_top_bounds);
  g_test_add_func ("/read/top-paging", test_top_paging);
  return service_run ();
}
