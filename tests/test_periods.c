/* test_periods.c -- periodic boards: the timestamp picks the period, at
 * exact boundaries (daylight-saving days, month ends, leap day, week starts,
 * half-hour zones); late updates; history reads; retention by key TTL;
 * window=true on the reads (IDL 1.8), refused where it cannot be.
 *
 * Expected labels and instants were computed independently of rankd, with
 * Python's zoneinfo. Which period an update went to is read from Redis: the
 * period's own keys (docs/internals.md, "Key layout in Redis").
 */
#include <glib/gstdio.h>
#include <hiredis/hiredis.h>
#include <string.h>

#include "calls.h"
#include "harness.h"
#include "shard.h"

static RankClient *client;
static redisContext *direct;

static const char config_text[]
    = "[defaults]\n"
      "accept_late=true\n"
      "retention=10000\n"
      "[board ny]\n"
      "period=daily\n"
      "timezone=America/New_York\n"
      "[board ny_sh]\n"
      "period=daily\n"
      "timezone=America/New_York\n"
      "shards=4\n"
      "[board akl]\n"
      "period=monthly\n"
      "timezone=Pacific/Auckland\n"
      "[board utc_month]\n"
      "period=monthly\n"
      "[board week_sun]\n"
      "period=weekly\n"
      "week_start=sunday\n"
      "[board kolkata]\n"
      "period=hourly\n"
      "timezone=Asia/Kolkata\n"
      "[board custom]\n"
      "period=custom\n"
      "period_seconds=600\n"
      "period_epoch=60\n"
      "[board hist]\n"
      "period=custom\n"
      "period_seconds=86400\n"
      "retention=3\n"
      "[board strict]\n"
      "period=daily\n"
      "accept_late=false\n"
      "[board short]\n"
      "period=daily\n"
      "retention=1\n"
      "[board kept]\n"
      "period=daily\n"
      "retention=2\n"
      "[board kept_sh]\n"
      "period=daily\n"
      "retention=2\n"
      "shards=4\n"
      "[board hist_sh]\n"
      "period=custom\n"
      "period_seconds=86400\n"
      "retention=3\n"
      "shards=4\n"
      /* docs/configuration.md's example, + accept_late */
      "[board rolling]\n"
      "period=daily\n"
      "window=3\n"
      "retention=2\n"
      "[board rolling_sh]\n"
      "period=daily\n"
      "window=3\n"
      "retention=2\n"
      "shards=4\n"
      "[board rolling_edge]\n"
      "period=daily\n"
      "window=3\n"
      "retention=2\n"
      "[board daily_run_hero]\n"
      "period=daily\n"
      "timezone=Europe/Paris\n"
      "order=asc\n"
      "mode=best\n"
      "rank=competition\n";

static void
put (const char *board, const char *member, gint64 ts)
{
  g_autofree char *rid = g_strdup_printf ("%s@%" G_GINT64_FORMAT, member, ts);
  g_auto (Result) r = update_on (client, board, member, 1, rid, NO_MODE, ts);

  assert_ok (&r);
}

/* Whether member is in board's period label (shards: its shard's keys). */
static gboolean
in_period (const char *board, guint shards, const char *label,
           const char *member)
{
  g_autofree char *key = NULL;
  redisReply *r;
  gboolean found;

  if (shards > 1)
    key = g_strdup_printf ("rk:s:{%s/%u}:p:%s:t", board,
                           rank_shard_of (member, strlen (member), shards),
                           label);
  else
    key = g_strdup_printf ("rk:{%s}:p:%s:t", board, label);
  r = redisCommand (direct, "HEXISTS %s %s", key, member);
  found = r->integer == 1;
  freeReplyObject (r);
  return found;
}

static void
assert_in (const char *board, guint shards, const char *label,
           const char *member)
{
  if (!in_period (board, shards, label, member))
    {
      g_autofree char *pattern = g_strdup_printf ("*%s*:t", board);
      redisReply *keys = redisCommand (direct, "KEYS %s", pattern);

      for (gsize i = 0; i < keys->elements; i++)
        g_test_message ("key: %s", keys->element[i]->str);
      freeReplyObject (keys);
      g_error ("%s is not in period %s of %s", member, label, board);
    }
}

/* New York, spring forward (2026-03-08 has 23 hours) and fall back
 * (2026-11-01 has 25). */
