/* transfer_format.c -- the export files' formats, CSV and JSON Lines:
 * an entry printed as a record, records parsed back (see transfer.h). */
#include "transfer.h"

#include <errno.h>
#include <string.h>

#include "error.h"
#include "format.h"
#include "json.h"

void
rank_transfer_entry_clear (RankTransferEntry *e)
{
  g_clear_pointer (&e->member, g_free);
  g_clear_pointer (&e->subscores, g_array_unref);
  g_clear_pointer (&e->data, g_hash_table_unref);
  e->score = e->timestamp_ms = 0;
}

gboolean
rank_transfer_format_parse (const char *text, RankTransferFormat *out)
{
  if (strcmp (text, "csv") == 0)
    *out = RANK_TRANSFER_CSV;
  else if (strcmp (text, "jsonl") == 0)
    *out = RANK_TRANSFER_JSONL;
  else
    return FALSE;
  return TRUE;
}

gboolean
rank_transfer_format_of_path (const char *path, RankTransferFormat *out)
{
  const char *dot = strrchr (path, '.');

  return dot != NULL && strchr (dot, '/') == NULL
         && rank_transfer_format_parse (dot + 1, out);
}

/* ---- writing ---- */

static void
append_subscores (GString *out, const GArray *subs, const char *sep)
{
  for (guint i = 0; subs != NULL && i < subs->len; i++)
    g_string_append_printf (out, "%s%" G_GINT64_FORMAT, i ? sep : "",
                            g_array_index (subs, gint64, i));
}

/* s quoted for CSV: in double quotes, each quote doubled. */
static void
append_csv_quoted (GString *out, const char *s)
{
  g_string_append_c (out, '"');
  for (; *s != '\0'; s++)
    {
      if (*s == '"')
        g_string_append_c (out, '"');
      g_string_append_c (out, *s);
    }
  g_string_append_c (out, '"');
}

void
rank_transfer_format_entry (GString *out, RankTransferFormat format,
                            const RankTransferEntry *e)
{
  gboolean has_data = e->data != NULL && g_hash_table_size (e->data) > 0;
  gboolean has_subs = e->subscores != NULL && e->subscores->len > 0;

  if (format == RANK_TRANSFER_CSV)
    {
      append_csv_quoted (out, e->member);
      g_string_append_printf (out,
                              ",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",",
                              e->score, e->timestamp_ms);
      append_subscores (out, e->subscores, ";");
      g_string_append_c (out, ',');
      if (has_data)
        {
          g_autoptr (GString) json = g_string_new (NULL);

          rank_json_map (json, e->data, RANK_JSON_PLAIN);
          append_csv_quoted (out, json->str);
        }
      g_string_append_c (out, '\n');
      return;
    }
  g_string_append (out, "{\"member\":");
  rank_json_string (out, e->member, RANK_JSON_PLAIN);
  g_string_append_printf (
      out, ",\"score\":%" G_GINT64_FORMAT ",\"timestamp_ms\":%" G_GINT64_FORMAT,
      e->score, e->timestamp_ms);
  if (has_subs)
    {
      g_string_append (out, ",\"subscores\":[");
      append_subscores (out, e->subscores, ",");
      g_string_append_c (out, ']');
    }
  if (has_data)
    {
      g_string_append (out, ",\"data\":");
      rank_json_map (out, e->data, RANK_JSON_PLAIN);
    }
  g_string_append (out, "}\n");
}

/* ---- reading ---- */

void
rank_transfer_reader_init (RankTransferReader *r, RankTransferFormat format,
                           const char *text, gsize len)
{
  *r = (RankTransferReader){ format, text, text + len, 1, 0 };
}

static gboolean bad (RankTransferReader *r, GError **error, const char *fmt,
                     ...) G_GNUC_PRINTF (3, 4);

