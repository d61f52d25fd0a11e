/* test_transfer.c -- the export/import file formats (transfer.h): what is
 * written reads back the same, byte for byte, and a malformed record is
 * refused naming its line. */
#include <string.h>

#include "error.h"
#include "transfer.h"

static RankTransferEntry
entry (const char *member, gint64 score, gint64 time, int n_subs,
       const gint64 *subs, const char *const *pairs)
{
  RankTransferEntry e = { g_strdup (member), score, time, NULL, NULL };

  if (n_subs > 0)
    {
      e.subscores = g_array_new (FALSE, FALSE, sizeof (gint64));
      g_array_append_vals (e.subscores, subs, (guint) n_subs);
    }
  if (pairs != NULL)
    {
      e.data = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
      for (int i = 0; pairs[i] != NULL; i += 2)
        g_hash_table_insert (e.data, g_strdup (pairs[i]),
                             g_strdup (pairs[i + 1]));
    }
  return e;
}

static gboolean
same_entry (const RankTransferEntry *a, const RankTransferEntry *b)
{
  guint na = a->subscores ? a->subscores->len : 0;
  guint nb = b->subscores ? b->subscores->len : 0;
  GHashTableIter it;
  gpointer k, v;

  if (strcmp (a->member, b->member) != 0 || a->score != b->score
      || a->timestamp_ms != b->timestamp_ms || na != nb)
    return FALSE;
  for (guint i = 0; i < na; i++)
    if (g_array_index (a->subscores, gint64, i)
        != g_array_index (b->subscores, gint64, i))
      return FALSE;
  if ((a->data == NULL) != (b->data == NULL))
    return FALSE;
  if (a->data == NULL)
    return TRUE;
  if (g_hash_table_size (a->data) != g_hash_table_size (b->data))
    return FALSE;
  g_hash_table_iter_init (&it, a->data);
  while (g_hash_table_iter_next (&it, &k, &v))
    if (g_strcmp0 (v, g_hash_table_lookup (b->data, k)) != 0)
      return FALSE;
  return TRUE;
}

/* Entries that stress both formats: separators, quotes, line breaks,
 * control characters, non-ASCII, the i64 ends, subscores and data. */
static RankTransferEntry *
tricky_entries (guint *n)
{
  static const gint64 subs[] = { G_MININT64, -1, G_MAXINT64 };
  static const char *const data1[] = {
    "name", "Zoë \"Z\", the \\ first", "empty", "", "tab", "a\tb\nc", NULL
  };
  static const char *const data2[] = { "emoji", "\xf0\x9f\x8f\x86", NULL };
  RankTransferEntry *e = g_new0 (RankTransferEntry, 6);

  e[0] = entry ("alice", 120, 1700000000000, 0, NULL, NULL);
  e[1] = entry ("b,o\"b", -9007199254740991, 0, 3, subs, data1);
  e[2] = entry ("line\nbreak\r\nand more", 9007199254740991, 7289654399999, 0,
                NULL, data2);
  e[3] = entry ("\x01\x1f ctl", 0, 1, 1, subs + 1, NULL);
  e[4] = entry ("日本", 5, 2, 0, NULL, NULL);
  e[5] = entry ("\"", 1, 3, 0, NULL, NULL);
  *n = 6;
  return e;
}

static void
check_round_trip (RankTransferFormat format)
{
  guint n;
  RankTransferEntry *in = tricky_entries (&n);
  g_autoptr (GString) text = g_string_new (NULL);
  g_autoptr (GString) again = g_string_new (NULL);
  RankTransferReader r;
  RankTransferEntry out = { 0 };
  gboolean done = FALSE;

  if (format == RANK_TRANSFER_CSV)
    g_string_append (text, RANK_TRANSFER_CSV_HEADER "\n");
  for (guint i = 0; i < n; i++)
    rank_transfer_format_entry (text, format, &in[i]);
  if (format == RANK_TRANSFER_CSV)
    g_string_append (again, RANK_TRANSFER_CSV_HEADER "\n");
  rank_transfer_reader_init (&r, format, text->str, text->len);
  for (guint i = 0; i < n; i++)
    {
      g_autoptr (GError) error = NULL;

      g_assert_true (rank_transfer_read (&r, &out, &done, &error));
      g_assert_no_error (error);
      g_assert_false (done);
      g_assert_true (same_entry (&in[i], &out));
      g_assert_cmpuint (r.record, ==, i + 1);
      rank_transfer_format_entry (again, format, &out);
    }
  g_assert_true (rank_transfer_read (&r, &out, &done, NULL));
  g_assert_true (done);
  g_assert_cmpstr (again->str, ==, text->str);
  rank_transfer_entry_clear (&out);
  for (guint i = 0; i < n; i++)
    rank_transfer_entry_clear (&in[i]);
  g_free (in);
}

