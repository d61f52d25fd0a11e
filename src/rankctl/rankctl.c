/* rankctl.c -- rankd from the shell: every Ranking method as a command, an
 * aligned table or one JSON document out, and exit codes a script can test.
 *
 *   rankctl [--connect HOST:PORT] [--json] [--tls-ca F --tls-cert F
 *           --tls-key F] COMMAND ARGS...
 *
 * Everything the command line says is checked before rankctl connects: a
 * usage error is exit 2 whether rankd is up or not. Syntax (is it a number,
 * is it KEY=VALUE) is checked here; the service's own limits (n 1-1000, pct
 * 0-100...) are left to rankd, whose InvalidArgument names the field.
 *
 * JSON is written by hand (json-glib is not a dependency): strings escaped,
 * i64s as plain numbers, exact.
 *
 * This file reads the command line and runs the command; output.c prints
 * the answers, call.c connects and turns a call's outcome into an exit
 * code, cmd_member.c, cmd_board.c and cmd_transfer.c are the commands.
 */
#include "rankctl.h"

static const char help_text[]
    = "Usage: rankctl [OPTION...] COMMAND ARGS...\n"
      "\n"
      "Calls rankd (the Ranking service of idl/ranking.thrift) and prints "
      "the answer\n"
      "as an aligned table, or as one JSON document with --json.\n"
      "\n"
      "Commands (the reads take --periods-back N on periodic boards, and\n"
      "--window on boards with a rolling window (board option window=N):\n"
      "the current period and the N-1 before it; not with --with-data):\n"
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
      "  whoami                        this connection's identity, TLS or "
      "not, and\n"
      "                                its roles (ROLE:BOARD-PATTERN)\n"
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
      "its line;\n"
      "                                --sort-memory MIB for putting records "
      "in order\n"
      "                                (default 256; beyond it, runs go to "
      "TMPDIR)\n"
      "  export BOARD                  every entry, as import reads them "
      "(sorted by\n"
      "                                member: export, import, export gives "
      "the same\n"
      "                                bytes); --format csv|jsonl, --output "
      "FILE\n"
      "                                (--sort-memory MIB as import's)\n"
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
      "  --tls                         speak TLS to rankd (implied by the "
      "--tls-*\n"
      "                                options below; $RANKCTL_TLS=1)\n"
      "  --tls-ca FILE                 CAs (PEM) that rankd's certificate "
      "must chain\n"
      "                                to (default $RANKCTL_TLS_CA, else the "
      "system's)\n"
      "  --tls-cert FILE               this client's certificate (PEM), for "
      "mutual TLS\n"
      "                                (default $RANKCTL_TLS_CERT)\n"
      "  --tls-key FILE                its private key (PEM; default "
      "$RANKCTL_TLS_KEY)\n"
      "  --tls-server-name NAME        the name (or IP) rankd's certificate "
      "must carry\n"
      "                                (default $RANKCTL_TLS_SERVER_NAME, "
      "else the\n"
      "                                host of --connect)\n"
      "  --help, --version\n"
      "\n"
      "Exit codes:\n"
      "  0  done\n"
      "  1  not found (NotFound)\n"
      "  2  invalid: a usage error, or InvalidArgument from rankd\n"
      "  3  unavailable: Unavailable from rankd, or rankd out of reach\n"
      "  4  any other error (TApplicationException, a bad answer, output "
      "failed)\n"
      "  5  permission denied (PermissionDenied: this identity lacks the "
      "role)\n"
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
  TAKES_SORT_MEMORY = 1 << 10,
  TAKES_WINDOW = 1 << 11,
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
  { "tls", 0, NULL },
  { "tls-ca", 0, "FILE" },
  { "tls-cert", 0, "FILE" },
  { "tls-key", 0, "FILE" },
  { "tls-server-name", 0, "NAME" },
  { "help", 0, NULL },
  { "version", 0, NULL },
  { "periods-back", TAKES_PERIODS_BACK, "N" },
  { "with-data", TAKES_WITH_DATA, NULL },
  { "window", TAKES_WINDOW, NULL },
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
  { "sort-memory", TAKES_SORT_MEMORY, "MIB" },
};

/* Prints "rankctl: message" on stderr; returns code. */
int
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

gboolean
parse_i32 (const char *what, const char *text, gint32 *out)
{
  gint64 v;

  if (!parse_int (what, text, G_MININT32, G_MAXINT32, &v))
    return FALSE;
  *out = (gint32) v;
  return TRUE;
}

