/* config.c -- the configuration file (see config.h).
 *
 * GKeyFile reads values (escapes, lists) but keeps no line numbers and
 * quietly merges repeated sections and keys. So the file is first scanned
 * line by line here: that scan finds malformed lines, repeats and unknown
 * names, and remembers where each key is, for the messages about values.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "address.h"
#include "constants.h"
#include "error.h"
#include "validate.h"

struct _RankConfig
{
  gatomicrefcount ref;
  RankBoardOptions defaults;
  GHashTable *boards; /* board name -> RankBoardOptions */
  GPtrArray *nodes;   /* char *, NULL-terminated */
  char *redis_user;
  char *redis_password;
  GHashTable *replicas; /* primary, as written -> GStrv of its replicas */
  RankConfigRedisTls redis_tls;
  RankGrants *grants; /* [grant NAME] sections and --grant options */
};

#define BOARD_SECTION_PREFIX "board "
#define GRANT_SECTION_PREFIX "grant "

typedef struct
{
  const char *path;
  GKeyFile *file;
  GHashTable *lines; /* "section\nkey" or "section" -> line number */
} Loader;

static const char *const board_keys[] = { "shards",
                                          "max_top_depth",
                                          "order",
                                          "rank",
                                          "mode",
                                          "dedup_window",
                                          "cap",
                                          "period",
                                          "timezone",
                                          "week_start",
                                          "period_seconds",
                                          "period_epoch",
                                          "retention",
                                          "accept_late",
                                          "subscores",
                                          "queue",
                                          "queue_claim_after",
                                          "queue_max_backlog",
                                          "queue_rate",
                                          "read_cache",
                                          "read_cache_ms",
                                          "read_from",
                                          "max_replica_lag_ms",
                                          "window",
                                          NULL };
static const char *const redis_keys[]
    = { "nodes",  "user",     "password", "replicas",        "tls",
        "tls_ca", "tls_cert", "tls_key",  "tls_server_name", NULL };
/* A [grant NAME] section's keys: the roles (access.h). */
static const char *const grant_keys[] = { "read", "write", "admin", NULL };

static gboolean fail_at (const Loader *loader, const char *section,
                         const char *key, GError **error, const char *fmt, ...)
    G_GNUC_PRINTF (5, 6);

static gboolean fail_line (const Loader *loader, int line, GError **error,
                           const char *fmt, ...) G_GNUC_PRINTF (4, 5);

/* "FILE:LINE: message" */
static gboolean
window_ok (const Loader *loader, const char *section,
           const RankBoardOptions *o, GError **error)
{
  if (o->window == 0)
    return TRUE;
  if (o->period.kind == RANK_PERIOD_NONE)
    return fail_at (loader, section, "window", error,
                    "a window combines periods: it needs period=hourly, "
                    "daily, weekly, monthly or custom");
  if (o->window - 1 > o->retention)
    return fail_at (loader, section, "window", error,
                    "window=%u needs the %u past periods it combines kept: "
                    "retention=%u is less",
                    o->window, o->window - 1, o->retention);
  if (o->mode == RANK_MODE_SET)
    return fail_at (loader, section, "window", error,
                    "a window adds up (mode=increment) or keeps the best "
                    "(mode=best) of its periods; mode=set has no combination");
  if (o->cap > 0)
    return fail_at (loader, section, "window", error,
                    "a capped board drops members a window would still "
                    "count: not with cap");
  if (o->rank == RANK_KIND_DENSE)
    return fail_at (loader, section, "window", error,
                    "not with rank=dense (ordinal or competition)");
  return TRUE;
}

static gboolean
fail_line (const Loader *loader, int line, GError **error, const char *fmt, ...)
{
  g_autofree char *message = NULL;
  va_list ap;

  va_start (ap, fmt);
  message = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID, "%s:%d: %s", loader->path,
               line, message);
  return FALSE;
}

/* "FILE:LINE: [section] key: message" */
static gboolean
fail_at (const Loader *loader, const char *section, const char *key,
         GError **error, const char *fmt, ...)
{
  g_autofree char *where
      = key ? g_strdup_printf ("%s\n%s", section, key) : g_strdup (section);
  g_autofree char *message = NULL;
  va_list ap;
  int line = GPOINTER_TO_INT (g_hash_table_lookup (loader->lines, where));

  va_start (ap, fmt);
  message = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID, "%s:%d: [%s]%s%s: %s",
               loader->path, line, section, key ? " " : "", key ? key : "",
               message);
  return FALSE;
}

