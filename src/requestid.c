/* requestid.c -- request-id records' encoding (see requestid.h). */
#include "requestid.h"

#include <string.h>

#include "command.h"

void
rank_request_id_hash (const char *request_id,
                      guint8 field[RANK_REQUEST_ID_HASH_BYTES])
{
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  guint8 digest[32];
  gsize len = sizeof digest;

  g_checksum_update (sum, (const guchar *) request_id, -1);
  g_checksum_get_digest (sum, digest, &len);
  memcpy (field, digest, RANK_REQUEST_ID_HASH_BYTES);
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

/* An update without subscores or data hashes as before they existed:
 * "mode:value:member", then "\ns<subscore>" each, then "\nd<len>:data". */
void
rank_request_fingerprint (const RankUpdate *update,
                          guint8 out[RANK_FINGERPRINT_BYTES])
{
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA1);
  guint8 digest[20];
  gsize len = sizeof digest;

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
  g_checksum_get_digest (sum, digest, &len);
  memcpy (out, digest, RANK_FINGERPRINT_BYTES);
}

void
rank_request_group (const char *request_id, const RankUpdate *const *updates,
                    guint n, gint64 bucket, guint64 token,
                    guint8 out[RANK_UPDATE_GROUP_BYTES])
{
  g_autoptr (GChecksum) id = g_checksum_new (G_CHECKSUM_SHA256);
  g_autoptr (GChecksum) all = g_checksum_new (G_CHECKSUM_SHA1);
  guint8 digest[32], fp[RANK_FINGERPRINT_BYTES];
  gsize len = sizeof digest;
  guint8 *p = out;

  g_assert (n >= 1 && n <= RANK_BATCH_MAX_ITEMS);
  /* The record: what the batch's updates stand for, in order. */
  checksum_number (all, "batch:", 6, n, ':');
  for (guint i = 0; i < n; i++)
    {
      rank_request_fingerprint (updates[i], fp);
      g_checksum_update (all, fp, sizeof fp);
    }
  g_checksum_get_digest (all, digest, &len);
  rank_request_record (digest, bucket, p);
  p += RANK_FINGERPRINT_BYTES;
  /* The field. */
  len = sizeof digest;
  g_checksum_update (id, (const guchar *) "", 1);
  g_checksum_update (id, (const guchar *) request_id, -1);
  g_checksum_get_digest (id, digest, &len);
  memcpy (p, digest, RANK_REQUEST_ID_HASH_BYTES);
  p += RANK_REQUEST_ID_HASH_BYTES;
  *p++ = (guint8) n;
  for (guint i = 0; i < 8; i++)
    *p++ = (guint8) (token >> (8 * i));
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
