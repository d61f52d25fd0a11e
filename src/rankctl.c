/* rankctl.c -- rankd from the shell: every Ranking method as a command,
 * an aligned table or JSON out, and exit codes a script can test.
 *
 *   rankctl [--connect HOST:PORT] [--json] COMMAND ARGS...
 *
 * Exit codes: 0 done; 1 not found; 2 invalid (usage, or InvalidArgument);
 * 3 unavailable (Unavailable, or rankd out of reach); 4 anything else.
 */
#include <locale.h>
#include <stdio.h>
#include <string.h>

#include <thrift/c_glib/thrift_application_exception.h>

#include "address.h"
#include "client.h"
#include "constants.h"
#include "thrift_fixes.h"

enum
{
  EXIT_OK = 0,
  EXIT_NOT_FOUND = 1,
  EXIT_INVALID = 2,
  EXIT_UNAVAILABLE = 3,
  EXIT_OTHER = 4,
};

static const char usage_text[]
    = "Usage: rankctl [OPTION...] COMMAND ARGS...\n"
      "\n"
      "Calls rankd's Ranking service (idl/ranking.thrift) and prints the "
      "answer.\n"
      "\n"
      "Commands:\n"
      "  update BOARD MEMBER VALUE [--mode increment|best|set]\n"
      "         [--request-id ID] [--timestamp-ms MS] [--subscore N]...\n"
      "         [--data KEY=VALUE]...\n"
      "  rank BOARD MEMBER\n"
      "  top BOARD [N] [--offset K] [--with-data]          (N default 10)\n"
      "  around BOARD MEMBER [RADIUS] [--with-data]        (RADIUS default "
      "5)\n"
      "  ranks BOARD MEMBER...\n"
      "  remove BOARD MEMBER [--request-id ID]\n"
      "  count BOARD\n"
      "  count-between BOARD MIN MAX\n"
      "  percentile BOARD MEMBER\n"
      "  score-at-percentile BOARD PCT\n"
      "  sample BOARD MIN MAX [COUNT]                      (COUNT default "
      "10)\n"
      "  set-data BOARD MEMBER [KEY=VALUE]...              (none: delete)\n"
      "  get-data BOARD MEMBER\n"
      "Reads take --periods-back N (periodic boards). Without --request-id, "
      "update and\nremove make a random one and print it: reuse it to retry.\n"
      "\n"
      "Options:\n"
      "  --connect HOST:PORT     rankd's address (default $RANKCTL_CONNECT, "
      "else 127.0.0.1:9090)\n"
      "  --transport framed|buffered, --protocol binary|compact   as rankd's\n"
      "  --timeout SECONDS       wait this long for rankd (default 10)\n"
      "  --json                  print JSON instead of a table\n"
      "  --help                  this text\n"
      "\n"
      "Exit codes: 0 done, 1 not found, 2 invalid (usage or InvalidArgument),\n"
      "3 unavailable (Unavailable, or rankd out of reach), 4 other errors.\n"
      "\n"
      "Examples:\n"
      "  rankctl update run_hero alice 120 --mode best\n"
      "  rankctl top run_hero 5\n"
      "  rankctl --json rank run_hero alice\n"
      "  rankctl update raid team7 12 --subscore 4 --subscore 93000 --data "
      "name=Seven\n"
      "  rankctl around run_hero alice 2 --with-data\n"
      "  rankctl top daily_run_hero 10 --periods-back 1\n";

/* The command line, split: positional arguments and --options. */
typedef struct
{
  GPtrArray *args;    /* char *, not owned */
  GHashTable *values; /* option name -> last value (not owned) */
  GPtrArray *subscores;
  GPtrArray *data;
  gboolean json;
  gboolean with_data;
} Command;

