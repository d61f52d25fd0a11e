/* test_orderkey.c -- the sorted-set encoding orders exactly as rank order
 * should, at the extremes of every range. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "constants.h"
#include "orderkey.h"

typedef struct
{
  gint64 score;
  gint64 ms;
  const char *member;
  /* what Redis stores */
  double zscore;
  guint8 zmember[64];
  gsize zlen;
} Item;

static void
encode (Item *it)
{
  it->zscore = rank_orderkey_zscore (it->score);
  rank_orderkey_encode_time (it->ms, it->zmember);
  it->zlen = RANK_ORDERKEY_TIME_BYTES + strlen (it->member);
  memcpy (it->zmember + RANK_ORDERKEY_TIME_BYTES, it->member,
          strlen (it->member));
}

/* Redis's order: score ascending, then member bytes (memcmp, shorter
 * first) -- zslValueGteMin/sdscmp in t_zset.c. */
static int
redis_cmp (gconstpointer a, gconstpointer b)
{
  const Item *x = a, *y = b;
  int c;

  if (x->zscore != y->zscore)
    return x->zscore < y->zscore ? -1 : 1;
  c = memcmp (x->zmember, y->zmember, MIN (x->zlen, y->zlen));
  if (c != 0)
    return c;
  return x->zlen < y->zlen ? -1 : x->zlen > y->zlen;
}

/* The rank order of the brief: score desc, time asc, member asc bytewise. */
static int
rank_cmp (gconstpointer a, gconstpointer b)
{
  const Item *x = a, *y = b;
  int c;

  if (x->score != y->score)
    return x->score > y->score ? -1 : 1;
  if (x->ms != y->ms)
    return x->ms < y->ms ? -1 : 1;
  c = strcmp (x->member, y->member); /* bytewise: strcmp compares unsigned */
  return c;
}

static void
test_time_roundtrip (void)
{
  const gint64 values[] = { 0,
                            1,
                            255,
                            256,
                            1763800000000,
                            RANK_TIMESTAMP_MAX_MS - 1,
                            RANK_TIMESTAMP_MAX_MS,
                            (G_GINT64_CONSTANT (1) << 48) - 1 };
  guint8 buf[RANK_ORDERKEY_TIME_BYTES];

  for (gsize i = 0; i < G_N_ELEMENTS (values); i++)
    {
      rank_orderkey_encode_time (values[i], buf);
      g_assert_cmpint (rank_orderkey_decode_time (buf), ==, values[i]);
    }
  rank_orderkey_encode_time (0, buf);
  for (gsize i = 0; i < sizeof buf; i++)
    g_assert_cmpuint (buf[i], ==, 0);
}

static void
test_time_order_1ms (void)
{
  const gint64 bases[]
      = { 0, 255, 65535, 1763800000000, RANK_TIMESTAMP_MAX_MS - 1 };
  guint8 a[RANK_ORDERKEY_TIME_BYTES], b[RANK_ORDERKEY_TIME_BYTES];

  for (gsize i = 0; i < G_N_ELEMENTS (bases); i++)
    {
      rank_orderkey_encode_time (bases[i], a);
      rank_orderkey_encode_time (bases[i] + 1, b);
      g_assert_cmpint (memcmp (a, b, sizeof a), <, 0);
    }
}

/* Subscores round-trip over the whole i64 range, and their bytes sort as
 * the values do: ascending for asc, descending for desc. */
static void
test_subscore_order (void)
{
  const gint64 values[] = { G_MININT64,
                            G_MININT64 + 1,
                            -65536,
                            -256,
                            -1,
                            0,
                            1,
                            255,
                            256,
                            G_GINT64_CONSTANT (1) << 53,
                            G_MAXINT64 - 1,
                            G_MAXINT64 };

  for (int asc = 0; asc <= 1; asc++)
    for (gsize i = 0; i < G_N_ELEMENTS (values); i++)
      {
        guint8 a[RANK_ORDERKEY_SUBSCORE_BYTES], b[RANK_ORDERKEY_SUBSCORE_BYTES];

        rank_orderkey_encode_subscore (values[i], asc, a);
        g_assert_cmpint (rank_orderkey_decode_subscore (a, asc), ==, values[i]);
        if (i + 1 == G_N_ELEMENTS (values))
          continue;
        rank_orderkey_encode_subscore (values[i + 1], asc, b);
        if (asc)
          g_assert_cmpint (memcmp (a, b, sizeof a), <, 0);
        else
          g_assert_cmpint (memcmp (a, b, sizeof a), >, 0);
      }
}

static void
test_zscore_exact (void)
{
  const gint64 scores[] = { 0,
                            1,
                            -1,
                            RANK_SCORE_MAX,
                            RANK_SCORE_MAX - 1,
                            -RANK_SCORE_MAX,
                            -RANK_SCORE_MAX + 1,
                            G_GINT64_CONSTANT (4503599627370497) };

  for (gsize i = 0; i < G_N_ELEMENTS (scores); i++)
    {
      char text[64];
      gint64 back = 0;
      double z = rank_orderkey_zscore (scores[i]);

      /* What Redis sends back for a score (%.17g), and the shortest form. */
      g_snprintf (text, sizeof text, "%.17g", z);
      g_assert_true (rank_orderkey_parse_zscore (text, strlen (text), &back));
      g_assert_cmpint (back, ==, scores[i]);
      g_snprintf (text, sizeof text, "%.16e", z);
      g_assert_true (rank_orderkey_parse_zscore (text, strlen (text), &back));
      g_assert_cmpint (back, ==, scores[i]);
    }
  /* Neighbours at the top of the range stay distinct. */
  g_assert_true (rank_orderkey_zscore (RANK_SCORE_MAX)
                 != rank_orderkey_zscore (RANK_SCORE_MAX - 1));
  g_assert_true (rank_orderkey_zscore (-RANK_SCORE_MAX)
                 != rank_orderkey_zscore (-RANK_SCORE_MAX + 1));
}

