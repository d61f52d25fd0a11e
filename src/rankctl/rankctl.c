/* rankctl.c -- rankd from the shell: every Ranking method as a command, an
 * aligned table or one JSON document out, and exit codes a script can test.
 *
 *   rankctl [--connect HOST:PORT] [--json] COMMAND ARGS...
 *
 * Everything the command line says is checked before rankctl connects: a
 * usage error is exit 2 whether rankd is up or not. Syntax (is it a number,
 * is it KEY=VALUE) is checked here; the service's own limits (n 1-1000, pct
 * 0-100...) are left to rankd, whose InvalidArgument names the field.
 *
 * JSON is written by hand (json-glib is not a dependency): strings escaped,
 * i64s as plain numbers, exact.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <thrift/c_glib/transport/thrift_transport.h>

#include "address.h"
#include "api.h"
#include "client.h"
#include "constants.h"
#include "error.h"
#include "json.h"
#include "memberdata.h"
#include "transfer.h"

#ifndef RANKD_VERSION
#define RANKD_VERSION "dev"
#endif

enum
{
  EXIT_OK = 0,
  EXIT_NOT_FOUND = 1,
  EXIT_INVALID = 2,
  EXIT_UNAVAILABLE = 3,
  EXIT_OTHER = 4,
};

#define DEFAULT_TIMEOUT_S 10.0
#define DEFAULT_TOP_N 10
#define DEFAULT_RADIUS 5
#define DEFAULT_SAMPLE_COUNT 10

static const char help_text[]
    = "Usage: rankctl [OPTION...] COMMAND ARGS...\n"
      "\n"
      "Calls rankd (the Ranking service of idl/ranking.thrift) and prints "
      "the answer\n"
      "as an aligned table, or as one JSON document with --json.\n"
      "\n"
      "Commands (the reads take --periods-back N on periodic boards):\n"
      "  update BOARD MEMBER VALUE     record a score, with:\n"
      "      --mode increment|best|set    how VALUE counts (default: the "
      "board's mode)\n"
      "      --request-id ID              idempotency key (default: a random "
      "UUID,\n"
      "                                   printed: reuse it to retry)\n"
      "      --timestamp-ms MS            when it was reached (default: "
      "rankd's clock)\n"
      "      --subscore N                 each of the board's subscores, in "
      "order\n"
      "      --data KEY=VALUE             the member's data, one per key\n"
      "      --without-rank               leave the rank out of the answer "
      "(update\n"
      "                                   only: it spares Redis a rank "
      "lookup)\n"
      "  enqueue BOARD MEMBER VALUE    queue an update (boards with "
      "queue=on), as update\n"
      "                                takes it; applied in the background\n"
      "  queue-status BOARD            backlog, pending, oldest wait, "
      "applied, dead\n"
      "  rank BOARD MEMBER             the member's rank and score\n"
      "  top BOARD [N]                 the N best (default 10); --offset K "
      "skips K;\n"
      "                                --with-data adds each member's data\n"
      "  around BOARD MEMBER [RADIUS]  the member and RADIUS (default 5) "
      "above and\n"
      "                                below it; --with-data\n"
      "  ranks BOARD MEMBER...         several members' ranks in one call\n"
      "  remove BOARD MEMBER           take the member off the board; "
      "--request-id ID\n"
      "  count BOARD                   how many members\n"
      "  count-between BOARD MIN MAX   how many with MIN <= score <= MAX\n"
      "  percentile BOARD MEMBER       the % of members with a worse score\n"
      "  score-at-percentile BOARD PCT the score at PCT (100: the best, 0: "
      "the worst)\n"
      "  sample BOARD MIN MAX [COUNT]  up to COUNT (default 10) random "
      "members with\n"
      "                                MIN <= score <= MAX\n"
      "  set-data BOARD MEMBER [KEY=VALUE]...\n"
      "                                replace the member's data (no pairs: "
      "delete it)\n"
      "  get-data BOARD MEMBER         the member's data\n"
      "  info                          rankd's version, IDL version, "
      "configured boards,\n"
      "                                uptime\n"
      "  import BOARD FILE             load a CSV or JSON Lines file of "
      "entries (SET at\n"
      "                                their times, by UpdateBatch; a re-run "
      "applies\n"
      "                                nothing twice); --format csv|jsonl "
      "when the\n"
      "                                name does not end in .csv or .jsonl;\n"
      "                                --max-frame BYTES as rankd's (default "
      "1048576):\n"
      "                                calls are made to fit in it; a file "
      "with a\n"
      "                                record that cannot fit is refused by "
      "its line\n"
      "  export BOARD                  every entry, as import reads them "
      "(sorted by\n"
      "                                member: export, import, export gives "
      "the same\n"
      "                                bytes); --format csv|jsonl, --output "
      "FILE\n"
      "                                (default stdout, csv). CSV is not\n"
      "                                spreadsheet-safe: members beginning "
      "with =, +,\n"
      "                                -, @ (formulas to a spreadsheet) are "
      "written as\n"
      "                                they are, for the byte-exact round "
      "trip\n"
      "  boards                        the boards that exist: configured "
      "or written to\n"
      "  board-info BOARD              options, members, periods, keys, "
      "memory\n"
      "  delete-board BOARD --yes      remove every key of the board; "
      "--request-id ID\n"
      "  reset-board BOARD --yes       remove its entries, keep its layout "
      "and request\n"
      "                                ids; --request-id ID\n"
      "\n"
      "Options (anywhere on the line; --name=value works too; -- ends "
      "them):\n"
      "  --connect HOST:PORT           rankd's address (default "
      "$RANKCTL_CONNECT,\n"
      "                                else 127.0.0.1:9090)\n"
      "  --transport framed|buffered   as rankd's --transport (default "
      "framed)\n"
      "  --protocol binary|compact     as rankd's --protocol (default "
      "binary)\n"
      "  --timeout SECONDS             wait for rankd at most this long "
      "(default 10)\n"
      "  --json                        print JSON instead of a table\n"
      "  --help, --version\n"
      "\n"
      "Exit codes:\n"
      "  0  done\n"
      "  1  not found (NotFound)\n"
      "  2  invalid: a usage error, or InvalidArgument from rankd\n"
      "  3  unavailable: Unavailable from rankd, or rankd out of reach\n"
      "  4  any other error (TApplicationException, a bad answer, output "
      "failed)\n"
      "\n"
      "Examples:\n"
      "  rankctl update run_hero alice 120 --mode best\n"
      "  rankctl top run_hero 5 --with-data\n"
      "  rankctl --json rank run_hero alice\n"
      "  rankctl update raid team7 12 --subscore 4 --subscore 93000 --data "
      "name=Seven\n"
      "  rankctl around run_hero alice 2\n"
      "  rankctl --connect 10.0.0.5:9090 count daily_run_hero --periods-back "
      "1\n";

/* Which options a command takes, besides the global ones. */
enum
{
  TAKES_PERIODS_BACK = 1 << 0,
  TAKES_WITH_DATA = 1 << 1,
  TAKES_OFFSET = 1 << 2,
  TAKES_REQUEST_ID = 1 << 3,
  TAKES_UPDATE = 1 << 4, /* --mode, --timestamp-ms, --subscore, --data */
  TAKES_FORMAT = 1 << 5,
  TAKES_YES = 1 << 6,
  TAKES_OUTPUT = 1 << 7,
  TAKES_WITHOUT_RANK = 1 << 8,
  TAKES_MAX_FRAME = 1 << 9,
};

typedef struct
{
  const char *name;
  guint takes;       /* 0: a global option */
  const char *value; /* its value's name; NULL: a flag */
} OptionSpec;

static const OptionSpec option_specs[] = {
  { "connect", 0, "HOST:PORT" },
  { "transport", 0, "framed|buffered" },
  { "protocol", 0, "binary|compact" },
  { "timeout", 0, "SECONDS" },
  { "json", 0, NULL },
  { "help", 0, NULL },
  { "version", 0, NULL },
  { "periods-back", TAKES_PERIODS_BACK, "N" },
  { "with-data", TAKES_WITH_DATA, NULL },
  { "offset", TAKES_OFFSET, "K" },
  { "request-id", TAKES_REQUEST_ID, "ID" },
  { "mode", TAKES_UPDATE, "increment|best|set" },
  { "timestamp-ms", TAKES_UPDATE, "MS" },
  { "subscore", TAKES_UPDATE, "N" },
  { "data", TAKES_UPDATE, "KEY=VALUE" },
  { "format", TAKES_FORMAT, "csv|jsonl" },
  { "yes", TAKES_YES, NULL },
  { "output", TAKES_OUTPUT, "FILE" },
  { "without-rank", TAKES_WITHOUT_RANK, NULL },
  { "max-frame", TAKES_MAX_FRAME, "BYTES" },
};

