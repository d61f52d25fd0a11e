/* command.h -- the arguments of one Redis command, built up in one buffer.
 *
 * A command is a plain one (its first argument the command's name, its
 * second the key that routes it), or one of rankd's scripts: its keys,
 * then rank_command_keys_done, then its other arguments (the backend puts
 * EVALSHA, the script's SHA1 and the key count in front). The buffer is on
 * the stack for the usual command, on the heap only for the long key lists
 * of a sharded read; the backend takes it over when the command is sent.
 */
#ifndef RANK_COMMAND_H
#define RANK_COMMAND_H

#include <glib.h>

#include "constants.h"
#include "format.h"

/* rankd's Lua scripts (src/store/lua). */
typedef enum
{
  RANK_SCRIPT_NONE,
  RANK_SCRIPT_UPDATE,
  RANK_SCRIPT_RANK,
  RANK_SCRIPT_DATA,
  RANK_SCRIPT_QUEUE,
  RANK_SCRIPT_CLEAR,
  RANK_SCRIPT_EXPORT,
  RANK_SCRIPT_QUEUES,
  RANK_SCRIPT_ROLL, /* the update library's roll (window.lua) */
  RANK_SCRIPTS,
} RankScriptId;

#define RANK_COMMAND_MAX_ARGS (MAX (RANK_SHARDS_MAX, RANK_TOP_N_MAX) + 32)
#define RANK_COMMAND_INLINE_BYTES 1024

typedef struct
{
  RankScriptId script;
  int nkeys; /* a script's: set by rank_command_keys_done */
  int argc;
  gsize offset[RANK_COMMAND_MAX_ARGS];
  gsize len[RANK_COMMAND_MAX_ARGS];
  gboolean routed; /* rank_command_route: route_* name the key */
  /* A read a replica may answer (rank_command_read_from): one that lags
   * less than max_lag_ms and has what the primary had at fresh_after_us
   * (monotonic). */
  gboolean replica_ok;
  int max_lag_ms;
  gint64 fresh_after_us;
  gsize route_offset;
  gsize route_len;
  char *bytes; /* inline, or a heap copy once it outgrew it */
  gsize used;
  gsize size;
  char inline_bytes[RANK_COMMAND_INLINE_BYTES];
} RankCommand;

/* The command is a read that a replica may answer, if it lags less than
 * max_lag_ms and has every write acknowledged up to fresh_after_us
 * (g_get_monotonic_time; 0: none). */
void rank_command_read_from (RankCommand *cmd, int max_lag_ms,
                             gint64 fresh_after_us);

/* A plain command: name is its first argument. */
void rank_command_init (RankCommand *cmd, const char *name);

/* Arguments only: an item of a batch (backend.h). */
void rank_command_init_args (RankCommand *cmd);

/* A script's: its keys come next. */
void rank_command_init_script (RankCommand *cmd, RankScriptId script);

void rank_command_add (RankCommand *cmd, const void *arg, gsize len);
void rank_command_add_str (RankCommand *cmd, const char *arg);
/* More bytes at the end of the last argument. */
void rank_command_append (RankCommand *cmd, const void *bytes, gsize len);
void rank_command_add_int (RankCommand *cmd, gint64 value);

/* A script's: the arguments added so far are its keys. */
void rank_command_keys_done (RankCommand *cmd);

/* A command without a key (SCAN): key is not sent, but routes it as its
 * key would (Redis Cluster: to the master of key's slot). */
void rank_command_route (RankCommand *cmd, const char *key, gsize len);

/* The key that routes the command (Redis Cluster): the one given to
 * rank_command_route, else a script's first key, a plain command's second
 * argument. */
const char *rank_command_key (const RankCommand *cmd, gsize *len);

/* The hash tag of key (what is between its first '{' and the next '}'),
 * or the whole key if it has none: keys with one tag go to one node. */
const char *rank_command_hash_tag (const char *key, gsize len, gsize *tag_len);

/* Frees the heap buffer of a command that was not sent. */
/* Puts cmd's arguments and their lengths into argv and lens (room for
 * cmd->argc each); returns how many. They point into cmd. */
int rank_command_argv (const RankCommand *cmd, const char **argv, size_t *lens);

void rank_command_clear (RankCommand *cmd);

#endif /* RANK_COMMAND_H */