static int fail (int code, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

static int
fail (int code, const char *fmt, ...)
{
  va_list ap;

  fputs ("rankctl: ", stderr);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
  return code;
}

static gboolean
parse_int (const char *what, const char *text, gint64 min, gint64 max,
           gint64 *out)
{
  g_autoptr (GError) error = NULL;
  gint64 v;

  if (!g_ascii_string_to_signed (text, 10, min, max, &v, &error))
    {
      fail (EXIT_INVALID, "%s: %s", what, error->message);
      return FALSE;
    }
  *out = v;
  return TRUE;
}

/* ---- output ---- */

static void
json_string (GString *out, const char *s, gssize len)
{
  const char *end = s + (len < 0 ? (gssize) strlen (s) : len);

  g_string_append_c (out, '"');
  for (const char *p = s; p < end; p++)
    {
      guchar c = (guchar) *p;

      if (c == '"' || c == '\\')
        g_string_append_printf (out, "\\%c", c);
      else if (c < 0x20)
        g_string_append_printf (out, "\\u%04x", c);
      else
        g_string_append_c (out, (char) c);
    }
  g_string_append_c (out, '"');
}

static char *
subscores_text (const GArray *subs)
{
  GString *out = g_string_new (NULL);

  for (guint i = 0; i < subs->len; i++)
    g_string_append_printf (out, "%s%" G_GINT64_FORMAT, i ? "," : "",
                            g_array_index (subs, gint64, i));
  return g_string_free (out, FALSE);
}

static gint
by_key (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* key=value pairs in key order, or a JSON object. */
static void
data_text (GString *out, GHashTable *data, gboolean json)
{
  guint n = data != NULL ? g_hash_table_size (data) : 0;
  g_autofree gpointer *keys
      = n > 0 ? g_hash_table_get_keys_as_array (data, NULL) : NULL;

  if (n > 1)
    qsort (keys, n, sizeof *keys, by_key);
  if (json)
    g_string_append_c (out, '{');
  for (guint i = 0; i < n; i++)
    {
      const char *v = g_hash_table_lookup (data, keys[i]);

      if (json)
        {
          g_string_append (out, i ? "," : "");
          json_string (out, keys[i], -1);
          g_string_append_c (out, ':');
          json_string (out, v, -1);
        }
      else
        g_string_append_printf (out, "%s%s=%s", i ? " " : "",
                                (const char *) keys[i], v);
    }
  if (json)
    g_string_append_c (out, '}');
}

/* Prints rows (each a GPtrArray of cells) under header, columns padded to
 * their widest cell (in characters); numbers right-aligned. */
static void
print_table (const char *const *header, const gboolean *numeric, guint cols,
             GPtrArray *rows)
{
  glong width[8] = { 0 };

  g_assert (cols <= G_N_ELEMENTS (width));
  for (guint c = 0; c < cols; c++)
    width[c] = g_utf8_strlen (header[c], -1);
  for (guint r = 0; r < rows->len; r++)
    for (guint c = 0; c < cols; c++)
      width[c]
          = MAX (width[c],
                 g_utf8_strlen (
                     g_ptr_array_index ((GPtrArray *) rows->pdata[r], c), -1));
  for (guint r = 0; r <= rows->len; r++)
    {
      GString *line = g_string_new (NULL);

      for (guint c = 0; c < cols; c++)
        {
          const char *cell
              = r == 0
                    ? header[c]
                    : g_ptr_array_index ((GPtrArray *) rows->pdata[r - 1], c);
          glong pad = width[c] - g_utf8_strlen (cell, -1);

          if (c > 0)
            g_string_append (line, "  ");
          if (numeric[c])
            for (glong i = 0; i < pad; i++)
              g_string_append_c (line, ' ');
          g_string_append (line, cell);
          if (!numeric[c] && c + 1 < cols)
            for (glong i = 0; i < pad; i++)
              g_string_append_c (line, ' ');
        }
      g_strchomp (line->str);
      puts (line->str);
      g_string_free (line, TRUE);
    }
}

/* Entries as a table (RANK MEMBER SCORE [SUBSCORES] [DATA]) or JSON. */
static void
print_entries (GPtrArray *entries, gboolean json)
{
  gboolean subs = FALSE, data = FALSE;

  for (guint i = 0; i < entries->len; i++)
    {
      rankEntry *e = entries->pdata[i];

      subs = subs || e->__isset_subscores;
      data = data || e->__isset_data;
    }
  if (json)
    {
      GString *out = g_string_new ("[");

      for (guint i = 0; i < entries->len; i++)
        {
          rankEntry *e = entries->pdata[i];

          g_string_append_printf (
              out, "%s{\"rank\":%" G_GINT64_FORMAT ",\"member\":", i ? "," : "",
              e->rank);
          json_string (out, e->member, -1);
          g_string_append_printf (out, ",\"score\":%" G_GINT64_FORMAT,
                                  e->score);
          if (e->__isset_subscores)
            {
              g_autofree char *t = subscores_text (e->subscores);

              g_string_append_printf (out, ",\"subscores\":[%s]", t);
            }
          if (e->__isset_data)
            {
              g_string_append (out, ",\"data\":");
              data_text (out, e->data, TRUE);
            }
          g_string_append_c (out, '}');
        }
      g_string_append_c (out, ']');
      puts (out->str);
      g_string_free (out, TRUE);
      return;
    }
  {
    const char *header[] = { "RANK", "MEMBER", "SCORE", "SUBSCORES", "DATA" };
    const char *header_data[] = { "RANK", "MEMBER", "SCORE", "DATA" };
    gboolean numeric[] = { TRUE, FALSE, TRUE, FALSE, FALSE };
    GPtrArray *rows
        = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);

    for (guint i = 0; i < entries->len; i++)
      {
        rankEntry *e = entries->pdata[i];
        GPtrArray *row = g_ptr_array_new_with_free_func (g_free);

        g_ptr_array_add (row, g_strdup_printf ("%" G_GINT64_FORMAT, e->rank));
        g_ptr_array_add (row, g_strdup (e->member));
        g_ptr_array_add (row, g_strdup_printf ("%" G_GINT64_FORMAT, e->score));
        if (subs)
          g_ptr_array_add (row, subscores_text (e->subscores));
        if (data)
          {
            GString *d = g_string_new (NULL);

            data_text (d, e->__isset_data ? e->data : NULL, FALSE);
            g_ptr_array_add (row, g_string_free (d, FALSE));
          }
        g_ptr_array_add (rows, row);
      }
    print_table (subs ? header : header_data, numeric,
                 3 + (subs ? 1 : 0) + (data ? 1 : 0), rows);
    g_ptr_array_unref (rows);
  }
}

/* One value: a number as it is, or "key: value" lines. */
static void
print_value (const char *name, const char *value, gboolean json,
             gboolean quoted)
{
  if (!json)
    {
      printf ("%s\n", value);
      return;
    }
  {
    GString *out = g_string_new ("{");

    json_string (out, name, -1);
    g_string_append_c (out, ':');
    if (quoted)
      json_string (out, value, -1);
    else
      g_string_append (out, value);
    g_string_append_c (out, '}');
    puts (out->str);
    g_string_free (out, TRUE);
  }
}

/* ---- calls ---- */

/* The outcome of a call: an exit code, with the message printed. */
static int
outcome (gboolean ok, GObject *invalid, GObject *not_found,
         GObject *unavailable, GError *error)
{
  GObject *x = invalid ? invalid : not_found ? not_found : unavailable;
  int code = invalid     ? EXIT_INVALID
             : not_found ? EXIT_NOT_FOUND
                         : EXIT_UNAVAILABLE;

  if (ok)
    return EXIT_OK;
  if (x != NULL)
    {
      g_autofree char *message = NULL;

      g_object_get (x, "message", &message, NULL);
      fail (code, "%s", message);
    }
  else if (error != NULL && error->domain == THRIFT_APPLICATION_EXCEPTION_ERROR)
    code = fail (EXIT_OTHER, "rankd: %s", error->message);
  else
    code = fail (EXIT_UNAVAILABLE, "no answer from rankd: %s",
                 error ? error->message : "?");
  g_clear_object (&invalid);
  g_clear_object (&not_found);
  g_clear_object (&unavailable);
  g_clear_error (&error);
  return code;
}

#define EXCEPTIONS                                                             \
  rankInvalidArgument *invalid = NULL;                                         \
  rankNotFound *not_found = NULL;                                              \
  rankUnavailable *unavailable = NULL;                                         \
  GError *error = NULL;                                                        \
  gboolean ok
#define OUTCOME()                                                              \
  outcome (ok, G_OBJECT (invalid), G_OBJECT (not_found),                       \
           G_OBJECT (unavailable), error)

static gboolean
need_args (const Command *c, guint min, guint max, const char *synopsis)
{
  if (c->args->len < min || c->args->len > max)
    {
      fail (EXIT_INVALID, "usage: rankctl %s", synopsis);
      return FALSE;
    }
  return TRUE;
}

static const char *
arg (const Command *c, guint i)
{
  return c->args->len > i ? c->args->pdata[i] : NULL;
}

static const char *
option (const Command *c, const char *name)
{
  return g_hash_table_lookup (c->values, name);
}

static gboolean
periods_back (const Command *c, gint32 *out)
{
  gint64 v = 0;

  if (option (c, "periods-back") != NULL
      && !parse_int ("--periods-back", option (c, "periods-back"), 0,
                     G_MAXINT32, &v))
    return FALSE;
  *out = (gint32) v;
  return TRUE;
}

/* KEY=VALUE arguments into a map; FALSE (printed) on one without '='. */
static gboolean
data_map (GPtrArray *pairs, guint from, GHashTable *map)
{
  for (guint i = from; i < pairs->len; i++)
    {
      const char *kv = pairs->pdata[i], *eq = strchr (kv, '=');

      if (eq == NULL)
        {
          fail (EXIT_INVALID, "'%s': data must be KEY=VALUE", kv);
          return FALSE;
        }
      g_hash_table_insert (map, g_strndup (kv, (gsize) (eq - kv)),
                           g_strdup (eq + 1));
    }
  return TRUE;
}

static char *
request_id (const Command *c)
{
  const char *given = option (c, "request-id");
  char *id = given != NULL ? g_strdup (given) : g_uuid_string_random ();

  if (given == NULL)
    fprintf (stderr, "request id: %s\n", id);
  return id;
}

static int
cmd_update (RankClient *client, Command *c)
{
  rankUpdateRequest *req;
  rankUpdateResponse *resp = g_object_new (RANK_TYPE_UPDATE_RESPONSE, NULL);
  g_autofree char *rid = NULL;
  gint64 value, v;
  int code;
  EXCEPTIONS;

  if (!need_args (c, 3, 3, "update BOARD MEMBER VALUE [--mode M] ...")
      || !parse_int ("VALUE", arg (c, 2), G_MININT64, G_MAXINT64, &value))
    return EXIT_INVALID;
  rid = request_id (c);
  req = g_object_new (RANK_TYPE_UPDATE_REQUEST, "board", arg (c, 0), "member",
                      arg (c, 1), "request_id", rid, NULL);
  req->value = value;
  if (option (c, "mode") != NULL)
    {
      const char *m = option (c, "mode");

      req->__isset_mode = TRUE;
      if (g_ascii_strcasecmp (m, "increment") == 0)
        req->mode = RANK_UPDATE_MODE_INCREMENT;
      else if (g_ascii_strcasecmp (m, "best") == 0)
        req->mode = RANK_UPDATE_MODE_BEST;
      else if (g_ascii_strcasecmp (m, "set") == 0)
        req->mode = RANK_UPDATE_MODE_SET;
      else
        {
          g_object_unref (req);
          g_object_unref (resp);
          return fail (EXIT_INVALID,
                       "--mode: '%s' is not increment, best or set", m);
        }
    }
  if (option (c, "timestamp-ms") != NULL)
    {
      if (!parse_int ("--timestamp-ms", option (c, "timestamp-ms"), G_MININT64,
                      G_MAXINT64, &v))
        {
          g_object_unref (req);
          g_object_unref (resp);
          return EXIT_INVALID;
        }
      req->timestamp_ms = v;
      req->__isset_timestamp_ms = TRUE;
    }
  for (guint i = 0; i < c->subscores->len; i++)
    {
      if (!parse_int ("--subscore", c->subscores->pdata[i], G_MININT64,
                      G_MAXINT64, &v))
        {
          g_object_unref (req);
          g_object_unref (resp);
          return EXIT_INVALID;
        }
      g_array_append_val (req->subscores, v);
      req->__isset_subscores = TRUE;
    }
  if (c->data->len > 0)
    {
      if (!data_map (c->data, 0, req->data))
        {
          g_object_unref (req);
          g_object_unref (resp);
          return EXIT_INVALID;
        }
      req->__isset_data = TRUE;
    }
  not_found = NULL;
  ok = rank_ranking_if_update (rank_client_iface (client), &resp, req, &invalid,
                               &unavailable, &error);
  code = OUTCOME ();
  if (code == EXIT_OK)
    {
      GString *out = g_string_new (NULL);
      g_autofree char *subs = subscores_text (resp->subscores);

      if (c->json)
        {
          g_string_append_printf (out, "{\"score\":%" G_GINT64_FORMAT,
                                  resp->score);
          if (resp->__isset_rank)
            g_string_append_printf (out, ",\"rank\":%" G_GINT64_FORMAT,
                                    resp->rank);
          g_string_append_printf (out, ",\"applied\":%s",
                                  resp->applied ? "true" : "false");
          if (resp->__isset_subscores)
            g_string_append_printf (out, ",\"subscores\":[%s]", subs);
          g_string_append (out, ",\"request_id\":");
          json_string (out, rid, -1);
          g_string_append_c (out, '}');
        }
      else
        {
          g_string_append_printf (out, "score      %" G_GINT64_FORMAT "\n",
                                  resp->score);
          if (resp->__isset_rank)
            g_string_append_printf (out, "rank       %" G_GINT64_FORMAT "\n",
                                    resp->rank);
          if (resp->__isset_subscores)
            g_string_append_printf (out, "subscores  %s\n", subs);
          g_string_append_printf (
              out, "applied    %s",
              resp->applied ? "yes" : "no (a retry: already applied)");
        }
      puts (out->str);
      g_string_free (out, TRUE);
    }
  g_object_unref (req);
  g_object_unref (resp);
  return code;
}

static int
cmd_rank (RankClient *client, Command *c)
{
  rankEntry *entry = g_object_new (RANK_TYPE_ENTRY, NULL);
  gint32 back;
  int code;
  EXCEPTIONS;

  if (!need_args (c, 2, 2, "rank BOARD MEMBER") || !periods_back (c, &back))
    {
      g_object_unref (entry);
      return EXIT_INVALID;
    }
  ok = rank_ranking_if_get_rank (rank_client_iface (client), &entry, arg (c, 0),
                                 arg (c, 1), back, &invalid, &not_found,
                                 &unavailable, &error);
  code = OUTCOME ();
  if (code == EXIT_OK)
    {
      GPtrArray *one = g_ptr_array_new ();

      g_ptr_array_add (one, entry);
      print_entries (one, c->json);
      g_ptr_array_unref (one);
    }
  g_object_unref (entry);
  return code;
}

/* top, around and sample: a page of entries. */
static int
cmd_page (RankClient *client, Command *c, const char *name)
{
  GPtrArray *page = g_ptr_array_new_with_free_func (g_object_unref);
  gint64 n = 10, offset = 0, lo = 0, hi = 0;
  gint32 back;
  int code = EXIT_INVALID;
  EXCEPTIONS;

  ok = FALSE;
  if (!periods_back (c, &back))
    goto out;
  if (strcmp (name, "top") == 0)
    {
      if (!need_args (c, 1, 2, "top BOARD [N] [--offset K] [--with-data]")
          || (arg (c, 1) && !parse_int ("N", arg (c, 1), 1, G_MAXINT32, &n))
          || (option (c, "offset")
              && !parse_int ("--offset", option (c, "offset"), 0, G_MAXINT32,
                             &offset)))
        goto out;
      ok = rank_ranking_if_get_top_n (
          rank_client_iface (client), &page, arg (c, 0), (gint32) n,
          (gint32) offset, back, c->with_data, &invalid, &unavailable, &error);
    }
  else if (strcmp (name, "around") == 0)
    {
      n = 5;
      if (!need_args (c, 2, 3, "around BOARD MEMBER [RADIUS] [--with-data]")
          || (arg (c, 2)
              && !parse_int ("RADIUS", arg (c, 2), 0, G_MAXINT32, &n)))
        goto out;
      ok = rank_ranking_if_get_around (
          rank_client_iface (client), &page, arg (c, 0), arg (c, 1), (gint32) n,
          back, c->with_data, &invalid, &not_found, &unavailable, &error);
    }
  else
    {
      if (!need_args (c, 3, 4, "sample BOARD MIN MAX [COUNT]")
          || !parse_int ("MIN", arg (c, 1), G_MININT64, G_MAXINT64, &lo)
          || !parse_int ("MAX", arg (c, 2), G_MININT64, G_MAXINT64, &hi)
          || (arg (c, 3)
              && !parse_int ("COUNT", arg (c, 3), 1, G_MAXINT32, &n)))
        goto out;
      ok = rank_ranking_if_sample (rank_client_iface (client), &page,
                                   arg (c, 0), lo, hi, (gint32) n, back,
                                   &invalid, &unavailable, &error);
    }
  code = OUTCOME ();
  if (code == EXIT_OK)
    print_entries (page, c->json);
out:
  g_ptr_array_unref (page);
  return code;
}

static int
cmd_ranks (RankClient *client, Command *c)
{
  GPtrArray *members = g_ptr_array_new ();
  GPtrArray *result = g_ptr_array_new_with_free_func (g_object_unref);
  gint32 back;
  int code = EXIT_INVALID;
  EXCEPTIONS;

  not_found = NULL;
  if (!need_args (c, 2, G_MAXUINT, "ranks BOARD MEMBER...")
      || !periods_back (c, &back))
    goto out;
  for (guint i = 1; i < c->args->len; i++)
    g_ptr_array_add (members, c->args->pdata[i]);
  ok = rank_ranking_if_get_ranks (rank_client_iface (client), &result,
                                  arg (c, 0), members, back, &invalid,
                                  &unavailable, &error);
  code = OUTCOME ();
  if (code == EXIT_OK && c->json)
    {
      GString *out = g_string_new ("[");

      for (guint i = 0; i < result->len; i++)
        {
          rankRankOf *r = result->pdata[i];

          g_string_append (out, i ? ",{\"member\":" : "{\"member\":");
          json_string (out, r->member, -1);
          if (r->found)
            g_string_append_printf (out,
                                    ",\"found\":true,\"rank\":%" G_GINT64_FORMAT
                                    ",\"score\":%" G_GINT64_FORMAT "}",
                                    r->rank, r->score);
          else
            g_string_append (out, ",\"found\":false}");
        }
      g_string_append_c (out, ']');
      puts (out->str);
      g_string_free (out, TRUE);
    }
  else if (code == EXIT_OK)
    {
      const char *header[] = { "RANK", "MEMBER", "SCORE" };
      gboolean numeric[] = { TRUE, FALSE, TRUE };
      GPtrArray *rows
          = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);

      for (guint i = 0; i < result->len; i++)
        {
          rankRankOf *r = result->pdata[i];
          GPtrArray *row = g_ptr_array_new_with_free_func (g_free);

          g_ptr_array_add (
              row, r->found ? g_strdup_printf ("%" G_GINT64_FORMAT, r->rank)
                            : g_strdup ("-"));
          g_ptr_array_add (row, g_strdup (r->member));
          g_ptr_array_add (
              row, r->found ? g_strdup_printf ("%" G_GINT64_FORMAT, r->score)
                            : g_strdup ("(not on the board)"));
          g_ptr_array_add (rows, row);
        }
      print_table (header, numeric, 3, rows);
      g_ptr_array_unref (rows);
    }
out:
  g_ptr_array_unref (members);
  g_ptr_array_unref (result);
  return code;
}