typedef struct _Cli Cli;

typedef struct
{
  const char *name;
  const char *args; /* the synopsis after the name */
  guint min_args, max_args;
  guint takes;
  int (*run) (Cli *cli);
} CommandSpec;

/* The command line, checked, and the connection once made. */
struct _Cli
{
  /* global options */
  RankAddress address;
  gboolean framed;
  RankProtocolKind protocol;
  int timeout_ms;
  gboolean json;
  /* the command and its arguments (argv's strings, not owned) */
  const CommandSpec *command;
  GPtrArray *args;
  /* its options */
  gint32 periods_back;
  gboolean with_data;
  gint32 offset;
  const char *request_id;
  gboolean has_mode;
  rankUpdateMode mode;
  gboolean has_timestamp;
  gint64 timestamp_ms;
  GArray *subscores; /* gint64 */
  GHashTable *data;  /* --data: key -> value, owned */
  gboolean has_data;
  gboolean has_format;
  RankTransferFormat format;
  gboolean yes;          /* --yes: a command that destroys data may run */
  const char *output;    /* --output FILE */
  gboolean without_rank; /* --without-rank: UpdateRequest.with_rank false */
  guint32 max_frame;     /* --max-frame: rankd's, for import's calls */
  RankClient *client;    /* connected by rankd() */
};