static gboolean
known (const char *const *names, const char *name)
{
  return g_strv_contains (names, name);
}

static const char *const *
section_keys (const char *section)
{
  if (strcmp (section, "defaults") == 0
      || g_str_has_prefix (section, BOARD_SECTION_PREFIX))
    return board_keys;
  if (strcmp (section, "redis") == 0)
    return redis_keys;
  if (g_str_has_prefix (section, GRANT_SECTION_PREFIX))
    return grant_keys;
  return NULL;
}

/* A "key=value" line of section: checks the key, records where it is. */
static gboolean
scan_key (Loader *loader, const char *section, const char *line, int number,
          GError **error)
{
  const char *eq = strchr (line, '=');
  g_autofree char *key = g_strchomp (g_strndup (line, (gsize) (eq - line)));
  g_autofree char *where = g_strdup_printf ("%s\n%s", section, key);
  const char *const *keys = section_keys (section);
  int seen = GPOINTER_TO_INT (g_hash_table_lookup (loader->lines, where));

  if (!known (keys, key))
    {
      g_autofree char *expected = g_strjoinv (", ", (char **) keys);

      return fail_line (loader, number, error,
                        "[%s] %s: unknown key (expected one of: %s)", section,
                        key, expected);
    }
  if (seen != 0)
    return fail_line (loader, number, error,
                      "[%s] %s: repeats the key of line %d", section, key,
                      seen);
  g_hash_table_insert (loader->lines, g_steal_pointer (&where),
                       GINT_TO_POINTER (number));
  return TRUE;
}

/* A [grant NAME] section's NAME (GKeyFile trims the spaces around a
 * section's name: "[grant ]" would be "[grant]"). */
static gboolean
grant_name_ok (const char *name)
{
  gsize len = strlen (name);

  return len > 0 && len <= RANK_IDENTITY_MAX_BYTES && !g_ascii_isspace (*name)
         && !g_ascii_isspace (name[len - 1]);
}

/* A "[section]" line: checks the name, records where it is. */
static gboolean
scan_section (Loader *loader, const char *line, int number, char **section,
              GError **error)
{
  const char *end = strchr (line, ']');
  int seen;

  if (end == NULL || end[1] != '\0')
    return fail_line (loader, number, error,
                      "a section header must be one '[name]' on its own line");
  g_free (*section);
  *section = g_strndup (line + 1, (gsize) (end - line - 1));
  seen = GPOINTER_TO_INT (g_hash_table_lookup (loader->lines, *section));
  if (seen != 0)
    return fail_line (loader, number, error,
                      "[%s]: repeats the section of line %d", *section, seen);
  if (g_str_has_prefix (*section, GRANT_SECTION_PREFIX)
      && !grant_name_ok (*section + strlen (GRANT_SECTION_PREFIX)))
    return fail_line (loader, number, error,
                      "[%s]: NAME must be an identity (a client "
                      "certificate's name, uid:N) or anonymous, 1-%d bytes "
                      "without spaces around it",
                      *section, RANK_IDENTITY_MAX_BYTES);
  if (section_keys (*section) == NULL)
    return fail_line (loader, number, error,
                      "[%s]: unknown section (expected [defaults], "
                      "[board NAME], [redis] or [grant NAME])",
                      *section);
  g_hash_table_insert (loader->lines, g_strdup (*section),
                       GINT_TO_POINTER (number));
  return TRUE;
}

/* Checks the file's structure line by line and fills loader->lines. */
static gboolean
scan (Loader *loader, const char *text, GError **error)
{
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  g_autofree char *section = NULL;

  for (int i = 0; lines[i] != NULL; i++)
    {
      char *line = g_strstrip (lines[i]);
      gboolean ok;

      if (*line == '\0' || *line == '#')
        continue;
      if (*line == '[')
        ok = scan_section (loader, line, i + 1, &section, error);
      else if (strchr (line, '=') == NULL)
        ok = fail_line (loader, i + 1, error,
                        "expected key=value, [section] or # comment");
      else if (section == NULL)
        ok = fail_line (loader, i + 1, error,
                        "key=value before the first [section]");
      else
        ok = scan_key (loader, section, line, i + 1, error);
      if (!ok)
        return FALSE;
    }
  return TRUE;
}