/* A malformed record: the error names the line. */
static gboolean
bad (RankTransferReader *r, GError **error, const char *fmt, ...)
{
  g_autofree char *what = NULL;
  va_list ap;

  va_start (ap, fmt);
  what = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
               "line %" G_GUINT64_FORMAT ": %s", r->line, what);
  return FALSE;
}

/* text as a gint64, by g_ascii_string_to_signed's rules in base 10 (an
 * optional sign, then digits, and nothing else; in range), without its
 * cost: an import reads two a record, and they were a quarter of reading
 * it (callgrind). */
static gboolean
decimal_i64 (const char *text, gsize len, gint64 *out)
{
  const char *p = text, *end = text + len;
  gboolean negative = len > 0 && *p == '-';
  guint64 limit = negative ? (guint64) G_MAXINT64 + 1 : (guint64) G_MAXINT64;
  /* v * 10 + d stays within limit while v < cut, or v == cut and d <=
   * last (divided once here, not at every digit). */
  guint64 cut = limit / 10, v = 0;
  guint last = (guint) (limit % 10);

  if (p < end && (*p == '-' || *p == '+'))
    p++;
  if (p == end)
    return FALSE;
  for (; p < end; p++)
    {
      guint d = (guint) (*p - '0');

      if (d > 9 || v > cut || (v == cut && d > last))
        return FALSE;
      v = v * 10 + d;
    }
  /* -(v - 1) - 1: -2^63 without an overflow. */
  *out = negative && v > 0 ? -(gint64) (v - 1) - 1 : (gint64) v;
  return TRUE;
}

/* The integer text (len bytes) holds, into out; what names it if not. */
static gboolean
parse_i64 (RankTransferReader *r, const char *what, const char *text, gsize len,
           gint64 *out, GError **error)
{
  if (decimal_i64 (text, len, out))
    return TRUE;
  return bad (r, error, "%s: '%.*s' is not an integer", what, (int) len, text);
}

/* -- a JSON subset: objects, arrays, strings, integers -- */

static void
skip_ws (RankTransferReader *r)
{
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\r'))
    r->p++;
}

static gboolean
expect_char (RankTransferReader *r, char c, GError **error)
{
  skip_ws (r);
  if (r->p < r->end && *r->p == c)
    {
      r->p++;
      return TRUE;
    }
  return bad (r, error, "expected '%c'", c);
}

static int
hex4 (const char *p)
{
  int v = 0;

  for (int i = 0; i < 4; i++)
    {
      int d = g_ascii_xdigit_value (p[i]);

      if (d < 0)
        return -1;
      v = v * 16 + d;
    }
  return v;
}

/* A JSON string at r->p (after whitespace), as UTF-8. */
static char *
json_string (RankTransferReader *r, GError **error)
{
  GString *s;

  skip_ws (r);
  if (r->p >= r->end || *r->p != '"')
    {
      bad (r, error, "expected a string");
      return NULL;
    }
  r->p++;
  s = g_string_new (NULL);
  while (r->p < r->end && *r->p != '"')
    {
      guchar c = (guchar) *r->p++;
      int u, lo;

      if (c < 0x20)
        goto fail;
      if (c != '\\')
        {
          g_string_append_c (s, (char) c);
          continue;
        }
      if (r->p >= r->end)
        goto fail;
      switch (*r->p++)
        {
        case '"':
          g_string_append_c (s, '"');
          break;
        case '\\':
          g_string_append_c (s, '\\');
          break;
        case '/':
          g_string_append_c (s, '/');
          break;
        case 'b':
          g_string_append_c (s, '\b');
          break;
        case 'f':
          g_string_append_c (s, '\f');
          break;
        case 'n':
          g_string_append_c (s, '\n');
          break;
        case 'r':
          g_string_append_c (s, '\r');
          break;
        case 't':
          g_string_append_c (s, '\t');
          break;
        case 'u':
          if (r->end - r->p < 4 || (u = hex4 (r->p)) < 0)
            goto fail;
          r->p += 4;
          if (u >= 0xD800 && u < 0xDC00)
            {
              if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u'
                  || (lo = hex4 (r->p + 2)) < 0xDC00 || lo > 0xDFFF)
                goto fail;
              r->p += 6;
              u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            }
          else if (u >= 0xDC00 && u <= 0xDFFF)
            goto fail;
          g_string_append_unichar (s, (gunichar) u);
          break;
        default:
          goto fail;
        }
    }
  if (r->p >= r->end)
    goto fail;
  r->p++;
  if (!g_utf8_validate (s->str, (gssize) s->len, NULL)
      || strlen (s->str) != s->len)
    goto fail;
  return g_string_free (s, FALSE);