static int fail (int code, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

/* Prints "rankctl: message" on stderr; returns code. */
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

/* ---- parsing ---- */

/* A whole decimal integer in min..max; FALSE (printed, naming what) if the
 * text is anything else. */
static gboolean
parse_int (const char *what, const char *text, gint64 min, gint64 max,
           gint64 *out)
{
  g_autoptr (GError) error = NULL;

  if (g_ascii_string_to_signed (text, 10, min, max, out, &error))
    return TRUE;
  fail (EXIT_INVALID, "%s: %s", what, error->message);
  return FALSE;
}

static gboolean
parse_i32 (const char *what, const char *text, gint32 *out)
{
  gint64 v;

  if (!parse_int (what, text, G_MININT32, G_MAXINT32, &v))
    return FALSE;
  *out = (gint32) v;
  return TRUE;
}

static gboolean
parse_i64 (const char *what, const char *text, gint64 *out)
{
  return parse_int (what, text, G_MININT64, G_MAXINT64, out);
}

/* A finite decimal number, all of text (not "nan", "inf" or hex, which
 * strtod takes). */
static gboolean
parse_double (const char *what, const char *text, double *out)
{
  char *end = NULL;
  double v = g_ascii_strtod (text, &end);

  if (end == text || *end != '\0' || !isfinite (v)
      || text[strspn (text, "0123456789.eE+-")] != '\0')
    {
      fail (EXIT_INVALID, "%s: '%s' is not a number", what, text);
      return FALSE;
    }
  *out = v;
  return TRUE;
}

/* KEY=VALUE into map; a key given twice is a mistake, not "last wins". */
static gboolean
parse_pair (const char *what, const char *pair, GHashTable *map)
{
  const char *eq = strchr (pair, '=');
  char *key;

  if (eq == NULL)
    {
      fail (EXIT_INVALID, "%s: '%s' is not KEY=VALUE", what, pair);
      return FALSE;
    }
  key = g_strndup (pair, (gsize) (eq - pair));
  if (g_hash_table_contains (map, key))
    {
      fail (EXIT_INVALID, "%s: key '%s' given twice", what, key);
      g_free (key);
      return FALSE;
    }
  g_hash_table_insert (map, key, g_strdup (eq + 1));
  return TRUE;
}

static gboolean
parse_mode (const char *text, rankUpdateMode *out)
{
  if (g_ascii_strcasecmp (text, "increment") == 0)
    *out = RANK_UPDATE_MODE_INCREMENT;
  else if (g_ascii_strcasecmp (text, "best") == 0)
    *out = RANK_UPDATE_MODE_BEST;
  else if (g_ascii_strcasecmp (text, "set") == 0)
    *out = RANK_UPDATE_MODE_SET;
  else
    {
      fail (EXIT_INVALID, "--mode: '%s' is not increment, best or set", text);
      return FALSE;
    }
  return TRUE;
}

/* rankd's address; what names its source (--connect, RANKCTL_CONNECT). */
static gboolean
parse_connect (Cli *cli, const char *what, const char *text)
{
  g_autoptr (GError) error = NULL;

  rank_address_clear (&cli->address);
  if (!rank_address_parse (text, RANK_DEFAULT_PORT, &cli->address, &error))
    {
      fail (EXIT_INVALID, "%s: %s", what, error->message);
      return FALSE;
    }
  if (cli->address.host == NULL)
    {
      fail (EXIT_INVALID, "%s: '%s': rankd is reached over TCP: HOST:PORT",
            what, text);
      return FALSE;
    }
  return TRUE;
}

/* Stores one option's value in cli; FALSE (printed) if it is not valid. */
static gboolean
apply_option (Cli *cli, const OptionSpec *o, const char *value)
{
  const char *name = o->name;
  double seconds;
  gint64 v;

  if (strcmp (name, "connect") == 0)
    return parse_connect (cli, "--connect", value);
  if (strcmp (name, "transport") == 0)
    {
      cli->framed = strcmp (value, "framed") == 0;
      if (!cli->framed && strcmp (value, "buffered") != 0)
        {
          fail (EXIT_INVALID, "--transport: '%s' is not framed or buffered",
                value);
          return FALSE;
        }
    }
  else if (strcmp (name, "protocol") == 0)
    {
      if (!rank_protocol_kind_parse (value, &cli->protocol))
        {
          fail (EXIT_INVALID, "--protocol: '%s' is not binary or compact",
                value);
          return FALSE;
        }
    }
  else if (strcmp (name, "timeout") == 0)
    {
      if (!parse_double ("--timeout", value, &seconds))
        return FALSE;
      if (!(seconds >= 0.001 && seconds <= 3600))
        {
          fail (EXIT_INVALID, "--timeout: must be 0.001-3600 seconds, got %s",
                value);
          return FALSE;
        }
      cli->timeout_ms = MAX (1, (int) (seconds * 1000));
    }
  else if (strcmp (name, "json") == 0)
    cli->json = TRUE;
  else if (strcmp (name, "periods-back") == 0)
    return parse_i32 ("--periods-back", value, &cli->periods_back);
  else if (strcmp (name, "with-data") == 0)
    cli->with_data = TRUE;
  else if (strcmp (name, "offset") == 0)
    return parse_i32 ("--offset", value, &cli->offset);
  else if (strcmp (name, "request-id") == 0)
    cli->request_id = value;
  else if (strcmp (name, "mode") == 0)
    {
      cli->has_mode = TRUE;
      return parse_mode (value, &cli->mode);
    }
  else if (strcmp (name, "timestamp-ms") == 0)
    {
      cli->has_timestamp = TRUE;
      return parse_i64 ("--timestamp-ms", value, &cli->timestamp_ms);
    }
  else if (strcmp (name, "subscore") == 0)
    {
      if (!parse_i64 ("--subscore", value, &v))
        return FALSE;
      g_array_append_val (cli->subscores, v);
    }
  else if (strcmp (name, "data") == 0)
    {
      cli->has_data = TRUE;
      return parse_pair ("--data", value, cli->data);
    }
  else if (strcmp (name, "yes") == 0)
    cli->yes = TRUE;
  else if (strcmp (name, "output") == 0)
    cli->output = value;
  else if (strcmp (name, "without-rank") == 0)
    cli->without_rank = TRUE;
  else if (strcmp (name, "max-frame") == 0)
    {
      if (!parse_int ("--max-frame", value, RANK_MIN_MAX_FRAME,
                      RANK_MAX_MAX_FRAME, &v))
        return FALSE;
      cli->max_frame = (guint32) v;
    }
  else if (strcmp (name, "format") == 0)
    {
      cli->has_format = TRUE;
      if (!rank_transfer_format_parse (value, &cli->format))
        {
          fail (EXIT_INVALID, "--format: '%s' is not csv or jsonl", value);
          return FALSE;
        }
    }
  return TRUE;
}

/* ---- output ---- */

static void
json_subscores (GString *out, const GArray *subscores)
{
  g_string_append_c (out, '[');
  for (guint i = 0; i < subscores->len; i++)
    g_string_append_printf (out, "%s%" G_GINT64_FORMAT, i ? "," : "",
                            g_array_index (subscores, gint64, i));
  g_string_append_c (out, ']');
}

/* A table cell: control characters shown as \xNN, so that a member named
 * "a\nb" cannot break a row. */
static char *
cell (const char *s)
{
  g_autofree char *valid = g_utf8_make_valid (s, -1);
  GString *out = g_string_new (NULL);

  for (const char *p = valid; *p != '\0'; p++)
    if ((guchar) *p < 0x20 || *p == 0x7f)
      g_string_append_printf (out, "\\x%02x", (guchar) *p);
    else
      g_string_append_c (out, *p);
  return g_string_free (out, FALSE);
}

static char *
cell_i64 (gint64 v)
{
  return g_strdup_printf ("%" G_GINT64_FORMAT, v);
}

static char *
cell_subscores (const GArray *subscores)
{
  GString *out = g_string_new (NULL);

  for (guint i = 0; i < subscores->len; i++)
    g_string_append_printf (out, "%s%" G_GINT64_FORMAT, i ? "," : "",
                            g_array_index (subscores, gint64, i));
  return g_string_free (out, FALSE);
}

/* "key=value key=value", keys in order. */
static char *
cell_data (GHashTable *data)
{
  GString *out = g_string_new (NULL);
  guint n;
  g_autofree const char **keys = rank_member_data_keys (data, &n);

  for (guint i = 0; i < n; i++)
    {
      g_autofree char *k = cell (keys[i]);
      g_autofree char *v = cell (g_hash_table_lookup (data, keys[i]));

      g_string_append_printf (out, "%s%s=%s", i ? " " : "", k, v);
    }
  return g_string_free (out, FALSE);
}

/* Terminal columns a (valid UTF-8) string takes: wide characters two, combining
 * marks none. */
static glong
display_width (const char *s)
{
  glong width = 0;

  for (const char *p = s; *p != '\0'; p = g_utf8_next_char (p))
    {
      gunichar c = g_utf8_get_char (p);

      width += g_unichar_iszerowidth (c) ? 0 : g_unichar_iswide (c) ? 2 : 1;
    }
  return width;
}

static void
pad (GString *line, glong n)
{
  for (glong i = 0; i < n; i++)
    g_string_append_c (line, ' ');
}

/* Prints cells (row after row, cols each, owned) under header (or none),
 * each column as wide as its widest cell, two spaces apart; the columns
 * numeric[] says are numbers are right-aligned. */
static void
print_table (const char *const *header, const gboolean *numeric, guint cols,
             GPtrArray *cells)
{
  g_autofree glong *width = g_new0 (glong, cols);
  guint first = header != NULL ? 0 : 1;
  guint rows = cells->len / cols + 1; /* with the header */

  for (guint c = 0; header != NULL && c < cols; c++)
    width[c] = display_width (header[c]);
  for (guint i = 0; i < cells->len; i++)
    width[i % cols] = MAX (width[i % cols], display_width (cells->pdata[i]));
  for (guint r = first; r < rows; r++)
    {
      g_autoptr (GString) line = g_string_new (NULL);

      for (guint c = 0; c < cols; c++)
        {
          const char *text
              = r == 0 ? header[c] : cells->pdata[(r - 1) * cols + c];
          glong gap = width[c] - display_width (text);

          if (c > 0)
            g_string_append (line, "  ");
          if (numeric[c])
            pad (line, gap);
          g_string_append (line, text);
          if (!numeric[c] && c + 1 < cols)
            pad (line, gap);
        }
      while (line->len > 0 && line->str[line->len - 1] == ' ')
        g_string_truncate (line, line->len - 1);
      puts (line->str);
    }
}

/* An entry as a JSON object with the IDL's field names. */
static void
json_entry (GString *out, rankEntry *e)
{
  g_string_append_printf (out, "{\"rank\":%" G_GINT64_FORMAT, e->rank);
  g_string_append (out, ",\"member\":");
  rank_json_string (out, e->member, RANK_JSON_PLAIN);
  g_string_append_printf (out, ",\"score\":%" G_GINT64_FORMAT, e->score);
  if (e->__isset_subscores)
    {
      g_string_append (out, ",\"subscores\":");
      json_subscores (out, e->subscores);
    }
  if (e->__isset_data)
    {
      g_string_append (out, ",\"data\":");
      rank_json_map (out, e->data, RANK_JSON_PLAIN);
    }
  g_string_append_c (out, '}');
}

/* Entries: RANK MEMBER SCORE, then SUBSCORES and DATA when any has them;
 * or a JSON list of objects. */
static void
print_entries (GPtrArray *entries, gboolean json)
{
  static const char *const header[]
      = { "RANK", "MEMBER", "SCORE", "SUBSCORES", "DATA" };
  static const char *const header_no_subscores[]
      = { "RANK", "MEMBER", "SCORE", "DATA" };
  static const gboolean numeric[] = { TRUE, FALSE, TRUE, FALSE, FALSE };
  g_autoptr (GPtrArray) cells = g_ptr_array_new_with_free_func (g_free);
  gboolean subs = FALSE, data = FALSE;

  for (guint i = 0; i < entries->len; i++)
    {
      rankEntry *e = entries->pdata[i];

      subs = subs || e->__isset_subscores;
      data = data || e->__isset_data;
    }
  if (json)
    {
      g_autoptr (GString) out = g_string_new ("[");

      for (guint i = 0; i < entries->len; i++)
        {
          if (i > 0)
            g_string_append_c (out, ',');
          json_entry (out, entries->pdata[i]);
        }
      g_string_append_c (out, ']');
      puts (out->str);
      return;
    }
  for (guint i = 0; i < entries->len; i++)
    {
      rankEntry *e = entries->pdata[i];

      g_ptr_array_add (cells, cell_i64 (e->rank));
      g_ptr_array_add (cells, cell (e->member));
      g_ptr_array_add (cells, cell_i64 (e->score));
      if (subs)
        g_ptr_array_add (cells, e->__isset_subscores
                                    ? cell_subscores (e->subscores)
                                    : g_strdup (""));
      if (data)
        g_ptr_array_add (cells,
                         e->__isset_data ? cell_data (e->data) : g_strdup (""));
    }
  print_table (subs ? header : header_no_subscores, numeric,
               3 + (subs ? 1 : 0) + (data ? 1 : 0), cells);
}

/* One record (an update's or a remove's answer): name-value lines, or one
 * JSON object. Each field has its JSON text and its table text. */
typedef struct
{
  GPtrArray *names; /* static strings */
  GPtrArray *json;  /* owned */
  GPtrArray *cells; /* owned, name and value in turn */
} Record;

static Record
record_new (void)
{
  return (Record){ g_ptr_array_new (), g_ptr_array_new_with_free_func (g_free),
                   g_ptr_array_new_with_free_func (g_free) };
}

/* Adds a field; takes json and text. */
static void
record_add (Record *r, const char *name, char *json, char *text)
{
  g_ptr_array_add (r->names, (char *) name);
  g_ptr_array_add (r->json, json);
  g_ptr_array_add (r->cells, g_strdup (name));
  g_ptr_array_add (r->cells, text);
}

static char *
json_quoted (const char *s)
{
  GString *out = g_string_new (NULL);

  rank_json_string (out, s, RANK_JSON_PLAIN);
  return g_string_free (out, FALSE);
}

static void
record_print_free (Record *r, gboolean json)
{
  static const gboolean numeric[] = { FALSE, FALSE };

  if (json)
    {
      g_autoptr (GString) out = g_string_new ("{");

      for (guint i = 0; i < r->names->len; i++)
        {
          if (i > 0)
            g_string_append_c (out, ',');
          rank_json_string (out, r->names->pdata[i], RANK_JSON_PLAIN);
          g_string_append_printf (out, ":%s", (char *) r->json->pdata[i]);
        }
      g_string_append_c (out, '}');
      puts (out->str);
    }
  else
    print_table (NULL, numeric, 2, r->cells);
  g_ptr_array_unref (r->names);
  g_ptr_array_unref (r->json);
  g_ptr_array_unref (r->cells);
}

/* One number: as it is, or {"name":number}. */
static void
print_number (const char *name, const char *number, gboolean json)
{
  if (json)
    printf ("{\"%s\":%s}\n", name, number);
  else
    puts (number);
}

/* ---- calls ---- */

/* A call's exceptions and error; call_outcome() turns them into an exit
 * code and a message on stderr. */
typedef struct
{
  rankInvalidArgument *invalid;
  rankNotFound *not_found;
  rankUnavailable *unavailable;
  GError *error;
} Call;

static int
call_outcome (Cli *cli, gboolean ok, Call *call)
{
  GObject *x = call->invalid     ? G_OBJECT (call->invalid)
               : call->not_found ? G_OBJECT (call->not_found)
                                 : G_OBJECT (call->unavailable);
  int code = call->invalid     ? EXIT_INVALID
             : call->not_found ? EXIT_NOT_FOUND
                               : EXIT_UNAVAILABLE;

  if (ok)
    code = EXIT_OK;
  else if (x != NULL)
    {
      g_autofree char *message = NULL;

      g_object_get (x, "message", &message, NULL);
      fail (code, "%s", message);
    }
  else if (call->error != NULL
           && call->error->domain == THRIFT_APPLICATION_EXCEPTION_ERROR
           && call->error->code
                  == THRIFT_APPLICATION_EXCEPTION_ERROR_PROTOCOL_ERROR
           && strstr (call->error->message, "rankd expects ") != NULL)
    /* rankd read first bytes unlike its framing and protocol, said which
     * it expects, and closed the connection (wire.c): out of reach as
     * configured, as when it closed without a word. */
    code = fail (EXIT_UNAVAILABLE,
                 "rankd: %s (do --transport and --protocol match rankd's?)",
                 call->error->message);
  else if (call->error == NULL || call->error->domain != THRIFT_TRANSPORT_ERROR)
    /* A TApplicationException, or an answer that does not decode. */
    code = fail (EXIT_OTHER, "rankd: %s",
                 call->error ? call->error->message : "no result");
  else
    {
      g_autofree char *where = rank_address_to_string (&cli->address);
      const char *message = call->error->message;

      /* rankd closes, unanswered, a connection whose first bytes are not
       * in its framing and protocol. */
      code = fail (EXIT_UNAVAILABLE, "no answer from rankd at %s: %s%s", where,
                   message,
                   strstr (message, "closed") != NULL
                       ? " (do --transport and --protocol match rankd's?)"
                       : "");
    }
  g_clear_object (&call->invalid);
  g_clear_object (&call->not_found);
  g_clear_object (&call->unavailable);
  g_clear_error (&call->error);
  return code;
}

/* Connects to rankd (once); NULL, printed, if it is out of reach: the
 * command then exits with EXIT_UNAVAILABLE. */
static rankRankingIf *
rankd (Cli *cli)
{
  g_autoptr (GError) error = NULL;

  if (cli->client == NULL)
    cli->client = rank_client_connect (cli->address.host, cli->address.port,
                                       cli->framed, cli->protocol,
                                       cli->timeout_ms, &error);
  if (cli->client == NULL)
    {
      g_autofree char *where = rank_address_to_string (&cli->address);

      fail (EXIT_UNAVAILABLE, "cannot reach rankd at %s: %s", where,
            error->message);
      return NULL;
    }
  return rank_client_iface (cli->client);
}

static const char *
arg (const Cli *cli, guint i)
{
  return i < cli->args->len ? cli->args->pdata[i] : NULL;
}

/* The request id to send: --request-id, or a new random one. */
static char *
request_id (const Cli *cli)
{
  return cli->request_id != NULL ? g_strdup (cli->request_id)
                                 : g_uuid_string_random ();
}

/* After a failed update or remove with a made-up request id: the id a retry
 * must reuse, as the call may have been applied. */
static void
retry_hint (const Cli *cli, int code, const char *rid)
{
  if (cli->request_id == NULL
      && (code == EXIT_UNAVAILABLE || code == EXIT_OTHER))
    fprintf (stderr,
             "rankctl: to retry, reuse --request-id %s (applied at most "
             "once)\n",
             rid);
}

/* ---- commands ---- */

/* The UpdateRequest the command line describes (update, enqueue). */
static rankUpdateRequest *
update_request (Cli *cli, gint64 value, const char *rid)
{
  /* Fields, not properties, so that nothing is checked twice: rankd's
   * InvalidArgument names the field. */
  rankUpdateRequest *req = g_object_new (RANK_TYPE_UPDATE_REQUEST, NULL);

  req->board = g_strdup (arg (cli, 0));
  req->member = g_strdup (arg (cli, 1));
  req->value = value;
  req->request_id = g_strdup (rid);
  req->mode = cli->mode;
  req->__isset_mode = cli->has_mode;
  req->timestamp_ms = cli->timestamp_ms;
  req->__isset_timestamp_ms = cli->has_timestamp;
  /* Only update takes --without-rank. */
  if (cli->without_rank)
    {
      req->with_rank = FALSE;
      req->__isset_with_rank = TRUE;
    }
  if (cli->subscores->len > 0)
    {
      g_array_append_vals (req->subscores, cli->subscores->data,
                           cli->subscores->len);
      req->__isset_subscores = TRUE;
    }
  if (cli->has_data)
    {
      GHashTableIter it;
      gpointer k, v;

      g_hash_table_iter_init (&it, cli->data);
      while (g_hash_table_iter_next (&it, &k, &v))
        g_hash_table_insert (req->data, g_strdup (k), g_strdup (v));
      req->__isset_data = TRUE;
    }
  return req;
}

static int
cmd_update (Cli *cli)
{
  g_autofree char *rid = NULL;
  rankUpdateRequest *req;
  rankUpdateResponse *resp;
  rankRankingIf *iface;
  Call call = { 0 };
  gint64 value;
  gboolean ok;
  int code;

  if (!parse_i64 ("VALUE", arg (cli, 2), &value))
    return EXIT_INVALID;
  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  rid = request_id (cli);
  req = update_request (cli, value, rid);
  resp = g_object_new (RANK_TYPE_UPDATE_RESPONSE, NULL);
  ok = rank_ranking_if_update (iface, &resp, req, &call.invalid,
                               &call.unavailable, &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK)
    {
      Record r = record_new ();

      record_add (&r, "score", cell_i64 (resp->score), cell_i64 (resp->score));
      if (resp->__isset_rank)
        record_add (&r, "rank", cell_i64 (resp->rank), cell_i64 (resp->rank));
      if (resp->__isset_subscores)
        {
          g_autoptr (GString) subs = g_string_new (NULL);

          json_subscores (subs, resp->subscores);
          record_add (&r, "subscores", g_strdup (subs->str),
                      cell_subscores (resp->subscores));
        }
      record_add (
          &r, "applied", g_strdup (resp->applied ? "true" : "false"),
          g_strdup (resp->applied ? "yes" : "no (a retry: nothing changed)"));
      record_add (&r, "request_id", json_quoted (rid), cell (rid));
      record_print_free (&r, cli->json);
    }
  retry_hint (cli, code, rid);
  g_object_unref (req);
  g_object_unref (resp);
  return code;
}

/* Enqueue of one update: its queue entry's id, or its refusal. */
static int
cmd_enqueue (Cli *cli)
{
  g_autofree char *rid = NULL;
  g_autoptr (rankEnqueueRequest) req = NULL;
  g_autoptr (rankEnqueueResponse) resp = NULL;
  rankRankingIf *iface;
  Call call = { 0 };
  gint64 value;
  gboolean ok;
  int code;

  if (!parse_i64 ("VALUE", arg (cli, 2), &value))
    return EXIT_INVALID;
  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  rid = request_id (cli);
  req = g_object_new (RANK_TYPE_ENQUEUE_REQUEST, NULL);
  g_ptr_array_add (req->requests, update_request (cli, value, rid));
  resp = g_object_new (RANK_TYPE_ENQUEUE_RESPONSE, NULL);
  ok = rank_ranking_if_enqueue (iface, &resp, req, &call.invalid,
                                &call.unavailable, &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK)
    {
      rankEnqueueResult *one = resp->results->pdata[0];

      if (one->__isset_invalid)
        {
          const char *m = one->invalid->message;
          const char *own = g_str_has_prefix (m, "requests[0]: ")
                                ? m + strlen ("requests[0]: ")
                                : m;

          code = fail (EXIT_INVALID, "%s", own);
        }
      else
        {
          Record r = record_new ();

          record_add (&r, "queued", json_quoted (one->id), cell (one->id));
          record_add (&r, "request_id", json_quoted (rid), cell (rid));
          record_print_free (&r, cli->json);
        }
    }
  retry_hint (cli, code, rid);
  return code;
}

static int
cmd_queue_status (Cli *cli)
{
  g_autoptr (rankGetQueueStatusRequest) req = g_object_new (
      RANK_TYPE_GET_QUEUE_STATUS_REQUEST, "board", arg (cli, 0), NULL);
  g_autoptr (rankQueueStatus) st = g_object_new (RANK_TYPE_QUEUE_STATUS, NULL);
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok;
  int code;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  ok = rank_ranking_if_get_queue_status (iface, &st, req, &call.invalid,
                                         &call.unavailable, &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK)
    {
      Record r = record_new ();

      record_add (&r, "queued", g_strdup (st->queued ? "true" : "false"),
                  g_strdup (st->queued ? "yes" : "no (queue=off)"));
      record_add (&r, "backlog", cell_i64 (st->backlog),
                  cell_i64 (st->backlog));
      record_add (&r, "pending", cell_i64 (st->pending),
                  cell_i64 (st->pending));
      record_add (&r, "oldest_age_ms", cell_i64 (st->oldest_age_ms),
                  cell_i64 (st->oldest_age_ms));
      record_add (&r, "applied", cell_i64 (st->applied),
                  cell_i64 (st->applied));
      record_add (&r, "dead_lettered", cell_i64 (st->dead_lettered),
                  cell_i64 (st->dead_lettered));
      record_print_free (&r, cli->json);
    }
  return code;
}

static int
cmd_rank (Cli *cli)
{
  g_autoptr (rankGetRankRequest) req = NULL;
  rankEntry *entry;
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok;
  int code;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  entry = g_object_new (RANK_TYPE_ENTRY, NULL);
  req = g_object_new (RANK_TYPE_GET_RANK_REQUEST, "board", arg (cli, 0),
                      "member", arg (cli, 1), "periods_back", cli->periods_back,
                      NULL);
  ok = rank_ranking_if_get_rank (iface, &entry, req, &call.invalid,
                                 &call.not_found, &call.unavailable,
                                 &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK && cli->json)
    {
      g_autoptr (GString) out = g_string_new (NULL);

      json_entry (out, entry); /* the object, not a list of one */
      puts (out->str);
    }
  else if (code == EXIT_OK)
    {
      g_autoptr (GPtrArray) one = g_ptr_array_new ();

      g_ptr_array_add (one, entry);
      print_entries (one, FALSE);
    }
  g_object_unref (entry);
  return code;
}

/* Prints a page (top, around, sample) once the call is made. */
static int
page_outcome (Cli *cli, gboolean ok, Call *call, GPtrArray *page)
{
  int code = call_outcome (cli, ok, call);

  if (code == EXIT_OK)
    print_entries (page, cli->json);
  g_ptr_array_unref (page);
  return code;
}

static int
cmd_top (Cli *cli)
{
  g_autoptr (rankGetTopNRequest) req = NULL;
  gint32 n = DEFAULT_TOP_N;
  rankRankingIf *iface;
  GPtrArray *page;
  Call call = { 0 };
  gboolean ok;

  if (arg (cli, 1) != NULL && !parse_i32 ("N", arg (cli, 1), &n))
    return EXIT_INVALID;
  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  req = g_object_new (RANK_TYPE_GET_TOP_N_REQUEST, "board", arg (cli, 0), "n",
                      n, "offset", cli->offset, "periods_back",
                      cli->periods_back, "with_data", cli->with_data, NULL);
  page = g_ptr_array_new_with_free_func (g_object_unref);
  ok = rank_ranking_if_get_top_n (iface, &page, req, &call.invalid,
                                  &call.unavailable, &call.error);
  return page_outcome (cli, ok, &call, page);
}

static int
cmd_around (Cli *cli)
{
  g_autoptr (rankGetAroundRequest) req = NULL;
  gint32 radius = DEFAULT_RADIUS;
  rankRankingIf *iface;
  GPtrArray *page;
  Call call = { 0 };
  gboolean ok;

  if (arg (cli, 2) != NULL && !parse_i32 ("RADIUS", arg (cli, 2), &radius))
    return EXIT_INVALID;
  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  req = g_object_new (RANK_TYPE_GET_AROUND_REQUEST, "board", arg (cli, 0),
                      "member", arg (cli, 1), "radius", radius, "periods_back",
                      cli->periods_back, "with_data", cli->with_data, NULL);
  page = g_ptr_array_new_with_free_func (g_object_unref);
  ok = rank_ranking_if_get_around (iface, &page, req, &call.invalid,
                                   &call.not_found, &call.unavailable,
                                   &call.error);
  return page_outcome (cli, ok, &call, page);
}

static int
cmd_sample (Cli *cli)
{
  g_autoptr (rankSampleRequest) req = NULL;
  gint32 count = DEFAULT_SAMPLE_COUNT;
  gint64 min, max;
  rankRankingIf *iface;
  GPtrArray *page;
  Call call = { 0 };
  gboolean ok;

  if (!parse_i64 ("MIN", arg (cli, 1), &min)
      || !parse_i64 ("MAX", arg (cli, 2), &max)
      || (arg (cli, 3) != NULL && !parse_i32 ("COUNT", arg (cli, 3), &count)))
    return EXIT_INVALID;
  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  req = g_object_new (RANK_TYPE_SAMPLE_REQUEST, "board", arg (cli, 0),
                      "min_score", min, "max_score", max, "count", count,
                      "periods_back", cli->periods_back, NULL);
  page = g_ptr_array_new_with_free_func (g_object_unref);
  ok = rank_ranking_if_sample (iface, &page, req, &call.invalid,
                               &call.unavailable, &call.error);
  return page_outcome (cli, ok, &call, page);
}

static int
cmd_ranks (Cli *cli)
{
  static const char *const header[] = { "RANK", "MEMBER", "SCORE" };
  static const gboolean numeric[] = { TRUE, FALSE, TRUE };
  g_autoptr (rankGetRanksRequest) req
      = g_object_new (RANK_TYPE_GET_RANKS_REQUEST, NULL);
  g_autoptr (GPtrArray) result = NULL;
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok;
  int code;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  req->board = g_strdup (arg (cli, 0));
  for (guint i = 1; i < cli->args->len; i++)
    g_ptr_array_add (req->members, g_strdup (cli->args->pdata[i]));
  req->periods_back = cli->periods_back;
  req->__isset_periods_back = TRUE;
  result = g_ptr_array_new_with_free_func (g_object_unref);
  ok = rank_ranking_if_get_ranks (iface, &result, req, &call.invalid,
                                  &call.unavailable, &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK && cli->json)
    {
      g_autoptr (GString) out = g_string_new ("[");

      for (guint i = 0; i < result->len; i++)
        {
          rankRankOf *r = result->pdata[i];

          g_string_append (out, i ? ",{\"member\":" : "{\"member\":");
          rank_json_string (out, r->member, RANK_JSON_PLAIN);
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
    }
  else if (code == EXIT_OK)
    {
      g_autoptr (GPtrArray) cells = g_ptr_array_new_with_free_func (g_free);

      /* Members not on the board: "-" for rank and score. */
      for (guint i = 0; i < result->len; i++)
        {
          rankRankOf *r = result->pdata[i];

          g_ptr_array_add (cells,
                           r->found ? cell_i64 (r->rank) : g_strdup ("-"));
          g_ptr_array_add (cells, cell (r->member));
          g_ptr_array_add (cells,
                           r->found ? cell_i64 (r->score) : g_strdup ("-"));
        }
      print_table (header, numeric, 3, cells);
    }
  return code;
}

static int
cmd_remove (Cli *cli)
{
  g_autofree char *rid = NULL;
  g_autoptr (rankRemoveRequest) req = NULL;
  rankRemoveResponse *resp;
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok;
  int code;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  rid = request_id (cli);
  resp = g_object_new (RANK_TYPE_REMOVE_RESPONSE, NULL);
  req = g_object_new (RANK_TYPE_REMOVE_REQUEST, "board", arg (cli, 0), "member",
                      arg (cli, 1), "request_id", rid, NULL);
  ok = rank_ranking_if_remove (iface, &resp, req, &call.invalid,
                               &call.unavailable, &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK)
    {
      Record r = record_new ();

      /* removed means something only when applied. */
      record_add (&r, "removed", g_strdup (resp->removed ? "true" : "false"),
                  g_strdup (!resp->applied  ? "-"
                            : resp->removed ? "yes"
                                            : "no (it was not on the board)"));
      record_add (
          &r, "applied", g_strdup (resp->applied ? "true" : "false"),
          g_strdup (resp->applied ? "yes" : "no (a retry: nothing changed)"));
      record_add (&r, "request_id", json_quoted (rid), cell (rid));
      record_print_free (&r, cli->json);
    }
  retry_hint (cli, code, rid);
  g_object_unref (resp);
  return code;
}

static int
count_outcome (Cli *cli, gboolean ok, Call *call, const char *name,
               gint64 count)
{
  int code = call_outcome (cli, ok, call);
  g_autofree char *text = cell_i64 (count);

  if (code == EXIT_OK)
    print_number (name, text, cli->json);
  return code;
}

static int
cmd_count (Cli *cli)
{
  g_autoptr (rankCountRequest) req = NULL;
  rankRankingIf *iface;
  Call call = { 0 };
  gint64 count = 0;
  gboolean ok;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  req = g_object_new (RANK_TYPE_COUNT_REQUEST, "board", arg (cli, 0),
                      "periods_back", cli->periods_back, NULL);
  ok = rank_ranking_if_count (iface, &count, req, &call.invalid,
                              &call.unavailable, &call.error);
  return count_outcome (cli, ok, &call, "count", count);
}

static int
cmd_count_between (Cli *cli)
{
  g_autoptr (rankCountBetweenRequest) req = NULL;
  rankRankingIf *iface;
  Call call = { 0 };
  gint64 count = 0, min, max;
  gboolean ok;

  if (!parse_i64 ("MIN", arg (cli, 1), &min)
      || !parse_i64 ("MAX", arg (cli, 2), &max))
    return EXIT_INVALID;
  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  req = g_object_new (RANK_TYPE_COUNT_BETWEEN_REQUEST, "board", arg (cli, 0),
                      "min_score", min, "max_score", max, "periods_back",
                      cli->periods_back, NULL);
  ok = rank_ranking_if_count_between (iface, &count, req, &call.invalid,
                                      &call.unavailable, &call.error);
  return count_outcome (cli, ok, &call, "count", count);
}

static int
cmd_score_at_percentile (Cli *cli)
{
  g_autoptr (rankGetScoreAtPercentileRequest) req = NULL;
  rankRankingIf *iface;
  Call call = { 0 };
  gint64 score = 0;
  double pct;
  gboolean ok;

  if (!parse_double ("PCT", arg (cli, 1), &pct))
    return EXIT_INVALID;
  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  req = g_object_new (RANK_TYPE_GET_SCORE_AT_PERCENTILE_REQUEST, "board",
                      arg (cli, 0), "pct", pct, "periods_back",
                      cli->periods_back, NULL);
  ok = rank_ranking_if_get_score_at_percentile (iface, &score, req,
                                                &call.invalid, &call.not_found,
                                                &call.unavailable, &call.error);
  return count_outcome (cli, ok, &call, "score", score);
}

static int
cmd_percentile (Cli *cli)
{
  char text[G_ASCII_DTOSTR_BUF_SIZE];
  g_autoptr (rankGetPercentileRequest) req = NULL;
  rankRankingIf *iface;
  Call call = { 0 };
  double pct = 0;
  gboolean ok;
  int code;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  req = g_object_new (RANK_TYPE_GET_PERCENTILE_REQUEST, "board", arg (cli, 0),
                      "member", arg (cli, 1), "periods_back", cli->periods_back,
                      NULL);
  ok = rank_ranking_if_get_percentile (iface, &pct, req, &call.invalid,
                                       &call.not_found, &call.unavailable,
                                       &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK)
    {
      /* The shortest text that reads back as the same double. */
      g_ascii_dtostr (text, sizeof text, pct);
      print_number ("percentile", isfinite (pct) ? text : "null", cli->json);
    }
  return code;
}

static int
cmd_set_data (Cli *cli)
{
  g_autoptr (GHashTable) map
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok;
  int code;

  for (guint i = 2; i < cli->args->len; i++)
    if (!parse_pair ("KEY=VALUE", cli->args->pdata[i], map))
      return EXIT_INVALID;
  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  {
    g_autoptr (rankSetMemberDataRequest) req
        = g_object_new (RANK_TYPE_SET_MEMBER_DATA_REQUEST, "board",
                        arg (cli, 0), "member", arg (cli, 1), NULL);
    GHashTableIter it;
    gpointer k, v;

    g_hash_table_iter_init (&it, map);
    while (g_hash_table_iter_next (&it, &k, &v))
      g_hash_table_insert (req->data, g_strdup (k), g_strdup (v));
    ok = rank_ranking_if_set_member_data (iface, req, &call.invalid,
                                          &call.not_found, &call.unavailable,
                                          &call.error);
  }
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK && cli->json)
    {
      g_autoptr (GString) out = g_string_new ("{\"data\":");

      rank_json_map (out, map, RANK_JSON_PLAIN);
      g_string_append_c (out, '}');
      puts (out->str);
    }
  else if (code == EXIT_OK && g_hash_table_size (map) == 0)
    puts ("data deleted");
  else if (code == EXIT_OK)
    printf ("data replaced: %u key%s\n", g_hash_table_size (map),
            g_hash_table_size (map) == 1 ? "" : "s");
  return code;
}

static int
cmd_get_data (Cli *cli)
{
  static const char *const header[] = { "KEY", "VALUE" };
  static const gboolean numeric[] = { FALSE, FALSE };
  g_autoptr (rankGetMemberDataRequest) req = NULL;
  g_autoptr (GHashTable) map
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok;
  int code;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  req = g_object_new (RANK_TYPE_GET_MEMBER_DATA_REQUEST, "board", arg (cli, 0),
                      "member", arg (cli, 1), "periods_back", cli->periods_back,
                      NULL);
  ok = rank_ranking_if_get_member_data (iface, &map, req, &call.invalid,
                                        &call.not_found, &call.unavailable,
                                        &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK && cli->json)
    {
      g_autoptr (GString) out = g_string_new (NULL);

      rank_json_map (out, map, RANK_JSON_PLAIN);
      puts (out->str);
    }
  else if (code == EXIT_OK)
    {
      g_autoptr (GPtrArray) cells = g_ptr_array_new_with_free_func (g_free);
      guint n;
      g_autofree const char **keys = rank_member_data_keys (map, &n);

      for (guint i = 0; i < n; i++)
        {
          g_ptr_array_add (cells, cell (keys[i]));
          g_ptr_array_add (cells, cell (g_hash_table_lookup (map, keys[i])));
        }
      print_table (header, numeric, 2, cells);
    }
  return code;
}

/* ---- the server, import ---- */

static int
cmd_info (Cli *cli)
{
  g_autoptr (rankGetServerInfoRequest) req
      = g_object_new (RANK_TYPE_GET_SERVER_INFO_REQUEST, NULL);
  g_autoptr (rankServerInfo) info = g_object_new (RANK_TYPE_SERVER_INFO, NULL);
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok;
  int code;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  ok = rank_ranking_if_get_server_info (iface, &info, req, &call.unavailable,
                                        &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK)
    {
      Record r = record_new ();

      record_add (&r, "version", json_quoted (info->version),
                  cell (info->version));
      record_add (&r, "idl_version", json_quoted (info->idl_version),
                  cell (info->idl_version));
      record_add (&r, "configured_boards", cell_i64 (info->configured_boards),
                  cell_i64 (info->configured_boards));
      record_add (&r, "uptime_seconds", cell_i64 (info->uptime_seconds),
                  cell_i64 (info->uptime_seconds));
      record_print_free (&r, cli->json);
    }
  return code;
}

/* ---- boards ---- */

static int
cmd_boards (Cli *cli)
{
  static const char *const header[] = { "BOARD", "CONFIGURED", "MEMBERS" };
  static const gboolean numeric[] = { FALSE, FALSE, TRUE };
  g_autoptr (GPtrArray) cells = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GString) json = g_string_new ("{\"boards\":[");
  g_autofree char *after = g_strdup ("");
  rankRankingIf *iface;
  guint n = 0;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  while (after != NULL)
    {
      g_autoptr (rankListBoardsRequest) req
          = g_object_new (RANK_TYPE_LIST_BOARDS_REQUEST, "after", after,
                          "limit", RANK_LIST_BOARDS_MAX, NULL);
      g_autoptr (rankListBoardsResponse) page
          = g_object_new (RANK_TYPE_LIST_BOARDS_RESPONSE, NULL);
      Call call = { 0 };
      gboolean ok = rank_ranking_if_list_boards (
          iface, &page, req, &call.invalid, &call.unavailable, &call.error);
      int code = call_outcome (cli, ok, &call);

      if (code != EXIT_OK)
        return code;
      for (guint i = 0; i < page->boards->len; i++, n++)
        {
          const rankBoardSummary *b = page->boards->pdata[i];

          g_ptr_array_add (cells, cell (b->board));
          g_ptr_array_add (cells, g_strdup (b->configured ? "yes" : "no"));
          g_ptr_array_add (cells, cell_i64 (b->members));
          g_string_append (json, n ? ",{\"board\":" : "{\"board\":");
          rank_json_string (json, b->board, RANK_JSON_PLAIN);
          g_string_append_printf (
              json, ",\"configured\":%s,\"members\":%" G_GINT64_FORMAT "}",
              b->configured ? "true" : "false", b->members);
        }
      g_free (after);
      after = page->__isset_next_after ? g_strdup (page->next_after) : NULL;
    }
  if (cli->json)
    printf ("%s]}\n", json->str);
  else
    print_table (header, numeric, 3, cells);
  return EXIT_OK;
}

