/* rankctl.h -- what rankctl's files share: the command line checked (Cli),
 * the output helpers, a call's outcome, and the commands (see rankctl.c).
 */
#ifndef RANKCTL_H
#define RANKCTL_H

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
  EXIT_DENIED = 5,
};

#define DEFAULT_TIMEOUT_S 10.0
#define DEFAULT_TOP_N 10
#define DEFAULT_RADIUS 5
#define DEFAULT_SAMPLE_COUNT 10

typedef struct _Cli Cli;

/* A TLS setting: its value and where it came from ("--tls-ca",
 * "RANKCTL_TLS_CA"), for messages. */
typedef struct
{
  const char *value; /* argv's or the environment's; NULL: not given */
  const char *from;
} TlsSetting;

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
  gboolean tls; /* --tls, or implied by a --tls-* setting */
  TlsSetting tls_ca, tls_cert, tls_key, tls_server_name;
  RankTlsContext *tls_context; /* loaded before connecting */
  /* the command and its arguments (argv's strings, not owned) */
  const CommandSpec *command;
  GPtrArray *args;
  /* its options */
  gint32 periods_back;
  gboolean window; /* --window (IDL 1.8) */
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
  gsize sort_memory;     /* --sort-memory, in bytes: import's and export's */
  RankClient *client;    /* connected by rankd() */
};

/* One record (an update's or a remove's answer): name-value lines, or one
 * JSON object. Each field has its JSON text and its table text. */
typedef struct
{
  GPtrArray *names; /* static strings */
  GPtrArray *json;  /* owned */
  GPtrArray *cells; /* owned, name and value in turn */
} Record;

/* A call's exceptions and error; call_outcome() turns them into an exit
 * code and a message on stderr. */
typedef struct
{
  rankInvalidArgument *invalid;
  rankNotFound *not_found;
  rankUnavailable *unavailable;
  rankPermissionDenied *denied;
  GError *error;
} Call;

/* rankctl.c: the command line */
int fail (int code, const char *fmt, ...) G_GNUC_PRINTF (2, 3);
gboolean parse_i32 (const char *what, const char *text, gint32 *out);
gboolean parse_i64 (const char *what, const char *text, gint64 *out);
gboolean parse_double (const char *what, const char *text, double *out);
gboolean parse_pair (const char *what, const char *pair, GHashTable *map);

/* output.c: tables and JSON */
void json_subscores (GString *out, const GArray *subscores);
char *cell (const char *s);
char *cell_i64 (gint64 v);
char *cell_subscores (const GArray *subscores);
char *cell_data (GHashTable *data);
void print_table (const char *const *header, const gboolean *numeric,
                  guint cols, GPtrArray *cells);
void json_entry (GString *out, rankEntry *e);
void print_entries (GPtrArray *entries, gboolean json);
Record record_new (void);
void record_add (Record *r, const char *name, char *json, char *text);
char *json_quoted (const char *s);
void record_print_free (Record *r, gboolean json);
void print_number (const char *name, const char *number, gboolean json);

/* call.c: the connection, a call's outcome */
int call_outcome (Cli *cli, gboolean ok, Call *call);
rankRankingIf *rankd (Cli *cli);
const char *arg (const Cli *cli, guint i);
char *request_id (const Cli *cli);
void retry_hint (const Cli *cli, int code, const char *rid);

/* cmd_member.c: the commands on members and scores */
int cmd_update (Cli *cli);
int cmd_enqueue (Cli *cli);
int cmd_queue_status (Cli *cli);
int cmd_rank (Cli *cli);
int cmd_top (Cli *cli);
int cmd_around (Cli *cli);
int cmd_sample (Cli *cli);
int cmd_ranks (Cli *cli);
int cmd_remove (Cli *cli);
int cmd_count (Cli *cli);
int cmd_count_between (Cli *cli);
int cmd_score_at_percentile (Cli *cli);
int cmd_percentile (Cli *cli);
int cmd_set_data (Cli *cli);
int cmd_get_data (Cli *cli);

/* cmd_board.c: the server and board commands */
int cmd_info (Cli *cli);
int cmd_whoami (Cli *cli);
int cmd_boards (Cli *cli);
int cmd_board_info (Cli *cli);
int cmd_delete_board (Cli *cli);
int cmd_reset_board (Cli *cli);

/* cmd_transfer.c: import and export */
int cmd_import (Cli *cli);
int cmd_export (Cli *cli);

#endif /* RANKCTL_H */