fail:
  g_string_free (s, TRUE);
  bad (r, error, "a malformed JSON string (or one with a NUL)");
  return NULL;
}

static gboolean
json_i64 (RankTransferReader *r, const char *what, gint64 *out, GError **error)
{
  const char *start;

  skip_ws (r);
  start = r->p;
  if (r->p < r->end && *r->p == '-')
    r->p++;
  while (r->p < r->end && g_ascii_isdigit (*r->p))
    r->p++;
  return parse_i64 (r, what, start, (gsize) (r->p - start), out, error);
}

/* The next char after whitespace is c: consumed. */
static gboolean
json_peek (RankTransferReader *r, char c)
{
  skip_ws (r);
  if (r->p < r->end && *r->p == c)
    {
      r->p++;
      return TRUE;
    }
  return FALSE;
}

static gboolean
json_subscores (RankTransferReader *r, GArray **out, GError **error)
{
  *out = g_array_new (FALSE, FALSE, sizeof (gint64));
  if (!expect_char (r, '[', error))
    return FALSE;
  if (json_peek (r, ']'))
    return TRUE;
  do
    {
      gint64 v;

      if (!json_i64 (r, "subscores", &v, error))
        return FALSE;
      g_array_append_val (*out, v);
    }
  while (json_peek (r, ','));
  return expect_char (r, ']', error);
}

static gboolean
json_data (RankTransferReader *r, GHashTable **out, GError **error)
{
  *out = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  if (!expect_char (r, '{', error))
    return FALSE;
  if (json_peek (r, '}'))
    return TRUE;
  do
    {
      char *key = json_string (r, error), *value;

      if (key == NULL)
        return FALSE;
      if (!expect_char (r, ':', error)
          || (value = json_string (r, error)) == NULL)
        {
          g_free (key);
          return FALSE;
        }
      if (g_hash_table_contains (*out, key))
        {
          bad (r, error, "data: key '%s' given twice", key);
          g_free (key);
          g_free (value);
          return FALSE;
        }
      g_hash_table_insert (*out, key, value);
    }
  while (json_peek (r, ','));
  return expect_char (r, '}', error);
}

/* One JSON Lines record: an object, then the line's end. */
static gboolean
read_jsonl (RankTransferReader *r, RankTransferEntry *e, GError **error)
{
  guint seen = 0;
  enum
  {
    MEMBER = 1,
    SCORE = 2,
    TIME = 4
  };

  if (!expect_char (r, '{', error))
    return FALSE;
  if (!json_peek (r, '}'))
    do
      {
        g_autofree char *key = json_string (r, error);
        gboolean ok;

        if (key == NULL || !expect_char (r, ':', error))
          return FALSE;
        if (strcmp (key, "member") == 0 && e->member == NULL)
          ok = (e->member = json_string (r, error)) != NULL, seen |= MEMBER;
        else if (strcmp (key, "score") == 0 && !(seen & SCORE))
          ok = json_i64 (r, "score", &e->score, error), seen |= SCORE;
        else if (strcmp (key, "timestamp_ms") == 0 && !(seen & TIME))
          ok = json_i64 (r, "timestamp_ms", &e->timestamp_ms, error),
          seen |= TIME;
        else if (strcmp (key, "subscores") == 0 && e->subscores == NULL)
          ok = json_subscores (r, &e->subscores, error);
        else if (strcmp (key, "data") == 0 && e->data == NULL)
          ok = json_data (r, &e->data, error);
        else
          return bad (r, error,
                      "'%s' is not a field of an entry (member, score, "
                      "timestamp_ms, subscores, data), or comes twice",
                      key);
        if (!ok)
          return FALSE;
      }
    while (json_peek (r, ','));
  if (!expect_char (r, '}', error))
    return FALSE;
  skip_ws (r);
  if (r->p < r->end && *r->p != '\n')
    return bad (r, error, "text after the entry's closing '}'");
  if (r->p < r->end)
    r->p++;
  if ((seen & (MEMBER | SCORE | TIME)) != (MEMBER | SCORE | TIME))
    return bad (r, error, "an entry needs member, score and timestamp_ms");
  r->line++;
  return TRUE;
}