/* An unsigned integer value in min..max. */
static gboolean
get_uint (const Loader *loader, const char *section, const char *key, guint min,
          guint max, guint *out, GError **error)
{
  g_autofree char *value = NULL;
  guint64 n;

  if (!g_key_file_has_key (loader->file, section, key, NULL))
    return TRUE;
  value = g_key_file_get_value (loader->file, section, key, NULL);
  g_strstrip (value);
  if (!g_ascii_string_to_unsigned (value, 10, min, max, &n, NULL))
    return fail_at (loader, section, key, error,
                    "must be an integer %u-%u, got '%s'", min, max, value);
  *out = (guint) n;
  return TRUE;
}

/* A non-empty string value (escapes and all, as GKeyFile reads them). */
static gboolean
get_string (const Loader *loader, const char *section, const char *key,
            char **out, GError **error)
{
  g_autoptr (GError) bad = NULL;
  char *value;

  if (!g_key_file_has_key (loader->file, section, key, NULL))
    return TRUE;
  value = g_key_file_get_string (loader->file, section, key, &bad);
  if (value == NULL)
    return fail_at (loader, section, key, error, "%s", bad->message);
  if (*value == '\0')
    {
      g_free (value);
      return fail_at (loader, section, key, error, "must not be empty");
    }
  *out = value;
  return TRUE;
}

static gboolean get_choice (const Loader *loader, const char *section,
                            const char *key, const char *const *names,
                            const int *values, int *out, GError **error);

/* An IANA zone name ("UTC", "Europe/Paris"), checked before GLib sees it:
 * GLib also opens absolute paths and any file under the zone directory, and
 * asserts (a CRITICAL in the log) on one that is not a zone file. */
static gboolean
zone_name_ok (const char *name)
{
  const char *dir = g_getenv ("TZDIR");
  g_autofree char *path = NULL;
  char head[4];
  FILE *f;
  gboolean zone_file;

  if (!g_ascii_isalpha (name[0]) || strstr (name, "..") != NULL
      || strstr (name, "//") != NULL || g_str_has_suffix (name, "/"))
    return FALSE;
  for (const char *p = name; *p; p++)
    if (!g_ascii_isalnum (*p) && *p != '/' && *p != '_' && *p != '-'
        && *p != '+')
      return FALSE;
  if (strcmp (name, "UTC") == 0)
    return TRUE;
  path = g_build_filename (dir != NULL ? dir : "/usr/share/zoneinfo", name,
                           NULL);
  f = fopen (path, "rb");
  if (f == NULL)
    return TRUE; /* not there: GLib says so without a fuss */
  zone_file = fread (head, 1, sizeof head, f) == sizeof head
              && memcmp (head, "TZif", 4) == 0;
  fclose (f);
  return zone_file;
}

/* period, timezone, week_start, period_seconds, period_epoch, retention,
 * accept_late. */
static gboolean
load_period (const Loader *loader, const char *section, RankBoardOptions *o,
             GError **error)
{
  static const char *const kinds[]
      = { "none", "hourly", "daily", "weekly", "monthly", "custom", NULL };
  static const int kind_values[]
      = { RANK_PERIOD_NONE,   RANK_PERIOD_HOURLY,  RANK_PERIOD_DAILY,
          RANK_PERIOD_WEEKLY, RANK_PERIOD_MONTHLY, RANK_PERIOD_CUSTOM };
  static const char *const days[]
      = { "monday", "tuesday",  "wednesday", "thursday",
          "friday", "saturday", "sunday",    NULL };
  static const int day_values[] = { 1, 2, 3, 4, 5, 6, 7 };
  static const char *const booleans[] = { "false", "true", NULL };
  static const int boolean_values[] = { FALSE, TRUE };
  int kind = (int) o->period.kind, day = o->period.week_start,
      late = o->accept_late;
  guint length = (guint) o->period.length_s, epoch = (guint) o->period.epoch_s;
  g_autofree char *zone = NULL;

  if (!get_choice (loader, section, "period", kinds, kind_values, &kind, error)
      || !get_choice (loader, section, "week_start", days, day_values, &day,
                      error)
      || !get_choice (loader, section, "accept_late", booleans, boolean_values,
                      &late, error)
      || !get_uint (loader, section, "period_seconds", 1,
                    RANK_PERIOD_SECONDS_MAX, &length, error)
      || !get_uint (loader, section, "period_epoch", 0, G_MAXUINT, &epoch,
                    error)
      || !get_uint (loader, section, "retention", 0, RANK_RETENTION_MAX,
                    &o->retention, error)
      || !get_string (loader, section, "timezone", &zone, error))
    return FALSE;
  if (zone != NULL)
    {
      GTimeZone *tz
          = zone_name_ok (zone) ? g_time_zone_new_identifier (zone) : NULL;

      if (tz == NULL)
        return fail_at (loader, section, "timezone", error,
                        "'%s' is not an IANA time zone name "
                        "(like UTC or Europe/Paris)",
                        zone);
      g_time_zone_unref (o->period.timezone);
      o->period.timezone = tz;
    }
  o->period.kind = (RankPeriodKind) kind;
  o->period.week_start = day;
  o->period.length_s = length;
  o->period.epoch_s = epoch;
  o->accept_late = late;
  if (o->period.kind == RANK_PERIOD_CUSTOM && o->period.length_s == 0)
    return fail_at (loader, section, "period", error,
                    "period=custom needs period_seconds");
  return TRUE;
}

