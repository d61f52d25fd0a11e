/* store.c -- boards in Redis (see store.h; key layout in constants.h and the
 * README).
 *
 * Every update is one EVALSHA of update.lua: the idempotency check, the
 * read, the computation and the writes happen atomically in Redis. Reads
 * are one EVALSHA of rank.lua (GetRank) or one ZRANGE (GetTopN). Scripts are
 * loaded with SCRIPT LOAD on every new Redis connection and, should Redis
 * still answer NOSCRIPT (a SCRIPT FLUSH, a failover), loaded again and the
 * call repeated: NOSCRIPT means the script did not run.
 *
 * An operation in flight is an Op: the callback, and a private copy of the
 * command's arguments (for the NOSCRIPT retry and for messages).
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

/* Turns a Redis error reply into a GError. */
static GError *
reply_error (const redisReply *reply)
{
  static const char *const unavailable[] = {
    "OOM ",      "READONLY ",    "BUSY ",       "LOADING ", "MASTERDOWN ",
    "TRYAGAIN ", "CLUSTERDOWN ", "NOREPLICAS ", "MISCONF ",
  };
  const char *msg = reply->str;

  if (g_str_has_prefix (msg, "RANK_INVALID "))
    return g_error_new_literal (RANK_ERROR, RANK_ERROR_INVALID,
                                msg + strlen ("RANK_INVALID "));
  for (gsize i = 0; i < G_N_ELEMENTS (unavailable); i++)
    if (g_str_has_prefix (msg, unavailable[i]))
      return g_error_new (RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                          "Redis refused the command: %s", msg);
  g_warning ("unexpected Redis error: %s", msg);
  return g_error_new (RANK_ERROR, RANK_ERROR_INTERNAL,
                      "unexpected Redis error: %s", msg);
}

static GError *
unexpected (const redisReply *reply, const char *what)
{
  g_warning ("unexpected Redis reply (type %d) to %s", reply->type, what);
  return g_error_new (RANK_ERROR, RANK_ERROR_INTERNAL,
                      "unexpected Redis reply to %s", what);
}

/* Fingerprint of what a request id stands for: a retry must carry the same
 * member, mode and value. 4 bytes: a false match needs a client bug (an id
 * reused for another update) and 2^-32 luck, and only hides that bug. */
static void
fingerprint (const RankUpdate *update, guint8 out[4])
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
  memcpy (out, digest, 4);
}

/* The request id as stored: 10 bytes of its SHA-256, and 4 more bytes that
 * select its record hash. Hashing bounds a record's size whatever the id's
 * length; 80 bits keep a false match (a new id taken for a retry) below
 * 10^-16 per request even with 45 million records in a board's window. */
static void
request_id_hash (const char *request_id, guint8 field[10], guint32 *selector)
{
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  guint8 digest[32];
  gsize len = sizeof digest;

  g_checksum_update (sum, (const guchar *) request_id, -1);
  g_checksum_get_digest (sum, digest, &len);
  memcpy (field, digest, 10);
  *selector = ((guint32) digest[10] << 24) | ((guint32) digest[11] << 16)
              | ((guint32) digest[12] << 8) | digest[13];
}

typedef enum
{
  OP_UPDATE,
  OP_RANK,
  OP_TOP,
} OpKind;

#define OP_MAX_ARGS 16

typedef struct
{
  RankStore *store;
  const Script *script; /* NULL: not a script */
  OpKind kind;
  gboolean retried;
  gint64 offset;
  union
  {
    RankStoreUpdateFunc update;
    RankStoreRankFunc rank;
    RankStoreTopFunc top;
  } func;
  gpointer data;
  int argc;
  const char *argv[OP_MAX_ARGS];
  size_t argvlen[OP_MAX_ARGS];
  char args[]; /* the bytes argv points into */
} Op;

/* An Op with a copy of the command: cmd[0..n) then, for scripts, the
 * EVALSHA prefix is prepended. */