static int
cmd_remove (RankClient *client, Command *c)
{
  rankRemoveResponse *resp = g_object_new (RANK_TYPE_REMOVE_RESPONSE, NULL);
  g_autofree char *rid = NULL;
  int code;
  EXCEPTIONS;

  not_found = NULL;
  if (!need_args (c, 2, 2, "remove BOARD MEMBER [--request-id ID]"))
    {
      g_object_unref (resp);
      return EXIT_INVALID;
    }
  rid = request_id (c);
  ok = rank_ranking_if_remove (rank_client_iface (client), &resp, arg (c, 0),
                               arg (c, 1), rid, &invalid, &unavailable, &error);
  code = OUTCOME ();
  if (code == EXIT_OK && c->json)
    printf ("{\"applied\":%s,\"removed\":%s}\n",
            resp->applied ? "true" : "false", resp->removed ? "true" : "false");
  else if (code == EXIT_OK)
    puts (!resp->applied  ? "not applied (a retry: already done)"
          : resp->removed ? "removed"
                          : "was not on the board");
  g_object_unref (resp);
  return code;
}

/* count, count-between, percentile, score-at-percentile: one number. */
static int
cmd_number (RankClient *client, Command *c, const char *name)
{
  gint64 count = 0, lo = 0, hi = 0;
  double pct = 0;
  g_autofree char *text = NULL;
  gint32 back;
  int code;
  EXCEPTIONS;

  ok = FALSE;
  if (!periods_back (c, &back))
    return EXIT_INVALID;
  if (strcmp (name, "count") == 0)
    {
      if (!need_args (c, 1, 1, "count BOARD"))
        return EXIT_INVALID;
      ok = rank_ranking_if_count (rank_client_iface (client), &count,
                                  arg (c, 0), back, &invalid, &unavailable,
                                  &error);
    }
  else if (strcmp (name, "count-between") == 0)
    {
      if (!need_args (c, 3, 3, "count-between BOARD MIN MAX")
          || !parse_int ("MIN", arg (c, 1), G_MININT64, G_MAXINT64, &lo)
          || !parse_int ("MAX", arg (c, 2), G_MININT64, G_MAXINT64, &hi))
        return EXIT_INVALID;
      ok = rank_ranking_if_count_between (rank_client_iface (client), &count,
                                          arg (c, 0), lo, hi, back, &invalid,
                                          &unavailable, &error);
    }
  else if (strcmp (name, "percentile") == 0)
    {
      if (!need_args (c, 2, 2, "percentile BOARD MEMBER"))
        return EXIT_INVALID;
      ok = rank_ranking_if_get_percentile (
          rank_client_iface (client), &pct, arg (c, 0), arg (c, 1), back,
          &invalid, &not_found, &unavailable, &error);
    }
  else
    {
      char *end = NULL;

      if (!need_args (c, 2, 2, "score-at-percentile BOARD PCT"))
        return EXIT_INVALID;
      pct = g_ascii_strtod (arg (c, 1), &end);
      if (end == arg (c, 1) || *end != '\0')
        return fail (EXIT_INVALID, "PCT: '%s' is not a number", arg (c, 1));
      ok = rank_ranking_if_get_score_at_percentile (
          rank_client_iface (client), &count, arg (c, 0), pct, back, &invalid,
          &not_found, &unavailable, &error);
    }
  code = OUTCOME ();
  if (code != EXIT_OK)
    return code;
  if (strcmp (name, "percentile") == 0)
    {
      char buf[G_ASCII_DTOSTR_BUF_SIZE];

      text = g_strdup (g_ascii_dtostr (buf, sizeof buf, pct));
    }
  else
    text = g_strdup_printf ("%" G_GINT64_FORMAT, count);
  print_value (strcmp (name, "percentile") == 0            ? "percentile"
               : strcmp (name, "score-at-percentile") == 0 ? "score"
                                                           : "count",
               text, c->json, FALSE);
  return EXIT_OK;
}

