/* cpu.c -- CPU time of processes over an interval (see cpu.h). */
#include "cpu.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

typedef struct
{
  char *name;
  int pid; /* 0: this process */
  gint64 start_ns, end_ns;
} Watched;

struct _RankCpuWatch
{
  GArray *procs; /* Watched */
};

static gint64
self_ns (void)
{
  struct rusage ru;

  getrusage (RUSAGE_SELF, &ru);
  return ((gint64) ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000
         + ((gint64) ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

/* The sum of the threads' time on a CPU; -1 if the process is gone. */
static gint64
process_ns (int pid)
{
  g_autofree char *tasks = g_strdup_printf ("/proc/%d/task", pid);
  g_autoptr (GDir) dir = g_dir_open (tasks, 0, NULL);
  const char *tid;
  gint64 sum = 0;

  if (dir == NULL)
    return -1;
  while ((tid = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = g_strdup_printf ("%s/%s/schedstat", tasks, tid);
      g_autofree char *text = NULL;

      if (g_file_get_contents (path, &text, NULL, NULL))
        sum += g_ascii_strtoll (text, NULL, 10);
    }
  return sum;
}

static gint64
now_ns (const Watched *w)
{
  return w->pid == 0 ? self_ns () : process_ns (w->pid);
}

RankCpuWatch *
rank_cpu_watch_new (const char *spec, GError **error)
{
  RankCpuWatch *watch = g_new0 (RankCpuWatch, 1);
  Watched self = { g_strdup ("client"), 0, 0, 0 };

  watch->procs = g_array_new (FALSE, TRUE, sizeof (Watched));
  g_array_append_val (watch->procs, self);
  if (spec != NULL && *spec != '\0')
    {
      g_auto (GStrv) items = g_strsplit (spec, ",", -1);

      for (char **item = items; *item != NULL; item++)
        {
          const char *eq = strchr (*item, '=');
          Watched w = { 0 };
          char *end = NULL;

          if (eq == NULL || eq == *item)
            {
              g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                           "--cpu: NAME=PID, got '%s'", *item);
              rank_cpu_watch_free (watch);
              return NULL;
            }
          w.pid = (int) strtol (eq + 1, &end, 10);
          if (w.pid <= 0 || *end != '\0' || process_ns (w.pid) < 0)
            {
              g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                           "--cpu: no process %s", eq + 1);
              rank_cpu_watch_free (watch);
              return NULL;
            }
          w.name = g_strndup (*item, (gsize) (eq - *item));
          g_array_append_val (watch->procs, w);
        }
    }
  return watch;
}

void
rank_cpu_watch_free (RankCpuWatch *watch)
{
  if (watch == NULL)
    return;
  for (guint i = 0; i < watch->procs->len; i++)
    g_free (g_array_index (watch->procs, Watched, i).name);
  g_array_unref (watch->procs);
  g_free (watch);
}

void
rank_cpu_watch_start (RankCpuWatch *watch)
{
  for (guint i = 0; i < watch->procs->len; i++)
    {
      Watched *w = &g_array_index (watch->procs, Watched, i);

      w->start_ns = now_ns (w);
    }
}

void
rank_cpu_watch_stop (RankCpuWatch *watch)
{
  for (guint i = 0; i < watch->procs->len; i++)
    {
      Watched *w = &g_array_index (watch->procs, Watched, i);

      w->end_ns = now_ns (w);
    }
}

static double
per_op_us (const Watched *w, guint64 ops)
{
  if (ops == 0 || w->start_ns < 0 || w->end_ns < w->start_ns)
    return -1;
  return (double) (w->end_ns - w->start_ns) / 1e3 / (double) ops;
}

void
rank_cpu_watch_json (RankCpuWatch *watch, guint64 ops, GString *out)
{
  for (guint i = 0; i < watch->procs->len; i++)
    {
      const Watched *w = &g_array_index (watch->procs, Watched, i);

      g_string_append_printf (out, "%s\"%s\":%.2f", i ? "," : "", w->name,
                              per_op_us (w, ops));
    }
}

void
rank_cpu_watch_text (RankCpuWatch *watch, guint64 ops, GString *out)
{
  g_string_append (out, "CPU per op:");
  for (guint i = 0; i < watch->procs->len; i++)
    {
      const Watched *w = &g_array_index (watch->procs, Watched, i);

      g_string_append_printf (out, " %s %.2f us%s", w->name, per_op_us (w, ops),
                              i + 1 < watch->procs->len ? "," : "\n");
    }
}
