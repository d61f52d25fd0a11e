/* test_requestid.c -- how request ids are recorded (requestid.h), against
 * vectors computed independently (Python's hashlib); and update.lua reads
 * each of its arguments from the position rankd gives it
 * (rank_store_update_batch_arg_names and the others), so that a swap on
 * either side fails here. */
#include <stdlib.h>
#include <string.h>

#include "requestid.h"
#include "store.h"

static char *
hex (const guint8 *bytes, gsize n)
{
  GString *s = g_string_new (NULL);

  for (gsize i = 0; i < n; i++)
    g_string_append_printf (s, "%02x", bytes[i]);
  return g_string_free (s, FALSE);
}

/* sha256("run-8f3c"): its first 10 bytes. */
static void
test_id_hash (void)
{
  guint8 field[RANK_REQUEST_ID_HASH_BYTES];
  g_autofree char *h = NULL;

  rank_request_id_hash ("run-8f3c", field);
  h = hex (field, sizeof field);
  g_assert_cmpstr (h, ==, "f2aac5ccc4c8f400cc1c");
}

/* sha1 of "mode:value:member", then "\ns<subscore>" each, then
 * "\nd<len>:<data>": its first 4 bytes. */
static void
test_fingerprint (void)
{
  gint64 subs[] = { 3, -4 };
  RankUpdate u = {
    .member = "alice", .request_id = "x", .value = 120, .mode = RANK_MODE_BEST
  };
  guint8 fp[RANK_FINGERPRINT_BYTES];
  g_autofree char *plain = NULL, *with_subs = NULL, *with_data = NULL;

  rank_request_fingerprint (&u, fp);
  plain = hex (fp, sizeof fp);
  u.subscores = subs;
  u.n_subscores = 2;
  rank_request_fingerprint (&u, fp);
  with_subs = hex (fp, sizeof fp);
  u.data_given = TRUE;
  u.data = "\x01k\0\x01v";
  u.data_len = 5;
  rank_request_fingerprint (&u, fp);
  with_data = hex (fp, sizeof fp);
  g_assert_cmpstr (plain, ==, "c66965a8");
  g_assert_cmpstr (with_subs, ==, "179b65e5");
  g_assert_cmpstr (with_data, ==, "f6f84535");
  /* The request id is not part of it: a retry carries the same. */
  u.request_id = "y";
  rank_request_fingerprint (&u, fp);
  {
    g_autofree char *again = hex (fp, sizeof fp);

    g_assert_cmpstr (again, ==, "f6f84535");
  }
}

/* A record: the bucket mod 16 in the top 4 bits, then the fingerprint's
 * other 28 bits. */
static void
test_record (void)
{
  const guint8 fp[RANK_FINGERPRINT_BYTES] = { 0xc6, 0x69, 0x65, 0xa8 };
  guint8 out[RANK_FINGERPRINT_BYTES];

  rank_request_record (fp, 1959777, out); /* 1959777 mod 16 = 1 */
  g_assert_cmpmem (out, sizeof out, "\x16\x69\x65\xa8", 4);
  rank_request_record (fp, 31, out);
  g_assert_cmpmem (out, sizeof out, "\xf6\x69\x65\xa8", 4);
  rank_request_record (fp, -1, out);
  g_assert_cmpmem (out, sizeof out, "\xf6\x69\x65\xa8", 4);
}

/* A batch recorded as a whole: the record of sha1("batch:<n>:", then each
 * update's bytes after "\ni<member's length>:", in order), the field
 * sha256(NUL, request id), the count, the token (little-endian). Vectors
 * from Python's hashlib. */