static int
cmd_data (RankClient *client, Command *c, gboolean set)
{
  GHashTable *map
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  gint32 back;
  int code = EXIT_INVALID;
  EXCEPTIONS;

  ok = FALSE;
  if (set)
    {
      not_found = NULL;
      if (!need_args (c, 2, G_MAXUINT, "set-data BOARD MEMBER [KEY=VALUE]...")
          || !data_map (c->args, 2, map))
        goto out;
      ok = rank_ranking_if_set_member_data (
          rank_client_iface (client), arg (c, 0), arg (c, 1), map, &invalid,
          &not_found, &unavailable, &error);
      code = OUTCOME ();
      if (code == EXIT_OK)
        print_value ("set", "true", c->json, FALSE);
      goto out;
    }
  if (!need_args (c, 2, 2, "get-data BOARD MEMBER") || !periods_back (c, &back))
    goto out;
  ok = rank_ranking_if_get_member_data (rank_client_iface (client), &map,
                                        arg (c, 0), arg (c, 1), back, &invalid,
                                        &not_found, &unavailable, &error);
  code = OUTCOME ();
  if (code == EXIT_OK)
    {
      GString *out = g_string_new (NULL);

      data_text (out, map, c->json);
      if (!c->json)
        g_strdelimit (out->str, " ", '\n');
      if (out->len > 0)
        puts (out->str);
      g_string_free (out, TRUE);
    }
out:
  g_hash_table_unref (map);
  return code;
}

