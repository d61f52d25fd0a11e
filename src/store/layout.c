/* layout.c -- board descriptors (see layout.h). */
#include "layout.h"

#include <string.h>

#define MAGIC "rankd-layout"

static const char *
period_name (RankPeriodKind kind)
{
  static const char *const names[] = {
    [RANK_PERIOD_NONE] = "none",       [RANK_PERIOD_HOURLY] = "hourly",
    [RANK_PERIOD_DAILY] = "daily",     [RANK_PERIOD_WEEKLY] = "weekly",
    [RANK_PERIOD_MONTHLY] = "monthly", [RANK_PERIOD_CUSTOM] = "custom",
  };

  return names[kind];
}

static const char *const day_names[]
    = { "",         "monday", "tuesday",  "wednesday",
        "thursday", "friday", "saturday", "sunday" };

/* The options as key=value pairs, in a fixed order: what the descriptor
 * records after its version. */
static GPtrArray *
options_of (const RankBoardOptions *o)
{
  GPtrArray *kv = g_ptr_array_new_with_free_func (g_free);

  g_ptr_array_add (kv, g_strdup_printf ("shards=%u", o->shards));
  g_ptr_array_add (kv, g_strdup_printf ("order=%s", o->order == RANK_ORDER_ASC
                                                        ? "asc"
                                                        : "desc"));
  g_ptr_array_add (kv, g_strdup (o->rank == RANK_KIND_DENSE
                                     ? "rank=dense"
                                     : "rank=ordinal/competition"));
  if (o->n_subscores == 0)
    g_ptr_array_add (kv, g_strdup ("subscores=none"));
  else
    {
      GString *s = g_string_new ("subscores=");

      for (guint i = 0; i < o->n_subscores; i++)
        g_string_append_printf (s, "%s%s", i ? "," : "",
                                o->subscore_asc[i] ? "asc" : "desc");
      g_ptr_array_add (kv, g_string_free (s, FALSE));
    }
  g_ptr_array_add (kv,
                   g_strdup_printf ("period=%s", period_name (o->period.kind)));
  if (o->period.kind == RANK_PERIOD_CUSTOM)
    {
      g_ptr_array_add (kv, g_strdup_printf ("period_seconds=%" G_GINT64_FORMAT,
                                            o->period.length_s));
      g_ptr_array_add (kv, g_strdup_printf ("period_epoch=%" G_GINT64_FORMAT,
                                            o->period.epoch_s));
    }
  else if (o->period.kind != RANK_PERIOD_NONE)
    {
      g_ptr_array_add (
          kv, g_strdup_printf ("timezone=%s", g_time_zone_get_identifier (
                                                  o->period.timezone)));
      if (o->period.kind == RANK_PERIOD_WEEKLY)
        g_ptr_array_add (kv, g_strdup_printf ("week_start=%s",
                                              day_names[o->period.week_start]));
    }
  if (o->cap > 0)
    g_ptr_array_add (kv, g_strdup_printf ("cap=%u", o->cap));
  else
    g_ptr_array_add (kv, g_strdup ("cap=none"));
  /* Only when set: the descriptors of boards without one stay as they were. */
  if (o->window > 0)
    g_ptr_array_add (kv, g_strdup_printf ("window=%u", o->window));
  return kv;
}

char *
rank_layout_describe (const RankBoardOptions *o)
{
  g_autoptr (GPtrArray) kv = options_of (o);
  GString *s = g_string_new (MAGIC);

  g_string_append_printf (s, " %d", RANK_LAYOUT_VERSION);
  for (guint i = 0; i < kv->len; i++)
    g_string_append_printf (s, " %s", (const char *) kv->pdata[i]);
  return g_string_free (s, FALSE);
}

/* The value of key in words ("key=value"), or NULL. */
static const char *
value_of (char **words, const char *key)
{
  gsize n = strlen (key);

  for (; *words != NULL; words++)
    if (strncmp (*words, key, n) == 0 && (*words)[n] == '=')
      return *words + n + 1;
  return NULL;
}

guint
rank_layout_stored_shards (const char *descriptor, guint fallback)
{
  const char *at = descriptor != NULL ? strstr (descriptor, " shards=") : NULL;

  if (at == NULL)
    return fallback;
  return CLAMP ((guint) g_ascii_strtoull (at + strlen (" shards="), NULL, 10),
                1, RANK_SHARDS_MAX);
}

char *
rank_layout_mismatch (const char *board, const char *stored, const char *wanted)
{
  g_auto (GStrv) words = g_strsplit (stored, " ", -1);
  g_auto (GStrv) want = g_strsplit (wanted, " ", -1);
  gint64 version;

  if (words[0] == NULL || strcmp (words[0], MAGIC) != 0 || words[1] == NULL)
    return g_strdup_printf ("board '%s' has a layout descriptor this rankd "
                            "does not understand ('%.40s')",
                            board, stored);
  version = g_ascii_strtoll (words[1], NULL, 10);
  if (version != RANK_LAYOUT_VERSION)
    return g_strdup_printf ("board '%s' is stored in layout version %s; this "
                            "rankd reads version %d only",
                            board, words[1], RANK_LAYOUT_VERSION);
  for (char **pair = want + 2; *pair != NULL; pair++)
    {
      const char *eq = strchr (*pair, '=');
      g_autofree char *key = g_strndup (*pair, (gsize) (eq - *pair));
      const char *have = value_of (words + 2, key);

      if (have == NULL || strcmp (have, eq + 1) != 0)
        return g_strdup_printf (
            "board '%s' is stored with %s=%s, but the configuration in force "
            "says %s: rankd will not read or write it in another layout; "
            "restore the board's options, or reset the board",
            board, key, have != NULL ? have : "(unset)", *pair);
    }
  /* An option the stored one has and this rankd does not know. */
  for (char **w = words + 2; *w != NULL; w++)
    {
      const char *eq = strchr (*w, '=');
      g_autofree char *key
          = eq != NULL ? g_strndup (*w, (gsize) (eq - *w)) : g_strdup (*w);

      if (value_of (want + 2, key) == NULL && strcmp (key, "window") == 0)
        return g_strdup_printf (
            "board '%s' is stored with %s, but the configuration in force "
            "sets no window: rankd will not write it without keeping its "
            "window; restore the board's options, or reset the board",
            board, *w);
      if (value_of (want + 2, key) == NULL)
        return g_strdup_printf ("board '%s' is stored with %s, which this "
                                "rankd does not know",
                                board, *w);
    }
  return NULL;
}

/* Boards whose layout does not match, and why: what was logged last. */
static GMutex report_lock;
static GHashTable *reported;

void
rank_layout_report (const char *board, const char *mismatch)
{
  const char *before;

  g_mutex_lock (&report_lock);
  if (reported == NULL)
    reported = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  before = g_hash_table_lookup (reported, board);
  if (mismatch != NULL && g_strcmp0 (before, mismatch) != 0)
    {
      g_warning ("%s; its calls fail until then", mismatch);
      g_hash_table_insert (reported, g_strdup (board), g_strdup (mismatch));
    }
  else if (mismatch == NULL && before != NULL)
    {
      g_message ("board '%s': the configuration matches its stored layout "
                 "again; serving it",
                 board);
      g_hash_table_remove (reported, board);
    }
  g_mutex_unlock (&report_lock);
}