/* One of names (NULL-terminated); *out = values[its index]. */
static gboolean
get_choice (const Loader *loader, const char *section, const char *key,
            const char *const *names, const int *values, int *out,
            GError **error)
{
  g_autofree char *value = NULL;

  if (!g_key_file_has_key (loader->file, section, key, NULL))
    return TRUE;
  value = g_key_file_get_value (loader->file, section, key, NULL);
  g_strstrip (value);
  for (int i = 0; names[i] != NULL; i++)
    if (strcmp (value, names[i]) == 0)
      {
        *out = values[i];
        return TRUE;
      }
  {
    g_autofree char *expected = g_strjoinv (", ", (char **) names);

    return fail_at (loader, section, key, error, "must be one of %s, got '%s'",
                    expected, value);
  }
}

/* subscores=desc,asc,...: up to RANK_SUBSCORES_MAX directions; "none" or
 * an empty value for none. */
static gboolean
load_subscores (const Loader *loader, const char *section, RankBoardOptions *o,
                GError **error)
{
  g_autofree char *value = NULL;
  g_auto (GStrv) parts = NULL;
  guint n;

  if (!g_key_file_has_key (loader->file, section, "subscores", NULL))
    return TRUE;
  value = g_strstrip (
      g_key_file_get_value (loader->file, section, "subscores", NULL));
  if (*value == '\0' || strcmp (value, "none") == 0)
    {
      o->n_subscores = 0;
      return TRUE;
    }
  parts = g_strsplit (value, ",", -1);
  n = g_strv_length (parts);
  if (n > RANK_SUBSCORES_MAX)
    return fail_at (loader, section, "subscores", error,
                    "at most %d, got %u in '%s'", RANK_SUBSCORES_MAX, n, value);
  for (guint i = 0; i < n; i++)
    {
      const char *dir = g_strstrip (parts[i]);

      if (strcmp (dir, "asc") != 0 && strcmp (dir, "desc") != 0)
        return fail_at (loader, section, "subscores", error,
                        "each must be asc or desc, got '%s' in '%s'", dir,
                        value);
      o->subscore_asc[i] = strcmp (dir, "asc") == 0;
    }
  o->n_subscores = n;
  return TRUE;
}