/* A CSV field: its bytes, in the file or (a quoted field's, unquoted) in
 * owned. */
typedef struct
{
  const char *p;
  gsize len;
  char *owned; /* NUL-terminated; NULL: p points into the file */
} CsvField;

/* One CSV field (quoted or not) into f, up to its ',' or the record's end,
 * which is left at r->p. */
static gboolean
csv_field (RankTransferReader *r, CsvField *f, GError **error)
{
  GString *s;

  if (r->p >= r->end || *r->p != '"')
    {
      /* Unquoted (every field export writes but data): where it is in the
       * file, not copied a byte at a time into a GString (a tenth of an
       * import's rankctl instructions, callgrind). */
      f->p = r->p;
      while (r->p < r->end && *r->p != ',' && *r->p != '\n' && *r->p != '\r')
        r->p++;
      f->len = (gsize) (r->p - f->p);
      if (memchr (f->p, '\0', f->len) != NULL)
        return bad (r, error, "a NUL byte in a field");
      return TRUE;
    }
  s = g_string_new (NULL);
  r->p++;
  for (;;)
    {
      if (r->p >= r->end)
        {
          g_string_free (s, TRUE);
          return bad (r, error, "a quoted field is not closed");
        }
      if (*r->p == '"')
        {
          if (r->p + 1 < r->end && r->p[1] == '"')
            {
              g_string_append_c (s, '"');
              r->p += 2;
              continue;
            }
          r->p++;
          break;
        }
      if (*r->p == '\n')
        r->line++;
      g_string_append_c (s, *r->p++);
    }
  if (r->p < r->end && *r->p != ',' && *r->p != '\n' && *r->p != '\r')
    {
      g_string_free (s, TRUE);
      return bad (r, error, "text after a quoted field's closing quote");
    }
  if (strlen (s->str) != s->len)
    {
      g_string_free (s, TRUE);
      return bad (r, error, "a NUL byte in a field");
    }
  f->len = s->len;
  f->p = f->owned = g_string_free (s, FALSE);
  return TRUE;
}

/* A field's text, the caller's. */
static char *
csv_take (CsvField *f)
{
  return f->owned != NULL ? g_steal_pointer (&f->owned)
                          : g_strndup (f->p, f->len);
}

/* The fields of one CSV record into fields (5 expected; each one read is
 * freed by the caller, csv_free). */
static gboolean
csv_record (RankTransferReader *r, CsvField fields[5], GError **error)
{
  guint n = 0;

  for (;;)
    {
      CsvField f = { 0 };

      if (!csv_field (r, &f, error))
        return FALSE;
      if (n == 5)
        {
          g_free (f.owned);
          return bad (r, error, "more than 5 fields (%s)",
                      RANK_TRANSFER_CSV_HEADER);
        }
      fields[n++] = f;
      if (r->p < r->end && *r->p == ',')
        {
          r->p++;
          continue;
        }
      break;
    }
  if (r->p < r->end && *r->p == '\r')
    r->p++;
  if (r->p < r->end && *r->p != '\n')
    return bad (r, error, "a bare carriage return");
  if (n != 5)
    return bad (r, error, "%u fields, not 5 (%s)", n, RANK_TRANSFER_CSV_HEADER);
  return TRUE;
}