static void
test_csv_round_trip (void)
{
  check_round_trip (RANK_TRANSFER_CSV);
}

static void
test_jsonl_round_trip (void)
{
  check_round_trip (RANK_TRANSFER_JSONL);
}

/* The first record of text is refused, naming line and what. */
static void
check_refused (RankTransferFormat format, const char *text, const char *want)
{
  RankTransferReader r;
  RankTransferEntry e = { 0 };
  g_autoptr (GError) error = NULL;
  gboolean done = FALSE, ok = TRUE;

  rank_transfer_reader_init (&r, format, text, strlen (text));
  while (ok && !done)
    ok = rank_transfer_read (&r, &e, &done, &error);
  rank_transfer_entry_clear (&e);
  g_assert_false (ok);
  g_assert_error (error, RANK_ERROR, RANK_ERROR_INVALID);
  if (strstr (error->message, want) == NULL)
    g_error ("'%s' does not say '%s'", error->message, want);
}

static void
test_refusals (void)
{
  const char *h = RANK_TRANSFER_CSV_HEADER "\n";
  g_autofree char *two = g_strconcat (h, "\"a\",1,2,,\n\"b\",x,2,,\n", NULL);
  g_autofree char *fields = g_strconcat (h, "\"a\",1,2\n", NULL);
  g_autofree char *quote = g_strconcat (h, "\"a,1,2,,\n", NULL);
  g_autofree char *subs = g_strconcat (h, "\"a\",1,2,1;z,\n", NULL);
  g_autofree char *data
      = g_strconcat (h, "\"a\",1,2,,\"{\"\"k\"\":1}\"\n", NULL);
  g_autofree char *big
      = g_strconcat (h, "\"a\",9223372036854775808,2,,\n", NULL);

  check_refused (RANK_TRANSFER_CSV, "member,score\n", "line 1: the header");
  check_refused (RANK_TRANSFER_CSV, two, "line 3: score: 'x'");
  check_refused (RANK_TRANSFER_CSV, fields, "line 2: 3 fields");
  check_refused (RANK_TRANSFER_CSV, quote, "not closed");
  check_refused (RANK_TRANSFER_CSV, subs, "subscores: 'z'");
  check_refused (RANK_TRANSFER_CSV, data, "expected a string");
  check_refused (RANK_TRANSFER_CSV, big, "score");
  check_refused (RANK_TRANSFER_JSONL,
                 "{\"member\":\"a\",\"score\":1,\"timestamp_ms\":2}\n"
                 "{\"member\":\"a\",\"score\":1}\n",
                 "line 2: an entry needs member, score and timestamp_ms");
  check_refused (RANK_TRANSFER_JSONL,
                 "{\"member\":\"a\",\"score\":1.5,\"timestamp_ms\":2}\n",
                 "line 1: expected '}'");
  check_refused (RANK_TRANSFER_JSONL,
                 "{\"member\":\"a\",\"rank\":1,\"timestamp_ms\":2}\n",
                 "'rank' is not a field");
  check_refused (RANK_TRANSFER_JSONL,
                 "{\"member\":\"a\\u0000\",\"score\":1,\"timestamp_ms\":2}\n",
                 "NUL");
  check_refused (RANK_TRANSFER_JSONL,
                 "{\"member\":\"\\ud800\",\"score\":1,\"timestamp_ms\":2}\n",
                 "malformed JSON string");
  check_refused (RANK_TRANSFER_JSONL, "\n", "line 1: an empty line");
  check_refused (
      RANK_TRANSFER_JSONL,
      "{\"member\":\"a\",\"score\":1,\"timestamp_ms\":2,\"data\":{\"k\":\"v\","
      "\"k\":\"w\"}}\n",
      "key 'k' given twice");
}

/* A score reads as g_ascii_string_to_signed reads it in base 10 (the
 * reader parses integers itself): the same texts taken, the same values. */