static gboolean
load_board (const Loader *loader, const char *section, RankBoardOptions *o,
            GError **error)
{
  static const char *const orders[] = { "desc", "asc", NULL };
  static const int order_values[] = { RANK_ORDER_DESC, RANK_ORDER_ASC };
  static const char *const kinds[]
      = { "ordinal", "competition", "dense", NULL };
  static const int kind_values[]
      = { RANK_KIND_ORDINAL, RANK_KIND_COMPETITION, RANK_KIND_DENSE };
  static const char *const modes[] = { "increment", "best", "set", NULL };
  static const int mode_values[]
      = { RANK_MODE_INCREMENT, RANK_MODE_BEST, RANK_MODE_SET };
  static const char *const switches[] = { "off", "on", NULL };
  static const int switch_values[] = { FALSE, TRUE };
  int order = (int) o->order, kind = (int) o->rank, mode = (int) o->mode;
  static const char *const caches[] = { "off", "tracked", NULL };
  static const int cache_values[] = { FALSE, TRUE };
  static const char *const sources[] = { "primary", "replica", NULL };
  static const int source_values[] = { FALSE, TRUE };
  int queue = o->queue, tracked = o->read_cache_tracked;
  int replica = o->read_from_replica;
  gboolean ok
      = get_uint (loader, section, "shards", 1, RANK_SHARDS_MAX, &o->shards,
                  error)
        && get_uint (loader, section, "max_top_depth", 1,
                     RANK_MAX_TOP_DEPTH_LIMIT, &o->max_top_depth, error)
        && get_choice (loader, section, "order", orders, order_values, &order,
                       error)
        && get_choice (loader, section, "rank", kinds, kind_values, &kind,
                       error)
        && get_choice (loader, section, "mode", modes, mode_values, &mode,
                       error)
        && get_uint (loader, section, "dedup_window", 1,
                     RANK_DEDUP_WINDOW_MAX_S, &o->dedup_window_s, error)
        && get_uint (loader, section, "cap", 1, RANK_CAP_MAX, &o->cap, error)
        && get_choice (loader, section, "queue", switches, switch_values,
                       &queue, error)
        && get_uint (loader, section, "queue_claim_after", 1,
                     RANK_QUEUE_CLAIM_AFTER_MAX_S, &o->queue_claim_after_s,
                     error)
        && get_uint (loader, section, "queue_max_backlog", 1,
                     RANK_QUEUE_MAX_BACKLOG_LIMIT, &o->queue_max_backlog, error)
        && get_uint (loader, section, "queue_rate", 0, G_MAXUINT,
                     &o->queue_rate, error)
        && get_choice (loader, section, "read_cache", caches, cache_values,
                       &tracked, error)
        && get_uint (loader, section, "read_cache_ms", 0,
                     RANK_READ_CACHE_MS_MAX, &o->read_cache_ms, error)
        && get_choice (loader, section, "read_from", sources, source_values,
                       &replica, error)
        && get_uint (loader, section, "max_replica_lag_ms", 1,
                     RANK_REPLICA_LAG_MAX_MS, &o->max_replica_lag_ms, error)
        && get_uint (loader, section, "window", 2, RANK_WINDOW_MAX, &o->window,
                     error);

  o->queue = queue;
  o->read_cache_tracked = tracked;
  o->read_from_replica = replica;
  o->order = (RankOrder) order;
  o->rank = (RankKind) kind;
  o->mode = (RankMode) mode;
  ok = ok && load_period (loader, section, o, error)
       && load_subscores (loader, section, o, error);
  /* Competition and dense ranks count better scores; with subscores, equal
   * scores are not equal places, and no count gives their ranks. */
  if (ok && o->n_subscores > 0 && o->rank != RANK_KIND_ORDINAL)
    return fail_at (
        loader, section,
        g_key_file_has_key (loader->file, section, "subscores", NULL)
            ? "subscores"
            : NULL,
        error, "a board with subscores must have rank=ordinal");
  /* A capped sharded board hides members past the cap by their ordinal
   * position, which its other rank kinds do not give. */
  if (ok && o->cap > 0 && o->shards > 1 && o->rank != RANK_KIND_ORDINAL)
    return fail_at (
        loader, section,
        g_key_file_has_key (loader->file, section, "cap", NULL) ? "cap" : NULL,
        error, "a capped sharded board must have rank=ordinal");
  return ok && window_ok (loader, section, o, error);
}

static gboolean
load_nodes (const Loader *loader, RankConfig *config, GError **error)
{
  g_auto (GStrv) nodes = NULL;
  g_autoptr (GError) bad = NULL;
  gsize n = 0;

  if (!g_key_file_has_key (loader->file, "redis", "nodes", NULL))
    return TRUE;
  nodes = g_key_file_get_string_list (loader->file, "redis", "nodes", &n, &bad);
  if (nodes == NULL && bad != NULL)
    return fail_at (loader, "redis", "nodes", error, "%s", bad->message);
  if (nodes == NULL || n == 0)
    return fail_at (loader, "redis", "nodes", error,
                    "must list at least one HOST:PORT or unix:PATH, "
                    "separated by ';'");
  if (n > RANK_NODES_MAX)
    return fail_at (loader, "redis", "nodes", error,
                    "at most %d nodes, got %zu", RANK_NODES_MAX, n);
  for (gsize i = 0; i < n; i++)
    {
      g_autoptr (GError) wrong = NULL;
      RankAddress address;

      g_strstrip (nodes[i]);
      if (!rank_address_parse (nodes[i], 6379, &address, &wrong))
        return fail_at (loader, "redis", "nodes", error, "node %zu: %s", i + 1,
                        wrong->message);
      rank_address_clear (&address);
      g_ptr_array_insert (config->nodes, (gint) config->nodes->len - 1,
                          g_strdup (nodes[i]));
    }
  return TRUE;
}