static Op *
op_new (RankStore *store, OpKind kind, const Script *script, int nkeys,
        int argc, const char **argv, const size_t *argvlen)
{
  char numkeys[8];
  const char *all[OP_MAX_ARGS];
  size_t lens[OP_MAX_ARGS];
  int n = 0;
  gsize total = 0;
  Op *op;
  char *p;

  if (script != NULL)
    {
      g_snprintf (numkeys, sizeof numkeys, "%d", nkeys);
      all[n] = "EVALSHA", lens[n++] = 7;
      all[n] = script->sha, lens[n++] = 40;
      all[n] = numkeys, lens[n++] = strlen (numkeys);
    }
  g_assert (n + argc <= OP_MAX_ARGS);
  for (int i = 0; i < argc; i++, n++)
    {
      all[n] = argv[i];
      lens[n] = argvlen[i];
    }
  for (int i = 0; i < n; i++)
    total += lens[i] + 1;
  op = g_malloc0 (sizeof (Op) + total);
  op->store = store;
  op->kind = kind;
  op->script = script;
  op->argc = n;
  p = op->args;
  for (int i = 0; i < n; i++)
    {
      memcpy (p, all[i], lens[i]);
      p[lens[i]] = '\0';
      op->argv[i] = p;
      op->argvlen[i] = lens[i];
      p += lens[i] + 1;
    }
  return op;
}

static void on_reply (redisReply *reply, const GError *error, gpointer data);

static void
op_send (Op *op)
{
  rank_redis_link_send (op->store->link, op->argc, op->argv, op->argvlen,
                        on_reply, op);
}

/* Finishes op with an error. */
static void
op_fail (Op *op, const GError *error)
{
  switch (op->kind)
    {
    case OP_UPDATE:
      op->func.update (NULL, error, op->data);
      break;
    case OP_RANK:
      op->func.rank (0, 0, error, op->data);
      break;
    case OP_TOP:
      op->func.top (NULL, 0, error, op->data);
      break;
    }
  g_free (op);
}

static gboolean
int_element (const redisReply *reply, gsize i, gint64 *out)
{
  if (i >= reply->elements || reply->element[i]->type != REDIS_REPLY_INTEGER)
    return FALSE;
  *out = reply->element[i]->integer;
  return TRUE;
}

static GError *
finish_update (Op *op, const redisReply *reply)
{
  RankUpdateResult result;
  gint64 applied;

  if (reply->type != REDIS_REPLY_ARRAY || !int_element (reply, 0, &result.score)
      || !int_element (reply, 1, &result.rank)
      || !int_element (reply, 2, &applied))
    return unexpected (reply, "update.lua");
  result.applied = applied != 0;
  op->func.update (&result, NULL, op->data);
  return NULL;
}

/* argv of rank.lua: EVALSHA sha 2 zkey tkey member */
#define RANK_ARG_MEMBER 5
#define RANK_ARG_ZKEY 3

static GError *
finish_rank (Op *op, const redisReply *reply)
{
  gint64 score, rank;

  if (reply->type == REDIS_REPLY_NIL)
    {
      const char *zkey = op->argv[RANK_ARG_ZKEY];
      /* zkey is rk:{board}:z -- the board sits between the braces. */
      const char *open = strchr (zkey, '{'), *close = strrchr (zkey, '}');
      g_autoptr (GError) nf = g_error_new (RANK_ERROR, RANK_ERROR_NOT_FOUND,
                                           "member '%s' is not on board '%.*s'",
                                           op->argv[RANK_ARG_MEMBER],
                                           (int) (close - open - 1), open + 1);

      op->func.rank (0, 0, nf, op->data);
      return NULL;
    }
  if (reply->type != REDIS_REPLY_ARRAY || !int_element (reply, 0, &score)
      || !int_element (reply, 1, &rank))
    return unexpected (reply, "rank.lua");
  op->func.rank (score, rank, NULL, op->data);
  return NULL;
}

static GError *
finish_top (Op *op, const redisReply *reply)
{
  RankEntry entries[RANK_TOP_N_MAX];
  gsize n = 0;

  if (reply->type != REDIS_REPLY_ARRAY || reply->elements % 2 != 0
      || reply->elements / 2 > RANK_TOP_N_MAX)
    return unexpected (reply, "ZRANGE");
  for (gsize i = 0; i < reply->elements; i += 2, n++)
    {
      const redisReply *key = reply->element[i], *sc = reply->element[i + 1];

      if (key->type != REDIS_REPLY_STRING || sc->type != REDIS_REPLY_STRING
          || key->len <= RANK_ORDERKEY_TIME_BYTES
          || !rank_orderkey_parse_zscore (sc->str, sc->len, &entries[n].score))
        return unexpected (reply, "ZRANGE (malformed entry)");
      entries[n].member = key->str + RANK_ORDERKEY_TIME_BYTES;
      entries[n].member_len = key->len - RANK_ORDERKEY_TIME_BYTES;
      entries[n].rank = op->offset + (gint64) n + 1;
    }
  op->func.top (entries, n, NULL, op->data);
  return NULL;
}