/* ---- main ---- */

/* Splits argv into c; options may come anywhere. FALSE (printed) on an
 * unknown option or a missing value. */
static gboolean
split_args (int argc, char **argv, Command *c, gboolean *help)
{
  static const char *const valued[]
      = { "connect",    "transport",    "protocol", "timeout",     "mode",
          "request-id", "timestamp-ms", "offset",   "periods-back" };

  for (int i = 1; i < argc; i++)
    {
      const char *a = argv[i];
      const char *name = a + 2;
      gboolean known = FALSE;

      if (!g_str_has_prefix (a, "--") || strcmp (a, "--") == 0)
        {
          if (strcmp (a, "--") == 0)
            for (i++; i < argc; i++)
              g_ptr_array_add (c->args, argv[i]);
          else
            g_ptr_array_add (c->args, (char *) a);
          continue;
        }
      if (strcmp (name, "help") == 0)
        *help = TRUE, known = TRUE;
      else if (strcmp (name, "json") == 0)
        c->json = TRUE, known = TRUE;
      else if (strcmp (name, "with-data") == 0)
        c->with_data = TRUE, known = TRUE;
      else if (strcmp (name, "subscore") == 0 || strcmp (name, "data") == 0)
        {
          if (i + 1 >= argc)
            return fail (EXIT_INVALID, "%s needs a value", a), FALSE;
          g_ptr_array_add (strcmp (name, "data") == 0 ? c->data : c->subscores,
                           argv[++i]);
          continue;
        }
      for (gsize k = 0; !known && k < G_N_ELEMENTS (valued); k++)
        if (strcmp (name, valued[k]) == 0)
          {
            if (i + 1 >= argc)
              return fail (EXIT_INVALID, "%s needs a value", a), FALSE;
            g_hash_table_insert (c->values, (char *) name, argv[++i]);
            known = TRUE;
          }
      if (!known)
        return fail (EXIT_INVALID, "unknown option %s (see --help)", a), FALSE;
    }
  return TRUE;
}

