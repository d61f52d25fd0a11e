/* test_spill.c -- the external sort under rankctl import and export
 * (src/client/spill.c): whatever the budget, the records come back all,
 * byte for byte, in key order, equal ones in the order they were added. */
#include <string.h>

#include <glib.h>

#include "spill.h"

typedef struct
{
  RankSpillKey key;
  GByteArray *bytes;
  guint seq;
} Ref;

static void
ref_clear (gpointer p)
{
  g_byte_array_unref (((Ref *) p)->bytes);
}

/* Orders by the bytes after the first 8 (which the key's k[0] holds), as
 * import orders members: what the key cannot tell apart. */
static int
tail_compare (const guint8 *a, gsize a_len, const guint8 *b, gsize b_len)
{
  gsize n = MIN (a_len, b_len);
  int c = n > 8 ? memcmp (a + 8, b + 8, n - 8) : 0;

  return c != 0 ? c : (a_len > b_len) - (a_len < b_len);
}

static gboolean with_tail;

static int
ref_compare (gconstpointer pa, gconstpointer pb)
{
  const Ref *a = pa, *b = pb;

  for (int i = 0; i < 3; i++)
    if (a->key.k[i] != b->key.k[i])
      return a->key.k[i] < b->key.k[i] ? -1 : 1;
  if (with_tail)
    {
      int c = tail_compare (a->bytes->data, a->bytes->len, b->bytes->data,
                            b->bytes->len);

      if (c != 0)
        return c;
    }
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* n random records of up to max_len bytes (keys from a small range, so
 * that many are equal), through a spill of memory bytes; checks what comes
 * back against a sort in memory. Returns the runs written. */
static guint
check (guint n, gsize max_len, gsize memory, gboolean tail, guint32 seed)
{
  g_autoptr (GRand) rand = g_rand_new_with_seed (seed);
  g_autoptr (GArray) refs = g_array_new (FALSE, FALSE, sizeof (Ref));
  g_autoptr (RankSpill) s = rank_spill_new (memory, tail ? tail_compare : NULL);
  g_autoptr (GError) error = NULL;
  guint runs, got = 0;

  with_tail = tail;
  g_array_set_clear_func (refs, ref_clear);
  for (guint i = 0; i < n; i++)
    {
      Ref r = { { { 0 } }, g_byte_array_new (), i };
      gsize len = (gsize) g_rand_int_range (rand, 0, (gint32) max_len + 1);

      g_byte_array_set_size (r.bytes, (guint) len);
      for (gsize j = 0; j < len; j++)
        r.bytes->data[j] = (guint8) g_rand_int_range (rand, 'a', 'd');
      if (tail)
        r.key.k[0] = rank_spill_prefix ((const char *) r.bytes->data, len);
      else
        for (int k = 0; k < 3; k++)
          r.key.k[k] = (guint64) g_rand_int_range (rand, 0, 3)
                       << (k == 0 ? 62 : 0);
      g_assert_true (
          rank_spill_add (s, &r.key, r.bytes->data, r.bytes->len, &error));
      g_assert_no_error (error);
      g_array_append_val (refs, r);
    }
  g_assert_cmpuint (rank_spill_count (s), ==, n);
  runs = rank_spill_runs (s);
  g_assert_true (rank_spill_finish (s, &error));
  g_assert_no_error (error);
  g_array_sort (refs, ref_compare);
  for (;;)
    {
      RankSpillKey key;
      const guint8 *rec;
      gsize len;
      const Ref *want;

      g_assert_true (rank_spill_next (s, &key, &rec, &len, &error));
      g_assert_no_error (error);
      if (rec == NULL)
        break;
      g_assert_cmpuint (got, <, n);
      want = &g_array_index (refs, Ref, got);
      g_assert_cmpmem (&key, sizeof key, &want->key, sizeof want->key);
      g_assert_cmpmem (rec, len, want->bytes->data, want->bytes->len);
      got++;
    }
  g_assert_cmpuint (got, ==, n);
  return runs;
}

static void
test_memory_only (void)
{
  g_assert_cmpuint (check (0, 10, 1 << 20, FALSE, 1), ==, 0);
  g_assert_cmpuint (check (1, 10, 1 << 20, FALSE, 2), ==, 0);
  g_assert_cmpuint (check (5000, 40, 1 << 20, FALSE, 3), ==, 0);
}

static void
test_runs (void)
{
  /* About 10 runs of the 1 MiB least budget. */
  g_assert_cmpuint (check (80000, 200, 0, FALSE, 4), >=, 8);
  g_assert_cmpuint (check (80000, 200, 0, TRUE, 5), >=, 8);
}

static void
test_merge_rounds (void)
{
  /* Records of up to 64 KiB: over RANK_SPILL_FAN_IN runs, merged in
   * rounds; empty records among them. */
  g_assert_cmpuint (check (3000, 64 * 1024, 0, FALSE, 6), >, RANK_SPILL_FAN_IN);
  g_assert_cmpuint (check (3000, 64 * 1024, 0, TRUE, 7), >, RANK_SPILL_FAN_IN);
}

/* A TMPDIR that cannot take a run: the error names it, and nothing
 * crashes (run in a fresh process, which reads TMPDIR anew). */
static void
test_no_tmpdir (void)
{
  if (g_test_subprocess ())
    {
      g_autoptr (RankSpill) s = NULL;
      g_autoptr (GError) error = NULL;
      guint8 rec[1000] = { 0 };
      RankSpillKey key = { { 0 } };
      gboolean ok = TRUE;

      g_setenv ("TMPDIR", "/nonexistent-rankd-test-dir", TRUE);
      s = rank_spill_new (0, NULL);
      for (int i = 0; ok && i < 5000; i++)
        ok = rank_spill_add (s, &key, rec, sizeof rec, &error);
      g_assert_false (ok);
      g_printerr ("%s\n", error->message);
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("*cannot*nonexistent-rankd-test-dir*(TMPDIR)*");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/spill/memory-only", test_memory_only);
  g_test_add_func ("/spill/runs", test_runs);
  g_test_add_func ("/spill/merge-rounds", test_merge_rounds);
  g_test_add_func ("/spill/no-tmpdir", test_no_tmpdir);
  return g_test_run ();
}
