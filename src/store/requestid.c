/* requestid.c -- request-id records' encoding (see requestid.h). */
#include "requestid.h"

#include <string.h>

#include "command.h"

/* The first n bytes of sum's digest, into out. */
static void
digest_into (GChecksum *sum, guint8 *out, gsize n)
{
  guint8 digest[32];
  gsize len = sizeof digest;

  g_checksum_get_digest (sum, digest, &len);
  g_assert (n <= len);
  memcpy (out, digest, n);
}

void
rank_request_id_hash (const char *request_id,
                      guint8 field[RANK_REQUEST_ID_HASH_BYTES])
{
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);

  g_checksum_update (sum, (const guchar *) request_id, -1);
  digest_into (sum, field, RANK_REQUEST_ID_HASH_BYTES);
}

/* Hashes tag (a literal, or "" with tag_len 0), value in decimal, then
 * end (a character, or 0 for none): the bytes g_snprintf made of them
 * before, without printf on every update. */
static void
checksum_number (GChecksum *sum, const char *tag, gsize tag_len, gint64 value,
                 char end)
{
  char text[8 + RANK_FORMAT_INT_MAX];
  gsize n = tag_len;

  memcpy (text, tag, tag_len);
  n += rank_format_int (text + n, value);
  if (end != 0)
    text[n++] = end;
  g_checksum_update (sum, (const guchar *) text, (gssize) n);
}

/* An update's bytes: "mode:value:member", then "\ns<subscore>" each, then
 * "\nd<len>:data". */
static void
fingerprint_feed (GChecksum *sum, const RankUpdate *update)
{
  checksum_number (sum, "", 0, update->mode, ':');
  checksum_number (sum, "", 0, update->value, ':');
  g_checksum_update (sum, (const guchar *) update->member, -1);
  for (guint i = 0; i < update->n_subscores; i++)
    checksum_number (sum, "\ns", 2, update->subscores[i], 0);
  if (update->data_given)
    {
      checksum_number (sum, "\nd", 2, (gint64) update->data_len, ':');
      g_checksum_update (sum, (const guchar *) update->data,
                         (gssize) update->data_len);
    }
}

void
rank_request_fingerprint (const RankUpdate *update,
                          guint8 out[RANK_FINGERPRINT_BYTES])
{
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA1);

  fingerprint_feed (sum, update);
  digest_into (sum, out, RANK_FINGERPRINT_BYTES);
}

/* Whether every update SETs, each a member no other names. */
static gboolean
sets_of_their_own (const RankUpdate *const *updates, guint n)
{
  g_autoptr (GHashTable) seen = NULL;

  for (guint i = 0; i < n; i++)
    if (updates[i]->mode != RANK_MODE_SET)
      return FALSE;
  seen = g_hash_table_new (g_str_hash, g_str_equal);
  for (guint i = 0; i < n; i++)
    if (!g_hash_table_add (seen, (gpointer) updates[i]->member))
      return FALSE;
  return TRUE;
}

void
rank_request_group (const char *request_id, const RankUpdate *const *updates,
                    guint n, gint64 bucket, guint64 token,
                    guint8 out[RANK_UPDATE_GROUP_BYTES])
{
  g_autoptr (GChecksum) id = g_checksum_new (G_CHECKSUM_SHA256);
  g_autoptr (GChecksum) all = g_checksum_new (G_CHECKSUM_SHA1);
  guint8 fp[RANK_FINGERPRINT_BYTES];
  guint8 *p = out;

  g_assert (n >= 1 && n <= RANK_GROUP_MAX_ITEMS);
  /* The record: what the batch's updates stand for, in order, in one
   * hash (one per update cost rankd a tenth of an import): each update's
   * bytes after "\ni<member's length>:", which tells where one ends. */
  checksum_number (all, "batch:", 6, n, ':');
  for (guint i = 0; i < n; i++)
    {
      checksum_number (all, "\ni", 2, (gint64) strlen (updates[i]->member),
                       ':');
      fingerprint_feed (all, updates[i]);
    }
  digest_into (all, fp, sizeof fp);
  rank_request_record (fp, bucket, p);
  p += RANK_FINGERPRINT_BYTES;
  /* The field. */
  g_checksum_update (id, (const guchar *) "", 1);
  g_checksum_update (id, (const guchar *) request_id, -1);
  digest_into (id, p, RANK_REQUEST_ID_HASH_BYTES);
  p += RANK_REQUEST_ID_HASH_BYTES;
  *p++ = (guint8) n;
  for (guint i = 0; i < 8; i++)
    *p++ = (guint8) (token >> (8 * i));
  *p = sets_of_their_own (updates, n);
}

void
rank_request_record (const guint8 fingerprint[RANK_FINGERPRINT_BYTES],
                     gint64 bucket, guint8 out[RANK_FINGERPRINT_BYTES])
{
  guint tag = (guint) (((bucket % RANK_RECORD_BUCKETS) + RANK_RECORD_BUCKETS)
                       % RANK_RECORD_BUCKETS);

  memcpy (out, fingerprint, RANK_FINGERPRINT_BYTES);
  out[0] = (guint8) ((tag << 4) | (fingerprint[0] & 0x0f));
}

void
rank_request_buckets (gint64 window_ms, gint64 now_ms,
                      gint64 out[RANK_REQUEST_BUCKET_ARGS])
{
  gint64 width = (window_ms + RANK_DEDUP_BUCKETS - 1) / RANK_DEDUP_BUCKETS;
  gint64 bucket = now_ms / width;

  for (gint64 i = 0; i <= RANK_DEDUP_BUCKETS; i++)
    out[i] = bucket - i;
  out[RANK_DEDUP_BUCKETS + 1]
      = (bucket + RANK_DEDUP_BUCKETS + RANK_DEDUP_SWEEP_AFTER) * width;
}