static gboolean
read_csv (RankTransferReader *r, RankTransferEntry *e, GError **error)
{
  CsvField f[5] = { 0 };
  gboolean ok = csv_record (r, f, error);

  if (ok)
    {
      e->member = csv_take (&f[0]);
      ok = parse_i64 (r, "score", f[1].p, f[1].len, &e->score, error)
           && parse_i64 (r, "timestamp_ms", f[2].p, f[2].len, &e->timestamp_ms,
                         error);
    }
  if (ok && f[3].len > 0)
    {
      /* ';' between them. */
      const char *p = f[3].p, *end = f[3].p + f[3].len;

      e->subscores = g_array_new (FALSE, FALSE, sizeof (gint64));
      for (;;)
        {
          const char *sep = memchr (p, ';', (gsize) (end - p));
          const char *stop = sep != NULL ? sep : end;
          gint64 v = 0;

          ok = parse_i64 (r, "subscores", p, (gsize) (stop - p), &v, error);
          if (!ok)
            break;
          g_array_append_val (e->subscores, v);
          if (sep == NULL)
            break;
          p = sep + 1;
        }
    }
  if (ok && f[4].len > 0)
    {
      RankTransferReader sub
          = { RANK_TRANSFER_JSONL, f[4].p, f[4].p + f[4].len, r->line, 0 };

      ok = json_data (&sub, &e->data, error);
      skip_ws (&sub);
      if (ok && sub.p != sub.end)
        ok = bad (r, error, "data: text after the JSON object");
    }
  for (int i = 0; i < 5; i++)
    g_free (f[i].owned);
  if (ok && r->p < r->end)
    r->p++; /* the '\n' */
  if (ok)
    r->line++;
  return ok;
}

gboolean
rank_transfer_read (RankTransferReader *r, RankTransferEntry *e, gboolean *done,
                    GError **error)
{
  rank_transfer_entry_clear (e);
  if (r->format == RANK_TRANSFER_CSV && r->line == 1 && r->record == 0)
    {
      gsize n = strlen (RANK_TRANSFER_CSV_HEADER);

      if ((gsize) (r->end - r->p) < n
          || memcmp (r->p, RANK_TRANSFER_CSV_HEADER, n) != 0
          || (r->p + n < r->end && r->p[n] != '\n' && r->p[n] != '\r'))
        return bad (r, error, "the header must be %s",
                    RANK_TRANSFER_CSV_HEADER);
      r->p += n;
      if (r->p < r->end && *r->p == '\r')
        r->p++;
      if (r->p < r->end)
        r->p++;
      r->line++;
    }
  *done = r->p >= r->end;
  if (*done)
    return TRUE;
  if (*r->p == '\n')
    return bad (r, error, "an empty line");
  r->record++;
  return r->format == RANK_TRANSFER_CSV ? read_csv (r, e, error)
                                        : read_jsonl (r, e, error);
}

void
rank_transfer_entry_free (RankTransferEntry *e)
{
  rank_transfer_entry_clear (e);
  g_free (e);
}

void
rank_transfer_entry_destroy (gpointer p)
{
  rank_transfer_entry_free (p);
}

/* ---- an entry as bytes, for the external sort (transfer_internal.h) ---- */

static void
put_u32 (GByteArray *out, guint32 v)
{
  g_byte_array_append (out, (const guint8 *) &v, sizeof v);
}

static void
put_u64 (GByteArray *out, guint64 v)
{
  g_byte_array_append (out, (const guint8 *) &v, sizeof v);
}

static void
put_bytes (GByteArray *out, const char *s)
{
  gsize n = strlen (s);

  put_u32 (out, (guint32) n);
  g_byte_array_append (out, (const guint8 *) s, (guint) n);
}