/* A map's entries as "key=value" (table) and a JSON object, keys in
 * order. */
static void
record_add_map (Record *r, const char *name, GHashTable *map)
{
  g_autoptr (GString) json = g_string_new (NULL);

  rank_json_map (json, map, RANK_JSON_PLAIN);
  record_add (r, name, g_strdup (json->str), cell_data (map));
}

static int
cmd_board_info (Cli *cli)
{
  g_autoptr (rankGetBoardInfoRequest) req = g_object_new (
      RANK_TYPE_GET_BOARD_INFO_REQUEST, "board", arg (cli, 0), NULL);
  g_autoptr (rankBoardInfo) info = g_object_new (RANK_TYPE_BOARD_INFO, NULL);
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok;
  int code;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  ok = rank_ranking_if_get_board_info (iface, &info, req, &call.invalid,
                                       &call.unavailable, &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK)
    {
      Record r = record_new ();
      g_autoptr (GString) periods = g_string_new ("[");
      g_autoptr (GString) periods_text = g_string_new (NULL);

      for (guint i = 0; i < info->periods->len; i++)
        {
          g_autofree char *p = cell (info->periods->pdata[i]);

          if (i > 0)
            g_string_append_c (periods, ',');
          rank_json_string (periods, info->periods->pdata[i], RANK_JSON_PLAIN);
          g_string_append_printf (periods_text, "%s%s", i ? " " : "", p);
        }
      g_string_append_c (periods, ']');
      record_add (&r, "board", json_quoted (info->board), cell (info->board));
      record_add (&r, "configured",
                  g_strdup (info->configured ? "true" : "false"),
                  g_strdup (info->configured ? "yes" : "no"));
      record_add_map (&r, "options", info->options);
      record_add (&r, "members", cell_i64 (info->members),
                  cell_i64 (info->members));
      record_add (&r, "periods", g_strdup (periods->str),
                  g_strdup (periods_text->str));
      record_add (&r, "keys", cell_i64 (info->keys), cell_i64 (info->keys));
      record_add (&r, "memory_bytes", cell_i64 (info->memory_bytes),
                  cell_i64 (info->memory_bytes));
      if (info->__isset_stored_layout)
        record_add (&r, "stored_layout", json_quoted (info->stored_layout),
                    cell (info->stored_layout));
      record_print_free (&r, cli->json);
    }
  return code;
}