gboolean
parse_i64 (const char *what, const char *text, gint64 *out)
{
  return parse_int (what, text, G_MININT64, G_MAXINT64, out);
}

/* A finite decimal number, all of text (not "nan", "inf" or hex, which
 * strtod takes). */
gboolean
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
gboolean
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

/* A TLS setting and where it came from (the option, or its RANKCTL_*
 * variable), for the messages. */
static void
set_tls (TlsSetting *setting, const char *from, const char *value)
{
  setting->value = value;
  setting->from = from;
}

/* The TLS settings as the environment gives them; options given later
 * replace them. */
static gboolean
tls_from_environment (Cli *cli)
{
  static const struct
  {
    const char *variable;
    gsize offset;
  } vars[] = {
    { "RANKCTL_TLS_CA", G_STRUCT_OFFSET (Cli, tls_ca) },
    { "RANKCTL_TLS_CERT", G_STRUCT_OFFSET (Cli, tls_cert) },
    { "RANKCTL_TLS_KEY", G_STRUCT_OFFSET (Cli, tls_key) },
    { "RANKCTL_TLS_SERVER_NAME", G_STRUCT_OFFSET (Cli, tls_server_name) },
  };
  const char *on = g_getenv ("RANKCTL_TLS");

  for (gsize i = 0; i < G_N_ELEMENTS (vars); i++)
    {
      const char *v = g_getenv (vars[i].variable);

      if (v != NULL && *v != '\0')
        set_tls (G_STRUCT_MEMBER_P (cli, vars[i].offset), vars[i].variable, v);
    }
  if (on == NULL || *on == '\0' || strcmp (on, "0") == 0)
    return TRUE;
  if (strcmp (on, "1") != 0)
    {
      fail (EXIT_INVALID, "RANKCTL_TLS: '%s' is not 0 or 1", on);
      return FALSE;
    }
  cli->tls = TRUE;
  return TRUE;
}

/* Checks the TLS files and loads them (before connecting: a wrong file is
 * a usage error whether rankd is up or not). */
