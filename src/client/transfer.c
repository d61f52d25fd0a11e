/* transfer.c -- rankctl export and import (see transfer.h). */
#include "transfer.h"

#include <errno.h>
#include <string.h>

#include <thrift/c_glib/protocol/thrift_binary_protocol.h>
#include <thrift/c_glib/thrift_application_exception.h>

#include "api.h"
#include "codec_batch.h"
#include "constants.h"
#include "error.h"
#include "format.h"
#include "json.h"
#include "protocol.h"

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

/* ---- calls ---- */

/* The answer of a failed call as a GError: rankd's exception, or the
 * transport's error. Takes the exceptions. */
static gboolean
call_failed (GObject *invalid, GObject *unavailable, GObject *not_found,
             GError *transport, GError **error)
{
  GObject *x = invalid ? invalid : unavailable ? unavailable : not_found;

  if (x != NULL)
    {
      g_autofree char *message = NULL;

      g_object_get (x, "message", &message, NULL);
      g_set_error (error, RANK_ERROR,
                   invalid       ? RANK_ERROR_INVALID
                   : unavailable ? RANK_ERROR_UNAVAILABLE
                                 : RANK_ERROR_NOT_FOUND,
                   "%s", message);
    }
  else if (transport != NULL)
    g_propagate_error (error, g_steal_pointer (&transport));
  else
    g_set_error (error, RANK_ERROR, RANK_ERROR_INTERNAL, "no answer");
  g_clear_object (&invalid);
  g_clear_object (&unavailable);
  g_clear_object (&not_found);
  g_clear_error (&transport);
  return FALSE;
}

/* ---- import ---- */

void
rank_transfer_entry_free (RankTransferEntry *e)
{
  rank_transfer_entry_clear (e);
  g_free (e);
}

static void
entry_free (gpointer p)
{
  rank_transfer_entry_free (p);
}

/* One UpdateBatch call in flight: its records (indexes into the file's
 * entries), and the group they are when the call is recorded as a whole. */
typedef struct
{
  GArray *index; /* guint: into the file's entries */
  gint group;    /* -1: none */
} Flight;

/* ---- UpdateBatch, written and read without the generated structs ----
 *
 * The generated client builds a GObject for each request, string and result
 * of a call, and a hash table for each record's data: most of rankctl's CPU
 * in an import (perf). These write and read the same fields through the
 * protocol (binary or compact), in the generated code's order. */

/* The request id of record number n of the file whose digest is digest:
 * "import:<16 hex digits of it>:<n>"; the same file gives the same ids, so
 * a second run applies nothing twice. Returns its length. */
#define IMPORT_ID_MAX (7 + 16 + 1 + RANK_FORMAT_INT_MAX)
static gsize
import_request_id (char out[IMPORT_ID_MAX], const char *digest, guint64 n)
{
  gsize len = 0;

  memcpy (out, "import:", 7);
  len += 7;
  memcpy (out + len, digest, 16);
  len += 16;
  out[len++] = ':';
  return len + rank_format_int (out + len, (gint64) n);
}

/* An UpdateRequest: record n's SET of its score at its time, with its
 * subscores and data. */
static gboolean
write_update (ThriftProtocol *out, const char *board,
              const RankTransferEntry *e, const char *digest, guint64 n,
              GError **error)
{
  char id[IMPORT_ID_MAX + 1];
  RankUpdateFields f = {
    .board = (char *) board,
    .member = e->member,
    .value = e->score,
    .request_id = id,
    .has_mode = TRUE,
    .mode = RANK_UPDATE_MODE_SET,
    .has_timestamp_ms = TRUE,
    .timestamp_ms = e->timestamp_ms,
    .subscores = e->subscores,
    .data = e->data,
  };

  id[import_request_id (id, digest, n)] = '\0';
  return rank_codec_write_update (out, &f, error);
}

/* What an UpdateBatch call takes besides its records, at most, in the
 * binary protocol: the message header (12 bytes and the name), the
 * argument and request structs' fields, the list header, with_rank, a
 * group's request id (under 60 bytes) and the stops: under 100 bytes. The
 * compact protocol takes no more than the binary one for anything. */
#define CALL_OVERHEAD 128

/* The bytes record e takes in an UpdateBatch call to board (board_len
 * bytes), at most: its UpdateRequest in the binary protocol. */
static gsize
record_size (gsize board_len, const RankTransferEntry *e)
{
  gsize n = 3 * (3 + 4) + board_len + strlen (e->member) + IMPORT_ID_MAX
            + 2 * (3 + 8) + (3 + 4) + 1;
  GHashTableIter it;
  gpointer k, v;

  if (e->subscores != NULL)
    n += 3 + 5 + 8 * (gsize) e->subscores->len;
  if (e->data == NULL)
    return n;
  n += 3 + 6;
  g_hash_table_iter_init (&it, e->data);
  while (g_hash_table_iter_next (&it, &k, &v))
    n += 4 + strlen (k) + 4 + strlen (v);
  return n;
}

/* Whether every record fits in a call of its own within max_frame (rankd's
 * --max-frame): one that does not would have rankd close the connection,
 * which reads as rankd gone, the import as one to retry. The error names
 * the first one's line; nothing is sent then. */