static void
test_parse_rejects (void)
{
  const char *bad[] = { "",
                        "1.5",
                        "inf",
                        "-inf",
                        "nan",
                        "abc",
                        "1e300",
                        "9007199254740992",
                        "-9007199254740992",
                        "12x",
                        "-",
                        "--1",
                        "1-",
                        "99999999999999999999" };
  gint64 out = 0;

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    g_assert_false (rank_orderkey_parse_zscore (bad[i], strlen (bad[i]), &out));
  g_assert_true (rank_orderkey_parse_zscore ("-0", 2, &out));
  g_assert_cmpint (out, ==, 0);
  g_assert_true (rank_orderkey_parse_zscore ("1e3", 3, &out));
  g_assert_cmpint (out, ==, -1000);
  g_assert_true (rank_orderkey_parse_zscore ("+7", 2, &out));
  g_assert_cmpint (out, ==, -7);
  g_assert_true (rank_orderkey_parse_zscore ("007", 3, &out));
  g_assert_cmpint (out, ==, -7);
  /* Only the bytes given count. */
  g_assert_true (rank_orderkey_parse_zscore ("-12x", 3, &out));
  g_assert_cmpint (out, ==, 12);
}

/* Redis's order over the encoded items equals rank order. */
static void
test_rank_order (void)
{
  const gint64 scores[] = { RANK_SCORE_MAX,      RANK_SCORE_MAX - 1, 1, 0, -1,
                            -RANK_SCORE_MAX + 1, -RANK_SCORE_MAX };
  const gint64 times[] = {
    RANK_TIMESTAMP_MIN_MS, RANK_TIMESTAMP_MIN_MS + 1, 1763800000000,
    1763800000001,         RANK_TIMESTAMP_MAX_MS - 1, RANK_TIMESTAMP_MAX_MS
  };
  const char *members[] = { "a", "ab", "b", "B", "\xc3\xa9", "a\x7f", "zz" };
  GArray *by_redis = g_array_new (FALSE, FALSE, sizeof (Item));
  GArray *by_rank;
  GRand *rand = g_rand_new_with_seed (42);

  for (gsize s = 0; s < G_N_ELEMENTS (scores); s++)
    for (gsize t = 0; t < G_N_ELEMENTS (times); t++)
      for (gsize m = 0; m < G_N_ELEMENTS (members); m++)
        {
          Item it
              = { .score = scores[s], .ms = times[t], .member = members[m] };

          encode (&it);
          g_array_append_val (by_redis, it);
        }
  for (int i = 0; i < 2000; i++)
    {
      /* Random near-ties: few scores, times 0-3 ms apart. */
      Item it
          = { .score = g_rand_int_range (rand, -2, 3),
              .ms = 1763800000000 + g_rand_int_range (rand, 0, 4),
              .member
              = members[g_rand_int_range (rand, 0, G_N_ELEMENTS (members))] };
      encode (&it);
      g_array_append_val (by_redis, it);
    }
  by_rank = g_array_copy (by_redis);
  g_array_sort (by_redis, redis_cmp);
  g_array_sort (by_rank, rank_cmp);
  for (guint i = 0; i < by_redis->len; i++)
    {
      Item *a = &g_array_index (by_redis, Item, i);
      Item *b = &g_array_index (by_rank, Item, i);

      g_assert_cmpint (rank_cmp (a, b), ==, 0);
    }
  g_array_unref (by_redis);
  g_array_unref (by_rank);
  g_rand_free (rand);
}

/* The sorted-set score after the prefix in the times hash: a big-endian
 * 8-byte two's complement integer; what update.lua's place makes
 * (tests/test_service_idempotency.c checks a value it wrote). */
static void
test_place_score (void)
{
  static const struct
  {
    gint64 zscore;
    guint8 bytes[RANK_PLACE_SCORE_BYTES];
  } cases[] = {
    { 0, { 0, 0, 0, 0, 0, 0, 0, 0 } },
    { 42, { 0, 0, 0, 0, 0, 0, 0, 0x2a } },
    { -42, { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xd6 } },
    { 258, { 0, 0, 0, 0, 0, 0, 1, 2 } },
    { RANK_SCORE_MAX, { 0, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff } },
    { -RANK_SCORE_MAX, { 0xff, 0xe0, 0, 0, 0, 0, 0, 1 } },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      guint8 out[RANK_PLACE_SCORE_BYTES];

      rank_orderkey_encode_place_score (cases[i].zscore, out);
      g_assert_cmpmem (out, sizeof out, cases[i].bytes, sizeof out);
      g_assert_cmpint (rank_orderkey_decode_place_score (cases[i].bytes), ==,
                       cases[i].zscore);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/orderkey/time/roundtrip", test_time_roundtrip);
  g_test_add_func ("/orderkey/time/order-1ms", test_time_order_1ms);
  g_test_add_func ("/orderkey/subscore/order", test_subscore_order);
  g_test_add_func ("/orderkey/zscore/exact-at-2^53-1", test_zscore_exact);
  g_test_add_func ("/orderkey/zscore/parse-rejects", test_parse_rejects);
  g_test_add_func ("/orderkey/rank-order", test_rank_order);
  g_test_add_func ("/orderkey/place-score", test_place_score);
  return g_test_run ();
}