static gboolean
tls_setup (Cli *cli)
{
  const TlsSetting *files[] = { &cli->tls_ca, &cli->tls_cert, &cli->tls_key };
  RankTlsFiles tls = {
    .ca_file = cli->tls_ca.value,
    .cert_file = cli->tls_cert.value,
    .key_file = cli->tls_key.value,
  };
  g_autoptr (GError) error = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (files); i++)
    cli->tls = cli->tls || files[i]->value != NULL;
  cli->tls = cli->tls || cli->tls_server_name.value != NULL;
  if (!cli->tls)
    return TRUE;
  if ((tls.cert_file == NULL) != (tls.key_file == NULL))
    {
      fail (EXIT_INVALID, "%s needs %s too",
            tls.cert_file != NULL ? cli->tls_cert.from : cli->tls_key.from,
            tls.cert_file != NULL ? "--tls-key (or RANKCTL_TLS_KEY)"
                                  : "--tls-cert (or RANKCTL_TLS_CERT)");
      return FALSE;
    }
  for (gsize i = 0; i < G_N_ELEMENTS (files); i++)
    {
      const char *path = files[i]->value;
      FILE *f;

      if (path == NULL)
        continue;
      f = fopen (path, "r");
      if (f == NULL)
        {
          fail (EXIT_INVALID, "%s: cannot read '%s': %s", files[i]->from, path,
                g_strerror (errno));
          return FALSE;
        }
      fclose (f);
    }
  cli->tls_context = rank_tls_client_context_new (&tls, &error);
  if (cli->tls_context == NULL)
    {
      /* The message names the file; say which setting gave it. */
      const char *from = "TLS";

      for (gsize i = 0; i < G_N_ELEMENTS (files); i++)
        if (files[i]->value != NULL
            && strstr (error->message, files[i]->value) != NULL)
          {
            from = files[i]->from;
            break;
          }
      fail (EXIT_INVALID, "%s: %s", from, error->message);
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
  else if (strcmp (name, "tls") == 0)
    cli->tls = TRUE;
  else if (strcmp (name, "tls-ca") == 0)
    set_tls (&cli->tls_ca, "--tls-ca", value);
  else if (strcmp (name, "tls-cert") == 0)
    set_tls (&cli->tls_cert, "--tls-cert", value);
  else if (strcmp (name, "tls-key") == 0)
    set_tls (&cli->tls_key, "--tls-key", value);
  else if (strcmp (name, "tls-server-name") == 0)
    {
      if (*value == '\0')
        {
          fail (EXIT_INVALID, "--tls-server-name: must not be empty");
          return FALSE;
        }
      set_tls (&cli->tls_server_name, "--tls-server-name", value);
    }
  else if (strcmp (name, "periods-back") == 0)
    return parse_i32 ("--periods-back", value, &cli->periods_back);
  else if (strcmp (name, "with-data") == 0)
    cli->with_data = TRUE;
  else if (strcmp (name, "window") == 0)
    cli->window = TRUE;
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
  else if (strcmp (name, "sort-memory") == 0)
    {
      if (!parse_int ("--sort-memory", value, 1, 1024 * 1024, &v))
        return FALSE;
      cli->sort_memory = (gsize) v * 1024 * 1024;
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

static const CommandSpec command_specs[] = {
  { "update", "BOARD MEMBER VALUE", 3, 3,
    TAKES_UPDATE | TAKES_REQUEST_ID | TAKES_WITHOUT_RANK, cmd_update },
  { "enqueue", "BOARD MEMBER VALUE", 3, 3, TAKES_UPDATE | TAKES_REQUEST_ID,
    cmd_enqueue },
  { "queue-status", "BOARD", 1, 1, 0, cmd_queue_status },
  { "rank", "BOARD MEMBER", 2, 2, TAKES_PERIODS_BACK | TAKES_WINDOW, cmd_rank },
  { "top", "BOARD [N]", 1, 2,
    TAKES_PERIODS_BACK | TAKES_WINDOW | TAKES_WITH_DATA | TAKES_OFFSET,
    cmd_top },
  { "around", "BOARD MEMBER [RADIUS]", 2, 3,
    TAKES_PERIODS_BACK | TAKES_WINDOW | TAKES_WITH_DATA, cmd_around },
  { "ranks", "BOARD MEMBER...", 2, G_MAXUINT, TAKES_PERIODS_BACK | TAKES_WINDOW,
    cmd_ranks },
  { "remove", "BOARD MEMBER", 2, 2, TAKES_REQUEST_ID, cmd_remove },
  { "count", "BOARD", 1, 1, TAKES_PERIODS_BACK | TAKES_WINDOW, cmd_count },
  { "count-between", "BOARD MIN MAX", 3, 3, TAKES_PERIODS_BACK | TAKES_WINDOW,
    cmd_count_between },
  { "percentile", "BOARD MEMBER", 2, 2, TAKES_PERIODS_BACK | TAKES_WINDOW,
    cmd_percentile },
  { "score-at-percentile", "BOARD PCT", 2, 2, TAKES_PERIODS_BACK | TAKES_WINDOW,
    cmd_score_at_percentile },
  { "sample", "BOARD MIN MAX [COUNT]", 3, 4, TAKES_PERIODS_BACK | TAKES_WINDOW,
    cmd_sample },
  { "set-data", "BOARD MEMBER [KEY=VALUE]...", 2, G_MAXUINT, 0, cmd_set_data },
  { "get-data", "BOARD MEMBER", 2, 2, TAKES_PERIODS_BACK, cmd_get_data },
  { "info", "", 0, 0, 0, cmd_info },
  { "whoami", "", 0, 0, 0, cmd_whoami },
  { "import", "BOARD FILE", 2, 2,
    TAKES_FORMAT | TAKES_MAX_FRAME | TAKES_SORT_MEMORY, cmd_import },
  { "export", "BOARD", 1, 1,
    TAKES_FORMAT | TAKES_OUTPUT | TAKES_PERIODS_BACK | TAKES_SORT_MEMORY,
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
  /* TLS: $RANKCTL_TLS_*, replaced by the options below. */
  if (!tls_from_environment (cli))
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
  if (!tls_setup (cli))
    return EXIT_INVALID;
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
    .sort_memory = RANK_TRANSFER_SORT_MEMORY,
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
  rank_tls_context_unref (cli.tls_context);
  rank_address_clear (&cli.address);
  g_ptr_array_unref (cli.args);
  g_array_unref (cli.subscores);
  g_hash_table_unref (cli.data);
  return code;
}
