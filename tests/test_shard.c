/* test_shard.c -- member placement is the documented hash, and merging
 * shard pages gives exactly one board's order. */
#include <string.h>

#include "shard.h"

/* FNV-1a 32-bit reference values (Fowler/Noll/Vo test suite). */
static void
test_hash_vectors (void)
{
  g_assert_cmphex (rank_shard_hash ("", 0), ==, 0x811c9dc5u);
  g_assert_cmphex (rank_shard_hash ("a", 1), ==, 0xe40c292cu);
  g_assert_cmphex (rank_shard_hash ("foobar", 6), ==, 0xbf9cf968u);
  /* Bytes, not characters: a UTF-8 member hashes by its bytes. */
  g_assert_cmphex (rank_shard_hash ("\xc3\xa9", 2), !=,
                   rank_shard_hash ("\xc3", 1));
  g_assert_cmpuint (rank_shard_of ("foobar", 6, 10), ==, 0xbf9cf968u % 10);
  g_assert_cmpuint (rank_shard_of ("foobar", 6, 1), ==, 0);
  g_assert_cmpuint (rank_shard_node (7, 3), ==, 1);
  g_assert_cmpuint (rank_shard_node (7, 1), ==, 0);
}

/* 10,000 members spread over 10 shards within 10% of even. */
static void
test_hash_spreads (void)
{
  guint count[10] = { 0 };

  for (int i = 0; i < 10000; i++)
    {
      char member[32];

      g_snprintf (member, sizeof member, "player-%d", i);
      count[rank_shard_of (member, strlen (member), 10)]++;
    }
  for (int i = 0; i < 10; i++)
    {
      g_assert_cmpuint (count[i], >, 900);
      g_assert_cmpuint (count[i], <, 1100);
    }
}

static RankShardEntry
entry (gint64 zscore, const char *key)
{
  RankShardEntry e = { zscore, key, strlen (key) };

  return e;
}

static void
test_compare (void)
{
  RankShardEntry a = entry (-5, "b"), b = entry (-4, "a"), c = entry (-5, "ba"),
                 d = entry (-5, "\xff"), e = entry (-5, "b");

  g_assert_cmpint (rank_shard_entry_compare (&a, &b), <, 0); /* score first */
  g_assert_cmpint (rank_shard_entry_compare (&a, &c), <, 0); /* shorter first */
  g_assert_cmpint (rank_shard_entry_compare (&c, &d), <,
                   0); /* bytes unsigned */
  g_assert_cmpint (rank_shard_entry_compare (&a, &e), ==, 0);
}

/* Random entries dealt to k pages, each sorted, merge to the sorted whole at
 * every offset. */
static int
compare_entries (gconstpointer a, gconstpointer b)
{
  return rank_shard_entry_compare (a, b);
}

static void
test_merge (void)
{
  enum
  {
    N = 2000,
    K = 7
  };
  static char keys[N][8];
  RankShardEntry all[N], pages[K][N];
  const RankShardEntry *page_ptrs[K];
  const RankShardEntry *out[N];
  gsize lens[K] = { 0 };
  GRand *rand = g_rand_new_with_seed (42);

  for (int i = 0; i < N; i++)
    {
      /* Few scores and short keys: many ties, broken by key. */
      g_snprintf (keys[i], sizeof keys[i], "%c%c%d",
                  'a' + g_rand_int_range (rand, 0, 3),
                  'a' + g_rand_int_range (rand, 0, 3), i);
      all[i] = entry (g_rand_int_range (rand, -20, 20), keys[i]);
      pages[i % K][lens[i % K]++] = all[i];
    }
  qsort (all, N, sizeof all[0], compare_entries);
  for (int k = 0; k < K; k++)
    {
      qsort (pages[k], lens[k], sizeof pages[k][0], compare_entries);
      page_ptrs[k] = pages[k];
    }
  for (gsize offset = 0; offset <= N; offset += 137)
    {
      gsize n = rank_shard_merge (page_ptrs, lens, K, offset, 100, out);

      g_assert_cmpuint (n, ==, MIN (100, N - offset));
      for (gsize i = 0; i < n; i++)
        g_assert_cmpint (rank_shard_entry_compare (out[i], &all[offset + i]),
                         ==, 0);
    }
  /* Empty pages and an offset past the end. */
  g_assert_cmpuint (rank_shard_merge (page_ptrs, lens, K, N, 10, out), ==, 0);
  lens[0] = lens[1] = 0;
  g_assert_cmpuint (rank_shard_merge (page_ptrs, lens, 2, 0, 10, out), ==, 0);
  g_rand_free (rand);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/shard/hash-vectors", test_hash_vectors);
  g_test_add_func ("/shard/hash-spreads", test_hash_spreads);
  g_test_add_func ("/shard/compare", test_compare);
  g_test_add_func ("/shard/merge", test_merge);
  return g_test_run ();
}
