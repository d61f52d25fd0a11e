/* test_topreader.c -- rank-bench's in-place reader of GetTopN replies
 * (bench/topreader.c), on messages built here byte by byte in the binary
 * protocol: what it accepts, and that it refuses (never reads past) every
 * malformed or cut-short one.
 */
#include <string.h>

#include "../bench/topreader.h"

static void
put_u8 (GByteArray *b, guint8 v)
{
  g_byte_array_append (b, &v, 1);
}

static void
put_u16 (GByteArray *b, guint16 v)
{
  guint8 x[2] = { v >> 8, v & 0xff };

  g_byte_array_append (b, x, 2);
}

static void
put_u32 (GByteArray *b, guint32 v)
{
  guint8 x[4] = { v >> 24, (v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff };

  g_byte_array_append (b, x, 4);
}

static void
put_i64 (GByteArray *b, gint64 v)
{
  put_u32 (b, (guint32) ((guint64) v >> 32));
  put_u32 (b, (guint32) v);
}

static void
put_string (GByteArray *b, const char *s)
{
  put_u32 (b, (guint32) strlen (s));
  g_byte_array_append (b, (const guint8 *) s, (guint) strlen (s));
}

static void
put_field (GByteArray *b, guint8 type, gint16 id)
{
  put_u8 (b, type);
  put_u16 (b, (guint16) id);
}

/* A message header: version 1, type, name, seqid 7. */
static GByteArray *
message (guint8 type, const char *name)
{
  GByteArray *b = g_byte_array_new ();

  put_u32 (b, 0x80010000u | type);
  put_string (b, name);
  put_u32 (b, 7);
  return b;
}

/* An Entry; rank < 0 leaves it out. With subscores and data, as rankd
 * sends them on boards that have them. */
static void
put_entry (GByteArray *b, const char *member, gint64 score, gint64 rank,
           gboolean extras)
{
  put_field (b, 11, 1);
  put_string (b, member);
  put_field (b, 10, 2);
  put_i64 (b, score);
  if (rank >= 0)
    {
      put_field (b, 10, 3);
      put_i64 (b, rank);
    }
  if (extras)
    {
      put_field (b, 15, 4); /* list<i64> */
      put_u8 (b, 10);
      put_u32 (b, 2);
      put_i64 (b, 1);
      put_i64 (b, -1);
      put_field (b, 13, 5); /* map<string, string> */
      put_u8 (b, 11);
      put_u8 (b, 11);
      put_u32 (b, 1);
      put_string (b, "k");
      put_string (b, "v");
    }
  put_u8 (b, 0);
}

/* A reply to GetTopN with n entries ranked 1, 2, 2, 4, ... */
static GByteArray *
top_reply (guint n, gboolean extras)
{
  GByteArray *b = message (2, "GetTopN");

  put_field (b, 15, 0);
  put_u8 (b, 12);
  put_u32 (b, n);
  for (guint i = 0; i < n; i++)
    {
      char member[16];

      g_snprintf (member, sizeof member, "m%u", i);
      put_entry (b, member, 100 - i, i == 2 ? 2 : i + 1, extras);
    }
  put_u8 (b, 0);
  return b;
}

static gboolean
read_top (GByteArray *b, gsize *entries, char **why)
{
  /* A copy of exactly its length, so that valgrind sees a read past it. */
  g_autofree guint8 *copy = g_memdup2 (b->data, b->len);

  return rank_bench_read_top (copy, b->len, entries, why);
}

static void
test_accepts (void)
{
  for (int extras = 0; extras <= 1; extras++)
    {
      g_autoptr (GByteArray) b = top_reply (10, extras);
      g_autoptr (GByteArray) empty = top_reply (0, extras);
      gsize entries = 99;
      g_autofree char *why = NULL;
      g_autofree char *why_empty = NULL;

      g_assert_true (read_top (b, &entries, &why));
      g_assert_null (why);
      g_assert_cmpuint (entries, ==, 10);
      g_assert_true (read_top (empty, &entries, &why_empty));
      g_assert_cmpuint (entries, ==, 0);
    }
}

/* Every prefix of a good reply is refused, with a reason. */
static void
test_cut_short (void)
{
  g_autoptr (GByteArray) b = top_reply (3, TRUE);

  for (guint len = 0; len < b->len; len++)
    {
      g_autofree guint8 *copy = g_memdup2 (b->data, len);
      gsize entries;
      char *why = NULL;

      g_assert_false (rank_bench_read_top (copy, len, &entries, &why));
      g_assert_nonnull (why);
      g_free (why);
    }
}

static void
assert_refused (GByteArray *b, const char *want)
{
  gsize entries;
  g_autofree char *why = NULL;

  g_assert_false (read_top (b, &entries, &why));
  g_assert_nonnull (why);
  if (strstr (why, want) == NULL)
    g_error ("refused with \"%s\", not for \"%s\"", why, want);
}

static void
test_refuses (void)
{
  /* An exception of the application, and a declared one. */
  {
    g_autoptr (GByteArray) b = message (3, "GetTopN");

    put_field (b, 11, 1);
    put_string (b, "unknown method");
    put_field (b, 8, 2);
    put_u32 (b, 1);
    put_u8 (b, 0);
    assert_refused (b, "unknown method");
  }
  {
    g_autoptr (GByteArray) b = message (2, "GetTopN");

    put_field (b, 12, 1);
    put_field (b, 11, 1);
    put_string (b, "n: must be 1..1000");
    put_u8 (b, 0);
    put_u8 (b, 0);
    assert_refused (b, "n: must be 1..1000");
  }
  /* Another method's reply. */
  {
    g_autoptr (GByteArray) b = message (2, "GetRank");

    put_u8 (b, 0);
    assert_refused (b, "not a reply to GetTopN");
  }
  /* No success field. */
  {
    g_autoptr (GByteArray) b = message (2, "GetTopN");

    put_u8 (b, 0);
    assert_refused (b, "no success");
  }
  /* Ranks out of order; an entry without its rank; an empty member. */
  {
    g_autoptr (GByteArray) b = message (2, "GetTopN");

    put_field (b, 15, 0);
    put_u8 (b, 12);
    put_u32 (b, 2);
    put_entry (b, "a", 10, 2, FALSE);
    put_entry (b, "b", 9, 1, FALSE);
    put_u8 (b, 0);
    assert_refused (b, "rank 1 after rank 2");
  }
  {
    g_autoptr (GByteArray) b = message (2, "GetTopN");

    put_field (b, 15, 0);
    put_u8 (b, 12);
    put_u32 (b, 1);
    put_entry (b, "a", 10, -1, FALSE);
    put_u8 (b, 0);
    assert_refused (b, "without its member, score or rank");
  }
  {
    g_autoptr (GByteArray) b = message (2, "GetTopN");

    put_field (b, 15, 0);
    put_u8 (b, 12);
    put_u32 (b, 1);
    put_entry (b, "", 10, 1, FALSE);
    put_u8 (b, 0);
    assert_refused (b, "member is empty");
  }
  /* A list claiming more entries than the message holds; an unknown type. */
  {
    g_autoptr (GByteArray) b = message (2, "GetTopN");

    put_field (b, 15, 0);
    put_u8 (b, 12);
    put_u32 (b, 0x7fffffff);
    put_entry (b, "a", 10, 1, FALSE);
    assert_refused (b, "cut short");
  }
  {
    g_autoptr (GByteArray) b = message (2, "GetTopN");

    put_field (b, 99, 7);
    put_u8 (b, 0);
    assert_refused (b, "malformed field");
  }
  /* Not the binary protocol. */
  {
    g_autoptr (GByteArray) b = g_byte_array_new ();

    put_u32 (b, 0x82210000u);
    put_u32 (b, 0);
    assert_refused (b, "not a binary-protocol message");
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/topreader/accepts", test_accepts);
  g_test_add_func ("/topreader/cut-short", test_cut_short);
  g_test_add_func ("/topreader/refuses", test_refuses);
  return g_test_run ();
}