static gboolean
records_fit (const char *board, GPtrArray *entries, GArray *lines,
             guint32 max_frame, GError **error)
{
  gsize board_len = strlen (board);

  for (guint k = 0; k < entries->len; k++)
    {
      gsize size = record_size (board_len, entries->pdata[k]);

      if (CALL_OVERHEAD + size > max_frame)
        {
          g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                       "line %u: the record takes %" G_GSIZE_FORMAT
                       " bytes in an UpdateBatch call, over rankd's "
                       "--max-frame of %u bytes (give import rankd's "
                       "--max-frame if it is larger)",
                       g_array_index (lines, guint, k), CALL_OVERHEAD + size,
                       max_frame);
          return FALSE;
        }
    }
  return TRUE;
}

/* How many of the records listed in todo from next on go in the next call:
 * up to most, as many as fit in max_frame (one at least). */
static guint
records_that_fit (const char *board, GPtrArray *entries, GArray *todo,
                  guint next, guint most, guint32 max_frame)
{
  gsize board_len = strlen (board), bytes = CALL_OVERHEAD;
  guint take = 0;

  for (; take < most && next + take < todo->len; take++)
    {
      bytes += record_size (
          board_len, entries->pdata[g_array_index (todo, guint, next + take)]);
      if (take > 0 && bytes > max_frame)
        break;
    }
  return take;
}

/* Records go in score order, not where they lie in memory: each one's
 * pointer, entry and member would miss the caches in turn, one after the
 * other (perf: most of rankctl's encoding time). While record i is
 * written, those of the records a few places on are fetched, each from
 * what the step before fetched. In the loop itself: GCC finds a helper
 * holding only prefetches free of side effects, and drops its calls. */
#define PREFETCH_POINTER 12
#define PREFETCH_ENTRY 8
#define PREFETCH_MEMBER 4

/* Sends the records of flight as one UpdateBatch (corked by the caller):
 * without ranks (an import counts what applied; a rank would cost Redis a
 * lookup each); a group recorded as a whole, named by its first record
 * (each record is in one group). */
static gboolean
send_flight (RankClient *client, const char *board, GPtrArray *entries,
             const char *digest, const Flight *f, GError **error)
{
  ThriftProtocol *out
      = RANK_RANKING_CLIENT (rank_client_iface (client))->output_protocol;
  const guint *at = (const guint *) (gpointer) f->index->data;
  guint n = f->index->len;
  g_autofree char *group_id = NULL;
  gboolean ok
      = thrift_protocol_write_message_begin (out, "UpdateBatch", T_CALL, 0,
                                             error)
            >= 0
        && thrift_protocol_write_struct_begin (out, "UpdateBatch_args", error)
               >= 0
        && rank_codec_write_field (out, T_STRUCT, 1, error)
        && rank_codec_write_update_batch_begin (out, n, error);

  for (guint i = 0; ok && i < n; i++)
    {
      guint k = at[i];

      if (i + PREFETCH_POINTER < n)
        __builtin_prefetch (&entries->pdata[at[i + PREFETCH_POINTER]]);
      if (i + PREFETCH_ENTRY < n)
        __builtin_prefetch (entries->pdata[at[i + PREFETCH_ENTRY]]);
      if (i + PREFETCH_MEMBER < n)
        __builtin_prefetch (((const RankTransferEntry *)
                                 entries->pdata[at[i + PREFETCH_MEMBER]])
                                ->member);
      ok = write_update (out, board, entries->pdata[k], digest, k + 1, error);
    }
  if (f->group >= 0)
    group_id = g_strdup_printf ("import:%.16s:group:%u+%u", digest,
                                g_array_index (f->index, guint, 0) + 1,
                                f->index->len);
  return ok
         && rank_codec_write_update_batch_end (out, TRUE, FALSE, group_id,
                                               error)
         && thrift_protocol_write_field_end (out, error) >= 0
         && thrift_protocol_write_field_stop (out, error) >= 0
         && thrift_protocol_write_struct_end (out, error) >= 0
         && thrift_protocol_write_message_end (out, error) >= 0
         && thrift_transport_flush (out->transport, error)
         && thrift_transport_write_end (out->transport, error);
}

/* One record's answer. */
typedef enum
{
  ANSWER_NONE,
  ANSWER_APPLIED,
  ANSWER_REPEATED,
  ANSWER_INVALID,
  ANSWER_UNAVAILABLE,
} AnswerKind;

typedef struct
{
  AnswerKind kind;
  char *message; /* INVALID, UNAVAILABLE */
} Answer;

static void
answer_clear (gpointer p)
{
  g_free (((Answer *) p)->message);
}

/* InvalidArgument, Unavailable: 1: message. */
static gboolean
message_field (ThriftProtocol *in, ThriftType type, gint16 id, gpointer data,
               GError **error)
{
  char **message = data;

  if (id != 1 || type != T_STRING)
    return rank_protocol_skip (in, type, error);
  g_clear_pointer (message, g_free);
  return thrift_protocol_read_string (in, message, error) >= 0;
}

