/* store.c -- boards in Redis (see store.h; key layout in constants.h and the
 * README).
 *
 * Every update is one EVALSHA of update.lua: the idempotency check, the
 * read, the computation and the writes happen atomically in Redis. Reads
 * are one EVALSHA of rank.lua (GetRank) or one ZRANGE (GetTopN). Scripts are
 * loaded with SCRIPT LOAD on every new Redis connection and, should Redis
 * still answer NOSCRIPT (a SCRIPT FLUSH, a failover), loaded again and the
 * call repeated: NOSCRIPT means the script did not run.
 */
#include "store.h"

#include <string.h>

#include "error.h"
#include "constants.h"
#include "lua_scripts.h"
#include "orderkey.h"

typedef struct
{
  const char *name;
  const char *source;
  char sha[41];
} Script;

struct _RankStore
{
  RankRedisLink *link;
  gint64 dedup_window_ms;
  Script update;
  Script rank;
};

/* Longest key: prefix, board, request id and punctuation. */
#define KEY_MAX                                                                \
  (sizeof RANK_KEY_PREFIX + RANK_BOARD_MAX_BYTES + RANK_REQUEST_ID_MAX_BYTES   \
   + 16)

static gsize
board_key (char *out, const char *board, const char *suffix)
{
  return (gsize) g_snprintf (out, KEY_MAX, RANK_KEY_PREFIX ":{%s}:%s", board,
                             suffix);
}

static void
script_init (Script *script, const char *name, const char *source)
{
  g_autofree char *sha
      = g_compute_checksum_for_string (G_CHECKSUM_SHA1, source, -1);

  script->name = name;
  script->source = source;
  g_strlcpy (script->sha, sha, sizeof script->sha);
}

static void
script_register (RankRedisLink *link, const Script *script)
{
  const char *argv[] = { "SCRIPT", "LOAD", script->source };

  rank_redis_link_add_startup (link, 3, argv, NULL);
}

RankStore *
rank_store_new (RankRedisLink *link, gint64 dedup_window_ms)
{
  RankStore *store = g_new0 (RankStore, 1);

  store->link = link;
  store->dedup_window_ms = dedup_window_ms;
  script_init (&store->update, "update.lua", rank_lua_update);
  script_init (&store->rank, "rank.lua", rank_lua_rank);
  script_register (link, &store->update);
  script_register (link, &store->rank);
  return store;
}

void
rank_store_free (RankStore *store)
{
  g_free (store);
}

/* Turns a Redis error reply into a GError; consumes reply. */
static gboolean
reply_error (redisReply *reply, GError **error)
{
  static const char *const unavailable[] = {
    "OOM ",      "READONLY ",    "BUSY ",       "LOADING ", "MASTERDOWN ",
    "TRYAGAIN ", "CLUSTERDOWN ", "NOREPLICAS ", "MISCONF ",
  };
  const char *msg = reply->str;

  if (g_str_has_prefix (msg, "RANK_INVALID "))
    g_set_error_literal (error, RANK_ERROR, RANK_ERROR_INVALID,
                         msg + strlen ("RANK_INVALID "));
  else
    {
      for (gsize i = 0; i < G_N_ELEMENTS (unavailable); i++)
        if (g_str_has_prefix (msg, unavailable[i]))
          {
            g_set_error (error, RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                         "Redis refused the command: %s", msg);
            freeReplyObject (reply);
            return FALSE;
          }
      g_warning ("unexpected Redis error: %s", msg);
      g_set_error (error, RANK_ERROR, RANK_ERROR_INTERNAL,
                   "unexpected Redis error: %s", msg);
    }
  freeReplyObject (reply);
  return FALSE;
}

static void
unexpected (redisReply *reply, const char *what, GError **error)
{
  g_warning ("unexpected Redis reply (type %d) to %s", reply->type, what);
  g_set_error (error, RANK_ERROR, RANK_ERROR_INTERNAL,
               "unexpected Redis reply to %s", what);
  freeReplyObject (reply);
}

/* Runs script with keys and args (argv holds both, keys first). Returns the
 * reply, or NULL with error set; error replies become errors. */