static void
test_daily_dst (gconstpointer data)
{
  guint shards = GPOINTER_TO_UINT (data);
  const char *b = shards > 1 ? "ny_sh" : "ny";

  put (b, "before", 1772946000000 - 1); /* 2026-03-07T23:59:59.999-05:00 */
  put (b, "first", 1772946000000);      /* 2026-03-08T00:00:00-05:00 */
  put (b, "last", 1773028799999);       /* 2026-03-08T23:59:59.999-04:00 */
  put (b, "next", 1773028800000);       /* 2026-03-09T00:00:00-04:00 */
  assert_in (b, shards, "2026-03-07", "before");
  assert_in (b, shards, "2026-03-08", "first");
  assert_in (b, shards, "2026-03-08", "last");
  assert_in (b, shards, "2026-03-09", "next");
  put (b, "f-first", 1793505600000); /* 2026-11-01T00:00:00-04:00 */
  put (b, "f-last", 1793595599999);  /* 2026-11-01T23:59:59.999-05:00 */
  put (b, "f-next", 1793595600000);  /* 2026-11-02T00:00:00-05:00 */
  assert_in (b, shards, "2026-11-01", "f-first");
  assert_in (b, shards, "2026-11-01", "f-last");
  assert_in (b, shards, "2026-11-02", "f-next");
  g_assert_false (in_period (b, shards, "2026-11-02", "f-last"));
}

/* docs/configuration.md's example: Paris, 29 March 2026, 23 hours long. */
static void
test_readme_example (void)
{
  put ("daily_run_hero", "sat", 1774738799999); /* 2026-03-28T22:59:59.999Z */
  put ("daily_run_hero", "sun", 1774738800000); /* 2026-03-28T23:00:00Z */
  put ("daily_run_hero", "readme", 1774740600000); /* 2026-03-28T23:30:00Z */
  put ("daily_run_hero", "end", 1774821599999); /* 2026-03-29T21:59:59.999Z */
  put ("daily_run_hero", "mon", 1774821600000); /* 2026-03-29T22:00:00Z */
  assert_in ("daily_run_hero", 1, "2026-03-28", "sat");
  assert_in ("daily_run_hero", 1, "2026-03-29", "sun");
  assert_in ("daily_run_hero", 1, "2026-03-29", "readme");
  assert_in ("daily_run_hero", 1, "2026-03-29", "end");
  assert_in ("daily_run_hero", 1, "2026-03-30", "mon");
}

/* Month ends: Auckland (UTC+13 in February), and a leap day in UTC. */
static void
test_month_ends (void)
{
  put ("akl", "feb", 1772276399999); /* 2026-02-28T23:59:59.999+13:00 */
  put ("akl", "mar", 1772276400000); /* 2026-03-01T00:00:00+13:00 */
  assert_in ("akl", 1, "2026-02", "feb");
  assert_in ("akl", 1, "2026-03", "mar");
  put ("utc_month", "leap", 1709251199999);  /* 2024-02-29T23:59:59.999Z */
  put ("utc_month", "march", 1709251200000); /* 2024-03-01T00:00:00Z */
  assert_in ("utc_month", 1, "2024-02", "leap");
  assert_in ("utc_month", 1, "2024-03", "march");
}

/* Weeks starting on Sunday; hours of a UTC+05:30 zone; custom periods. */
static void
test_weeks_hours_custom (void)
{
  put ("week_sun", "sat", 1795305599999); /* Sat 2026-11-21T23:59:59.999Z */
  put ("week_sun", "sun", 1795305600000); /* Sun 2026-11-22T00:00:00Z */
  assert_in ("week_sun", 1, "2026-11-15", "sat");
  assert_in ("week_sun", 1, "2026-11-22", "sun");
  put ("kolkata", "h15", 1795343399999); /* 15:59:59.999+05:30 */
  put ("kolkata", "h16", 1795343400000); /* 16:00:00+05:30 */
  assert_in ("kolkata", 1, "2026-11-22T15:00+05:30", "h15");
  assert_in ("kolkata", 1, "2026-11-22T16:00+05:30", "h16");
  /* 600 s from Unix second 60: [60 + 600k, 60 + 600(k+1)) is n<k>; here
   * the boundary that began the current period. */
  {
    gint64 k = (g_get_real_time () / G_USEC_PER_SEC - 60) / 600;
    gint64 boundary = (60 + 600 * k) * 1000;
    g_autofree char *before = g_strdup_printf ("n%" G_GINT64_FORMAT, k - 1);
    g_autofree char *after = g_strdup_printf ("n%" G_GINT64_FORMAT, k);

    put ("custom", "c0", boundary - 1);
    put ("custom", "c1", boundary);
    assert_in ("custom", 1, before, "c0");
    assert_in ("custom", 1, after, "c1");
  }
}