static void
test_integers (void)
{
  static const char *const texts[] = {
    "0",
    "-0",
    "+7",
    "-",
    "+",
    "--1",
    "+-1",
    "00012",
    "-00012",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "99999999999999999999999",
    " 1",
    "1 ",
    "1x",
    "0x10",
    "1e3",
    "\xd9\xa3",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (texts); i++)
    {
      g_autofree char *text = g_strconcat (RANK_TRANSFER_CSV_HEADER "\na,",
                                           texts[i], ",2,,\n", NULL);
      RankTransferReader r;
      RankTransferEntry e = { 0 };
      g_autoptr (GError) error = NULL;
      gboolean done = FALSE;
      gint64 want = 0;
      gboolean valid = g_ascii_string_to_signed (texts[i], 10, G_MININT64,
                                                 G_MAXINT64, &want, NULL);

      rank_transfer_reader_init (&r, RANK_TRANSFER_CSV, text, strlen (text));
      if (rank_transfer_read (&r, &e, &done, &error) != valid)
        g_error ("'%s': read %s, glib %s", texts[i], valid ? "no" : "yes",
                 valid ? "yes" : "no");
      if (valid)
        g_assert_cmpint (e.score, ==, want);
      rank_transfer_entry_clear (&e);
    }
}

static void
test_format_names (void)
{
  RankTransferFormat f;

  g_assert_true (rank_transfer_format_of_path ("dir.x/board.csv", &f));
  g_assert_cmpint (f, ==, RANK_TRANSFER_CSV);
  g_assert_true (rank_transfer_format_of_path ("board.jsonl", &f));
  g_assert_cmpint (f, ==, RANK_TRANSFER_JSONL);
  g_assert_false (rank_transfer_format_of_path ("board.json", &f));
  g_assert_false (rank_transfer_format_of_path ("dir.csv/board", &f));
}

/* An export keeps each member's entry with the latest time (a member
 * updated during the export comes twice; on equal times the later seen),
 * and writes them sorted by member bytewise, whatever order they came in. */
static void
test_keep_latest (void)
{
  g_autoptr (GHashTable) entries = g_hash_table_new_full (
      g_str_hash, g_str_equal, NULL, (GDestroyNotify) rank_transfer_entry_free);
  static const char *const order[] = { "b", "\xc3\xa9", "a", "B" };
  g_autoptr (GString) out = g_string_new (NULL);

  for (guint i = 0; i < G_N_ELEMENTS (order); i++)
    {
      RankTransferEntry *e = g_new0 (RankTransferEntry, 1);

      *e = entry (order[i], i, 100, 0, NULL, NULL);
      g_assert_true (rank_transfer_keep_latest (entries, e));
    }
  {
    RankTransferEntry *older = g_new0 (RankTransferEntry, 1);
    RankTransferEntry *newer = g_new0 (RankTransferEntry, 1);
    RankTransferEntry *same = g_new0 (RankTransferEntry, 1);

    *older = entry ("a", 50, 99, 0, NULL, NULL);
    *newer = entry ("b", 60, 101, 0, NULL, NULL);
    *same = entry ("B", 70, 100, 0, NULL, NULL);
    g_assert_false (rank_transfer_keep_latest (entries, older));
    g_assert_true (rank_transfer_keep_latest (entries, newer));
    g_assert_true (rank_transfer_keep_latest (entries, same));
  }
  rank_transfer_write (out, RANK_TRANSFER_JSONL, entries);
  g_assert_cmpstr (
      out->str, ==,
      "{\"member\":\"B\",\"score\":70,\"timestamp_ms\":100}\n"
      "{\"member\":\"a\",\"score\":2,\"timestamp_ms\":100}\n"
      "{\"member\":\"b\",\"score\":60,\"timestamp_ms\":101}\n"
      "{\"member\":\"\xc3\xa9\",\"score\":1,\"timestamp_ms\":100}\n");
  g_string_truncate (out, 0);
  rank_transfer_write (out, RANK_TRANSFER_CSV, entries);
  g_assert_true (g_str_has_prefix (out->str, RANK_TRANSFER_CSV_HEADER
                                   "\n"
                                   "\"B\",70,100,,\n"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/transfer/csv-round-trip", test_csv_round_trip);
  g_test_add_func ("/transfer/jsonl-round-trip", test_jsonl_round_trip);
  g_test_add_func ("/transfer/refusals", test_refusals);
  g_test_add_func ("/transfer/integers", test_integers);
  g_test_add_func ("/transfer/format-names", test_format_names);
  g_test_add_func ("/transfer/keep-latest", test_keep_latest);
  return g_test_run ();
}