/* DeleteBoard (reset: ResetBoard); only with --yes. */
static int
clear_board (Cli *cli, gboolean reset)
{
  const char *name = reset ? "reset-board" : "delete-board";
  g_autofree char *rid = NULL;
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok, applied = FALSE;
  gint64 removed = 0;
  int code;

  if (!cli->yes)
    return fail (EXIT_INVALID,
                 "%s removes %s of board '%s' for good: add --yes to do it",
                 name, reset ? "every entry" : "every key", arg (cli, 0));
  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  rid = request_id (cli);
  if (reset)
    {
      g_autoptr (rankResetBoardRequest) req
          = g_object_new (RANK_TYPE_RESET_BOARD_REQUEST, "board", arg (cli, 0),
                          "request_id", rid, NULL);
      g_autoptr (rankResetBoardResponse) resp
          = g_object_new (RANK_TYPE_RESET_BOARD_RESPONSE, NULL);

      ok = rank_ranking_if_reset_board (iface, &resp, req, &call.invalid,
                                        &call.unavailable, &call.error);
      applied = resp->applied, removed = resp->keys_removed;
    }
  else
    {
      g_autoptr (rankDeleteBoardRequest) req
          = g_object_new (RANK_TYPE_DELETE_BOARD_REQUEST, "board", arg (cli, 0),
                          "request_id", rid, NULL);
      g_autoptr (rankDeleteBoardResponse) resp
          = g_object_new (RANK_TYPE_DELETE_BOARD_RESPONSE, NULL);

      ok = rank_ranking_if_delete_board (iface, &resp, req, &call.invalid,
                                         &call.unavailable, &call.error);
      applied = resp->applied, removed = resp->keys_removed;
    }
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK)
    {
      Record r = record_new ();

      record_add (&r, "applied", g_strdup (applied ? "true" : "false"),
                  g_strdup (applied ? "yes"
                                    : "no (a retry: done before, nothing "
                                      "changed)"));
      record_add (&r, "keys_removed", cell_i64 (removed), cell_i64 (removed));
      record_add (&r, "request_id", json_quoted (rid), cell (rid));
      record_print_free (&r, cli->json);
    }
  retry_hint (cli, code, rid);
  return code;
}