/* UpdateResponse: 3: applied. */
static gboolean
response_field (ThriftProtocol *in, ThriftType type, gint16 id, gpointer data,
                GError **error)
{
  Answer *a = data;
  gboolean applied = FALSE;

  if (id != 3 || type != T_BOOL)
    return rank_protocol_skip (in, type, error);
  if (thrift_protocol_read_bool (in, &applied, error) < 0)
    return FALSE;
  a->kind = applied ? ANSWER_APPLIED : ANSWER_REPEATED;
  return TRUE;
}

/* UpdateResult: 1: response, 2: invalid, 3: unavailable. */
static gboolean
result_field (ThriftProtocol *in, ThriftType type, gint16 id, gpointer data,
              GError **error)
{
  Answer *a = data;

  if (type != T_STRUCT || id < 1 || id > 3)
    return rank_protocol_skip (in, type, error);
  if (id == 1)
    {
      a->kind = ANSWER_REPEATED;
      return rank_protocol_read_struct (in, response_field, a, error);
    }
  a->kind = id == 2 ? ANSWER_INVALID : ANSWER_UNAVAILABLE;
  return rank_protocol_read_struct (in, message_field, &a->message, error);
}

/* UpdateBatchResponse: 1: results. */
static gboolean
results_field (ThriftProtocol *in, ThriftType type, gint16 id, gpointer data,
               GError **error)
{
  GArray *answers = data;
  ThriftType element;
  guint32 size = 0;

  if (id != 1 || type != T_LIST)
    return rank_protocol_skip (in, type, error);
  if (thrift_protocol_read_list_begin (in, &element, &size, error) < 0)
    return FALSE;
  for (guint32 i = 0; i < size; i++)
    {
      Answer a = { ANSWER_NONE, NULL };

      if (element != T_STRUCT)
        {
          if (!rank_protocol_skip (in, element, error))
            return FALSE;
          continue;
        }
      g_array_append_val (answers, a);
      if (!rank_protocol_read_struct (
              in, result_field,
              &g_array_index (answers, Answer, answers->len - 1), error))
        return FALSE;
    }
  return thrift_protocol_read_list_end (in, error) >= 0;
}

/* The reply: 0: success, 1: invalid (the call's refusal). */
typedef struct
{
  GArray *answers;
  char *invalid;
  gboolean refused;
} Reply;

static gboolean
reply_field (ThriftProtocol *in, ThriftType type, gint16 id, gpointer data,
             GError **error)
{
  Reply *r = data;

  if (type != T_STRUCT || id > 1 || id < 0)
    return rank_protocol_skip (in, type, error);
  if (id == 0)
    return rank_protocol_read_struct (in, results_field, r->answers, error);
  r->refused = TRUE;
  return rank_protocol_read_struct (in, message_field, &r->invalid, error);
}

/* Reads an UpdateBatch reply into answers; the call's own refusal or an
 * application exception as error. */
static gboolean
read_reply (RankClient *client, GArray *answers, GError **error)
{
  ThriftProtocol *in
      = RANK_RANKING_CLIENT (rank_client_iface (client))->input_protocol;
  g_autofree gchar *name = NULL;
  ThriftMessageType type;
  gint32 seqid;
  Reply r = { answers, NULL, FALSE };
  gboolean ok;

  if (thrift_protocol_read_message_begin (in, &name, &type, &seqid, error) < 0)
    return FALSE;
  if (type == T_EXCEPTION)
    {
      ThriftApplicationException *x
          = g_object_new (THRIFT_TYPE_APPLICATION_EXCEPTION, NULL);

      thrift_struct_read (THRIFT_STRUCT (x), in, NULL);
      thrift_protocol_read_message_end (in, NULL);
      thrift_transport_read_end (in->transport, NULL);
      g_set_error (error, THRIFT_APPLICATION_EXCEPTION_ERROR, x->type,
                   "application error: %s", x->message);
      g_object_unref (x);
      return FALSE;
    }
  if (type != T_REPLY || g_strcmp0 (name, "UpdateBatch") != 0)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INTERNAL,
                   "expected an UpdateBatch reply, got message type %d (%s)",
                   type, name != NULL ? name : "");
      return FALSE;
    }
  ok = rank_protocol_read_struct (in, reply_field, &r, error)
       && thrift_protocol_read_message_end (in, error) >= 0
       && thrift_transport_read_end (in->transport, error);
  if (ok && r.refused)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID, "%s",
                   r.invalid != NULL ? r.invalid : "InvalidArgument");
      ok = FALSE;
    }
  g_free (r.invalid);
  return ok;
}

/* What rankd answers the records of a group that were not applied because
 * another one of it was refused (handler.c). */
#define HELD "of the same batch was refused, and a batch with a request_id"

/* Reads flight's answer: counts applied, repeated and refused records
 * (printed with their line); the Unavailable ones go to retry (a group's:
 * the group, once); a group's records held back by another's refusal to
 * held. */