/* replicas=PRIMARY=REPLICA[,REPLICA...];PRIMARY=... */
static gboolean
load_replicas (const Loader *loader, RankConfig *config, GError **error)
{
  g_auto (GStrv) entries = NULL;
  g_autoptr (GError) bad = NULL;
  gsize n = 0;

  if (!g_key_file_has_key (loader->file, "redis", "replicas", NULL))
    return TRUE;
  entries = g_key_file_get_string_list (loader->file, "redis", "replicas", &n,
                                        &bad);
  if (entries == NULL && bad != NULL)
    return fail_at (loader, "redis", "replicas", error, "%s", bad->message);
  for (gsize i = 0; i < n; i++)
    {
      char *eq = strchr (entries[i], '=');
      g_auto (GStrv) replicas = NULL;
      g_autofree char *primary = NULL;
      RankAddress address;
      g_autoptr (GError) wrong = NULL;

      if (eq == NULL)
        return fail_at (loader, "redis", "replicas", error,
                        "entry %zu: '%s' is not PRIMARY=REPLICA[,REPLICA...]",
                        i + 1, entries[i]);
      primary = g_strstrip (g_strndup (entries[i], (gsize) (eq - entries[i])));
      if (!rank_address_parse (primary, 6379, &address, &wrong))
        return fail_at (loader, "redis", "replicas", error,
                        "entry %zu: primary: %s", i + 1, wrong->message);
      rank_address_clear (&address);
      replicas = g_strsplit (eq + 1, ",", -1);
      if (replicas[0] == NULL || g_strv_length (replicas) > RANK_REPLICAS_MAX)
        return fail_at (loader, "redis", "replicas", error,
                        "entry %zu: 1-%d replicas of %s", i + 1,
                        RANK_REPLICAS_MAX, primary);
      for (guint r = 0; replicas[r] != NULL; r++)
        {
          g_strstrip (replicas[r]);
          if (!rank_address_parse (replicas[r], 6379, &address, &wrong))
            return fail_at (loader, "redis", "replicas", error,
                            "entry %zu: replica %u: %s", i + 1, r + 1,
                            wrong->message);
          rank_address_clear (&address);
        }
      if (g_hash_table_contains (config->replicas, primary))
        return fail_at (loader, "redis", "replicas", error, "%s is given twice",
                        primary);
      g_hash_table_insert (config->replicas, g_steal_pointer (&primary),
                           g_steal_pointer (&replicas));
    }
  return TRUE;
}

/* [redis] tls=true|false and its files (checked against each other, and
 * loaded, by whoever makes the links: the command line may add to them). */
static gboolean
load_redis_tls (const Loader *loader, RankConfig *config, GError **error)
{
  static const char *const names[] = { "false", "true", NULL };
  static const int values[] = { FALSE, TRUE };
  RankConfigRedisTls *tls = &config->redis_tls;
  int on = FALSE;

  if (!get_choice (loader, "redis", "tls", names, values, &on, error))
    return FALSE;
  tls->tls = on;
  return get_string (loader, "redis", "tls_ca", &tls->ca_file, error)
         && get_string (loader, "redis", "tls_cert", &tls->cert_file, error)
         && get_string (loader, "redis", "tls_key", &tls->key_file, error)
         && get_string (loader, "redis", "tls_server_name", &tls->server_name,
                        error);
}

/* A [grant NAME] section: NAME (an identity, or anonymous) gets each role
 * its keys name on the boards their ';'-separated patterns match. */
static gboolean
load_grant (const Loader *loader, const char *section, RankConfig *config,
            GError **error)
{
  const char *name = section + strlen (GRANT_SECTION_PREFIX);

  rank_grants_add (config->grants, name, RANK_ROLE_NONE, NULL);
  for (int r = 0; r < RANK_ROLES; r++)
    {
      const char *key = rank_role_name ((RankRole) r);
      g_autofree char *value = NULL;
      g_auto (GStrv) patterns = NULL;
      guint n = 0;

      if (!g_key_file_has_key (loader->file, section, key, NULL))
        continue;
      value = g_key_file_get_value (loader->file, section, key, NULL);
      if (*g_strstrip (value) == '\0')
        return fail_at (loader, section, key, error,
                        "name at least one board pattern ('*': every "
                        "board), or leave the key out");
      patterns = g_strsplit (value, ";", -1);
      for (guint i = 0; patterns[i] != NULL; i++)
        {
          g_autoptr (GError) bad = NULL;
          char *pattern = g_strstrip (patterns[i]);

          /* "a;b;" (GKeyFile's own lists end so) is a and b. */
          if (*pattern == '\0' && patterns[i + 1] == NULL && n > 0)
            continue;
          if (!rank_grants_pattern_ok (pattern, &bad))
            return fail_at (loader, section, key, error, "%s", bad->message);
          rank_grants_add (config->grants, name, (RankRole) r, pattern);
          n++;
        }
    }
  return TRUE;
}