static void
test_group (void)
{
  gint64 subs[] = { 3, -4 };
  RankUpdate a = {
    .member = "alice", .request_id = "x", .value = 120, .mode = RANK_MODE_BEST
  };
  RankUpdate b = a;
  const RankUpdate *both[] = { &a, &b }, *swapped[] = { &b, &a };
  guint8 out[RANK_UPDATE_GROUP_BYTES], other[RANK_UPDATE_GROUP_BYTES];
  g_autofree char *h = NULL;

  b.subscores = subs;
  b.n_subscores = 2;
  rank_request_group ("imp-1", both, 2, 1959777, 0x0102030405060708, out);
  h = hex (out, sizeof out);
  g_assert_cmpstr (h, ==,
                   "14d3b76b"
                   "f645daeae7f87be011a0"
                   "02"
                   "0807060504030201"
                   "00");
  /* Another order stands for another batch. */
  rank_request_group ("imp-1", swapped, 2, 1959777, 0x0102030405060708, other);
  g_assert_cmpmem (other, 4, "\x1f\x67\x8f\xfb", 4);
  g_assert_cmpmem (other + 4, RANK_UPDATE_GROUP_BYTES - 4, out + 4,
                   RANK_UPDATE_GROUP_BYTES - 4);
  /* SETs each of a member of its own: the last byte says so. Not when
   * one is not a SET, nor when a member comes twice. */
  a.mode = b.mode = RANK_MODE_SET;
  rank_request_group ("imp-1", both, 2, 1959777, 1, out);
  g_assert_cmpint (out[RANK_UPDATE_GROUP_SETS], ==, 0);
  b.member = "bob";
  rank_request_group ("imp-1", both, 2, 1959777, 1, out);
  g_assert_cmpint (out[RANK_UPDATE_GROUP_SETS], ==, 1);
  b.mode = RANK_MODE_INCREMENT;
  rank_request_group ("imp-1", both, 2, 1959777, 1, out);
  g_assert_cmpint (out[RANK_UPDATE_GROUP_SETS], ==, 0);
}

static void
test_buckets (void)
{
  gint64 b[RANK_REQUEST_BUCKET_ARGS];

  /* 1 h window: 900 s buckets. */
  rank_request_buckets (3600000, G_GINT64_CONSTANT (1763800000000), b);
  g_assert_cmpint (b[0], ==, 1959777);
  g_assert_cmpint (b[4], ==, 1959773);
  /* A record hash marked in bucket k expires at the end of bucket k+5. */
  g_assert_cmpint (b[5], ==, G_GINT64_CONSTANT (1763804700000));
  /* A window that does not divide by 4: buckets of ceil(1001 / 4) ms. */
  rank_request_buckets (1001, 1001, b);
  g_assert_cmpint (b[0], ==, 3);
  g_assert_cmpint (b[1], ==, 2);
  g_assert_cmpint (b[4], ==, -1);
  g_assert_cmpint (b[5], ==, 2259);
}

/* In update.lua, the lines "local NAME = ARGV[PREFIXN]" or, where a call
 * sets a local of the library, "NAME = ARGV[PREFIXN]" (the batch's
 * arguments: PREFIX empty; each update's: "at + "), and for the batch the
 * names table of the buckets: NAME -> N, as the script reads them. */
static GHashTable *
script_reads (const char *source, const char *prefix)
{
  GHashTable *reads
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autofree char *pattern
      = g_strdup_printf ("^ *(?:local )?(\\w+) = ARGV\\[%s(\\d+)\\]$", prefix);
  g_autoptr (GRegex) one = g_regex_new (pattern, G_REGEX_MULTILINE, 0, NULL);
  g_autoptr (GMatchInfo) m = NULL;

  g_regex_match (one, source, 0, &m);
  while (g_match_info_matches (m))
    {
      g_autofree char *name = g_match_info_fetch (m, 1);
      g_autofree char *n = g_match_info_fetch (m, 2);

      g_hash_table_insert (reads, g_steal_pointer (&name),
                           GINT_TO_POINTER (atoi (n)));
      g_match_info_next (m, NULL);
    }
  if (*prefix == '\0')
    {
      g_autoptr (GRegex) names
          = g_regex_new ("^ *(?:local )?names = \\{\\[0\\] = (.*)\\}$",
                         G_REGEX_MULTILINE, 0, NULL);
      g_autoptr (GMatchInfo) nm = NULL;
      g_autofree char *list = NULL;
      g_auto (GStrv) items = NULL;

      g_assert_true (g_regex_match (names, source, 0, &nm));
      list = g_match_info_fetch (nm, 1);
      items = g_strsplit (list, ",", -1);
      for (int i = 0; items[i] != NULL; i++)
        {
          const char *at = strstr (items[i], "ARGV[");

          g_assert_nonnull (at);
          g_hash_table_insert (reads, g_strdup_printf ("names[%d]", i),
                               GINT_TO_POINTER (atoi (at + 5)));
        }
    }
  return reads;
}

