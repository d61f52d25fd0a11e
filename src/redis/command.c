/* command.c -- a command's arguments in one buffer (see command.h). */
#include "command.h"

#include <string.h>

static void
init (RankCommand *cmd, RankScriptId script)
{
  cmd->script = script;
  cmd->nkeys = 0;
  cmd->argc = 0;
  cmd->bytes = cmd->inline_bytes;
  cmd->used = 0;
  cmd->size = sizeof cmd->inline_bytes;
  cmd->routed = FALSE;
  cmd->replica_ok = FALSE;
}

void
rank_command_read_from (RankCommand *cmd, int max_lag_ms, gint64 fresh_after_us)
{
  cmd->replica_ok = TRUE;
  cmd->max_lag_ms = max_lag_ms;
  cmd->fresh_after_us = fresh_after_us;
}

void
rank_command_init (RankCommand *cmd, const char *name)
{
  init (cmd, RANK_SCRIPT_NONE);
  rank_command_add_str (cmd, name);
}

void
rank_command_init_args (RankCommand *cmd)
{
  init (cmd, RANK_SCRIPT_NONE);
}

void
rank_command_init_script (RankCommand *cmd, RankScriptId script)
{
  g_assert (script > RANK_SCRIPT_NONE && script < RANK_SCRIPTS);
  init (cmd, script);
}

/* len more bytes at the end of the buffer. */
static void
put (RankCommand *cmd, const void *bytes, gsize len)
{
  if (cmd->used + len > cmd->size)
    {
      gsize size = MAX (cmd->size * 2, cmd->used + len);

      if (cmd->bytes == cmd->inline_bytes)
        cmd->bytes = memcpy (g_malloc (size), cmd->inline_bytes, cmd->used);
      else
        cmd->bytes = g_realloc (cmd->bytes, size);
      cmd->size = size;
    }
  /* An empty argument may come without bytes (an empty GByteArray's data
   * is NULL), which memcpy must not be given. */
  if (len > 0)
    memcpy (cmd->bytes + cmd->used, bytes, len);
  cmd->used += len;
}

void
rank_command_add (RankCommand *cmd, const void *arg, gsize len)
{
  g_assert (cmd->argc < RANK_COMMAND_MAX_ARGS);
  cmd->offset[cmd->argc] = cmd->used;
  cmd->len[cmd->argc++] = len;
  put (cmd, arg, len);
}

void
rank_command_append (RankCommand *cmd, const void *bytes, gsize len)
{
  /* Its bytes are the last in the buffer (no route stored after it). */
  g_assert (cmd->argc > 0
            && cmd->offset[cmd->argc - 1] + cmd->len[cmd->argc - 1]
                   == cmd->used);
  cmd->len[cmd->argc - 1] += len;
  put (cmd, bytes, len);
}

void
rank_command_route (RankCommand *cmd, const char *key, gsize len)
{
  /* Stored as an argument would be, then not counted as one. */
  rank_command_add (cmd, key, len);
  cmd->argc--;
  cmd->route_offset = cmd->offset[cmd->argc];
  cmd->route_len = len;
  cmd->routed = TRUE;
}

void
rank_command_add_str (RankCommand *cmd, const char *arg)
{
  rank_command_add (cmd, arg, strlen (arg));
}

void
rank_command_add_int (RankCommand *cmd, gint64 value)
{
  char text[RANK_FORMAT_INT_MAX];

  /* Not g_snprintf: a script call's head carries about ten numbers, and
   * printf was a sixth of rankd's time in an import. */
  rank_command_add (cmd, text, rank_format_int (text, value));
}

void
rank_command_keys_done (RankCommand *cmd)
{
  g_assert (cmd->script != RANK_SCRIPT_NONE);
  cmd->nkeys = cmd->argc;
}

int
rank_command_argv (const RankCommand *cmd, const char **argv, size_t *lens)
{
  for (int i = 0; i < cmd->argc; i++)
    {
      argv[i] = cmd->bytes + cmd->offset[i];
      lens[i] = cmd->len[i];
    }
  return cmd->argc;
}

const char *
rank_command_key (const RankCommand *cmd, gsize *len)
{
  int k = cmd->script != RANK_SCRIPT_NONE ? 0 : 1;

  if (cmd->routed)
    {
      *len = cmd->route_len;
      return cmd->bytes + cmd->route_offset;
    }
  g_assert (cmd->argc > k
            && (cmd->script == RANK_SCRIPT_NONE || cmd->nkeys > 0));
  *len = cmd->len[k];
  return cmd->bytes + cmd->offset[k];
}

const char *
rank_command_hash_tag (const char *key, gsize len, gsize *tag_len)
{
  const char *open = memchr (key, '{', len);
  const char *close;

  if (open != NULL
      && (close = memchr (open + 1, '}', len - (gsize) (open + 1 - key)))
             != NULL)
    {
      *tag_len = (gsize) (close - open - 1);
      return open + 1;
    }
  *tag_len = len;
  return key;
}

void
rank_command_clear (RankCommand *cmd)
{
  if (cmd->bytes != cmd->inline_bytes)
    g_free (cmd->bytes);
  cmd->bytes = cmd->inline_bytes;
  cmd->used = 0;
  cmd->argc = 0;
}