/* None (NULL), as a count of subscores or data entries. */
#define PACK_NONE G_MAXUINT32

void
rank_transfer_entry_pack (GByteArray *out, const RankTransferEntry *e,
                          guint64 number, guint64 line)
{
  g_byte_array_set_size (out, 0);
  put_bytes (out, e->member);
  put_u64 (out, number);
  put_u64 (out, line);
  put_u64 (out, (guint64) e->score);
  put_u64 (out, (guint64) e->timestamp_ms);
  put_u32 (out, e->subscores != NULL ? e->subscores->len : PACK_NONE);
  if (e->subscores != NULL)
    g_byte_array_append (out, (const guint8 *) e->subscores->data,
                         e->subscores->len * (guint) sizeof (gint64));
  put_u32 (out, e->data != NULL ? g_hash_table_size (e->data) : PACK_NONE);
  if (e->data != NULL)
    {
      GHashTableIter it;
      gpointer k, v;

      g_hash_table_iter_init (&it, e->data);
      while (g_hash_table_iter_next (&it, &k, &v))
        {
          put_bytes (out, k);
          put_bytes (out, v);
        }
    }
}

/* Reads what put_* wrote, from *p on; the bytes are ours, so well formed. */
static guint32
get_u32 (const guint8 **p)
{
  guint32 v;

  memcpy (&v, *p, sizeof v);
  *p += sizeof v;
  return v;
}

static guint64
get_u64 (const guint8 **p)
{
  guint64 v;

  memcpy (&v, *p, sizeof v);
  *p += sizeof v;
  return v;
}

static char *
get_bytes (const guint8 **p)
{
  guint32 n = get_u32 (p);
  char *s = g_strndup ((const char *) *p, n);

  *p += n;
  return s;
}

gsize
rank_transfer_packed_member_len (const guint8 *p)
{
  guint32 n;

  memcpy (&n, p, sizeof n);
  return n;
}

void
rank_transfer_entry_unpack (const guint8 *p, RankTransferEntry *e, char *member,
                            guint64 *number, guint64 *line)
{
  guint32 n;

  rank_transfer_entry_clear (e);
  if (member != NULL)
    {
      n = get_u32 (&p);
      memcpy (member, p, n);
      member[n] = '\0';
      p += n;
      e->member = member;
    }
  else
    e->member = get_bytes (&p);
  *number = get_u64 (&p);
  *line = get_u64 (&p);
  e->score = (gint64) get_u64 (&p);
  e->timestamp_ms = (gint64) get_u64 (&p);
  n = get_u32 (&p);
  if (n != PACK_NONE)
    {
      e->subscores = g_array_sized_new (FALSE, FALSE, sizeof (gint64), n);
      g_array_set_size (e->subscores, n);
      memcpy (e->subscores->data, p, n * sizeof (gint64));
      p += n * sizeof (gint64);
    }
  n = get_u32 (&p);
  if (n != PACK_NONE)
    {
      e->data = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
      for (guint32 i = 0; i < n; i++)
        {
          char *k = get_bytes (&p);

          g_hash_table_insert (e->data, k, get_bytes (&p));
        }
    }
}

int
rank_transfer_pack_compare (const guint8 *a, gsize a_len, const guint8 *b,
                            gsize b_len)
{
  guint32 an, bn;
  guint64 x, y;
  int c;

  (void) a_len;
  (void) b_len;
  memcpy (&an, a, sizeof an);
  memcpy (&bn, b, sizeof bn);
  c = memcmp (a + 4, b + 4, MIN (an, bn));
  if (c != 0 || an != bn)
    return c != 0 ? c : (an > bn) - (an < bn);
  memcpy (&x, a + 4 + an, sizeof x);
  memcpy (&y, b + 4 + bn, sizeof y);
  return (x > y) - (x < y);
}