static int
run (Command *c)
{
  const char *connect = option (c, "connect");
  const char *transport = option (c, "transport");
  const char *protocol = option (c, "protocol");
  g_autoptr (GError) error = NULL;
  g_autoptr (RankClient) client = NULL;
  RankProtocolKind kind = RANK_PROTOCOL_BINARY;
  RankAddress address = { 0 };
  const char *name;
  gint64 timeout_s = 10;
  int code;

  if (c->args->len == 0)
    return fail (EXIT_INVALID, "no command (see --help)");
  name = c->args->pdata[0];
  g_ptr_array_remove_index (c->args, 0);
  if (connect == NULL)
    connect = g_getenv ("RANKCTL_CONNECT");
  if (!rank_address_parse (connect ? connect : RANK_DEFAULT_LISTEN,
                           RANK_DEFAULT_PORT, &address, &error)
      || address.host == NULL)
    return fail (EXIT_INVALID, "--connect: %s",
                 error ? error->message : "must be HOST:PORT");
  if (transport != NULL && strcmp (transport, "framed") != 0
      && strcmp (transport, "buffered") != 0)
    code = fail (EXIT_INVALID, "--transport: '%s' is not framed or buffered",
                 transport);
  else if (protocol != NULL && !rank_protocol_kind_parse (protocol, &kind))
    code = fail (EXIT_INVALID, "--protocol: '%s' is not binary or compact",
                 protocol);
  else if (option (c, "timeout") != NULL
           && !parse_int ("--timeout", option (c, "timeout"), 1, 3600,
                          &timeout_s))
    code = EXIT_INVALID;
  else if ((client = rank_client_connect (
                address.host, address.port,
                transport == NULL || strcmp (transport, "framed") == 0, kind,
                (int) timeout_s * 1000, &error))
           == NULL)
    code = fail (EXIT_UNAVAILABLE, "cannot reach rankd at %s:%u: %s",
                 address.host, address.port, error->message);
  else if (strcmp (name, "update") == 0)
    code = cmd_update (client, c);
  else if (strcmp (name, "rank") == 0)
    code = cmd_rank (client, c);
  else if (strcmp (name, "top") == 0 || strcmp (name, "around") == 0
           || strcmp (name, "sample") == 0)
    code = cmd_page (client, c, name);
  else if (strcmp (name, "ranks") == 0)
    code = cmd_ranks (client, c);
  else if (strcmp (name, "remove") == 0)
    code = cmd_remove (client, c);
  else if (strcmp (name, "count") == 0 || strcmp (name, "count-between") == 0
           || strcmp (name, "percentile") == 0
           || strcmp (name, "score-at-percentile") == 0)
    code = cmd_number (client, c, name);
  else if (strcmp (name, "set-data") == 0 || strcmp (name, "get-data") == 0)
    code = cmd_data (client, c, strcmp (name, "set-data") == 0);
  else
    code = fail (EXIT_INVALID, "unknown command '%s' (see --help)", name);
  rank_address_clear (&address);
  return code;
}

int
main (int argc, char **argv)
{
  Command c = { 0 };
  gboolean help = FALSE;
  int code;

  setlocale (LC_ALL, "");
  rank_thrift_fixes_apply ();
  c.args = g_ptr_array_new ();
  c.values = g_hash_table_new (g_str_hash, g_str_equal);
  c.subscores = g_ptr_array_new ();
  c.data = g_ptr_array_new ();
  if (!split_args (argc, argv, &c, &help))
    code = EXIT_INVALID;
  else if (help)
    {
      fputs (usage_text, stdout);
      code = EXIT_OK;
    }
  else
    code = run (&c);
  g_ptr_array_unref (c.args);
  g_hash_table_unref (c.values);
  g_ptr_array_unref (c.subscores);
  g_ptr_array_unref (c.data);
  return code;
}