static gboolean
recv_flight (RankClient *client, GPtrArray *entries, GArray *lines,
             const Flight *f, GArray *retry, GArray *held,
             RankImportStats *stats, GError **error)
{
  g_autoptr (GArray) answers = g_array_new (FALSE, TRUE, sizeof (Answer));

  g_array_set_clear_func (answers, answer_clear);
  if (!read_reply (client, answers, error))
    return FALSE;
  if (answers->len != f->index->len)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INTERNAL,
                   "UpdateBatch answered %u results for %u requests",
                   answers->len, f->index->len);
      return FALSE;
    }
  for (guint i = 0; i < f->index->len; i++)
    {
      const Answer *a = &g_array_index (answers, Answer, i);
      const char *message = a->message != NULL ? a->message : "";
      guint k = g_array_index (f->index, guint, i);

      if (a->kind == ANSWER_APPLIED)
        stats->applied++;
      else if (a->kind == ANSWER_REPEATED)
        stats->repeated++;
      else if (a->kind == ANSWER_INVALID && f->group >= 0
               && strstr (message, HELD) != NULL)
        /* Not applied with its group, for another record's refusal. */
        g_array_append_val (held, k);
      else if (a->kind == ANSWER_INVALID)
        {
          const RankTransferEntry *e = entries->pdata[k];
          const char *own = g_str_has_prefix (message, "requests[")
                                ? strstr (message, "]: ")
                                : NULL;

          /* The item's place in the call means nothing here: its line
           * does. */
          stats->refused++;
          fprintf (stderr, "rankctl: line %u (member '%s'): %s\n",
                   g_array_index (lines, guint, k), e->member,
                   own != NULL ? own + 3 : message);
        }
      else if (f->group < 0)
        g_array_append_val (retry, k);
      else if (retry->len == 0
               || g_array_index (retry, guint, retry->len - 1)
                      != (guint) f->group)
        {
          guint g = (guint) f->group;

          g_array_append_val (retry, g);
        }
    }
  return TRUE;
}

/* What the connections of an import share: the totals, and the progress
 * shown from them. */
typedef struct
{
  GMutex lock;
  RankImportStats *stats;
  RankImportProgress progress;
  gpointer progress_data;
} Shared;

/* One connection's part of an import: the records whose member hashes to
 * it, so that one member's records keep the file's order. */
typedef struct
{
  RankClient *client;
  const char *board;
  GPtrArray *entries;
  GArray *lines;
  const char *digest;
  /* The file's groups (GArray of guint into entries), or NULL: todo and
   * retry then hold entries, else groups. */
  GPtrArray *groups; /* grows (under shared->lock) */
  guint32 max_frame; /* rankd's: each call fits in it */
  GArray *todo;      /* guint: into entries, or into groups */
  GArray *retry;     /* those answered Unavailable */
  Shared *shared;
  GError *error;
} Lane;

/* Adds what one answer counted to the totals, and shows them. */
static void
lane_count (Lane *lane, const RankImportStats *delta)
{
  Shared *s = lane->shared;

  g_mutex_lock (&s->lock);
  s->stats->applied += delta->applied;
  s->stats->repeated += delta->repeated;
  s->stats->refused += delta->refused;
  if (s->progress != NULL)
    s->progress (s->stats, s->progress_data);
  g_mutex_unlock (&s->lock);
}

/* Sends the lane's records, keeping RANK_TRANSFER_IN_FLIGHT calls in
 * flight: the next call leaves as soon as the oldest is answered, so
 * rankctl encodes while rankd and Redis work. */
static gpointer
lane_run (gpointer data)
{
  Lane *lane = data;
  RankClientTransport *t = rank_client_get_transport (lane->client);
  Flight flights[RANK_TRANSFER_GROUPS_IN_FLIGHT];
  guint window = lane->groups != NULL ? RANK_TRANSFER_GROUPS_IN_FLIGHT
                                      : RANK_TRANSFER_IN_FLIGHT;
  guint next = 0, sent = 0, done = 0;
  GArray *todo = lane->todo;
  gboolean ok = TRUE;

  G_STATIC_ASSERT (RANK_TRANSFER_IN_FLIGHT <= RANK_TRANSFER_GROUPS_IN_FLIGHT);
  G_STATIC_ASSERT (RANK_TRANSFER_GROUP <= RANK_GROUP_MAX_ITEMS);
  while (ok && (done < sent || next < todo->len))
    {
      /* Fill the window; the calls of one fill leave in one write. */
      rank_client_transport_cork (t);
      for (; ok && sent - done < window && next < todo->len; sent++)
        {
          Flight *f = &flights[sent % window];

          if (lane->groups != NULL)
            {
              f->group = (gint) g_array_index (todo, guint, next++);
              g_mutex_lock (&lane->shared->lock);
              f->index = g_array_copy (lane->groups->pdata[f->group]);
              g_mutex_unlock (&lane->shared->lock);
            }
          else
            {
              guint take
                  = records_that_fit (lane->board, lane->entries, todo, next,
                                      RANK_TRANSFER_BATCH, lane->max_frame);

              f->group = -1;
              f->index = g_array_sized_new (FALSE, FALSE, sizeof (guint), take);
              g_array_append_vals (f->index, &g_array_index (todo, guint, next),
                                   take);
              next += take;
            }
          ok = send_flight (lane->client, lane->board, lane->entries,
                            lane->digest, f, &lane->error);
        }
      ok = rank_client_transport_uncork (t, ok ? &lane->error : NULL) && ok;
      if (ok && done < sent)
        {
          Flight *f = &flights[done % window];
          RankImportStats delta = { 0 };
          g_autoptr (GArray) held = g_array_new (FALSE, FALSE, sizeof (guint));

          ok = recv_flight (lane->client, lane->entries, lane->lines, f,
                            lane->retry, held, &delta, &lane->error);
          /* A group with a refused record: the others go again, as a group
           * of their own (the same one on every run of the file). */
          if (ok && held->len > 0)
            {
              guint g;

              g_mutex_lock (&lane->shared->lock);
              g = lane->groups->len;
              g_ptr_array_add (lane->groups, g_steal_pointer (&held));
              g_mutex_unlock (&lane->shared->lock);
              g_array_append_val (todo, g);
            }
          g_array_unref (f->index);
          f->index = NULL;
          done++;
          if (ok)
            lane_count (lane, &delta);
        }
    }
  for (; done < sent; done++)
    g_clear_pointer (&flights[done % window].index, g_array_unref);
  return NULL;
}