/* Reads default to the current period; periods_back reads history; a
 * request id is the board's across periods. */
static void
test_history (gconstpointer data)
{
  const char *b = data;
  gint64 now = g_get_real_time () / 1000;
  g_auto (Result) yesterday
      = update_on (client, b, "ann", 7, "h1", NO_MODE, now - 86400000);
  g_auto (Result) retry = update_on (client, b, "ann", 7, "h1", NO_MODE, now);
  g_auto (Result) back = get_rank_back_on (client, b, "ann", 1);
  g_auto (Result) current = get_rank_on (client, b, "ann");
  g_auto (Result) too_far = get_rank_back_on (client, b, "ann", 4);
  g_auto (Result) negative = get_rank_back_on (client, b, "ann", -1);
  g_auto (Result) plain = get_rank_back_on (client, "not-periodic", "ann", 1);
  g_auto (Result) r = { 0 };
  g_autoptr (GPtrArray) page = top_back_on (client, b, 10, 0, 1, &r);

  assert_ok (&yesterday);
  assert_ok (&retry);
  g_assert_false (retry.applied);
  assert_ok (&back);
  g_assert_cmpint (back.score, ==, 7);
  g_assert_cmpint (back.rank, ==, 1);
  assert_fails (&current, NOT_FOUND, NULL);
  assert_fails (&too_far, INVALID, "keeps 3 past periods");
  assert_fails (&negative, INVALID, "periods_back: must be >= 0");
  assert_fails (&plain, INVALID, "has no periods");
  g_assert_nonnull (page);
  g_assert_cmpuint (page->len, ==, 1);
}

/* Closed, too old and future periods are refused and change nothing. */
static void
test_late_and_future (void)
{
  gint64 now = g_get_real_time () / 1000;
  g_auto (Result) late
      = update_on (client, "strict", "ann", 1, "l1", NO_MODE, now - 86400000);
  g_auto (Result) future = update_on (client, "strict", "ann", 1, "l2", NO_MODE,
                                      now + 2 * 86400000);
  g_auto (Result) too_old = update_on (client, "short", "ann", 1, "l3", NO_MODE,
                                       now - 3 * 86400000);
  g_auto (Result) gone = get_rank_on (client, "strict", "ann");

  assert_fails (&late, INVALID, "accept_late");
  assert_fails (&future, INVALID, "after the current period");
  assert_fails (&too_old, INVALID, "retention");
  assert_fails (&gone, NOT_FOUND, NULL);
}

/* retention=2: today's keys expire at the end of the day after tomorrow
 * (UTC days here: exact arithmetic). */
static void
test_retention_ttl (gconstpointer data)
{
  guint shards = GPOINTER_TO_UINT (data);
  const char *b = shards > 1 ? "kept_sh" : "kept";
  gint64 now = g_get_real_time () / 1000;
  gint64 day = now / 86400000;
  g_autoptr (GDateTime) utc = g_date_time_new_from_unix_utc (now / 1000);
  g_autofree char *label = g_date_time_format (utc, "%Y-%m-%d");
  g_autofree char *key
      = shards > 1 ? g_strdup_printf ("rk:s:{%s/%u}:p:%s:z", b,
                                      rank_shard_of ("ann", 3, shards), label)
                   : g_strdup_printf ("rk:{%s}:p:%s:z", b, label);
  redisReply *r;

  put (b, "ann", now);
  r = redisCommand (direct, "PEXPIRETIME %s", key);
  g_assert_cmpint (r->type, ==, REDIS_REPLY_INTEGER);
  g_assert_cmpint (r->integer, ==, (day + 3) * 86400000);
  freeReplyObject (r);
}

/* ---- window=true (IDL 1.8) ---- */

/* Count of board's current period, window unset. */
static Result
count_on (const char *board)
{
  Result r = { 0 };
  g_autoptr (GError) error = NULL;
  rankInvalidArgument *invalid = NULL;
  rankUnavailable *unavailable = NULL;

  if (positional_count (rank_client_iface (client), &r.score, board, 0,
                        &invalid, &unavailable, &error))
    r.kind = OK;
  else
    g_error ("Count of %s failed", board);
  return r;
}