/* Every argument of names[0..n) is read from its position, and nothing
 * else is read with that prefix. */
static void
check_reads (GHashTable *reads, const char *const *names, guint n,
             const char *what)
{
  g_assert_cmpuint (g_hash_table_size (reads), ==, n);
  for (guint i = 0; i < n; i++)
    {
      if (!g_hash_table_contains (reads, names[i]))
        g_error ("update.lua does not read %s argument '%s' (%u)", what,
                 names[i], i + 1);
      g_assert_cmpint (GPOINTER_TO_INT (g_hash_table_lookup (reads, names[i])),
                       ==, (int) i + 1);
    }
}

/* The script unpacks a header's bytes into locals named as rankd's
 * (first: what string.byte is given before the last byte's number). */
static void
check_header (const char *source, const char *first,
              const char *const *expected, guint n)
{
  g_autofree char *pattern = g_strdup_printf (
      "^ *local ([\\w,\\s]+) =\\s+(?:string\\.)?byte\\(%s(\\d+)\\)$", first);
  g_autoptr (GRegex) re = g_regex_new (pattern, G_REGEX_MULTILINE, 0, NULL);
  g_autoptr (GRegex) comma = g_regex_new (",\\s*", 0, 0, NULL);
  g_autoptr (GMatchInfo) m = NULL;
  g_autofree char *list = NULL;
  g_autofree char *last = NULL;
  g_auto (GStrv) names = NULL;
  /* string.byte(what, 1, N) reads N bytes; (pack, at, at + N) N + 1. */
  guint read;

  g_assert_nonnull (re);
  g_assert_true (g_regex_match (re, source, 0, &m));
  list = g_match_info_fetch (m, 1);
  last = g_match_info_fetch (m, 2);
  names = g_regex_split (comma, g_strstrip (list), 0);
  read = (guint) atoi (last) + (g_str_has_prefix (first, "what") ? 0 : 1);
  g_assert_cmpuint (read, ==, n);
  g_assert_cmpuint (g_strv_length (names), ==, n);
  for (guint i = 0; i < n; i++)
    g_assert_cmpstr (names[i], ==, expected[i]);
}

static void
test_update_arguments (void)
{
  g_autofree char *path = g_build_filename (RANK_SOURCE_DIR, "src", "store",
                                            "lua", "update.lua", NULL);
  g_autofree char *source = NULL;
  g_autoptr (GHashTable) batch = NULL;
  g_autoptr (GHashTable) item = NULL;
  g_autoptr (GRegex) sizes = NULL;
  g_autoptr (GMatchInfo) m = NULL;

  g_assert_true (g_file_get_contents (path, &source, NULL, NULL));
  batch = script_reads (source, "");
  item = script_reads (source, "at \\+ ");
  check_reads (batch, rank_store_update_batch_arg_names,
               rank_store_update_n_batch_args, "the batch's");
  check_reads (item, rank_store_update_per_update_arg_names,
               rank_store_update_n_per_update_args, "an update's");
  /* The header of an update's second argument and of a packed SET: their
   * bytes, in order. */
  check_header (source, "what, 1, ", rank_store_update_what_names,
                rank_store_update_n_what_bytes);
  check_header (source, "pack, at, at \\+ ", rank_store_update_set_names,
                rank_store_update_n_set_bytes);
  /* And the script counts them as rankd does. */
  sizes = g_regex_new ("^local HEAD, PER_UPDATE = (\\d+), (\\d+)$",
                       G_REGEX_MULTILINE, 0, NULL);
  g_assert_true (g_regex_match (sizes, source, 0, &m));
  {
    g_autofree char *head = g_match_info_fetch (m, 1);
    g_autofree char *one = g_match_info_fetch (m, 2);

    g_assert_cmpint (atoi (head), ==, rank_store_update_n_batch_args);
    g_assert_cmpint (atoi (one), ==, rank_store_update_n_per_update_args);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/requestid/hash", test_id_hash);
  g_test_add_func ("/requestid/fingerprint", test_fingerprint);
  g_test_add_func ("/requestid/buckets", test_buckets);
  g_test_add_func ("/requestid/record", test_record);
  g_test_add_func ("/requestid/group", test_group);
  g_test_add_func ("/requestid/update-lua-arguments", test_update_arguments);
  return g_test_run ();
}