static redisReply *
eval (RankStore *store, const Script *script, int nkeys, int argc,
      const char **argv, const size_t *argvlen, GError **error)
{
  const char *cmd[16];
  size_t len[16];
  char numkeys[8];

  g_assert (argc + 3 <= (int) G_N_ELEMENTS (cmd));
  g_snprintf (numkeys, sizeof numkeys, "%d", nkeys);
  cmd[0] = "EVALSHA";
  cmd[1] = script->sha;
  cmd[2] = numkeys;
  len[0] = 7;
  len[1] = 40;
  len[2] = strlen (numkeys);
  memcpy (cmd + 3, argv, sizeof *argv * (gsize) argc);
  memcpy (len + 3, argvlen, sizeof *argvlen * (gsize) argc);

  for (int attempt = 0;; attempt++)
    {
      redisReply *reply
          = rank_redis_link_command (store->link, argc + 3, cmd, len, error);

      if (reply == NULL)
        return NULL;
      if (reply->type != REDIS_REPLY_ERROR)
        return reply;
      if (attempt == 0 && g_str_has_prefix (reply->str, "NOSCRIPT"))
        {
          const char *load[] = { "SCRIPT", "LOAD", script->source };

          freeReplyObject (reply);
          g_message ("redis %s: reloading %s after NOSCRIPT",
                     rank_redis_link_name (store->link), script->name);
          reply = rank_redis_link_command (store->link, 3, load, NULL, error);
          if (reply == NULL)
            return NULL;
          if (reply->type == REDIS_REPLY_ERROR)
            {
              reply_error (reply, error);
              return NULL;
            }
          freeReplyObject (reply);
          continue;
        }
      reply_error (reply, error);
      return NULL;
    }
}

/* Fingerprint of what a request id stands for: a retry must carry the same
 * member, mode and value. 8 bytes of SHA-1: a false match needs a client
 * bug (a reused id) and 2^-64 luck, and then only hides that bug. */
static void
fingerprint (const RankUpdate *update, guint8 out[8])
{
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA1);
  guint8 digest[20];
  gsize len = sizeof digest;
  char head[32];

  g_snprintf (head, sizeof head, "%d:%" G_GINT64_FORMAT ":", update->mode,
              update->value);
  g_checksum_update (sum, (const guchar *) head, -1);
  g_checksum_update (sum, (const guchar *) update->member, -1);
  g_checksum_get_digest (sum, digest, &len);
  memcpy (out, digest, 8);
}

static gboolean
int_element (redisReply *reply, gsize i, gint64 *out)
{
  if (i >= reply->elements || reply->element[i]->type != REDIS_REPLY_INTEGER)
    return FALSE;
  *out = reply->element[i]->integer;
  return TRUE;
}

gboolean
rank_store_update (RankStore *store, const RankUpdate *update,
                   RankUpdateResult *result, GError **error)
{
  char zkey[KEY_MAX], tkey[KEY_MAX], qkey[KEY_MAX], mode[4], value[24],
      window[24];
  guint8 prefix[RANK_ORDERKEY_TIME_BYTES], fp[8];
  gint64 applied;
  redisReply *reply;

  rank_orderkey_encode_time (update->timestamp_ms, prefix);
  fingerprint (update, fp);
  g_snprintf (mode, sizeof mode, "%d", update->mode);
  g_snprintf (value, sizeof value, "%" G_GINT64_FORMAT, update->value);
  g_snprintf (window, sizeof window, "%" G_GINT64_FORMAT,
              store->dedup_window_ms);

  const char *argv[] = {
    zkey,
    tkey,
    qkey,
    update->member,
    mode,
    value,
    (const char *) prefix,
    window,
    (const char *) fp,
  };
  size_t argvlen[] = {
    board_key (zkey, update->board, RANK_KEY_SUFFIX_SCORES),
    board_key (tkey, update->board, RANK_KEY_SUFFIX_TIMES),
    (size_t) g_snprintf (qkey, sizeof qkey, RANK_KEY_PREFIX ":{%s}:%s:%s",
                         update->board, RANK_KEY_SUFFIX_REQUEST,
                         update->request_id),
    strlen (update->member),
    strlen (mode),
    strlen (value),
    sizeof prefix,
    strlen (window),
    sizeof fp,
  };

  reply = eval (store, &store->update, 3, G_N_ELEMENTS (argv), argv, argvlen,
                error);
  if (reply == NULL)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY
      || !int_element (reply, 0, &result->score)
      || !int_element (reply, 1, &result->rank)
      || !int_element (reply, 2, &applied))
    {
      unexpected (reply, "update.lua", error);
      return FALSE;
    }
  result->applied = applied != 0;
  freeReplyObject (reply);
  return TRUE;
}