static gint
index_compare (gconstpointer a, gconstpointer b)
{
  guint x = *(const guint *) a, y = *(const guint *) b;

  return x < y ? -1 : x > y;
}

/* Sends the records listed in todo over RANK_TRANSFER_CONNECTIONS
 * connections (client's and more like it), one thread each: rankd decodes
 * one UpdateBatch of a connection at a time, so more connections keep its
 * workers and Redis busy together. Those answered Unavailable end in
 * retry, in record order. */
/* The lanes of count records: RANK_TRANSFER_BATCH records each, at most
 * RANK_TRANSFER_CONNECTIONS. */
static guint
lanes_for (guint count)
{
  return MAX (1, MIN (RANK_TRANSFER_CONNECTIONS, count / RANK_TRANSFER_BATCH));
}

/* The lane of record k among n, by its member's hash (hashes: taken as
 * the file was read, so that the records, sent in another order, are not
 * read again for it). */
static guint
lane_of (GArray *hashes, guint k, guint n)
{
  return g_array_index (hashes, guint, k) % n;
}

/* The calls recorded as a whole that an import of entries makes, the same
 * every time (for the same max_frame): RANK_TRANSFER_GROUP records of one
 * lane a call, fewer if they would not fit in max_frame, in the order of
 * order (send_order). */
static GPtrArray *
make_groups (const char *board, GPtrArray *entries, GArray *hashes,
             GArray *order, guint32 max_frame)
{
  GPtrArray *groups = g_ptr_array_new_with_free_func (
      (GDestroyNotify) (void (*) (void)) g_array_unref);
  guint n = lanes_for (hashes->len);
  GArray *open[RANK_TRANSFER_CONNECTIONS] = { NULL };
  gsize bytes[RANK_TRANSFER_CONNECTIONS] = { 0 };
  gsize board_len = strlen (board);

  for (guint i = 0; i < order->len; i++)
    {
      guint k = g_array_index (order, guint, i);
      guint lane = lane_of (hashes, k, n);
      gsize size = record_size (board_len, entries->pdata[k]);

      if (open[lane] == NULL || open[lane]->len == RANK_TRANSFER_GROUP
          || bytes[lane] + size > max_frame)
        {
          open[lane] = g_array_sized_new (FALSE, FALSE, sizeof (guint),
                                          RANK_TRANSFER_GROUP);
          g_ptr_array_add (groups, open[lane]);
          bytes[lane] = CALL_OVERHEAD;
        }
      g_array_append_val (open[lane], k);
      bytes[lane] += size;
    }
  return groups;
}

static gboolean
send_all (RankClient *client, const char *board, guint32 max_frame,
          GPtrArray *entries, GArray *lines, GArray *hashes, const char *digest,
          GPtrArray *groups, GArray *todo, GArray *retry,
          RankImportStats *stats, RankImportProgress progress,
          gpointer progress_data, GError **error)
{
  Shared shared = { .stats = stats,
                    .progress = progress,
                    .progress_data = progress_data };
  Lane lanes[RANK_TRANSFER_CONNECTIONS];
  GThread *threads[RANK_TRANSFER_CONNECTIONS] = { NULL };
  guint records = todo->len;
  guint n;
  gboolean ok = TRUE;

  if (groups != NULL)
    {
      records = 0;
      for (guint i = 0; i < todo->len; i++)
        records
            += ((GArray *) groups->pdata[g_array_index (todo, guint, i)])->len;
    }
  n = lanes_for (records);

  g_mutex_init (&shared.lock);
  for (guint i = 0; i < n; i++)
    lanes[i] = (Lane){ .client = i == 0 ? client : NULL,
                       .board = board,
                       .entries = entries,
                       .lines = lines,
                       .digest = digest,
                       .groups = groups,
                       .max_frame = max_frame,
                       .todo = g_array_new (FALSE, FALSE, sizeof (guint)),
                       .retry = g_array_new (FALSE, FALSE, sizeof (guint)),
                       .shared = &shared };
  /* A group goes with its first record: its records share a lane. */
  for (guint i = 0; i < todo->len; i++)
    {
      guint k = g_array_index (todo, guint, i);
      guint first = groups != NULL
                        ? g_array_index ((GArray *) groups->pdata[k], guint, 0)
                        : k;

      g_array_append_val (lanes[lane_of (hashes, first, n)].todo, k);
    }
  for (guint i = 1; i < n && ok; i++)
    {
      lanes[i].client = rank_client_connect_again (client, error);
      ok = lanes[i].client != NULL;
    }
  for (guint i = 1; i < n && ok; i++)
    threads[i] = g_thread_new ("import", lane_run, &lanes[i]);
  if (ok)
    lane_run (&lanes[0]);
  for (guint i = 0; i < n; i++)
    {
      if (threads[i] != NULL)
        g_thread_join (threads[i]);
      if (lanes[i].error != NULL && ok)
        {
          g_propagate_error (error, lanes[i].error);
          lanes[i].error = NULL;
          ok = FALSE;
        }
      g_clear_error (&lanes[i].error);
      g_array_append_vals (retry, lanes[i].retry->data, lanes[i].retry->len);
      g_array_unref (lanes[i].retry);
      g_array_unref (lanes[i].todo);
      if (i > 0 && lanes[i].client != NULL)
        rank_client_free (lanes[i].client);
    }
  g_array_sort (retry, index_compare);
  g_mutex_clear (&shared.lock);
  return ok;
}