static void
on_reply (redisReply *reply, const GError *error, gpointer data)
{
  Op *op = data;
  g_autoptr (GError) failure = NULL;

  if (error != NULL)
    {
      op_fail (op, error);
      return;
    }
  if (reply->type == REDIS_REPLY_ERROR)
    {
      if (op->script != NULL && !op->retried
          && g_str_has_prefix (reply->str, "NOSCRIPT"))
        {
          const char *load[] = { "SCRIPT", "LOAD", op->script->source };

          /* The load goes first on the same connection, so the retry that
           * follows it finds the script. */
          g_message ("redis %s: reloading %s after NOSCRIPT",
                     rank_redis_link_name (op->store->link), op->script->name);
          rank_redis_link_send (op->store->link, 3, load, NULL, NULL, NULL);
          op->retried = TRUE;
          op_send (op);
          return;
        }
      failure = reply_error (reply);
      op_fail (op, failure);
      return;
    }
  switch (op->kind)
    {
    case OP_UPDATE:
      failure = finish_update (op, reply);
      break;
    case OP_RANK:
      failure = finish_rank (op, reply);
      break;
    case OP_TOP:
      failure = finish_top (op, reply);
      break;
    }
  if (failure != NULL)
    op_fail (op, failure);
  else
    g_free (op);
}

void
rank_store_update (RankStore *store, const RankUpdate *update,
                   RankStoreUpdateFunc func, gpointer data)
{
  char zkey[KEY_MAX], tkey[KEY_MAX], qprefix[KEY_MAX], mode[4], value[24],
      window[24], selector[16], now[24];
  guint8 prefix[RANK_ORDERKEY_TIME_BYTES], fp[4], idhash[10];
  guint32 sel;
  Op *op;

  rank_orderkey_encode_time (update->timestamp_ms, prefix);
  fingerprint (update, fp);
  request_id_hash (update->request_id, idhash, &sel);
  g_snprintf (mode, sizeof mode, "%d", update->mode);
  g_snprintf (value, sizeof value, "%" G_GINT64_FORMAT, update->value);
  g_snprintf (window, sizeof window, "%" G_GINT64_FORMAT,
              store->dedup_window_ms);
  g_snprintf (selector, sizeof selector, "%u", sel);
  g_snprintf (now, sizeof now, "%" G_GINT64_FORMAT, g_get_real_time () / 1000);

  const char *argv[] = {
    zkey,
    tkey,
    qprefix,
    update->member,
    mode,
    value,
    (const char *) prefix,
    window,
    (const char *) fp,
    (const char *) idhash,
    selector,
    now,
  };
  size_t argvlen[] = {
    board_key (zkey, update->board, RANK_KEY_SUFFIX_SCORES),
    board_key (tkey, update->board, RANK_KEY_SUFFIX_TIMES),
    board_key (qprefix, update->board, RANK_KEY_SUFFIX_REQUEST),
    strlen (update->member),
    strlen (mode),
    strlen (value),
    sizeof prefix,
    strlen (window),
    sizeof fp,
    sizeof idhash,
    strlen (selector),
    strlen (now),
  };

  op = op_new (store, OP_UPDATE, &store->update, 3, G_N_ELEMENTS (argv), argv,
               argvlen);
  op->func.update = func;
  op->data = data;
  op_send (op);
}

void
rank_store_get_rank (RankStore *store, const char *board, const char *member,
                     RankStoreRankFunc func, gpointer data)
{
  char zkey[KEY_MAX], tkey[KEY_MAX];
  const char *argv[] = { zkey, tkey, member };
  size_t argvlen[] = {
    board_key (zkey, board, RANK_KEY_SUFFIX_SCORES),
    board_key (tkey, board, RANK_KEY_SUFFIX_TIMES),
    strlen (member),
  };
  Op *op = op_new (store, OP_RANK, &store->rank, 2, G_N_ELEMENTS (argv), argv,
                   argvlen);

  op->func.rank = func;
  op->data = data;
  op_send (op);
}

void
rank_store_get_top (RankStore *store, const char *board, gint64 offset, gint n,
                    RankStoreTopFunc func, gpointer data)
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
  Op *op = op_new (store, OP_TOP, NULL, 0, G_N_ELEMENTS (argv), argv, argvlen);

  op->func.top = func;
  op->data = data;
  op->offset = offset;
  op_send (op);
}