static int
cmd_delete_board (Cli *cli)
{
  return clear_board (cli, FALSE);
}

static int
cmd_reset_board (Cli *cli)
{
  return clear_board (cli, TRUE);
}

/* A GError of transfer.h as an exit code, printed. */
static int
transfer_failed (const GError *error)
{
  int code = EXIT_OTHER;

  if (error->domain == RANK_ERROR)
    code = error->code == RANK_ERROR_INVALID       ? EXIT_INVALID
           : error->code == RANK_ERROR_NOT_FOUND   ? EXIT_NOT_FOUND
           : error->code == RANK_ERROR_UNAVAILABLE ? EXIT_UNAVAILABLE
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

static int
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
  ok = rank_transfer_import (cli->client, arg (cli, 0), arg (cli, 1), format,
                             cli->max_frame, tty ? import_progress : NULL,
                             &start, &stats, &error);
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

static int
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
                                 format, out, tty ? export_progress : NULL,
                                 NULL, &stats, &error);
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
    ok = rank_transfer_export (cli->client, arg (cli, 0), cli->periods_back,
                               format, out, tty ? export_progress : NULL, NULL,
                               &stats, &error);
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

static const CommandSpec command_specs[] = {
  { "update", "BOARD MEMBER VALUE", 3, 3,
    TAKES_UPDATE | TAKES_REQUEST_ID | TAKES_WITHOUT_RANK, cmd_update },
  { "enqueue", "BOARD MEMBER VALUE", 3, 3, TAKES_UPDATE | TAKES_REQUEST_ID,
    cmd_enqueue },
  { "queue-status", "BOARD", 1, 1, 0, cmd_queue_status },
  { "rank", "BOARD MEMBER", 2, 2, TAKES_PERIODS_BACK, cmd_rank },
  { "top", "BOARD [N]", 1, 2,
    TAKES_PERIODS_BACK | TAKES_WITH_DATA | TAKES_OFFSET, cmd_top },
  { "around", "BOARD MEMBER [RADIUS]", 2, 3,
    TAKES_PERIODS_BACK | TAKES_WITH_DATA, cmd_around },
  { "ranks", "BOARD MEMBER...", 2, G_MAXUINT, TAKES_PERIODS_BACK, cmd_ranks },
  { "remove", "BOARD MEMBER", 2, 2, TAKES_REQUEST_ID, cmd_remove },
  { "count", "BOARD", 1, 1, TAKES_PERIODS_BACK, cmd_count },
  { "count-between", "BOARD MIN MAX", 3, 3, TAKES_PERIODS_BACK,
    cmd_count_between },
  { "percentile", "BOARD MEMBER", 2, 2, TAKES_PERIODS_BACK, cmd_percentile },
  { "score-at-percentile", "BOARD PCT", 2, 2, TAKES_PERIODS_BACK,
    cmd_score_at_percentile },
  { "sample", "BOARD MIN MAX [COUNT]", 3, 4, TAKES_PERIODS_BACK, cmd_sample },
  { "set-data", "BOARD MEMBER [KEY=VALUE]...", 2, G_MAXUINT, 0, cmd_set_data },
  { "get-data", "BOARD MEMBER", 2, 2, TAKES_PERIODS_BACK, cmd_get_data },
  { "info", "", 0, 0, 0, cmd_info },
  { "import", "BOARD FILE", 2, 2, TAKES_FORMAT | TAKES_MAX_FRAME, cmd_import },
  { "export", "BOARD", 1, 1, TAKES_FORMAT | TAKES_OUTPUT | TAKES_PERIODS_BACK,
    cmd_export },
  { "boards", "", 0, 0, 0, cmd_boards },
  { "board-info", "BOARD", 1, 1, 0, cmd_board_info },
  { "delete-board", "BOARD", 1, 1, TAKES_REQUEST_ID | TAKES_YES,
    cmd_delete_board },
  { "reset-board", "BOARD", 1, 1, TAKES_REQUEST_ID | TAKES_YES,
    cmd_reset_board },
};