/* Whether board takes calls recorded as a whole (the IDL's
 * UpdateBatchRequest.request_id): not sharded, capped, dense-ranked or
 * periodic (an import's times may fall in several periods). */
static gboolean
groups_allowed (RankClient *client, const char *board, gboolean *allowed,
                GError **error)
{
  g_autoptr (rankGetBoardInfoRequest) req
      = g_object_new (RANK_TYPE_GET_BOARD_INFO_REQUEST, "board", board, NULL);
  rankBoardInfo *info = g_object_new (RANK_TYPE_BOARD_INFO, NULL);
  rankInvalidArgument *invalid = NULL;
  rankUnavailable *unavailable = NULL;
  GError *transport = NULL;
  const char *shards, *cap, *rank, *period;

  if (!rank_ranking_if_get_board_info (rank_client_iface (client), &info, req,
                                       &invalid, &unavailable, &transport))
    {
      g_object_unref (info);
      return call_failed ((GObject *) invalid, (GObject *) unavailable, NULL,
                          transport, error);
    }
  shards = g_hash_table_lookup (info->options, "shards");
  cap = g_hash_table_lookup (info->options, "cap");
  rank = g_hash_table_lookup (info->options, "rank");
  period = g_hash_table_lookup (info->options, "period");
  *allowed = g_strcmp0 (shards, "1") == 0 && g_strcmp0 (cap, "0") == 0
             && rank != NULL && strcmp (rank, "dense") != 0
             && g_strcmp0 (period, "none") == 0;
  g_object_unref (info);
  return TRUE;
}

/* A file's digest, the part of its records' request ids that names it:
 * SHA-256 of its bytes, in hex. */
typedef struct
{
  const char *text;
  gsize len;
} DigestJob;

static gpointer
digest_of (gpointer data)
{
  const DigestJob *job = data;

  return g_compute_checksum_for_data (G_CHECKSUM_SHA256,
                                      (const guchar *) job->text, job->len);
}

/* A record's place in the order an import sends (send_order): keys that
 * sort as unsigned integers, the score's first. */
typedef struct
{
  guint64 score_key; /* higher scores first */
  guint64 time_key;  /* then earlier times */
  guint index;       /* the record's number, from 0 */
} Place;

#define SIGN_BIT G_GUINT64_CONSTANT (0x8000000000000000)

static Place
place_of (const RankTransferEntry *e, guint index)
{
  return (Place){ ~((guint64) e->score ^ SIGN_BIT),
                  (guint64) e->timestamp_ms ^ SIGN_BIT, index };
}

/* Every record of the file into entries, with its line, its member's
 * hash and its place; sorted: whether the members came in strictly
 * increasing order (as export writes them: then no member is there
 * twice). FALSE at the first record that does not read. */
static gboolean
read_entries (RankTransferReader *reader, GPtrArray *entries, GArray *lines,
              GArray *hashes, GArray *places, gboolean *sorted, GError **error)
{
  const RankTransferEntry *last = NULL;

  *sorted = TRUE;
  for (;;)
    {
      RankTransferEntry *e = g_new0 (RankTransferEntry, 1);
      guint line = (guint) reader->line, hash;
      gboolean done = FALSE;
      Place p;

      if (!rank_transfer_read (reader, e, &done, error) || done)
        {
          entry_free (e);
          return done;
        }
      if (last != NULL && *sorted && strcmp (last->member, e->member) >= 0)
        *sorted = FALSE;
      p = place_of (e, entries->len);
      g_array_append_val (places, p);
      g_array_append_val (lines, line);
      hash = g_str_hash (e->member);
      g_array_append_val (hashes, hash);
      g_ptr_array_add (entries, e);
      last = e;
    }
}

/* Byte d of a place's keys, the time's 8 first. */
static inline guint
place_byte (const Place *p, guint d)
{
  return (
      guint) ((d < 8 ? p->time_key >> (8 * d) : p->score_key >> (8 * (d - 8)))
              & 0xff);
}

/* Sorts places by score_key, then time_key, keeping their order where
 * both are equal: a least-significant-byte radix sort, which is stable;
 * a byte that is the same in every place takes no pass. 1M places: about
 * half of g_array_sort's time. */
