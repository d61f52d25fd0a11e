/* cmd_transfer.c -- import and export (transfer.h does the work). */
#include "rankctl.h"

/* A GError of transfer.h as an exit code, printed. */
static int
transfer_failed (const GError *error)
{
  int code = EXIT_OTHER;

  if (error->domain == RANK_ERROR)
    code = error->code == RANK_ERROR_INVALID       ? EXIT_INVALID
           : error->code == RANK_ERROR_NOT_FOUND   ? EXIT_NOT_FOUND
           : error->code == RANK_ERROR_UNAVAILABLE ? EXIT_UNAVAILABLE
           : error->code == RANK_ERROR_DENIED      ? EXIT_DENIED
                                                   : EXIT_OTHER;
  else if (error->domain == THRIFT_TRANSPORT_ERROR)
    code = EXIT_UNAVAILABLE;
  else if (error->domain == G_FILE_ERROR)
    code = EXIT_INVALID;
  return fail (code, "%s", error->message);
}

/* On a terminal: one line, rewritten, of how far the import is. */
static void
import_progress (const RankImportStats *s, gpointer data)
{
  guint64 done = s->applied + s->repeated + s->refused;
  gint64 *start = data;
  double secs = (double) (g_get_monotonic_time () - *start) / 1e6;
  int width = 30;
  int filled = s->records ? (int) (width * done / s->records) : width;

  fprintf (stderr,
           "\r[%.*s%*s] %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT
           " %3d%%  %.0f/s ",
           filled, "##############################", width - filled, "", done,
           s->records, s->records ? (int) (100 * done / s->records) : 100,
           secs > 0 ? (double) done / secs : 0.0);
  fflush (stderr);
}

int
cmd_import (Cli *cli)
{
  g_autoptr (GError) error = NULL;
  RankTransferFormat format = cli->format;
  RankImportStats stats;
  gint64 start = g_get_monotonic_time ();
  gboolean tty = isatty (STDERR_FILENO);
  gboolean ok;

  if (!cli->has_format && !rank_transfer_format_of_path (arg (cli, 1), &format))
    return fail (EXIT_INVALID,
                 "FILE: '%s' ends in neither .csv nor .jsonl: give --format",
                 arg (cli, 1));
  if (rankd (cli) == NULL)
    return EXIT_UNAVAILABLE;
  ok = rank_transfer_import (
      cli->client, arg (cli, 0), arg (cli, 1), format, cli->max_frame,
      cli->sort_memory, tty ? import_progress : NULL, &start, &stats, &error);
  if (tty)
    fputc ('\n', stderr);
  if (!ok)
    return transfer_failed (error);
  if (cli->json)
    printf ("{\"records\":%" G_GUINT64_FORMAT ",\"applied\":%" G_GUINT64_FORMAT
            ",\"repeated\":%" G_GUINT64_FORMAT ",\"refused\":%" G_GUINT64_FORMAT
            "}\n",
            stats.records, stats.applied, stats.repeated, stats.refused);
  else
    printf ("%" G_GUINT64_FORMAT " records: %" G_GUINT64_FORMAT
            " applied, %" G_GUINT64_FORMAT
            " applied before (same file, same request ids), %" G_GUINT64_FORMAT
            " refused\n",
            stats.records, stats.applied, stats.repeated, stats.refused);
  return stats.refused > 0 ? EXIT_INVALID : EXIT_OK;
}

/* On a terminal: how many entries the export has read. */
static void
export_progress (const RankExportStats *s, gpointer data)
{
  fprintf (stderr,
           "\r%" G_GUINT64_FORMAT " entries read, %" G_GUINT64_FORMAT " pages ",
           s->read, s->pages);
  fflush (stderr);
}

int
cmd_export (Cli *cli)
{
  g_autoptr (GError) error = NULL;
  RankTransferFormat format = RANK_TRANSFER_CSV;
  RankExportStats stats;
  gboolean tty = isatty (STDERR_FILENO);
  FILE *out = stdout;
  gboolean ok;

  if (cli->has_format)
    format = cli->format;
  else if (cli->output != NULL)
    rank_transfer_format_of_path (cli->output, &format);
  if (rankd (cli) == NULL)
    return EXIT_UNAVAILABLE;
  /* The file is written only once every page is in: a failed export
   * leaves no half file. */
  if (cli->output != NULL)
    {
      g_autofree char *tmp = g_strconcat (cli->output, ".part", NULL);

      out = fopen (tmp, "wb");
      if (out == NULL)
        return fail (EXIT_INVALID, "--output: cannot write %s: %s", tmp,
                     g_strerror (errno));
      ok = rank_transfer_export (cli->client, arg (cli, 0), cli->periods_back,
                                 format, cli->sort_memory, out,
                                 tty ? export_progress : NULL, NULL, &stats,
                                 &error);
      if (fclose (out) != 0 && ok)
        {
          g_set_error (&error, G_FILE_ERROR, g_file_error_from_errno (errno),
                       "cannot write %s: %s", tmp, g_strerror (errno));
          ok = FALSE;
        }
      if (ok && rename (tmp, cli->output) != 0)
        {
          g_set_error (&error, G_FILE_ERROR, g_file_error_from_errno (errno),
                       "cannot rename %s to %s: %s", tmp, cli->output,
                       g_strerror (errno));
          ok = FALSE;
        }
      if (!ok)
        remove (tmp);
    }
  else
    ok = rank_transfer_export (
        cli->client, arg (cli, 0), cli->periods_back, format, cli->sort_memory,
        out, tty ? export_progress : NULL, NULL, &stats, &error);
  if (tty)
    fputc ('\n', stderr);
  if (!ok)
    return transfer_failed (error);
  if (cli->output != NULL)
    {
      if (cli->json)
        printf ("{\"entries\":%" G_GUINT64_FORMAT ",\"read\":%" G_GUINT64_FORMAT
                ",\"pages\":%" G_GUINT64_FORMAT "}\n",
                stats.entries, stats.read, stats.pages);
      else
        printf ("%" G_GUINT64_FORMAT
                " entries written to %s (%" G_GUINT64_FORMAT
                " read in %" G_GUINT64_FORMAT " pages)\n",
                stats.entries, cli->output, stats.read, stats.pages);
    }
  return EXIT_OK;
}