static gboolean
load_grants (const Loader *loader, RankConfig *config, GError **error)
{
  g_auto (GStrv) sections = g_key_file_get_groups (loader->file, NULL);

  for (int i = 0; sections[i] != NULL; i++)
    if (g_str_has_prefix (sections[i], GRANT_SECTION_PREFIX)
        && !load_grant (loader, sections[i], config, error))
      return FALSE;
  return TRUE;
}

static gboolean
load_sections (const Loader *loader, RankConfig *config, GError **error)
{
  g_auto (GStrv) sections = g_key_file_get_groups (loader->file, NULL);

  /* [defaults] first: board sections start from it, wherever it is. */
  if (g_key_file_has_group (loader->file, "defaults")
      && !load_board (loader, "defaults", &config->defaults, error))
    return FALSE;
  for (int i = 0; sections[i] != NULL; i++)
    {
      const char *section = sections[i];
      const char *board = section + strlen (BOARD_SECTION_PREFIX);
      g_autoptr (GError) bad = NULL;
      RankBoardOptions *o;

      if (!g_str_has_prefix (section, BOARD_SECTION_PREFIX))
        continue;
      if (!rank_validate_board (board, &bad))
        return fail_at (loader, section, NULL, error, "%s", bad->message);
      o = g_new (RankBoardOptions, 1);
      *o = config->defaults;
      g_time_zone_ref (o->period.timezone);
      g_hash_table_insert (config->boards, g_strdup (board), o);
      if (!load_board (loader, section, o, error))
        return FALSE;
    }
  return load_grants (loader, config, error)
         && load_nodes (loader, config, error)
         && load_replicas (loader, config, error)
         && get_string (loader, "redis", "user", &config->redis_user, error)
         && get_string (loader, "redis", "password", &config->redis_password,
                        error)
         && load_redis_tls (loader, config, error);
}

static void
options_free (gpointer data)
{
  RankBoardOptions *o = data;

  g_time_zone_unref (o->period.timezone);
  g_free (o);
}

RankConfig *
rank_config_new (void)
{
  RankConfig *config = g_new0 (RankConfig, 1);

  g_atomic_ref_count_init (&config->ref);
  config->defaults.shards = 1;
  config->defaults.order = RANK_ORDER_DESC;
  config->defaults.rank = RANK_KIND_ORDINAL;
  config->defaults.mode = RANK_MODE_INCREMENT;
  config->defaults.dedup_window_s = 0;
  config->defaults.period.kind = RANK_PERIOD_NONE;
  config->defaults.period.timezone = g_time_zone_new_utc ();
  config->defaults.period.week_start = 1;
  config->defaults.retention = 1;
  config->defaults.max_top_depth = RANK_DEFAULT_MAX_TOP_DEPTH;
  config->defaults.queue_claim_after_s = RANK_QUEUE_CLAIM_AFTER_DEFAULT_S;
  config->defaults.max_replica_lag_ms = RANK_REPLICA_LAG_DEFAULT_MS;
  config->defaults.queue_max_backlog = RANK_QUEUE_MAX_BACKLOG_DEFAULT;
  config->boards
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, options_free);
  config->nodes = g_ptr_array_new_with_free_func (g_free);
  config->replicas = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                            (GDestroyNotify) g_strfreev);
  g_ptr_array_add (config->nodes, NULL);
  config->grants = rank_grants_new ();
  return config;
}

/* The file is UTF-8 text, every byte of which the scan and GKeyFile read:
 * a NUL would end the text early (what follows it silently ignored) and
 * other control characters (but tab, and CR before LF) have no place in
 * it. */
static gboolean
check_text (const char *path, const char *text, gsize length, GError **error)
{
  int line = 1;

  for (gsize i = 0; i < length; i++)
    {
      guchar c = (guchar) text[i];

      if (c == '\n')
        line++;
      else if ((c < 0x20 && c != '\t' && !(c == '\r' && text[i + 1] == '\n'))
               || c == 0x7f)
        {
          g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                       "%s:%d: %s (byte 0x%02x): the file must be text", path,
                       line, c == 0 ? "a NUL byte" : "a control character", c);
          return FALSE;
        }
    }
  if (!g_utf8_validate (text, (gssize) length, NULL))
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "%s: not valid UTF-8 text", path);
      return FALSE;
    }
  return TRUE;
}