static void
places_sort (GArray *places)
{
  guint n = places->len;
  g_autofree Place *spare = NULL;
  g_autofree guint *counts = NULL;
  Place *src = (Place *) (gpointer) places->data, *dst;

  if (n < 2)
    return;
  spare = g_new (Place, n);
  counts = g_new0 (guint, 16 * 256);
  dst = spare;
  for (guint i = 0; i < n; i++)
    for (guint d = 0; d < 16; d++)
      counts[d * 256 + place_byte (&src[i], d)]++;
  for (guint d = 0; d < 16; d++)
    {
      guint *c = counts + d * 256;
      guint at = 0;
      Place *t;

      if (c[place_byte (&src[0], d)] == n)
        continue;
      for (guint b = 0; b < 256; b++)
        {
          guint k = c[b];

          c[b] = at;
          at += k;
        }
      for (guint i = 0; i < n; i++)
        dst[c[place_byte (&src[i], d)]++] = src[i];
      t = src;
      src = dst;
      dst = t;
    }
  if (src != (Place *) (gpointer) places->data)
    memcpy (places->data, src, n * sizeof (Place));
}

/* The order an import sends entries in: by score, highest first (on an
 * ascending board, worst first: as monotone in the sorted set), then time.
 * Export writes a board sorted by member, so its scores come in random
 * order, and each ZADD then finds its place in the sorted set through
 * nodes Redis has not touched lately; in score order the place of one is
 * next to the last's, in what Redis's caches still hold (1M entries: about
 * 0.5-0.8x Redis CPU an entry, bench/README.md, "Import"). The records of
 * one member take its first record's place, so they stay together and in
 * the file's order (its last SET wins); a file whose members are sorted
 * has none twice and needs no table for that. */
static GArray *
send_order (GPtrArray *entries, GArray *places, gboolean sorted)
{
  GArray *order;

  if (!sorted)
    {
      g_autoptr (GHashTable) first = g_hash_table_new (g_str_hash, g_str_equal);

      for (guint k = 0; k < entries->len; k++)
        {
          const RankTransferEntry *e = entries->pdata[k];
          Place *p = &g_array_index (places, Place, k);
          gpointer was;

          if (g_hash_table_lookup_extended (first, e->member, NULL, &was))
            {
              const Place *f
                  = &g_array_index (places, Place, GPOINTER_TO_UINT (was));

              p->score_key = f->score_key;
              p->time_key = f->time_key;
            }
          else
            g_hash_table_insert (first, e->member, GUINT_TO_POINTER (k));
        }
    }
  places_sort (places);
  order = g_array_sized_new (FALSE, FALSE, sizeof (guint), places->len);
  for (guint i = 0; i < places->len; i++)
    g_array_append_val (order, g_array_index (places, Place, i).index);
  return order;
}

gboolean
rank_transfer_import (RankClient *client, const char *board, const char *path,
                      RankTransferFormat format, guint32 max_frame,
                      RankImportProgress progress, gpointer progress_data,
                      RankImportStats *stats, GError **error)
{
  g_autofree char *text = NULL;
  g_autofree char *digest = NULL;
  g_autoptr (GPtrArray) entries = g_ptr_array_new_with_free_func (entry_free);
  g_autoptr (GArray) lines = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr (GArray) hashes = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr (GArray) places = g_array_new (FALSE, FALSE, sizeof (Place));
  g_autoptr (GArray) order = NULL;
  g_autoptr (GArray) todo = NULL;
  g_autoptr (GPtrArray) groups = NULL;
  gboolean grouped = FALSE, sorted;
  RankTransferReader reader;
  gsize len = 0;
  DigestJob job;
  GThread *digesting;
  gboolean all_read;

  memset (stats, 0, sizeof *stats);
  if (!g_file_get_contents (path, &text, &len, error))
    return FALSE;
  /* The whole file is read and checked before anything is sent; its
   * digest is computed meanwhile, on a thread of its own. For 1M entries
   * the lanes connect 0.6-0.8 s after rankctl starts (perf trace -e
   * connect), 0.3-0.45 s of it reading the records; reading the file's two
   * halves on two threads did not connect them sooner (bench/README). */
  job = (DigestJob){ text, len };
  digesting = g_thread_new ("digest", digest_of, &job);
  rank_transfer_reader_init (&reader, format, text, len);
  all_read
      = read_entries (&reader, entries, lines, hashes, places, &sorted, error);
  digest = g_thread_join (digesting);
  if (!all_read || !records_fit (board, entries, lines, max_frame, error))
    {
      g_prefix_error (error, "%s: ", path);
      return FALSE;
    }
  stats->records = entries->len;
  if (!groups_allowed (client, board, &grouped, error))
    return FALSE;
  order = send_order (entries, places, sorted);
  g_clear_pointer (&places, g_array_unref);
  if (grouped)
    {
      groups = make_groups (board, entries, hashes, order, max_frame);
      todo = g_array_sized_new (FALSE, FALSE, sizeof (guint), groups->len);
      for (guint g = 0; g < groups->len; g++)
        g_array_append_val (todo, g);
    }
  else
    todo = g_steal_pointer (&order);
  g_clear_pointer (&order, g_array_unref);
  for (int attempt = 0; todo->len > 0; attempt++)
    {
      g_autoptr (GArray) retry = g_array_new (FALSE, FALSE, sizeof (guint));

      if (attempt > 5)
        {
          guint left = todo->len;

          if (groups != NULL)
            {
              left = 0;
              for (guint i = 0; i < todo->len; i++)
                left += ((GArray *)
                             groups->pdata[g_array_index (todo, guint, i)])
                            ->len;
            }
          g_set_error (error, RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                       "%u records still unavailable after 5 retries; run "
                       "the import again (what was applied is not applied "
                       "twice)",
                       left);
          return FALSE;
        }
      if (attempt > 0)
        g_usleep ((gulong) (100000 << attempt)); /* backoff before a retry */
      if (!send_all (client, board, max_frame, entries, lines, hashes, digest,
                     groups, todo, retry, stats, progress, progress_data,
                     error))
        return FALSE;
      g_array_unref (todo);
      todo = g_steal_pointer (&retry);
    }
  return TRUE;
}