/* The nine reads that take window, by the generated client. */
typedef enum
{
  W_GET_RANK,
  W_GET_TOP_N,
  W_GET_AROUND,
  W_GET_RANKS,
  W_COUNT,
  W_COUNT_BETWEEN,
  W_GET_PERCENTILE,
  W_GET_SCORE_AT_PERCENTILE,
  W_SAMPLE,
  W_READS
} WindowRead;

static const char *const window_read_names[]
    = { "GetRank", "GetTopN",      "GetAround",     "GetRanks",
        "Count",   "CountBetween", "GetPercentile", "GetScoreAtPercentile",
        "Sample" };

/* What a window read answered: OK (with a count, or a list's length, in
 * r->score), INVALID, NOT_FOUND. */
static Result
window_read (WindowRead what, const char *board, gint32 periods_back,
             gboolean with_data)
{
  rankRankingIf *iface = rank_client_iface (client);
  Result r = { 0 };
  rankInvalidArgument *invalid = NULL;
  rankNotFound *not_found = NULL;
  rankUnavailable *unavailable = NULL;
  rankPermissionDenied *denied = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GObject) req = NULL;
  g_autoptr (GPtrArray) list = g_ptr_array_new_with_free_func (g_object_unref);
  g_autoptr (rankEntry) entry = g_object_new (RANK_TYPE_ENTRY, NULL);
  gint64 n = 0;
  double pct = 0;
  gboolean ok = FALSE;

  switch (what)
    {
    case W_GET_RANK:
      req = g_object_new (RANK_TYPE_GET_RANK_REQUEST, "board", board, "member",
                          "ann", NULL);
      break;
    case W_GET_TOP_N:
      req = g_object_new (RANK_TYPE_GET_TOP_N_REQUEST, "board", board, "n", 10,
                          "with_data", with_data, NULL);
      break;
    case W_GET_AROUND:
      req = g_object_new (RANK_TYPE_GET_AROUND_REQUEST, "board", board,
                          "member", "ann", "radius", 2, "with_data", with_data,
                          NULL);
      break;
    case W_GET_RANKS:
      req = g_object_new (RANK_TYPE_GET_RANKS_REQUEST, "board", board, NULL);
      g_ptr_array_add (RANK_GET_RANKS_REQUEST (req)->members, g_strdup ("ann"));
      break;
    case W_COUNT:
      req = g_object_new (RANK_TYPE_COUNT_REQUEST, "board", board, NULL);
      break;
    case W_COUNT_BETWEEN:
      req = g_object_new (RANK_TYPE_COUNT_BETWEEN_REQUEST, "board", board,
                          "min_score", (gint64) 0, "max_score", (gint64) 100,
                          NULL);
      break;
    case W_GET_PERCENTILE:
      req = g_object_new (RANK_TYPE_GET_PERCENTILE_REQUEST, "board", board,
                          "member", "ann", NULL);
      break;
    case W_GET_SCORE_AT_PERCENTILE:
      req = g_object_new (RANK_TYPE_GET_SCORE_AT_PERCENTILE_REQUEST, "board",
                          board, "pct", 50.0, NULL);
      break;
    case W_SAMPLE:
      req = g_object_new (RANK_TYPE_SAMPLE_REQUEST, "board", board, "min_score",
                          (gint64) 0, "max_score", (gint64) 100, "count", 5,
                          NULL);
      break;
    default:
      g_assert_not_reached ();
    }
  g_object_set (req, "periods_back", periods_back, "window", TRUE, NULL);
  switch (what)
    {
    case W_GET_RANK:
      ok = rank_ranking_if_get_rank (iface, &entry, (gpointer) req, &invalid,
                                     &not_found, &unavailable, &denied, &error);
      n = 1;
      break;
    case W_GET_TOP_N:
      ok = rank_ranking_if_get_top_n (iface, &list, (gpointer) req, &invalid,
                                      &unavailable, &denied, &error);
      n = list->len;
      break;
    case W_GET_AROUND:
      ok = rank_ranking_if_get_around (iface, &list, (gpointer) req, &invalid,
                                       &not_found, &unavailable, &denied,
                                       &error);
      n = list->len;
      break;
    case W_GET_RANKS:
      ok = rank_ranking_if_get_ranks (iface, &list, (gpointer) req, &invalid,
                                      &unavailable, &denied, &error);
      /* The members found. */
      for (guint i = 0; ok && i < list->len; i++)
        n += RANK_RANK_OF (list->pdata[i])->found ? 1 : 0;
      break;
    case W_COUNT:
      ok = rank_ranking_if_count (iface, &n, (gpointer) req, &invalid,
                                  &unavailable, &denied, &error);
      break;
    case W_COUNT_BETWEEN:
      ok = rank_ranking_if_count_between (iface, &n, (gpointer) req, &invalid,
                                          &unavailable, &denied, &error);
      break;
    case W_GET_PERCENTILE:
      ok = rank_ranking_if_get_percentile (iface, &pct, (gpointer) req,
                                           &invalid, &not_found, &unavailable,
                                           &denied, &error);
      n = 1;
      break;
    case W_GET_SCORE_AT_PERCENTILE:
      ok = rank_ranking_if_get_score_at_percentile (
          iface, &n, (gpointer) req, &invalid, &not_found, &unavailable,
          &denied, &error);
      break;
    case W_SAMPLE:
      ok = rank_ranking_if_sample (iface, &list, (gpointer) req, &invalid,
                                   &unavailable, &denied, &error);
      n = list->len;
      break;
    default:
      g_assert_not_reached ();
    }
  if (ok)
    {
      r.kind = OK;
      r.score = n;
    }
  else if (invalid != NULL)
    {
      r.kind = INVALID;
      r.message = g_strdup (invalid->message);
    }
  else if (not_found != NULL)
    r.kind = NOT_FOUND;
  else
    g_error ("%s on %s: neither an answer, InvalidArgument nor NotFound: %s",
             window_read_names[what], board,
             error != NULL ? error->message : "an exception");
  g_clear_object (&invalid);
  g_clear_object (&not_found);
  g_clear_object (&unavailable);
  g_clear_object (&denied);
  return r;
}

