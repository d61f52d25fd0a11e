/* timeline.c -- latency percentiles over time (see timeline.h).
 *
 * Each worker's samples are in the order its requests started, so the
 * seconds are walked in order with one cursor per worker, and only one
 * histogram per operation (16 KiB) is in use at a time, however long the
 * run. gnuplot draws the result from a data file with one block per
 * operation (its "index"), written next to the PNG and removed after.
 */
#include "timeline.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "histogram.h"

/* Rows "second op count p50_ms p99_ms p999_ms", one GString per operation
 * (NULL: no request of that operation was measured). Row s covers seconds
 * [s, s+1) of the measurement; the last also takes the fraction of a second
 * the run overshot its duration by, rather than a row of a few requests. */
static GString **
rows_per_op (GArray *const *samples, guint n_workers,
             const char *const *op_names, guint n_ops, guint n_seconds)
{
  GString **rows = g_new0 (GString *, n_ops);
  RankHistogram *h = g_new (RankHistogram, n_ops);
  guint *cursor = g_new0 (guint, n_workers);

  for (guint s = 0; s < n_seconds; s++)
    {
      gboolean last = s == n_seconds - 1;

      memset (h, 0, sizeof (RankHistogram) * n_ops);
      for (guint w = 0; w < n_workers; w++)
        for (; cursor[w] < samples[w]->len; cursor[w]++)
          {
            const RankSample *x
                = &g_array_index (samples[w], RankSample, cursor[w]);

            if (!last && x->t_ms / 1000 > s)
              break;
            if (x->op < n_ops)
              rank_histogram_record (&h[x->op], (guint64) x->latency_us * 1000);
          }
      for (guint op = 0; op < n_ops; op++)
        {
          if (h[op].total == 0)
            continue;
          if (rows[op] == NULL)
            rows[op] = g_string_new (NULL);
          g_string_append_printf (
              rows[op], "%u\t%s\t%" G_GUINT64_FORMAT "\t%.3f\t%.3f\t%.3f\n", s,
              op_names[op], h[op].total,
              rank_histogram_quantile (&h[op], 0.5) / 1e6,
              rank_histogram_quantile (&h[op], 0.99) / 1e6,
              rank_histogram_quantile (&h[op], 0.999) / 1e6);
        }
    }
  g_free (cursor);
  g_free (h);
  return rows;
}

/* s as a gnuplot single-quoted string: a quote inside is written twice. */
static void
append_quoted (GString *out, const char *s)
{
  g_string_append_c (out, '\'');
  for (; *s != '\0'; s++)
    {
      if (*s == '\'')
        g_string_append_c (out, '\'');
      g_string_append_c (out, *s);
    }
  g_string_append_c (out, '\'');
}

/* One panel per operation with rows, p50/p99/p99.9 on a log scale. */
static char *
gnuplot_script (const char *data, const char *png, const char *title,
                const char *const *op_names, GString *const *rows, guint n_ops)
{
  GString *script = g_string_new (NULL);
  guint panels = 0, panel = 0;

  for (guint op = 0; op < n_ops; op++)
    panels += rows[op] != NULL ? 1 : 0;
  panels = MAX (panels, 1u);
  g_string_append_printf (script,
                          "set terminal pngcairo size 1200,%u noenhanced "
                          "font ',10'\nset output ",
                          panels * 260 + 40);
  append_quoted (script, png);
  g_string_append_printf (script, "\nset multiplot layout %u,1 title ", panels);
  append_quoted (script, title);
  g_string_append (script, "\nset logscale y\n"
                           "set ylabel 'latency (ms)'\n"
                           "set grid\n"
                           "set key outside right\n");
  for (guint op = 0; op < n_ops; op++)
    {
      if (rows[op] == NULL)
        continue;
      g_string_append (script, "set title ");
      append_quoted (script, op_names[op]);
      g_string_append_printf (script, "\nset xlabel '%s'\nplot ",
                              ++panel == panels ? "seconds into the run" : "");
      append_quoted (script, data);
      g_string_append_printf (
          script,
          " index %u using 1:4 with linespoints title 'p50', "
          "'' index %u using 1:5 with linespoints title 'p99', "
          "'' index %u using 1:6 with linespoints title 'p99.9'\n",
          panel - 1, panel - 1, panel - 1);
    }
  g_string_append (script, "unset multiplot\n");
  return g_string_free (script, FALSE);
}

static gboolean
run_gnuplot (const char *script, GError **error)
{
  g_autofree char *path = NULL;
  g_autofree char *err = NULL;
  const char *argv[] = { "gnuplot", NULL, NULL };
  int fd, status;
  gboolean ok;

  fd = g_file_open_tmp ("rank-bench-XXXXXX.gp", &path, error);
  if (fd < 0)
    return FALSE;
  close (fd);
  argv[1] = path;
  ok = g_file_set_contents (path, script, -1, error)
       && g_spawn_sync (NULL, (char **) argv, NULL,
                        G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
                        NULL, NULL, &err, &status, error);
  g_unlink (path);
  if (ok && !g_spawn_check_wait_status (status, NULL))
    {
      g_set_error (error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                   "gnuplot failed: %s", err);
      ok = FALSE;
    }
  return ok;
}

gboolean
rank_timeline_write (GArray *const *samples, guint n_workers,
                     const char *const *op_names, guint n_ops, double seconds,
                     const char *tsv, const char *png, const char *title,
                     GError **error)
{
  guint n_seconds = MAX (1u, (guint) seconds);
  GString **rows = rows_per_op (samples, n_workers, op_names, n_ops, n_seconds);
  GString *flat = g_string_new ("second\top\tcount\tp50_ms\tp99_ms\tp999_ms\n");
  GString *blocks = g_string_new (NULL);
  gboolean ok;

  for (guint op = 0; op < n_ops; op++)
    if (rows[op] != NULL)
      {
        g_string_append (flat, rows[op]->str);
        g_string_append (blocks, rows[op]->str);
        g_string_append (blocks, "\n\n"); /* ends a gnuplot "index" block */
      }
  ok = g_file_set_contents (tsv, flat->str, -1, error);
  if (ok && png != NULL && blocks->len == 0)
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                   "no request was measured: nothing to draw in %s", png);
      ok = FALSE;
    }
  if (ok && png != NULL)
    {
      g_autofree char *data = g_strconcat (png, ".data", NULL);
      g_autofree char *script
          = gnuplot_script (data, png, title, op_names, rows, n_ops);

      ok = g_file_set_contents (data, blocks->str, -1, error)
           && run_gnuplot (script, error);
      g_unlink (data);
    }
  for (guint op = 0; op < n_ops; op++)
    if (rows[op] != NULL)
      g_string_free (rows[op], TRUE);
  g_free (rows);
  g_string_free (flat, TRUE);
  g_string_free (blocks, TRUE);
  return ok;
}
