/* transfer_export.c -- rankctl export: a board's pages read while it
 * keeps taking updates, each member's latest entry written (see
 * transfer.h). */
#include "transfer_internal.h"

#include <errno.h>
#include <string.h>

#include "api.h"
#include "error.h"
#include "spill.h"

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
      rank_transfer_entry_destroy (e);
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

/* Writes what out has gathered; FALSE (error set) if it cannot. */
static gboolean
write_out (FILE *f, GString *out, GError **error)
{
  if (out->len > 0 && fwrite (out->str, 1, out->len, f) != out->len)
    {
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno),
                   "cannot write the export: %s", g_strerror (errno));
      return FALSE;
    }
  g_string_truncate (out, 0);
  return TRUE;
}

/* The entries of spill (finished: by member, then the order read), each
 * member's latest (rank_transfer_keep_latest's rule), written to f in
 * format. */
static gboolean
write_sorted (RankSpill *spill, RankTransferFormat format, FILE *f,
              RankExportStats *stats, GError **error)
{
  g_autoptr (GString) out = g_string_sized_new (2 * 1024 * 1024);
  RankTransferEntry kept = { 0 }, e = { 0 };
  gboolean ok = TRUE;

  if (format == RANK_TRANSFER_CSV)
    g_string_append (out, RANK_TRANSFER_CSV_HEADER "\n");
  while (ok)
    {
      RankSpillKey key;
      const guint8 *rec;
      gsize len;
      guint64 seq, line;

      ok = rank_spill_next (spill, &key, &rec, &len, error);
      if (!ok)
        break;
      if (rec != NULL)
        rank_transfer_entry_unpack (rec, &e, NULL, &seq, &line);
      /* A new member (or the end): the one before is written. */
      if (kept.member != NULL
          && (rec == NULL || strcmp (kept.member, e.member) != 0))
        {
          rank_transfer_format_entry (out, format, &kept);
          rank_transfer_entry_clear (&kept);
          stats->entries++;
          if (out->len >= 1024 * 1024)
            ok = write_out (f, out, error);
        }
      if (rec == NULL)
        break;
      /* Read later, so kept on equal times. */
      if (kept.member == NULL || e.timestamp_ms >= kept.timestamp_ms)
        {
          rank_transfer_entry_clear (&kept);
          kept = e;
          memset (&e, 0, sizeof e);
        }
    }
  rank_transfer_entry_clear (&kept);
  rank_transfer_entry_clear (&e);
  if (!ok || !write_out (f, out, error))
    return FALSE;
  if (fflush (f) != 0)
    {
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno),
                   "cannot write the export: %s", g_strerror (errno));
      return FALSE;
    }
  return TRUE;
}

gboolean
rank_transfer_export (RankClient *client, const char *board,
                      gint32 periods_back, RankTransferFormat format,
                      gsize memory, FILE *out, RankExportProgress progress,
                      gpointer progress_data, RankExportStats *stats,
                      GError **error)
{
  /* Pages come in the times hash's order: they are sorted by member (and
   * the order read, for keep_latest's rule) through a spill, in bounded
   * memory whatever the board's size. */
  g_autoptr (RankSpill) spill
      = rank_spill_new (memory, rank_transfer_pack_compare);
  g_autoptr (GByteArray) packed = g_byte_array_new ();
  g_autofree char *cursor = g_strdup ("");

  memset (stats, 0, sizeof *stats);
  while (cursor != NULL)
    {
      g_autoptr (rankExportRequest) request = g_object_new (
          RANK_TYPE_EXPORT_REQUEST, "board", board, "cursor", cursor, "count",
          RANK_TRANSFER_EXPORT_PAGE, "periods_back", periods_back, NULL);
      g_autoptr (rankExportResponse) page
          = g_object_new (RANK_TYPE_EXPORT_RESPONSE, NULL);
      rankInvalidArgument *invalid = NULL;
      rankPermissionDenied *denied = NULL;
      rankUnavailable *unavailable = NULL;
      GError *transport = NULL;

      if (!rank_ranking_if_export (rank_client_iface (client), &page, request,
                                   &invalid, &unavailable, &denied, &transport))
        return rank_transfer_call_failed ((GObject *) invalid,
                                          (GObject *) unavailable, NULL,
                                          (GObject *) denied, transport, error);
      for (guint i = 0; i < page->entries->len; i++)
        {
          RankTransferEntry *e = entry_of_export (page->entries->pdata[i]);
          RankSpillKey key
              = { { rank_spill_prefix (e->member, strlen (e->member)), 0, 0 } };
          gboolean ok;

          stats->read++;
          rank_transfer_entry_pack (packed, e, stats->read, 0);
          rank_transfer_entry_free (e);
          ok = rank_spill_add (spill, &key, packed->data, packed->len, error);
          if (!ok)
            return FALSE;
        }
      stats->pages++;
      g_free (cursor);
      cursor = page->__isset_next_cursor ? g_strdup (page->next_cursor) : NULL;
      if (progress != NULL)
        progress (stats, progress_data);
    }
  if (!rank_spill_finish (spill, error)
      || !write_sorted (spill, format, out, stats, error))
    return FALSE;
  stats->superseded = stats->read - stats->entries;
  return TRUE;
}