/* window=true where the board has no window, or with periods_back, is
 * refused by every read, naming the field; with_data too (GetTopN,
 * GetAround). */
static void
test_window_refused (void)
{
  for (WindowRead w = 0; w < W_READS; w++)
    {
      g_auto (Result) plain = window_read (w, "kept", 0, FALSE);
      g_auto (Result) unperiodic = window_read (w, "not-periodic", 0, FALSE);
      g_auto (Result) back = window_read (w, "rolling", 1, FALSE);

      g_test_message ("%s", window_read_names[w]);
      assert_fails (&plain, INVALID,
                    "window: board 'kept' has no rolling window");
      assert_fails (&unperiodic, INVALID, "window: board 'not-periodic'");
      assert_fails (&back, INVALID,
                    "window: reads the current window; "
                    "periods_back must be 0");
    }
  for (WindowRead w = W_GET_TOP_N; w <= W_GET_AROUND; w++)
    {
      g_auto (Result) data = window_read (w, "rolling", 0, TRUE);

      assert_fails (&data, INVALID,
                    "with_data: a rolling window keeps no member data");
    }
}

/* On a board with a window, every read of it answers; before anything
 * wrote the window's keys, as an empty board does. Then a member put in
 * the window's sorted set by hand (where the coordinator's scripts keep
 * it: rk:{board}:p:window:z, a shard's rk:s:{board/i}:p:window:z) is
 * counted by a window read, and not by a read of the current period. */
static void
test_window_empty (gconstpointer data)
{
  const char *b = data;
  guint shards = strcmp (b, "rolling_sh") == 0 ? 4 : 1;
  g_autofree char *key
      = shards > 1 ? g_strdup_printf ("rk:s:{%s/%u}:p:window:z", b,
                                      rank_shard_of ("ann", 3, shards))
                   : g_strdup_printf ("rk:{%s}:p:window:z", b);
  g_auto (Result) window = { 0 };
  g_auto (Result) period = { 0 };
  redisReply *reply;

  for (WindowRead w = 0; w < W_READS; w++)
    {
      g_auto (Result) r = window_read (w, b, 0, FALSE);

      g_test_message ("%s", window_read_names[w]);
      if (w == W_GET_RANK || w == W_GET_AROUND || w == W_GET_PERCENTILE
          || w == W_GET_SCORE_AT_PERCENTILE)
        assert_fails (&r, NOT_FOUND, NULL);
      else
        {
          assert_ok (&r);
          g_assert_cmpint (r.score, ==, 0);
        }
    }
  reply = redisCommand (direct, "ZADD %s 0 ann", key);
  g_assert_cmpint (reply->integer, ==, 1);
  freeReplyObject (reply);
  window = window_read (W_COUNT, b, 0, FALSE);
  period = count_on (b);
  assert_ok (&window);
  g_assert_cmpint (window.score, ==, 1);
  assert_ok (&period);
  g_assert_cmpint (period.score, ==, 0);
  freeReplyObject (redisCommand (direct, "DEL %s", key));
}

