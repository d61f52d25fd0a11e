/* orderkey.c -- sorted-set encoding of rank order (see orderkey.h). */
#include "orderkey.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "constants.h"

/* v's low n bytes into out, big-endian. */
static void
put_be (guint64 v, guint8 *out, int n)
{
  for (int i = n - 1; i >= 0; i--)
    {
      out[i] = (guint8) (v & 0xff);
      v >>= 8;
    }
}

/* n big-endian bytes of in. */
static guint64
get_be (const guint8 *in, int n)
{
  guint64 v = 0;

  for (int i = 0; i < n; i++)
    v = (v << 8) | in[i];
  return v;
}

void
rank_orderkey_encode_time (gint64 ms, guint8 out[RANK_ORDERKEY_TIME_BYTES])
{
  put_be ((guint64) ms, out, RANK_ORDERKEY_TIME_BYTES);
}

gint64
rank_orderkey_decode_time (const guint8 in[RANK_ORDERKEY_TIME_BYTES])
{
  return (gint64) get_be (in, RANK_ORDERKEY_TIME_BYTES);
}

void
rank_orderkey_encode_subscore (gint64 x, gboolean asc,
                               guint8 out[RANK_ORDERKEY_SUBSCORE_BYTES])
{
  guint64 v = (guint64) x ^ G_GUINT64_CONSTANT (0x8000000000000000);

  put_be (asc ? v : ~v, out, RANK_ORDERKEY_SUBSCORE_BYTES);
}

gint64
rank_orderkey_decode_subscore (const guint8 in[RANK_ORDERKEY_SUBSCORE_BYTES],
                               gboolean asc)
{
  guint64 v = get_be (in, RANK_ORDERKEY_SUBSCORE_BYTES);

  if (!asc)
    v = ~v;
  return (gint64) (v ^ G_GUINT64_CONSTANT (0x8000000000000000));
}

void
rank_orderkey_encode_place_score (gint64 zscore,
                                  guint8 out[RANK_PLACE_SCORE_BYTES])
{
  put_be ((guint64) zscore, out, RANK_PLACE_SCORE_BYTES);
}

gint64
rank_orderkey_decode_place_score (const guint8 in[RANK_PLACE_SCORE_BYTES])
{
  return (gint64) get_be (in, RANK_PLACE_SCORE_BYTES);
}

double
rank_orderkey_zscore (gint64 score)
{
  return -(double) score;
}

/* A sorted-set score as Redis prints one of rankd's (an integer within
 * +-RANK_SCORE_MAX, with %.17g: decimal digits after an optional '-'),
 * read without strtod, which took a tenth of rankd's instructions per
 * GetTopN (callgrind). FALSE for any other text, which strtod reads. */
static gboolean
parse_integer (const char *text, gsize len, gint64 *v)
{
  gsize i = len > 0 && text[0] == '-' ? 1 : 0;
  guint64 acc = 0;

  /* RANK_SCORE_MAX has 16 digits. */
  if (i == len || len - i > 16)
    return FALSE;
  for (gsize j = i; j < len; j++)
    {
      if (text[j] < '0' || text[j] > '9')
        return FALSE;
      acc = acc * 10 + (guint64) (text[j] - '0');
    }
  if (acc > (guint64) RANK_SCORE_MAX)
    return FALSE;
  *v = i == 1 ? -(gint64) acc : (gint64) acc;
  return TRUE;
}

gboolean
rank_orderkey_parse_zscore (const char *text, gsize len, gint64 *score)
{
  char buf[64];
  char *end = NULL;
  double d;
  gint64 z;

  if (parse_integer (text, len, &z))
    {
      *score = -z;
      return TRUE;
    }
  if (len == 0 || len >= sizeof buf)
    return FALSE;
  memcpy (buf, text, len);
  buf[len] = '\0';
  d = g_ascii_strtod (buf, &end);
  if (end != buf + len || !isfinite (d) || d != floor (d)
      || fabs (d) > (double) RANK_SCORE_MAX)
    return FALSE;
  /* -0.0 comes back for a score of 0; the cast turns it into 0. */
  *score = -(gint64) d;
  return TRUE;
}