RankConfig *
rank_config_load (const char *path, GError **error)
{
  g_autoptr (GError) io = NULL;
  g_autofree char *text = NULL;
  gsize length = 0;
  g_autoptr (GKeyFile) file = g_key_file_new ();
  RankConfig *config;
  Loader loader = { path, file, NULL };
  gboolean ok;

  if (!g_file_get_contents (path, &text, &length, &io))
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID, "%s", io->message);
      return NULL;
    }
  if (!check_text (path, text, length, error))
    return NULL;
  loader.lines = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  config = rank_config_new ();
  ok = scan (&loader, text, error);
  if (ok
      && !g_key_file_load_from_data (file, text, (gsize) -1, G_KEY_FILE_NONE,
                                     &io))
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID, "%s: %s", path,
                   io->message);
      ok = FALSE;
    }
  ok = ok && load_sections (&loader, config, error);
  g_hash_table_unref (loader.lines);
  if (!ok)
    {
      rank_config_unref (config);
      return NULL;
    }
  return config;
}

RankConfig *
rank_config_ref (RankConfig *config)
{
  g_atomic_ref_count_inc (&config->ref);
  return config;
}

void
rank_config_unref (RankConfig *config)
{
  if (config == NULL || !g_atomic_ref_count_dec (&config->ref))
    return;
  g_hash_table_unref (config->boards);
  g_time_zone_unref (config->defaults.period.timezone);
  g_ptr_array_unref (config->nodes);
  g_free (config->redis_user);
  g_hash_table_unref (config->replicas);
  rank_grants_free (config->grants);
  if (config->redis_password != NULL)
    explicit_bzero (config->redis_password, strlen (config->redis_password));
  g_free (config->redis_password);
  g_free (config->redis_tls.ca_file);
  g_free (config->redis_tls.cert_file);
  g_free (config->redis_tls.key_file);
  g_free (config->redis_tls.server_name);
  g_free (config);
}

const RankBoardOptions *
rank_config_board (const RankConfig *config, const char *board)
{
  const RankBoardOptions *o = g_hash_table_lookup (config->boards, board);

  return o != NULL ? o : &config->defaults;
}

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

char **
rank_config_board_names (const RankConfig *config)
{
  guint n = 0;
  char **names = (char **) g_hash_table_get_keys_as_array (config->boards, &n);

  for (guint i = 0; i < n; i++)
    names[i] = g_strdup (names[i]);
  qsort (names, n, sizeof *names, compare_names);
  return names;
}

const char *const *
rank_config_redis_nodes (const RankConfig *config)
{
  return (const char *const *) config->nodes->pdata;
}

const char *const *
rank_config_redis_replicas (const RankConfig *config, const char *primary)
{
  GHashTableIter it;
  gpointer name, replicas;
  g_autofree char *want = NULL;
  RankAddress address;

  if (!rank_address_parse (primary, 6379, &address, NULL))
    return NULL;
  want = rank_address_to_string (&address);
  rank_address_clear (&address);
  g_hash_table_iter_init (&it, config->replicas);
  while (g_hash_table_iter_next (&it, &name, &replicas))
    {
      g_autofree char *have = NULL;

      if (!rank_address_parse (name, 6379, &address, NULL))
        continue;
      have = rank_address_to_string (&address);
      rank_address_clear (&address);
      if (strcmp (have, want) == 0)
        return (const char *const *) replicas;
    }
  return NULL;
}

guint
rank_config_redis_replica_sets (const RankConfig *config)
{
  return g_hash_table_size (config->replicas);
}

const char *
rank_config_redis_user (const RankConfig *config)
{
  return config->redis_user;
}

const char *
rank_config_redis_password (const RankConfig *config)
{
  return config->redis_password;
}

const RankConfigRedisTls *
rank_config_redis_tls (const RankConfig *config)
{
  return &config->redis_tls;
}

const RankGrants *
rank_config_grants (const RankConfig *config)
{
  return config->grants;
}

gboolean
rank_config_add_grant_option (RankConfig *config, const char *option,
                              GError **error)
{
  return rank_grants_add_option (config->grants, option, error);
}