/* ---- export ---- */

/* A member's entry from an Export page, owned. */
static RankTransferEntry *
entry_of_export (const rankExportEntry *x)
{
  RankTransferEntry *e = g_new0 (RankTransferEntry, 1);

  e->member = g_strdup (x->member);
  e->score = x->score;
  e->timestamp_ms = x->timestamp_ms;
  if (x->__isset_subscores && x->subscores->len > 0)
    {
      e->subscores = g_array_new (FALSE, FALSE, sizeof (gint64));
      g_array_append_vals (e->subscores, x->subscores->data, x->subscores->len);
    }
  if (x->__isset_data && g_hash_table_size (x->data) > 0)
    {
      GHashTableIter it;
      gpointer k, v;

      e->data = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
      g_hash_table_iter_init (&it, x->data);
      while (g_hash_table_iter_next (&it, &k, &v))
        g_hash_table_insert (e->data, g_strdup (k), g_strdup (v));
    }
  return e;
}

gboolean
rank_transfer_keep_latest (GHashTable *entries, RankTransferEntry *e)
{
  RankTransferEntry *old = g_hash_table_lookup (entries, e->member);

  if (old != NULL && old->timestamp_ms > e->timestamp_ms)
    {
      entry_free (e);
      return FALSE;
    }
  g_hash_table_replace (entries, e->member, e);
  return TRUE;
}

static gint
entry_compare (gconstpointer a, gconstpointer b)
{
  const RankTransferEntry *x = *(const RankTransferEntry *const *) a;
  const RankTransferEntry *y = *(const RankTransferEntry *const *) b;

  return strcmp (x->member, y->member);
}

void
rank_transfer_write (GString *out, RankTransferFormat format,
                     GHashTable *entries)
{
  g_autoptr (GPtrArray) sorted = g_ptr_array_new ();
  GHashTableIter it;
  gpointer value;

  g_hash_table_iter_init (&it, entries);
  while (g_hash_table_iter_next (&it, NULL, &value))
    g_ptr_array_add (sorted, value);

  g_ptr_array_sort (sorted, entry_compare);
  if (format == RANK_TRANSFER_CSV)
    g_string_append (out, RANK_TRANSFER_CSV_HEADER "\n");
  for (guint i = 0; i < sorted->len; i++)
    rank_transfer_format_entry (out, format, sorted->pdata[i]);
}

gboolean
rank_transfer_export (RankClient *client, const char *board,
                      gint32 periods_back, RankTransferFormat format, FILE *out,
                      RankExportProgress progress, gpointer progress_data,
                      RankExportStats *stats, GError **error)
{
  g_autoptr (GHashTable) entries
      = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, entry_free);
  g_autofree char *cursor = g_strdup ("");
  g_autoptr (GString) text = NULL;

  memset (stats, 0, sizeof *stats);
  while (cursor != NULL)
    {
      g_autoptr (rankExportRequest) request = g_object_new (
          RANK_TYPE_EXPORT_REQUEST, "board", board, "cursor", cursor, "count",
          RANK_TRANSFER_EXPORT_PAGE, "periods_back", periods_back, NULL);
      g_autoptr (rankExportResponse) page
          = g_object_new (RANK_TYPE_EXPORT_RESPONSE, NULL);
      rankInvalidArgument *invalid = NULL;
      rankUnavailable *unavailable = NULL;
      GError *transport = NULL;

      if (!rank_ranking_if_export (rank_client_iface (client), &page, request,
                                   &invalid, &unavailable, &transport))
        return call_failed ((GObject *) invalid, (GObject *) unavailable, NULL,
                            transport, error);
      for (guint i = 0; i < page->entries->len; i++)
        {
          stats->read++;
          rank_transfer_keep_latest (entries,
                                     entry_of_export (page->entries->pdata[i]));
        }
      stats->pages++;
      g_free (cursor);
      cursor = page->__isset_next_cursor ? g_strdup (page->next_cursor) : NULL;
      if (progress != NULL)
        progress (stats, progress_data);
    }
  stats->entries = g_hash_table_size (entries);
  stats->superseded = stats->read - stats->entries;
  text = g_string_sized_new (64 * (stats->entries + 1));
  rank_transfer_write (text, format, entries);
  if (fwrite (text->str, 1, text->len, out) != text->len || fflush (out) != 0)
    {
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno),
                   "cannot write the export: %s", g_strerror (errno));
      return FALSE;
    }
  return TRUE;
}