/* The window's entry of member on board (score; FALSE: not on it). */
static gboolean
window_score (const char *board, const char *member, gint64 *score)
{
  g_auto (Result) r = { 0 };
  g_autoptr (GPtrArray) page = top_window_on (client, board, 100, 0, &r);

  assert_ok (&r);
  for (guint i = 0; i < page->len; i++)
    {
      rankEntry *e = page->pdata[i];

      if (strcmp (e->member, member) == 0)
        {
          *score = e->score;
          return TRUE;
        }
    }
  return FALSE;
}

/* An update that would take a member's window total past 2^53-1 is
 * refused before its first write: its period, the window and its request
 * id stay as they were (sent again, it is refused again). A Remove of the
 * member's entry in today's period leaves the window with yesterday's. */
static void
test_window_edges (void)
{
  const gint64 limit = G_GINT64_CONSTANT (9007199254740991);
  gint64 now = g_get_real_time () / 1000, score = 0;
  gint64 yesterday = now - 86400000;

  {
    g_auto (Result) a = update_on (client, "rolling_edge", "x", limit - 1,
                                   "edge-1", NO_MODE, yesterday);
    assert_ok (&a);
  }
  for (int attempt = 0; attempt < 2; attempt++)
    {
      g_auto (Result) b
          = update_on (client, "rolling_edge", "x", 5, "edge-2", NO_MODE, now);
      g_auto (Result) today = get_rank_on (client, "rolling_edge", "x");

      assert_fails (&b, INVALID, "value: the window total");
      assert_fails (&today, NOT_FOUND, NULL);
      g_assert_true (window_score ("rolling_edge", "x", &score));
      g_assert_cmpint (score, ==, limit - 1);
    }
  {
    g_auto (Result) y = update_on (client, "rolling_edge", "y", 10, "edge-3",
                                   NO_MODE, yesterday);
    g_auto (Result) t
        = update_on (client, "rolling_edge", "y", 5, "edge-4", NO_MODE, now);
    rankRemoveResponse *removed
        = g_object_new (RANK_TYPE_REMOVE_RESPONSE, NULL);
    rankInvalidArgument *invalid = NULL;
    rankUnavailable *unavailable = NULL;
    GError *error = NULL;

    assert_ok (&y);
    assert_ok (&t);
    g_assert_true (window_score ("rolling_edge", "y", &score));
    g_assert_cmpint (score, ==, 15);
    g_assert_true (positional_remove (rank_client_iface (client), &removed,
                                      "rolling_edge", "y", "edge-5", &invalid,
                                      &unavailable, &error));
    g_assert_true (removed->removed);
    g_clear_object (&removed);
    g_assert_true (window_score ("rolling_edge", "y", &score));
    g_assert_cmpint (score, ==, 10);
  }
}

int
main (int argc, char **argv)
{
  RankTestBed bed;
  int status;

  g_test_init (&argc, &argv, NULL);
  rank_test_bed_start (&bed, config_text);
  client = bed.client;
  direct = redis_connect (bed.redis->port);
  g_test_add_data_func ("/periods/daily-dst/ordinary", GUINT_TO_POINTER (1),
                        test_daily_dst);
  g_test_add_data_func ("/periods/daily-dst/sharded", GUINT_TO_POINTER (4),
                        test_daily_dst);
  g_test_add_func ("/periods/month-ends", test_month_ends);
  g_test_add_func ("/periods/readme-example", test_readme_example);
  g_test_add_func ("/periods/weeks-hours-custom", test_weeks_hours_custom);
  g_test_add_data_func ("/periods/history/ordinary", "hist", test_history);
  g_test_add_data_func ("/periods/history/sharded", "hist_sh", test_history);
  g_test_add_func ("/periods/late-and-future", test_late_and_future);
  g_test_add_data_func ("/periods/retention-ttl/ordinary", GUINT_TO_POINTER (1),
                        test_retention_ttl);
  g_test_add_data_func ("/periods/retention-ttl/sharded", GUINT_TO_POINTER (4),
                        test_retention_ttl);
  g_test_add_func ("/periods/window/refused", test_window_refused);
  g_test_add_func ("/periods/window/edges", test_window_edges);
  g_test_add_data_func ("/periods/window/empty/ordinary", "rolling",
                        test_window_empty);
  g_test_add_data_func ("/periods/window/empty/sharded", "rolling_sh",
                        test_window_empty);
  status = g_test_run ();
  redisFree (direct);
  rank_test_bed_stop (&bed);
  return status;
}
