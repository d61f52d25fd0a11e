/* timeline.c -- latency percentiles over time (see timeline.h). */
#include "timeline.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <unistd.h>

#include "histogram.h"

/* One histogram per (second, op): n_seconds * n_ops of them. */
static RankHistogram *
bucket (GArray *const *samples, guint n_workers, guint n_ops, guint n_seconds)
{
  RankHistogram *h = g_new0 (RankHistogram, (gsize) n_seconds * n_ops);

  for (guint w = 0; w < n_workers; w++)
    for (guint i = 0; i < samples[w]->len; i++)
      {
        const RankSample *s = &g_array_index (samples[w], RankSample, i);
        guint second = MIN (s->t_ms / 1000, n_seconds - 1);

        if (s->op < n_ops)
          rank_histogram_record (&h[second * n_ops + s->op],
                                 (guint64) s->latency_us * 1000);
      }
  return h;
}

static gboolean
draw (const char *data, const char *png, const char *title,
      const char *const *op_names, const gboolean *present, guint n_ops,
      GError **error)
{
  g_autofree char *script_path = NULL;
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  GString *script = g_string_new (NULL);
  const char *argv[] = { "gnuplot", NULL, NULL };
  guint panels = 0, panel = 0, block = 0;
  int fd, status;
  gboolean ok;

  for (guint op = 0; op < n_ops; op++)
    panels += present[op] ? 1 : 0;
  g_string_append_printf (
      script,
      "set terminal pngcairo size 1200,%u noenhanced font ',10'\n"
      "set output '%s'\n"
      "set multiplot layout %u,1 title '%s'\n"
      "set logscale y\n"
      "set ylabel 'latency (ms)'\n"
      "set grid\n"
      "set key outside right\n",
      MAX (panels, 1u) * 260 + 40, png, MAX (panels, 1u), title);
  for (guint op = 0; op < n_ops; op++)
    {
      if (!present[op])
        continue;
      panel++;
      g_string_append_printf (
          script,
          "set title '%s'\n"
          "set xlabel '%s'\n"
          "plot '%s' index %u using 1:4 with linespoints title 'p50', "
          "'' index %u using 1:5 with linespoints title 'p99', "
          "'' index %u using 1:6 with linespoints title 'p99.9'\n",
          op_names[op], panel == panels ? "seconds into the measurement" : "",
          data, block, block, block);
      block++;
    }
  g_string_append (script, "unset multiplot\n");
  fd = g_file_open_tmp ("rank-bench-XXXXXX.gp", &script_path, error);
  if (fd < 0)
    {
      g_string_free (script, TRUE);
      return FALSE;
    }
  close (fd);
  ok = g_file_set_contents (script_path, script->str, -1, error);
  g_string_free (script, TRUE);
  argv[1] = script_path;
  ok = ok
       && g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL,
                        NULL, &out, &err, &status, error);
  g_unlink (script_path);
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
  guint n_seconds = MAX (1u, (guint) (seconds + 0.999));
  g_autofree RankHistogram *h = bucket (samples, n_workers, n_ops, n_seconds);
  g_autofree gboolean *present = g_new0 (gboolean, n_ops);
  GString *flat = g_string_new ("second\top\tcount\tp50_ms\tp99_ms\tp999_ms\n");
  GString *blocks = g_string_new (NULL);
  gboolean ok;

  for (guint op = 0; op < n_ops; op++)
    {
      for (guint s = 0; s < n_seconds; s++)
        present[op] = present[op] || h[s * n_ops + op].total > 0;
      if (!present[op])
        continue;
      for (guint s = 0; s < n_seconds; s++)
        {
          const RankHistogram *x = &h[s * n_ops + op];
          g_autofree char *row = NULL;

          if (x->total == 0)
            continue;
          row = g_strdup_printf (
              "%u\t%s\t%" G_GUINT64_FORMAT "\t%.3f\t%.3f\t%.3f\n", s,
              op_names[op], x->total, rank_histogram_quantile (x, 0.5) / 1e6,
              rank_histogram_quantile (x, 0.99) / 1e6,
              rank_histogram_quantile (x, 0.999) / 1e6);
          g_string_append (flat, row);
          g_string_append (blocks, row);
        }
      /* gnuplot's "index": blocks apart by two blank lines. */
      g_string_append (blocks, "\n\n");
    }
  ok = g_file_set_contents (tsv, flat->str, -1, error);
  if (ok && png != NULL)
    {
      g_autofree char *data = g_strconcat (png, ".data", NULL);

      ok = g_file_set_contents (data, blocks->str, -1, error)
           && draw (data, png, title, op_names, present, n_ops, error);
      g_unlink (data);
    }
  g_string_free (flat, TRUE);
  g_string_free (blocks, TRUE);
  return ok;
}