/* ---- the command line ---- */

/* "usage: rankctl top BOARD [N] [--offset K] ..." for a wrong argument
 * count. */
static int
usage_of (const CommandSpec *command)
{
  g_autoptr (GString) line = g_string_new (NULL);

  for (gsize i = 0; i < G_N_ELEMENTS (option_specs); i++)
    if (option_specs[i].takes & command->takes)
      g_string_append_printf (
          line, " [--%s%s%s]", option_specs[i].name,
          option_specs[i].value != NULL ? " " : "",
          option_specs[i].value != NULL ? option_specs[i].value : "");
  return fail (EXIT_INVALID, "usage: rankctl %s %s%s (see --help)",
               command->name, command->args, line->str);
}

static const OptionSpec *
find_option (const char *name, gsize len)
{
  for (gsize i = 0; i < G_N_ELEMENTS (option_specs); i++)
    if (strlen (option_specs[i].name) == len
        && strncmp (option_specs[i].name, name, len) == 0)
      return &option_specs[i];
  return NULL;
}

/* Reads argv into cli: options (anywhere, "--name value" or
 * "--name=value"), the command and its arguments, all checked. Returns
 * EXIT_OK, or the exit code with the message printed; *done when --help or
 * --version answered. */
static int
parse_command_line (int argc, char **argv, Cli *cli, gboolean *done)
{
  g_autoptr (GPtrArray) given = g_ptr_array_new (); /* OptionSpec, value */
  g_autoptr (GPtrArray) words = g_ptr_array_new ();
  const char *env = g_getenv ("RANKCTL_CONNECT");
  gboolean options_end = FALSE, connect_given = FALSE;

  for (int i = 1; i < argc; i++)
    {
      const char *a = argv[i], *eq;
      const OptionSpec *o;

      if (options_end || !g_str_has_prefix (a, "-") || strcmp (a, "-") == 0
          || (a[1] != '-' && strcmp (a, "-h") != 0))
        {
          g_ptr_array_add (words, (char *) a);
          continue;
        }
      if (strcmp (a, "--") == 0)
        {
          options_end = TRUE;
          continue;
        }
      if (strcmp (a, "-h") == 0)
        a = "--help";
      eq = strchr (a, '=');
      o = find_option (a + 2,
                       eq != NULL ? (gsize) (eq - a - 2) : strlen (a + 2));
      if (o == NULL)
        return fail (EXIT_INVALID, "unknown option %.*s (see --help)",
                     eq != NULL ? (int) (eq - a) : (int) strlen (a), a);
      if (o->value == NULL && eq != NULL)
        return fail (EXIT_INVALID, "--%s takes no value", o->name);
      if (o->value != NULL && eq == NULL && i + 1 >= argc)
        return fail (EXIT_INVALID, "--%s needs a value (%s)", o->name,
                     o->value);
      g_ptr_array_add (given, (gpointer) o);
      if (o->value == NULL)
        g_ptr_array_add (given, NULL);
      else
        g_ptr_array_add (given, eq != NULL ? (char *) eq + 1 : argv[++i]);
    }
  for (guint i = 0; i < given->len; i += 2)
    {
      const OptionSpec *o = given->pdata[i];

      connect_given = connect_given || strcmp (o->name, "connect") == 0;
      if (strcmp (o->name, "help") == 0 || strcmp (o->name, "version") == 0)
        {
          fputs (strcmp (o->name, "help") == 0 ? help_text
                                               : "rankctl " RANKD_VERSION
                                                 " (IDL " RANK_API_IDL_VERSION
                                                 ")\n",
                 stdout);
          *done = TRUE;
          return EXIT_OK;
        }
    }
  if (words->len == 0)
    return fail (EXIT_INVALID, "no command (see --help)");
  for (gsize i = 0; i < G_N_ELEMENTS (command_specs); i++)
    if (strcmp (command_specs[i].name, words->pdata[0]) == 0)
      cli->command = &command_specs[i];
  if (cli->command == NULL)
    return fail (EXIT_INVALID, "unknown command '%s' (see --help)",
                 (const char *) words->pdata[0]);
  for (guint i = 1; i < words->len; i++)
    g_ptr_array_add (cli->args, words->pdata[i]);
  if (cli->args->len < cli->command->min_args
      || cli->args->len > cli->command->max_args)
    return usage_of (cli->command);
  /* Without --connect: $RANKCTL_CONNECT, else the default. */
  if (env != NULL && *env != '\0' && !connect_given
      && !parse_connect (cli, "RANKCTL_CONNECT", env))
    return EXIT_INVALID;
  if (cli->address.host == NULL
      && !parse_connect (cli, "--connect", RANK_DEFAULT_LISTEN))
    return EXIT_INVALID;
  for (guint i = 0; i < given->len; i += 2)
    {
      const OptionSpec *o = given->pdata[i];

      if (o->takes != 0 && !(o->takes & cli->command->takes))
        return fail (EXIT_INVALID, "%s takes no --%s", cli->command->name,
                     o->name);
      if (!apply_option (cli, o, given->pdata[i + 1]))
        return EXIT_INVALID;
    }
  return EXIT_OK;
}

int
main (int argc, char **argv)
{
  Cli cli = {
    .framed = TRUE,
    .protocol = RANK_PROTOCOL_BINARY,
    .timeout_ms = (int) (DEFAULT_TIMEOUT_S * 1000),
    .max_frame = RANK_DEFAULT_MAX_FRAME,
    .args = g_ptr_array_new (),
    .subscores = g_array_new (FALSE, FALSE, sizeof (gint64)),
    .data = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free),
  };
  gboolean done = FALSE;
  int code;

  code = parse_command_line (argc, argv, &cli, &done);
  if (code == EXIT_OK && !done)
    code = cli.command->run (&cli);
  /* A full disk or a closed pipe must not pass for success. */
  if (fflush (stdout) != 0 || ferror (stdout))
    code = fail (EXIT_OTHER, "writing the output failed");
  rank_client_free (cli.client);
  rank_address_clear (&cli.address);
  g_ptr_array_unref (cli.args);
  g_array_unref (cli.subscores);
  g_hash_table_unref (cli.data);
  return code;
}
