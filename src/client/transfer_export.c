/* transfer_export.c -- rankctl export: a board's pages read while it
 * keeps taking updates, each member's latest entry written (see
 * transfer.h). */
#include "transfer_internal.h"

#include <errno.h>
#include <string.h>

#include "api.h"
#include "error.h"

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

gboolean
rank_transfer_export (RankClient *client, const char *board,
                      gint32 periods_back, RankTransferFormat format, FILE *out,
                      RankExportProgress progress, gpointer progress_data,
                      RankExportStats *stats, GError **error)
{
  g_autoptr (GHashTable) entries = g_hash_table_new_full (
      g_str_hash, g_str_equal, NULL, rank_transfer_entry_destroy);
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