gboolean
rank_store_get_rank (RankStore *store, const char *board, const char *member,
                     gint64 *score, gint64 *rank, GError **error)
{
  char zkey[KEY_MAX], tkey[KEY_MAX];
  const char *argv[] = { zkey, tkey, member };
  size_t argvlen[] = {
    board_key (zkey, board, RANK_KEY_SUFFIX_SCORES),
    board_key (tkey, board, RANK_KEY_SUFFIX_TIMES),
    strlen (member),
  };
  redisReply *reply;

  reply = eval (store, &store->rank, 2, G_N_ELEMENTS (argv), argv, argvlen,
                error);
  if (reply == NULL)
    return FALSE;
  if (reply->type == REDIS_REPLY_NIL)
    {
      freeReplyObject (reply);
      g_set_error (error, RANK_ERROR, RANK_ERROR_NOT_FOUND,
                   "member '%s' is not on board '%s'", member, board);
      return FALSE;
    }
  if (reply->type != REDIS_REPLY_ARRAY || !int_element (reply, 0, score)
      || !int_element (reply, 1, rank))
    {
      unexpected (reply, "rank.lua", error);
      return FALSE;
    }
  freeReplyObject (reply);
  return TRUE;
}

gboolean
rank_store_get_top (RankStore *store, const char *board, gint64 offset, gint n,
                    RankEntryFunc func, gpointer data, GError **error)
{
  char zkey[KEY_MAX], start[24], stop[24];
  const char *argv[] = { "ZRANGE", zkey, start, stop, "WITHSCORES" };
  size_t argvlen[] = {
    6,
    board_key (zkey, board, RANK_KEY_SUFFIX_SCORES),
    (size_t) g_snprintf (start, sizeof start, "%" G_GINT64_FORMAT, offset),
    (size_t) g_snprintf (stop, sizeof stop, "%" G_GINT64_FORMAT,
                         offset + n - 1),
    10,
  };
  redisReply *reply;

  reply = rank_redis_link_command (store->link, G_N_ELEMENTS (argv), argv,
                                   argvlen, error);
  if (reply == NULL)
    return FALSE;
  if (reply->type == REDIS_REPLY_ERROR)
    return reply_error (reply, error);
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements % 2 != 0)
    {
      unexpected (reply, "ZRANGE", error);
      return FALSE;
    }
  /* Validate the whole page before handing out any of it. */
  for (gsize i = 0; i < reply->elements; i += 2)
    {
      redisReply *key = reply->element[i], *sc = reply->element[i + 1];
      gint64 score;

      if (key->type != REDIS_REPLY_STRING || sc->type != REDIS_REPLY_STRING
          || key->len <= RANK_ORDERKEY_TIME_BYTES
          || !rank_orderkey_parse_zscore (sc->str, sc->len, &score))
        {
          unexpected (reply, "ZRANGE (malformed entry)", error);
          return FALSE;
        }
    }
  for (gsize i = 0; i < reply->elements; i += 2)
    {
      redisReply *key = reply->element[i], *sc = reply->element[i + 1];
      gint64 score;

      rank_orderkey_parse_zscore (sc->str, sc->len, &score);
      func (key->str + RANK_ORDERKEY_TIME_BYTES,
            key->len - RANK_ORDERKEY_TIME_BYTES, score,
            offset + (gint64) (i / 2) + 1, data);
    }
  freeReplyObject (reply);
  return TRUE;
}
