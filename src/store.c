/* store.c -- boards in Redis (see store.h; key layout in constants.h and the
 * README; shard placement in shard.h).
 *
 * Every update is one EVALSHA of update.lua on one shard: the idempotency
 * check, the read, the computation and the writes happen atomically in
 * Redis. GetRank is one EVALSHA of rank.lua per node holding the board: the
 * node of the member's shard finds the member and counts the entries ahead
 * of it there, then every other node counts those ahead of it in its shards.
 * GetTopN is one ZRANGE on an ordinary board; on a sharded one, one ZRANGE
 * of the top offset+n per shard (all sent at once: they share each node's
 * round trip, and the nodes work in parallel), merged here.
 *
 * Scripts are loaded with SCRIPT LOAD on every new Redis connection and,
 * should Redis still answer NOSCRIPT (a SCRIPT FLUSH, a failover), loaded
 * again and the call repeated: NOSCRIPT means the script did not run.
 *
 * A command in flight is an Op: what to call with its reply, and a private
 * copy of its arguments (for the NOSCRIPT retry). A call that needs several
 * commands (a fan-out) counts its Ops down and answers once, with the first
 * error if any Op failed: never with a partial result.
 */
#include "store.h"

#include <string.h>

#include "cluster.h"
#include "error.h"
#include "constants.h"
#include "layout.h"
#include "lua_scripts.h"
#include "orderkey.h"
#include "period.h"
#include "shard.h"

typedef struct
{
  const char *name;
  const char *source;
  char sha[41];
} Script;

struct _RankStore
{
  RankRedisLink **links; /* one per node; ordinary boards on the first */
  /* Nodes; on Redis Cluster, one per possible shard (each shard its own
   * node, so that no command names keys of two slots), and the cluster
   * finds each command's master from its first key. */
  guint n_links;
  RankCluster *cluster;
  /* WAIT for this many replicas after each update (0: none), this long. */
  guint wait_replicas;
  int wait_timeout_ms;
  RankConfig *config; /* a reference */
  gint64 dedup_window_ms;
  GRand *rand; /* Sample */
  /* What this worker learned of boards' stored layouts (layout.h): board
   * -> LayoutEntry, for the config in force. */
  GHashTable *layouts;
  Script update;
  Script rank;
  Script data;
};

/* Longest key: prefix, board, shard, period, suffix and punctuation. */
#define KEY_MAX                                                                \
  (sizeof RANK_SHARD_KEY_PREFIX + RANK_BOARD_MAX_BYTES + RANK_PERIOD_LABEL_MAX \
   + 32)

/* The key of suffix for board, or for its shard when it has shards; on a
 * periodic board (period: the label, or NULL) the period's own keys, except
 * the request-id records, which are the board's across periods (a retry
 * after midnight is still a retry). */
static gsize
board_key (char *out, const char *board, const char *period, guint shard,
           guint shards, const char *suffix)
{
  char tag[RANK_BOARD_MAX_BYTES + 16];

  if (shards > 1)
    g_snprintf (tag, sizeof tag, RANK_SHARD_KEY_PREFIX ":{%s/%u}", board,
                shard);
  else
    g_snprintf (tag, sizeof tag, RANK_KEY_PREFIX ":{%s}", board);
  if (period != NULL && *period != '\0'
      && strcmp (suffix, RANK_KEY_SUFFIX_REQUEST) != 0)
    return (gsize) g_snprintf (out, KEY_MAX, "%s:p:%s:%s", tag, period, suffix);
  return (gsize) g_snprintf (out, KEY_MAX, "%s:%s", tag, suffix);
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

/* A board's stored layout as last read, for the config in force. */
typedef struct
{
  gboolean present; /* it has a descriptor */
  char *mismatch;   /* why the config may not touch it; NULL: it may */
  gint64 checked;   /* monotonic us */
} LayoutEntry;

static void
layout_free (gpointer data)
{
  LayoutEntry *e = data;

  g_free (e->mismatch);
  g_free (e);
}

/* What both kinds of store start with; n_nodes as in the struct. */
static RankStore *
store_new (guint n_nodes, RankConfig *config, gint64 dedup_window_ms,
           guint32 seed)
{
  RankStore *store = g_new0 (RankStore, 1);

  store->n_links = n_nodes;
  store->config = rank_config_ref (config);
  store->dedup_window_ms = dedup_window_ms;
  store->rand = seed != 0 ? g_rand_new_with_seed (seed) : g_rand_new ();
  store->layouts
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, layout_free);
  script_init (&store->update, "update.lua", rank_lua_update);
  script_init (&store->rank, "rank.lua", rank_lua_rank);
  script_init (&store->data, "data.lua", rank_lua_data);
  return store;
}

RankStore *
rank_store_new (RankRedisLink *const *links, guint n_links, RankConfig *config,
                gint64 dedup_window_ms, guint32 seed)
{
  RankStore *store = store_new (n_links, config, dedup_window_ms, seed);

  g_assert (n_links >= 1);
  store->links = g_memdup2 (links, n_links * sizeof *links);
  for (guint i = 0; i < n_links; i++)
    {
      script_register (links[i], &store->update);
      script_register (links[i], &store->rank);
      script_register (links[i], &store->data);
    }
  return store;
}

RankStore *
rank_store_new_cluster (RankCluster *cluster, RankConfig *config,
                        gint64 dedup_window_ms, guint32 seed)
{
  RankStore *store = store_new (RANK_SHARDS_MAX, config, dedup_window_ms, seed);
  const Script *scripts[] = { &store->update, &store->rank, &store->data };

  store->cluster = cluster;
  /* On every master, found now or after a failover. */
  for (gsize i = 0; i < G_N_ELEMENTS (scripts); i++)
    {
      const char *argv[] = { "SCRIPT", "LOAD", scripts[i]->source };

      rank_cluster_add_startup (cluster, 3, argv);
    }
  return store;
}

void
rank_store_set_wait_replicas (RankStore *store, guint replicas, int timeout_ms)
{
  store->wait_replicas = replicas;
  store->wait_timeout_ms = timeout_ms;
}

void
rank_store_free (RankStore *store)
{
  if (store == NULL)
    return;
  rank_config_unref (store->config);
  g_rand_free (store->rand);
  g_hash_table_unref (store->layouts);
  g_free (store->links);
  g_free (store);
}

void
rank_store_set_config (RankStore *store, RankConfig *config)
{
  RankConfig *old = store->config;

  store->config = rank_config_ref (config);
  rank_config_unref (old);
  /* Verdicts were for the options before. */
  g_hash_table_remove_all (store->layouts);
}

/* Turns a Redis error reply into a GError. */
static GError *
reply_error (const redisReply *reply)
{
  static const char *const unavailable[] = {
    "OOM ",
    "READONLY ",
    "BUSY ",
    "LOADING ",
    "MASTERDOWN ",
    "TRYAGAIN ",
    "CLUSTERDOWN ",
    "NOREPLICAS ",
    "MISCONF ",
    /* Credentials wrong or missing (the log says which at connect). */
    "NOAUTH ",
    "WRONGPASS ",
    "NOPERM ",
  };
  const char *msg = reply->str;

  if (g_str_has_prefix (msg, "RANK_INVALID "))
    return g_error_new_literal (RANK_ERROR, RANK_ERROR_INVALID,
                                msg + strlen ("RANK_INVALID "));
  /* A key of another type than rankd keeps there: the script found it
   * before its first write and changed nothing. Not worth a retry: an
   * operator has to repair or reset the board. The script's location,
   * which Redis appends, tells the operator nothing. */
  if (g_str_has_prefix (msg, "RANK_DAMAGED "))
    {
      const char *where = strstr (msg, " script: ");
      int len = where != NULL ? (int) (where - msg) : (int) strlen (msg);

      return g_error_new (RANK_ERROR, RANK_ERROR_INTERNAL,
                          "damaged data: %.*s; nothing was changed",
                          len - (int) strlen ("RANK_DAMAGED "),
                          msg + strlen ("RANK_DAMAGED "));
    }
  if (g_str_has_prefix (msg, "WRONGTYPE "))
    return g_error_new (RANK_ERROR, RANK_ERROR_INTERNAL,
                        "damaged data: a key of the board holds another type "
                        "than rankd keeps there (%s)",
                        msg);
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
 * member, mode and value (and subscores and data, when given: an update
 * without them hashes as before they existed). 4 bytes: a false match needs
 * a client bug (an id reused for another update) and 2^-32 luck, and only
 * hides that bug. */
void
rank_store_fingerprint (const RankUpdate *update, guint8 out[4])
{
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA1);
  guint8 digest[20];
  gsize len = sizeof digest;
  char head[32];

  g_snprintf (head, sizeof head, "%d:%" G_GINT64_FORMAT ":", update->mode,
              update->value);
  g_checksum_update (sum, (const guchar *) head, -1);
  g_checksum_update (sum, (const guchar *) update->member, -1);
  for (guint i = 0; i < update->n_subscores; i++)
    {
      g_snprintf (head, sizeof head, "\ns%" G_GINT64_FORMAT,
                  update->subscores[i]);
      g_checksum_update (sum, (const guchar *) head, -1);
    }
  if (update->data_given)
    {
      g_snprintf (head, sizeof head, "\nd%" G_GSIZE_FORMAT ":",
                  update->data_len);
      g_checksum_update (sum, (const guchar *) head, -1);
      g_checksum_update (sum, (const guchar *) update->data,
                         (gssize) update->data_len);
    }
  g_checksum_get_digest (sum, digest, &len);
  memcpy (out, digest, 4);
}

/* A board's order-key prefix bytes: subscores, then time (orderkey.h). */
static gsize
prefix_len (const RankBoardOptions *o)
{
  return RANK_ORDERKEY_PREFIX_BYTES (o->n_subscores);
}

/* The subscores a prefix (or an order key) starts with. */
static void
decode_subscores (const RankBoardOptions *o, const char *prefix, guint *n,
                  gint64 *out)
{
  *n = o->n_subscores;
  for (guint i = 0; i < o->n_subscores; i++)
    out[i] = rank_orderkey_decode_subscore (
        (const guint8 *) prefix + i * RANK_ORDERKEY_SUBSCORE_BYTES,
        o->subscore_asc[i]);
}

/* An entry (rank 0, no data) from its order key and sorted-set score. */
static void
entry_from_key (const RankBoardOptions *o, const char *key, gsize key_len,
                gint64 zscore, RankEntry *e)
{
  gsize skip = prefix_len (o);

  g_assert (key_len > skip);
  e->member = key + skip;
  e->member_len = key_len - skip;
  e->score = o->order == RANK_ORDER_ASC ? zscore : -zscore;
  e->rank = 0;
  e->data = NULL;
  e->data_len = 0;
  decode_subscores (o, key, &e->n_subscores, e->subscores);
}

/* The request id as stored: 10 bytes of its SHA-256, and 4 more bytes that
 * select its record hash. Hashing bounds a record's size whatever the id's
 * length; 80 bits keep a false match (a new id taken for a retry) below
 * 10^-16 per request even with 45 million records in a board's window. */
void
rank_store_request_id_hash (const char *request_id, guint8 field[10],
                            guint32 *selector)
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

/* ---- commands ---- */

/* A command's arguments, built up in one buffer: on the stack for the
 * usual command, on the heap only for the long key lists of a sharded read
 * (op_start copies it into the Op either way). */
#define CMD_MAX_ARGS (MAX (RANK_SHARDS_MAX, RANK_TOP_N_MAX) + 16)
#define CMD_INLINE_BYTES 1024

typedef struct
{
  int argc;
  gsize offset[CMD_MAX_ARGS];
  gsize len[CMD_MAX_ARGS];
  char *bytes; /* inline, or a heap copy once it outgrew it */
  gsize used;
  gsize size;
  char inline_bytes[CMD_INLINE_BYTES];
} Cmd;

static void
cmd_init (Cmd *cmd)
{
  cmd->argc = 0;
  cmd->bytes = cmd->inline_bytes;
  cmd->used = 0;
  cmd->size = sizeof cmd->inline_bytes;
}

static void
cmd_add (Cmd *cmd, const void *arg, gsize len)
{
  g_assert (cmd->argc < CMD_MAX_ARGS);
  if (cmd->used + len > cmd->size)
    {
      gsize size = MAX (cmd->size * 2, cmd->used + len);

      if (cmd->bytes == cmd->inline_bytes)
        cmd->bytes = memcpy (g_malloc (size), cmd->inline_bytes, cmd->used);
      else
        cmd->bytes = g_realloc (cmd->bytes, size);
      cmd->size = size;
    }
  cmd->offset[cmd->argc] = cmd->used;
  cmd->len[cmd->argc++] = len;
  memcpy (cmd->bytes + cmd->used, arg, len);
  cmd->used += len;
}

static void
cmd_add_str (Cmd *cmd, const char *arg)
{
  cmd_add (cmd, arg, strlen (arg));
}

static void
cmd_add_int (Cmd *cmd, gint64 value)
{
  char text[24];

  cmd_add (cmd, text,
           (gsize) g_snprintf (text, sizeof text, "%" G_GINT64_FORMAT, value));
}

static void
cmd_add_key (Cmd *cmd, const char *board, const char *period, guint shard,
             guint shards, const char *suffix)
{
  char key[KEY_MAX];

  cmd_add (cmd, key, board_key (key, board, period, shard, shards, suffix));
}

typedef struct _Op Op;

/* Called exactly once per Op: with the reply (never an error reply), or
 * with error. The Op is freed after it returns. */
typedef void (*OpDone) (Op *op, const redisReply *reply, const GError *error);

struct _Op
{
  RankStore *store;
  RankRedisLink *link;
  const Script *script; /* NULL: not a script */
  gboolean retried;
  guint redirects; /* Redis Cluster: MOVED and ASK followed so far */
  OpDone done;
  gpointer data; /* the call this command is part of */
  guint part;    /* which node or shard of the call */
  int argc;
  const char **argv;
  size_t *argvlen;
};

static void on_reply (redisReply *reply, const GError *error, gpointer data);

static void
op_send (Op *op)
{
  rank_redis_link_send (op->link, op->argc, op->argv, op->argvlen, on_reply,
                        op);
}

/* Sends cmd (as EVALSHA of script with its first nkeys arguments as keys,
 * when script is set) to node; done gets the reply. Frees cmd's buffer if
 * it grew onto the heap. */
static void
op_start (RankStore *store, guint node, const Script *script, int nkeys,
          Cmd *cmd, OpDone done, gpointer data, guint part)
{
  RankRedisLink *link;
  char numkeys[8];
  const char *pre[3] = { "EVALSHA", script ? script->sha : NULL, numkeys };
  int npre = script != NULL ? 3 : 0;
  int argc = npre + cmd->argc;
  gsize bytes = cmd->used + (gsize) argc;
  Op *op;
  char *p;

  /* Every command names a key first: a script's first key, or the
   * command's first argument. */
  if (store->cluster != NULL)
    {
      int k = script != NULL ? 0 : 1;

      g_assert (cmd->argc > k && (script == NULL || nkeys > 0));
      link = rank_cluster_link (
          store->cluster,
          rank_cluster_slot (cmd->bytes + cmd->offset[k], cmd->len[k]));
    }
  else
    link = store->links[node];
  g_snprintf (numkeys, sizeof numkeys, "%d", nkeys);
  for (int i = 0; i < npre; i++)
    bytes += strlen (pre[i]);
  op = g_malloc0 (sizeof (Op)
                  + (gsize) argc * (sizeof (char *) + sizeof (size_t)) + bytes);
  op->store = store;
  op->link = link;
  op->script = script;
  op->done = done;
  op->data = data;
  op->part = part;
  op->argc = argc;
  op->argv = (const char **) (op + 1);
  op->argvlen = (size_t *) (op->argv + argc);
  p = (char *) (op->argvlen + argc);
  for (int i = 0; i < argc; i++)
    {
      const char *arg = i < npre ? pre[i] : cmd->bytes + cmd->offset[i - npre];
      gsize len = i < npre ? strlen (pre[i]) : cmd->len[i - npre];

      memcpy (p, arg, len);
      p[len] = '\0';
      op->argv[i] = p;
      op->argvlen[i] = len;
      p += len + 1;
    }
  if (cmd->bytes != cmd->inline_bytes)
    g_free (cmd->bytes);
  cmd->bytes = NULL;
  op_send (op);
}

/* A MOVED or ASK reply on Redis Cluster: sends op where it points (MOVED
 * also updates the map). FALSE if the reply is neither, or op has been
 * redirected too often. */
static gboolean
follow_redirect (Op *op, const redisReply *reply)
{
  g_autofree char *host = NULL;
  RankRedisLink *to;
  gboolean ask;
  guint slot;
  guint16 port;

  if (op->store->cluster == NULL
      || !rank_cluster_parse_redirect (reply->str, &ask, &slot, &host, &port)
      || op->redirects >= RANK_CLUSTER_REDIRECTS_MAX)
    return FALSE;
  op->redirects++;
  if (!ask)
    rank_cluster_moved (op->store->cluster, slot, host, port);
  to = rank_cluster_link_to (op->store->cluster, host, port);
  if (to == NULL)
    return FALSE;
  op->link = to;
  if (ask)
    {
      /* ASKING lets the next command in on a slot being imported. */
      const char *asking[] = { "ASKING" };

      rank_redis_link_send (op->link, 1, asking, NULL, NULL, NULL);
    }
  op_send (op);
  return TRUE;
}

static void
on_reply (redisReply *reply, const GError *error, gpointer data)
{
  Op *op = data;
  g_autoptr (GError) failure = NULL;

  /* A master out of reach may have failed over: learn the new map for the
   * retries to come. */
  if (error != NULL && op->store->cluster != NULL)
    rank_cluster_refresh (op->store->cluster);
  if (error == NULL && reply->type == REDIS_REPLY_ERROR
      && follow_redirect (op, reply))
    return;
  if (error == NULL && reply->type == REDIS_REPLY_ERROR)
    {
      if (op->script != NULL && !op->retried
          && g_str_has_prefix (reply->str, "NOSCRIPT"))
        {
          const char *load[] = { "SCRIPT", "LOAD", op->script->source };

          /* The load goes first on the same connection, so the retry that
           * follows it finds the script. */
          g_message ("redis %s: reloading %s after NOSCRIPT",
                     rank_redis_link_name (op->link), op->script->name);
          rank_redis_link_send (op->link, 3, load, NULL, NULL, NULL);
          op->retried = TRUE;
          op_send (op);
          return;
        }
      error = failure = reply_error (reply);
    }
  op->done (op, error != NULL ? NULL : reply, error);
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

static gboolean
string_element (const redisReply *reply, gsize i)
{
  return i < reply->elements && reply->element[i]->type == REDIS_REPLY_STRING;
}

/* A fan-out's countdown: records the first error of its Ops. Returns TRUE
 * when the last Op is done. */
typedef struct
{
  guint pending;
  GError *error;
} Countdown;

static gboolean
countdown_done (Countdown *c, const GError *error)
{
  if (error != NULL && c->error == NULL)
    c->error = g_error_copy (error);
  g_assert (c->pending > 0);
  return --c->pending == 0;
}

static const char *
order_name (RankOrder order)
{
  return order == RANK_ORDER_ASC ? "asc" : "desc";
}

static const char *
kind_name (RankKind kind)
{
  return kind == RANK_KIND_COMPETITION ? "competition"
         : kind == RANK_KIND_DENSE     ? "dense"
                                       : "ordinal";
}

/* The sorted-set score range of scores min..max: -score, or score on asc
 * boards. */
static void
zscore_bounds (const RankBoardOptions *o, gint64 min, gint64 max, gint64 *lo,
               gint64 *hi)
{
  *lo = o->order == RANK_ORDER_ASC ? min : -max;
  *hi = o->order == RANK_ORDER_ASC ? max : -min;
}

/* ---- the board's layout ---- */

typedef struct
{
  RankStore *store;
  char *board;
  gboolean write;
  RankStoreLayoutFunc func;
  gpointer data;
} LayoutCall;

static GError *
layout_refusal (const char *mismatch)
{
  return g_error_new_literal (RANK_ERROR, RANK_ERROR_UNAVAILABLE, mismatch);
}

static void
layout_read (Op *op, const redisReply *reply, const GError *error)
{
  LayoutCall *call = op->data;
  RankStore *store = call->store;
  const RankBoardOptions *o = rank_config_board (store->config, call->board);
  g_autoptr (GError) refused = NULL;
  LayoutEntry *e;

  if (error == NULL && reply->type != REDIS_REPLY_NIL
      && reply->type != REDIS_REPLY_STRING)
    error = refused = unexpected (reply, "the board's layout descriptor");
  if (error == NULL)
    {
      if (g_hash_table_size (store->layouts) >= RANK_LAYOUT_CACHE_MAX)
        g_hash_table_remove_all (store->layouts);
      e = g_new0 (LayoutEntry, 1);
      /* NIL: none (a read), or none until this SET NX wrote ours. */
      e->present = reply->type == REDIS_REPLY_STRING || call->write;
      e->mismatch = reply->type == REDIS_REPLY_STRING
                        ? rank_layout_mismatch (call->board, reply->str, o)
                        : NULL;
      e->checked = g_get_monotonic_time ();
      g_hash_table_replace (store->layouts, g_strdup (call->board), e);
      if (e->present)
        rank_layout_report (call->board, e->mismatch);
      if (e->mismatch != NULL)
        error = refused = layout_refusal (e->mismatch);
    }
  call->func (error, call->data);
  g_free (call->board);
  g_free (call);
}

static void
ignore_reply (Op *op, const redisReply *reply, const GError *error)
{
}

RankLayoutCheck
rank_store_check_layout (RankStore *store, const char *board, gboolean write,
                         GError **error, RankStoreLayoutFunc func,
                         gpointer data)
{
  const RankBoardOptions *o = rank_config_board (store->config, board);
  LayoutEntry *e = g_hash_table_lookup (store->layouts, board);
  LayoutCall *call;
  Cmd cmd;

  if (e != NULL
      && g_get_monotonic_time () - e->checked
             < (gint64) RANK_LAYOUT_RECHECK_MS * 1000
      && (e->present || !write))
    {
      if (e->mismatch == NULL)
        return RANK_LAYOUT_OK;
      g_propagate_error (error, layout_refusal (e->mismatch));
      return RANK_LAYOUT_REFUSED;
    }
  call = g_new0 (LayoutCall, 1);
  call->store = store;
  call->board = g_strdup (board);
  call->write = write;
  call->func = func;
  call->data = data;
  cmd_init (&cmd);
  if (!write)
    {
      cmd_add_str (&cmd, "GET");
      cmd_add_key (&cmd, board, NULL, 0, 1, RANK_KEY_SUFFIX_LAYOUT);
      op_start (store, 0, NULL, 0, &cmd, layout_read, call, 0);
      return RANK_LAYOUT_PENDING;
    }
  {
    /* The first write records the layout; a periodic board's descriptor
     * lives as long as its newest period's keys, and every write check
     * moves that on. */
    g_autofree char *describe = rank_layout_describe (o);
    gint64 expire_ms = 0;

    if (o->period.kind != RANK_PERIOD_NONE)
      {
        RankPeriod current;

        rank_period_of (&o->period, g_get_real_time () / 1000, &current);
        expire_ms = rank_period_expiry_ms (&o->period, &current, o->retention);
      }
    cmd_add_str (&cmd, "SET");
    cmd_add_key (&cmd, board, NULL, 0, 1, RANK_KEY_SUFFIX_LAYOUT);
    cmd_add_str (&cmd, describe);
    cmd_add_str (&cmd, "NX");
    cmd_add_str (&cmd, "GET");
    if (expire_ms > 0)
      {
        cmd_add_str (&cmd, "PXAT");
        cmd_add_int (&cmd, expire_ms);
      }
    op_start (store, 0, NULL, 0, &cmd, layout_read, call, 0);
    if (expire_ms > 0)
      {
        cmd_init (&cmd);
        cmd_add_str (&cmd, "PEXPIREAT");
        cmd_add_key (&cmd, board, NULL, 0, 1, RANK_KEY_SUFFIX_LAYOUT);
        cmd_add_int (&cmd, expire_ms);
        cmd_add_str (&cmd, "GT");
        op_start (store, 0, NULL, 0, &cmd, ignore_reply, NULL, 0);
      }
  }
  return RANK_LAYOUT_PENDING;
}

static void
layout_checked_quietly (const GError *error, gpointer data)
{
}

void
rank_store_check_configured_layouts (RankStore *store)
{
  g_auto (GStrv) boards = rank_config_board_names (store->config);

  for (char **b = boards; *b != NULL; b++)
    rank_store_check_layout (store, *b, FALSE, NULL, layout_checked_quietly,
                             NULL);
}

/* ---- Update ---- */

typedef struct
{
  RankStoreUpdateFunc func;
  gpointer data;
  RankBoardOptions options; /* a copy: a reload may free the config */
  guint wait_replicas;
  int wait_timeout_ms;
  RankUpdateResult result; /* held while WAIT runs */
} UpdateCall;

/* WAIT answered: the replicas that have the update. Too few, and the
 * update is as good as unacknowledged: Unavailable, and a retry with the
 * same request id finds it if it survives. */
static void
update_replicated (redisReply *reply, const GError *error, gpointer data)
{
  UpdateCall *call = data;
  g_autoptr (GError) few = NULL;

  if (error == NULL && reply->type == REDIS_REPLY_ERROR)
    error = few = reply_error (reply);
  else if (error == NULL
           && (reply->type != REDIS_REPLY_INTEGER
               || reply->integer < (long long) call->wait_replicas))
    error = few = g_error_new (
        RANK_ERROR, RANK_ERROR_UNAVAILABLE,
        "the update reached %lld of the %u replicas asked for "
        "(--wait-replicas) within %d ms; retry with the same request_id",
        reply->type == REDIS_REPLY_INTEGER ? reply->integer : 0LL,
        call->wait_replicas, call->wait_timeout_ms);
  call->func (error != NULL ? NULL : &call->result, error, call->data);
  g_free (call);
}

static void
update_done (Op *op, const redisReply *reply, const GError *error)
{
  UpdateCall *call = op->data;
  g_autoptr (GError) bad = NULL;
  RankUpdateResult result = { 0 };
  gint64 applied = 0;
  gsize subs_len = call->options.n_subscores * RANK_ORDERKEY_SUBSCORE_BYTES;

  if (error == NULL
      && (reply->type != REDIS_REPLY_ARRAY
          || !int_element (reply, 0, &result.score)
          || !int_element (reply, 1, &result.rank)
          || !int_element (reply, 2, &applied) || !string_element (reply, 3)
          || (reply->element[3]->len != subs_len
              && reply->element[3]->len != 0)))
    error = bad = unexpected (reply, "update.lua");
  if (error == NULL && reply->element[3]->len == subs_len)
    decode_subscores (&call->options, reply->element[3]->str,
                      &result.n_subscores, result.subscores);
  result.applied = applied != 0;
  /* WAIT on the connection that ran the script covers its writes; a retry
   * that changed nothing waits too: the first try's writes may not have
   * reached the replicas yet. */
  if (error == NULL && call->wait_replicas > 0)
    {
      char replicas[16], timeout[16];
      const char *argv[] = { "WAIT", replicas, timeout };

      g_snprintf (replicas, sizeof replicas, "%u", call->wait_replicas);
      g_snprintf (timeout, sizeof timeout, "%d", call->wait_timeout_ms);
      call->result = result;
      rank_redis_link_send (op->link, 3, argv, NULL, update_replicated, call);
      return;
    }
  call->func (error != NULL ? NULL : &result, error, call->data);
  g_free (call);
}

void
rank_store_update (RankStore *store, const RankUpdate *update,
                   RankStoreUpdateFunc func, gpointer data)
{
  const RankBoardOptions *o = rank_config_board (store->config, update->board);
  gsize member_len = strlen (update->member);
  guint shard = rank_shard_of (update->member, member_len, o->shards);
  guint node = rank_shard_node (shard, store->n_links);
  guint8 prefix[RANK_ORDERKEY_TIME_BYTES], fp[4], idhash[10];
  guint8 subs[RANK_SUBSCORES_MAX * RANK_ORDERKEY_SUBSCORE_BYTES];
  UpdateCall *call = g_new (UpdateCall, 1);
  RankPeriod period;
  guint32 sel;
  gint64 now_ms = g_get_real_time () / 1000, buckets[RANK_STORE_BUCKET_ARGS];
  gint64 window_ms = o->dedup_window_s != 0 ? (gint64) o->dedup_window_s * 1000
                                            : store->dedup_window_ms;
  Cmd cmd;

  rank_period_of (&o->period, update->timestamp_ms, &period);
  rank_orderkey_encode_time (update->timestamp_ms, prefix);
  rank_store_fingerprint (update, fp);
  rank_store_request_id_hash (update->request_id, idhash, &sel);
  call->func = func;
  call->data = data;
  call->options = *o;
  call->wait_replicas = store->wait_replicas;
  call->wait_timeout_ms = store->wait_timeout_ms;
  /* Without subscores, an INCREMENT keeps the member's own; a new member
   * gets 0s. */
  g_assert (update->n_subscores == 0 || update->n_subscores == o->n_subscores);
  /* The config refuses more than RANK_SUBSCORES_MAX; the second bound says
   * so to the compiler, whose -O3 warns of an overflow of subs otherwise. */
  for (guint i = 0; i < o->n_subscores && i < RANK_SUBSCORES_MAX; i++)
    rank_orderkey_encode_subscore (
        update->n_subscores > 0 ? update->subscores[i] : 0, o->subscore_asc[i],
        subs + i * RANK_ORDERKEY_SUBSCORE_BYTES);
  cmd_init (&cmd);
  cmd_add_key (&cmd, update->board, period.label, shard, o->shards,
               RANK_KEY_SUFFIX_SCORES);
  cmd_add_key (&cmd, update->board, period.label, shard, o->shards,
               RANK_KEY_SUFFIX_TIMES);
  cmd_add_key (&cmd, update->board, period.label, shard, o->shards,
               RANK_KEY_SUFFIX_REQUEST);
  cmd_add_key (&cmd, update->board, period.label, shard, o->shards,
               RANK_KEY_SUFFIX_DISTINCT);
  cmd_add_key (&cmd, update->board, period.label, shard, o->shards,
               RANK_KEY_SUFFIX_COUNTS);
  cmd_add_key (&cmd, update->board, period.label, shard, o->shards,
               RANK_KEY_SUFFIX_DATA);
  cmd_add (&cmd, update->member, member_len);
  cmd_add_int (&cmd, update->mode);
  cmd_add_int (&cmd, update->value);
  cmd_add (&cmd, prefix, sizeof prefix);
  cmd_add_int (&cmd, window_ms);
  cmd_add (&cmd, fp, sizeof fp);
  cmd_add (&cmd, idhash, sizeof idhash);
  cmd_add_int (&cmd, sel);
  cmd_add_int (&cmd, now_ms);
  /* The rank within one shard is not the board's: sharded updates leave it
   * unset rather than ask every shard. */
  cmd_add_str (&cmd, o->shards > 1 ? "0" : "1");
  cmd_add_str (&cmd, order_name (o->order));
  cmd_add_str (&cmd, kind_name (o->rank));
  /* Each shard keeps its best cap: the board's best cap are among them. */
  cmd_add_int (&cmd, o->cap);
  /* A period's keys expire by themselves once it is past retention. */
  cmd_add_int (&cmd,
               o->period.kind == RANK_PERIOD_NONE
                   ? 0
                   : rank_period_expiry_ms (&o->period, &period, o->retention));
  cmd_add (&cmd, subs, o->n_subscores * RANK_ORDERKEY_SUBSCORE_BYTES);
  cmd_add_str (&cmd, update->n_subscores == 0 ? "1" : "0");
  cmd_add_str (&cmd, update->data_given ? "1" : "0");
  cmd_add (&cmd, update->data_given ? update->data : "",
           update->data_given ? update->data_len : 0);
  rank_store_request_buckets (window_ms, now_ms, buckets);
  for (guint i = 0; i < RANK_STORE_BUCKET_ARGS; i++)
    cmd_add_int (&cmd, buckets[i]);
  op_start (store, node, &store->update, 6, &cmd, update_done, call, node);
}

/* Numbers update.lua would otherwise format itself, which costs Redis more;
 * the same arithmetic as its width and current. */
void
rank_store_request_buckets (gint64 window_ms, gint64 now_ms,
                            gint64 out[RANK_STORE_BUCKET_ARGS])
{
  gint64 width = (window_ms + RANK_DEDUP_BUCKETS - 1) / RANK_DEDUP_BUCKETS;
  gint64 bucket = now_ms / width;

  for (gint64 i = 0; i <= RANK_DEDUP_BUCKETS; i++)
    out[i] = bucket - i;
  out[RANK_DEDUP_BUCKETS + 1] = (bucket + RANK_DEDUP_BUCKETS + 1) * width;
}

/* What is ahead of an entry, summed over nodes: a count (ordinal and
 * competition ranks, one-shard dense ranks), or on a sharded dense board the
 * set of distinct better sorted-set scores, whose size is the count. */
typedef struct
{
  gint64 count;
  GHashTable *distinct; /* gint64 set; NULL unless sharded dense */
} Ahead;

static void
ahead_init (Ahead *a, const RankBoardOptions *o)
{
  a->count = 0;
  a->distinct
      = o->rank == RANK_KIND_DENSE && o->shards > 1
            ? g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL)
            : NULL;
}

static void
ahead_clear (Ahead *a)
{
  g_clear_pointer (&a->distinct, g_hash_table_unref);
}

/* Adds one node's answer to rank.lua count (or find's list): an integer,
 * or the list of distinct scores. FALSE if it is neither. */
static gboolean
ahead_add (Ahead *a, const redisReply *reply)
{
  if (a->distinct == NULL)
    {
      if (reply->type != REDIS_REPLY_INTEGER)
        return FALSE;
      a->count += reply->integer;
      return TRUE;
    }
  if (reply->type != REDIS_REPLY_ARRAY)
    return FALSE;
  for (gsize i = 0; i < reply->elements; i++)
    {
      const redisReply *e = reply->element[i];
      gint64 zscore;

      if (e->type != REDIS_REPLY_STRING
          || !rank_orderkey_parse_zscore (e->str, e->len, &zscore))
        return FALSE;
      g_hash_table_add (a->distinct, g_memdup2 (&zscore, sizeof zscore));
    }
  return TRUE;
}

static gint64
ahead_total (const Ahead *a)
{
  return a->distinct != NULL ? g_hash_table_size (a->distinct) : a->count;
}

/* Sharded dense boards merge at most max_top_depth distinct scores. */
static gboolean
ahead_too_deep (const Ahead *a, const RankBoardOptions *o)
{
  return a->distinct != NULL
         && g_hash_table_size (a->distinct) > o->max_top_depth;
}

/* rank.lua's name for the way a board counts ranks. */
static const char *
rank_script_kind (const RankBoardOptions *o)
{
  if (o->rank == RANK_KIND_DENSE)
    return o->shards > 1 ? "dense-list" : "dense";
  return kind_name (o->rank);
}

/* The keys with suffix of board's shards that live on node, but skip. */
static void
add_node_shards (Cmd *cmd, const RankStore *store, const char *board,
                 const char *period, guint shards, guint node, gint skip,
                 const char *suffix)
{
  for (guint j = 0; j < shards; j++)
    if ((gint) j != skip && rank_shard_node (j, store->n_links) == node)
      cmd_add_key (cmd, board, period, j, shards, suffix);
}

/* rank.lua's ARGV up to the member or score: op, order, kind, limit. */
static void
add_rank_args (Cmd *cmd, const char *op, const RankBoardOptions *o)
{
  cmd_add_str (cmd, op);
  cmd_add_str (cmd, order_name (o->order));
  cmd_add_str (cmd, rank_script_kind (o));
  cmd_add_int (cmd, o->max_top_depth);
}

/* Asks every node holding shards of the board, but skip_node, for what is
 * ahead of (zscore, key) there: rank.lua count over its shards' sorted sets,
 * or distinct-score sets on dense boards. Each answer goes to done; returns
 * how many were sent. */
static guint
send_counts (RankStore *store, const char *board, const RankPeriod *period,
             const RankBoardOptions *o, guint skip_node, const char *zscore,
             gsize zscore_len, const char *key, gsize key_len, OpDone done,
             gpointer data)
{
  guint sent = 0;

  for (guint node = 0; node < MIN (store->n_links, o->shards); node++)
    {
      Cmd cmd;
      int nkeys;

      if (node == skip_node)
        continue;
      cmd_init (&cmd);
      add_node_shards (&cmd, store, board, period->label, o->shards, node, -1,
                       o->rank == RANK_KIND_DENSE ? RANK_KEY_SUFFIX_DISTINCT
                                                  : RANK_KEY_SUFFIX_SCORES);
      nkeys = cmd.argc;
      add_rank_args (&cmd, "count", o);
      cmd_add (&cmd, zscore, zscore_len);
      cmd_add (&cmd, key, key_len);
      op_start (store, node, &store->rank, nkeys, &cmd, done, data, node);
      sent++;
    }
  return sent;
}

/* ---- GetRank ---- */

typedef struct
{
  RankStore *store;
  RankBoardOptions options; /* a copy: a reload may free the config */
  RankStoreRankFunc func;
  gpointer data;
  Countdown countdown;
  gint64 score;
  guint n_subscores;
  gint64 subscores[RANK_SUBSCORES_MAX];
  Ahead ahead;       /* entries ahead of the member, over the nodes */
  RankPeriod period; /* the period read (periodic boards) */
  char *board;
  char *member;
} RankCall;

static void
rank_finish (RankCall *call)
{
  const RankBoardOptions *o = &call->options;
  gint64 rank = ahead_total (&call->ahead) + 1;

  if (call->countdown.error == NULL && ahead_too_deep (&call->ahead, o))
    call->countdown.error = g_error_new (
        RANK_ERROR, RANK_ERROR_INVALID,
        "rank: more than %u distinct scores are ahead of member '%s' on "
        "sharded dense board '%s' (its max_top_depth)",
        o->max_top_depth, call->member, call->board);
  /* A capped sharded board stores each shard's best cap; past the board's
   * cap a member is not on it. */
  if (call->countdown.error == NULL && o->cap > 0 && o->shards > 1
      && rank > (gint64) o->cap)
    call->countdown.error
        = g_error_new (RANK_ERROR, RANK_ERROR_NOT_FOUND,
                       "member '%s' is not among the best %u of board '%s'",
                       call->member, o->cap, call->board);
  if (call->countdown.error != NULL)
    call->func (NULL, call->countdown.error, call->data);
  else
    {
      RankEntry e = { .member = call->member,
                      .member_len = strlen (call->member),
                      .score = call->score,
                      .rank = rank,
                      .n_subscores = call->n_subscores };

      memcpy (e.subscores, call->subscores, sizeof e.subscores);
      call->func (&e, NULL, call->data);
    }
  g_clear_error (&call->countdown.error);
  ahead_clear (&call->ahead);
  g_free (call->board);
  g_free (call->member);
  g_free (call);
}

static void
rank_counted (Op *op, const redisReply *reply, const GError *error)
{
  RankCall *call = op->data;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && !ahead_add (&call->ahead, reply))
    error = bad = unexpected (reply, "rank.lua count");
  if (countdown_done (&call->countdown, error))
    rank_finish (call);
}

/* The member's node answered: its score, and who is ahead of it there. Now
 * every other node holding shards counts who is ahead of it in them. */
static void
rank_found (Op *op, const redisReply *reply, const GError *error)
{
  RankCall *call = op->data;
  g_autoptr (GError) bad = NULL;
  const redisReply *key, *zscore;

  if (error == NULL && reply->type == REDIS_REPLY_NIL)
    error = bad = g_error_new (RANK_ERROR, RANK_ERROR_NOT_FOUND,
                               "member '%s' is not on board '%s'", call->member,
                               call->board);
  /* find: {score, ahead on this node, key, zscore[, distinct scores ahead]} */
  else if (error == NULL
           && (reply->type != REDIS_REPLY_ARRAY
               || !int_element (reply, 0, &call->score)
               || !string_element (reply, 2) || !string_element (reply, 3)
               || reply->elements < (call->ahead.distinct != NULL ? 5u : 4u)
               || !ahead_add (
                   &call->ahead,
                   reply->element[call->ahead.distinct != NULL ? 4 : 1])))
    error = bad = unexpected (reply, "rank.lua find");
  if (error != NULL)
    {
      countdown_done (&call->countdown, error);
      rank_finish (call);
      return;
    }
  key = reply->element[2];
  zscore = reply->element[3];
  if (key->len <= prefix_len (&call->options))
    {
      error = bad = unexpected (reply, "rank.lua find (short key)");
      countdown_done (&call->countdown, error);
      rank_finish (call);
      return;
    }
  decode_subscores (&call->options, key->str, &call->n_subscores,
                    call->subscores);
  call->countdown.pending += send_counts (
      call->store, call->board, &call->period, &call->options, op->part,
      zscore->str, zscore->len, key->str, key->len, rank_counted, call);
  if (countdown_done (&call->countdown, NULL))
    rank_finish (call);
}

/* GetRank, counting the board's rank kind, or kind when it is not 0. */
static void
get_rank (RankStore *store, const char *board, const char *member,
          guint periods_back, RankKind kind, RankStoreRankFunc func,
          gpointer data)
{
  const RankBoardOptions *o;
  gsize member_len = strlen (member);
  RankCall *call = g_new0 (RankCall, 1);
  guint shard, node;
  Cmd cmd;
  int nkeys;

  call->store = store;
  call->options = *rank_config_board (store->config, board);
  if (kind != 0)
    call->options.rank = kind;
  o = &call->options;
  call->func = func;
  call->data = data;
  call->board = g_strdup (board);
  call->member = g_strdup (member);
  call->countdown.pending = 1;
  shard = rank_shard_of (member, member_len, o->shards);
  node = rank_shard_node (shard, store->n_links);
  rank_period_back (&o->period, g_get_real_time () / 1000, periods_back,
                    &call->period);
  ahead_init (&call->ahead, o);
  cmd_init (&cmd);
  cmd_add_key (&cmd, board, call->period.label, shard, o->shards,
               RANK_KEY_SUFFIX_TIMES);
  cmd_add_key (&cmd, board, call->period.label, shard, o->shards,
               RANK_KEY_SUFFIX_SCORES);
  if (o->rank == RANK_KIND_DENSE && o->shards == 1)
    cmd_add_key (&cmd, board, call->period.label, shard, o->shards,
                 RANK_KEY_SUFFIX_DISTINCT);
  else if (o->rank == RANK_KIND_DENSE)
    add_node_shards (&cmd, store, board, call->period.label, o->shards, node,
                     -1, RANK_KEY_SUFFIX_DISTINCT);
  else
    add_node_shards (&cmd, store, board, call->period.label, o->shards, node,
                     (gint) shard, RANK_KEY_SUFFIX_SCORES);
  nkeys = cmd.argc;
  add_rank_args (&cmd, "find", o);
  cmd_add (&cmd, member, member_len);
  op_start (store, node, &store->rank, nkeys, &cmd, rank_found, call, node);
}

void
rank_store_get_rank (RankStore *store, const char *board, const char *member,
                     guint periods_back, RankStoreRankFunc func, gpointer data)
{
  get_rank (store, board, member, periods_back, 0, func, data);
}

void
rank_store_get_rank_as (RankStore *store, const char *board, const char *member,
                        guint periods_back, RankKind kind,
                        RankStoreRankFunc func, gpointer data)
{
  get_rank (store, board, member, periods_back, kind, func, data);
}

/* ---- GetRanks ---- */

typedef struct _RanksCall RanksCall;

typedef struct
{
  RanksCall *call;
  guint index;
} RanksSlot;

struct _RanksCall
{
  RankStoreRanksFunc func;
  gpointer data;
  Countdown countdown; /* records the first failure other than NotFound */
  guint n;
  RankOfMember *results;
  RanksSlot slots[];
};

static void
rank_of_done (const RankEntry *e, const GError *error, gpointer data)
{
  RanksSlot *slot = data;
  RanksCall *call = slot->call;
  RankOfMember *r = &call->results[slot->index];
  gboolean absent = error != NULL && error->domain == RANK_ERROR
                    && error->code == RANK_ERROR_NOT_FOUND;

  if (error == NULL)
    {
      r->found = TRUE;
      r->score = e->score;
      r->rank = e->rank;
    }
  if (!countdown_done (&call->countdown, absent ? NULL : error))
    return;
  call->func (call->countdown.error == NULL ? call->results : NULL,
              call->countdown.error == NULL ? call->n : 0,
              call->countdown.error, call->data);
  g_clear_error (&call->countdown.error);
  g_free (call->results);
  g_free (call);
}

void
rank_store_get_ranks (RankStore *store, const char *board,
                      const char *const *members, guint n, guint periods_back,
                      RankStoreRanksFunc func, gpointer data)
{
  RanksCall *call = g_malloc0 (sizeof (RanksCall) + n * sizeof (RanksSlot));

  g_assert (n > 0);
  call->func = func;
  call->data = data;
  call->n = n;
  call->countdown.pending = n;
  call->results = g_new0 (RankOfMember, n);
  for (guint i = 0; i < n; i++)
    {
      call->slots[i].call = call;
      call->slots[i].index = i;
      rank_store_get_rank (store, board, members[i], periods_back, rank_of_done,
                           &call->slots[i]);
    }
}

/* ---- Count ---- */

typedef struct
{
  RankStoreCountFunc func;
  gpointer data;
  Countdown countdown;
  gint64 count;
  guint cap;
} CountCall;

static void
counted (Op *op, const redisReply *reply, const GError *error)
{
  CountCall *call = op->data;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && reply->type != REDIS_REPLY_INTEGER)
    error = bad = unexpected (reply, "ZCARD/ZCOUNT");
  if (error == NULL)
    call->count += reply->integer;
  if (!countdown_done (&call->countdown, error))
    return;
  if (call->countdown.error != NULL)
    call->func (0, call->countdown.error, call->data);
  else
    call->func (call->cap > 0 ? MIN (call->count, (gint64) call->cap)
                              : call->count,
                NULL, call->data);
  g_clear_error (&call->countdown.error);
  g_free (call);
}

void
rank_store_count (RankStore *store, const char *board, gboolean range,
                  gint64 min, gint64 max, guint periods_back,
                  RankStoreCountFunc func, gpointer data)
{
  const RankBoardOptions *o = rank_config_board (store->config, board);
  CountCall *call = g_new0 (CountCall, 1);
  RankPeriod period;
  gint64 lo, hi;

  zscore_bounds (o, min, max, &lo, &hi);
  rank_period_back (&o->period, g_get_real_time () / 1000, periods_back,
                    &period);
  call->func = func;
  call->data = data;
  call->cap = range ? 0 : o->cap;
  call->countdown.pending = o->shards;
  for (guint shard = 0; shard < o->shards; shard++)
    {
      guint node = rank_shard_node (shard, store->n_links);
      Cmd cmd;

      cmd_init (&cmd);
      cmd_add_str (&cmd, range ? "ZCOUNT" : "ZCARD");
      cmd_add_key (&cmd, board, period.label, shard, o->shards,
                   RANK_KEY_SUFFIX_SCORES);
      if (range)
        {
          cmd_add_int (&cmd, lo);
          cmd_add_int (&cmd, hi);
        }
      op_start (store, node, NULL, 0, &cmd, counted, call, shard);
    }
}

/* ---- GetTopN ---- */

/* One shard's page, copied out of its reply (replies do not outlive their
 * callback, and the merge needs every shard's). */
typedef struct
{
  RankShardEntry *entries;
  gsize len;
  char *keys;
} Page;

typedef struct
{
  RankStore *store;
  RankBoardOptions options; /* a copy: a reload may free the config */
  RankPeriod period;        /* the period read (periodic boards) */
  char *board;
  RankStoreTopFunc func;
  gpointer data;
  gint64 offset;
  gint n;
  Countdown countdown;
  /* After the merge: the page, and for competition and dense ranks the
   * number of entries (or distinct scores) better than its first entry. */
  const RankShardEntry *merged[RANK_TOP_N_MAX];
  gsize merged_len;
  Ahead better;
  /* with_data: each merged entry's shard, and its data once read (NULL:
   * none). */
  gboolean with_data;
  guint8 shard_of[RANK_TOP_N_MAX];
  char **member_data;
  gsize *member_data_len;
  Page pages[]; /* one per shard; pages[0] only on an ordinary board */
} TopCall;

/* Copies a ZRANGE ... WITHSCORES reply into page; every key must be longer
 * than the board's prefix (min_key_len). */
static GError *
page_read (Page *page, const redisReply *reply, gsize min_key_len)
{
  gsize bytes = 0, n;

  if (reply->type != REDIS_REPLY_ARRAY || reply->elements % 2 != 0)
    return unexpected (reply, "ZRANGE");
  n = reply->elements / 2;
  for (gsize i = 0; i < reply->elements; i += 2)
    if (reply->element[i]->type == REDIS_REPLY_STRING)
      bytes += reply->element[i]->len;
  page->entries = g_new (RankShardEntry, n);
  page->keys = g_malloc (bytes + 1);
  bytes = 0;
  for (gsize i = 0; i < n; i++)
    {
      const redisReply *key = reply->element[2 * i],
                       *sc = reply->element[2 * i + 1];
      RankShardEntry *e = &page->entries[i];

      if (key->type != REDIS_REPLY_STRING || sc->type != REDIS_REPLY_STRING
          || key->len <= min_key_len
          || !rank_orderkey_parse_zscore (sc->str, sc->len, &e->zscore))
        return unexpected (reply, "ZRANGE (malformed entry)");
      e->zscore = -e->zscore;
      memcpy (page->keys + bytes, key->str, key->len);
      e->key = page->keys + bytes;
      e->key_len = key->len;
      bytes += key->len;
      page->len++;
    }
  return NULL;
}

static void
top_free (TopCall *call)
{
  for (guint i = 0; i < call->options.shards; i++)
    {
      g_free (call->pages[i].entries);
      g_free (call->pages[i].keys);
    }
  if (call->member_data != NULL)
    for (gsize i = 0; i < call->merged_len; i++)
      g_free (call->member_data[i]);
  g_free (call->member_data);
  g_free (call->member_data_len);
  g_clear_error (&call->countdown.error);
  ahead_clear (&call->better);
  g_free (call->board);
  g_free (call);
}

/* Answers with the merged page, numbering it by the board's rank kind:
 * equal scores share a rank; the next score's rank is its position
 * (competition) or one more (dense). */
static void
top_deliver (TopCall *call)
{
  RankEntry entries[RANK_TOP_N_MAX];

  if (call->countdown.error == NULL
      && ahead_too_deep (&call->better, &call->options))
    call->countdown.error = g_error_new (
        RANK_ERROR, RANK_ERROR_INVALID,
        "offset: more than %u distinct scores are ahead of offset "
        "%" G_GINT64_FORMAT " on sharded dense board '%s' (its max_top_depth)",
        call->options.max_top_depth, call->offset, call->board);
  if (call->countdown.error != NULL)
    {
      call->func (NULL, 0, call->countdown.error, call->data);
      top_free (call);
      return;
    }
  for (gsize i = 0; i < call->merged_len; i++)
    {
      const RankShardEntry *e = call->merged[i];
      gint64 position = call->offset + (gint64) i + 1;

      entry_from_key (&call->options, e->key, e->key_len, e->zscore,
                      &entries[i]);
      if (call->member_data != NULL)
        {
          entries[i].data = call->member_data[i];
          entries[i].data_len = call->member_data_len[i];
        }
      if (call->options.rank == RANK_KIND_ORDINAL)
        entries[i].rank = position;
      else if (i == 0)
        entries[i].rank = ahead_total (&call->better) + 1;
      else if (e->zscore == call->merged[i - 1]->zscore)
        entries[i].rank = entries[i - 1].rank;
      else
        entries[i].rank = call->options.rank == RANK_KIND_COMPETITION
                              ? position
                              : entries[i - 1].rank + 1;
    }
  call->func (entries, call->merged_len, NULL, call->data);
  top_free (call);
}

/* One shard's HMGET of its members' data: the values in the order of the
 * page's entries from that shard. */
static void
top_data_read (Op *op, const redisReply *reply, const GError *error)
{
  TopCall *call = op->data;
  g_autoptr (GError) bad = NULL;
  gsize next = 0;

  if (error == NULL && reply->type != REDIS_REPLY_ARRAY)
    error = bad = unexpected (reply, "HMGET");
  for (gsize i = 0; error == NULL && i < call->merged_len; i++)
    {
      const redisReply *v;

      if (call->shard_of[i] != op->part)
        continue;
      if (next >= reply->elements)
        {
          error = bad = unexpected (reply, "HMGET (short)");
          break;
        }
      v = reply->element[next++];
      if (v->type == REDIS_REPLY_STRING)
        {
          call->member_data[i] = g_memdup2 (v->str, v->len);
          call->member_data_len[i] = v->len;
        }
    }
  if (countdown_done (&call->countdown, error))
    top_deliver (call);
}

/* The page is known; with_data, read its members' data (one HMGET per
 * shard with entries on the page, all sent at once), then answer. */
static void
top_ready (TopCall *call)
{
  const RankBoardOptions *o = &call->options;
  gsize skip = prefix_len (o);
  gboolean used[RANK_SHARDS_MAX] = { FALSE };

  if (!call->with_data || call->countdown.error != NULL
      || call->merged_len == 0)
    {
      top_deliver (call);
      return;
    }
  call->member_data = g_new0 (char *, call->merged_len);
  call->member_data_len = g_new0 (gsize, call->merged_len);
  call->countdown.pending = 1;
  for (gsize i = 0; i < call->merged_len; i++)
    {
      const RankShardEntry *e = call->merged[i];

      call->shard_of[i] = (guint8) rank_shard_of (e->key + skip,
                                                  e->key_len - skip, o->shards);
      used[call->shard_of[i]] = TRUE;
    }
  for (guint shard = 0; shard < o->shards; shard++)
    {
      Cmd cmd;

      if (!used[shard])
        continue;
      cmd_init (&cmd);
      cmd_add_str (&cmd, "HMGET");
      cmd_add_key (&cmd, call->board, call->period.label, shard, o->shards,
                   RANK_KEY_SUFFIX_DATA);
      for (gsize i = 0; i < call->merged_len; i++)
        if (call->shard_of[i] == shard)
          cmd_add (&cmd, call->merged[i]->key + skip,
                   call->merged[i]->key_len - skip);
      call->countdown.pending++;
      op_start (call->store, rank_shard_node (shard, call->store->n_links),
                NULL, 0, &cmd, top_data_read, call, shard);
    }
  if (countdown_done (&call->countdown, NULL))
    top_deliver (call);
}

static void
top_counted (Op *op, const redisReply *reply, const GError *error)
{
  TopCall *call = op->data;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && !ahead_add (&call->better, reply))
    error = bad = unexpected (reply, "rank.lua count");
  if (countdown_done (&call->countdown, error))
    top_ready (call);
}

/* Competition and dense ranks of a page that does not start at the top
 * need the count of what is better than its first entry: one more round,
 * on every node holding the board. */
static void
top_count_better (TopCall *call)
{
  const RankShardEntry *first = call->merged[0];
  char zscore[24];
  gsize len = (gsize) g_snprintf (zscore, sizeof zscore, "%" G_GINT64_FORMAT,
                                  first->zscore);

  ahead_init (&call->better, &call->options);
  /* Every node: G_MAXUINT skips none. */
  call->countdown.pending
      = 1
        + send_counts (call->store, call->board, &call->period, &call->options,
                       G_MAXUINT, zscore, len, first->key, first->key_len,
                       top_counted, call);
  if (countdown_done (&call->countdown, NULL))
    top_ready (call);
}

static void
top_merge (TopCall *call)
{
  const RankShardEntry *pages[RANK_SHARDS_MAX];
  gsize lens[RANK_SHARDS_MAX];
  guint shards = call->options.shards;
  /* An ordinary board's page starts at offset already. */
  gsize skip = shards > 1 ? (gsize) call->offset : 0;

  if (call->countdown.error != NULL)
    {
      top_deliver (call);
      return;
    }
  for (guint i = 0; i < shards; i++)
    {
      pages[i] = call->pages[i].entries;
      lens[i] = call->pages[i].len;
    }
  call->merged_len = rank_shard_merge (pages, lens, shards, skip,
                                       (gsize) call->n, call->merged);
  if (call->options.rank != RANK_KIND_ORDINAL && call->offset > 0
      && call->merged_len > 0)
    top_count_better (call);
  else
    top_ready (call);
}

static void
top_read (Op *op, const redisReply *reply, const GError *error)
{
  TopCall *call = op->data;
  g_autoptr (GError) bad = NULL;

  if (error == NULL)
    error = bad = page_read (&call->pages[op->part], reply,
                             prefix_len (&call->options));
  if (countdown_done (&call->countdown, error))
    top_merge (call);
}

gboolean
rank_store_check_update (RankStore *store, const RankUpdate *update,
                         GError **error)
{
  const RankBoardOptions *o = rank_config_board (store->config, update->board);
  gint64 now = g_get_real_time () / 1000;
  RankPeriod period, current, oldest;

  if (o->period.kind == RANK_PERIOD_NONE)
    return TRUE;
  rank_period_of (&o->period, update->timestamp_ms, &period);
  rank_period_of (&o->period, now, &current);
  rank_period_back (&o->period, now, o->retention, &oldest);
  if (period.start_ms > current.start_ms)
    g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                 "timestamp_ms: %" G_GINT64_FORMAT " is in period %s, after "
                 "the current period %s of board '%s'",
                 update->timestamp_ms, period.label, current.label,
                 update->board);
  else if (period.start_ms < current.start_ms && !o->accept_late)
    g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                 "timestamp_ms: %" G_GINT64_FORMAT " is in the closed period "
                 "%s of board '%s' (current: %s), which does not accept late "
                 "updates (accept_late)",
                 update->timestamp_ms, period.label, update->board,
                 current.label);
  else if (period.start_ms < oldest.start_ms)
    g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                 "timestamp_ms: %" G_GINT64_FORMAT " is in period %s, older "
                 "than the %u past periods board '%s' keeps (retention)",
                 update->timestamp_ms, period.label, o->retention,
                 update->board);
  else
    return TRUE;
  return FALSE;
}

gboolean
rank_store_check_period (RankStore *store, const char *board,
                         gint64 periods_back, GError **error)
{
  const RankBoardOptions *o = rank_config_board (store->config, board);

  if (periods_back < 0)
    g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                 "periods_back: must be >= 0, got %" G_GINT64_FORMAT,
                 periods_back);
  else if (periods_back > 0 && o->period.kind == RANK_PERIOD_NONE)
    g_set_error (
        error, RANK_ERROR, RANK_ERROR_INVALID,
        "periods_back: board '%s' has no periods, got %" G_GINT64_FORMAT, board,
        periods_back);
  else if (periods_back > (gint64) o->retention)
    g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                 "periods_back: board '%s' keeps %u past periods, got "
                 "%" G_GINT64_FORMAT,
                 board, o->retention, periods_back);
  else
    return TRUE;
  return FALSE;
}

const RankBoardOptions *
rank_store_board (RankStore *store, const char *board)
{
  return rank_config_board (store->config, board);
}

gboolean
rank_store_check_top (RankStore *store, const char *board, gint64 offset,
                      gint n, GError **error)
{
  const RankBoardOptions *o = rank_config_board (store->config, board);

  if (o->shards > 1 && offset + n > (gint64) o->max_top_depth)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "offset+n: must be at most %u on sharded board '%s' "
                   "(its max_top_depth), got %" G_GINT64_FORMAT,
                   o->max_top_depth, board, offset + n);
      return FALSE;
    }
  return TRUE;
}

void
rank_store_get_top (RankStore *store, const char *board, gint64 offset, gint n,
                    guint periods_back, gboolean with_data,
                    RankStoreTopFunc func, gpointer data)
{
  const RankBoardOptions *o = rank_config_board (store->config, board);
  TopCall *call;

  /* A capped board shows its best cap only (a sharded one stores more). */
  if (o->cap > 0 && offset + n > (gint64) o->cap)
    n = offset >= (gint64) o->cap ? 0 : (gint) (o->cap - offset);
  call = g_malloc0 (sizeof (TopCall) + o->shards * sizeof (Page));
  call->store = store;
  call->options = *o;
  rank_period_back (&o->period, g_get_real_time () / 1000, periods_back,
                    &call->period);
  call->board = g_strdup (board);
  call->func = func;
  call->data = data;
  call->offset = offset;
  call->n = n;
  call->with_data = with_data;
  call->countdown.pending = o->shards;
  for (guint shard = 0; shard < o->shards; shard++)
    {
      guint node = rank_shard_node (shard, store->n_links);
      /* An ordinary board reads its page; a shard, all it may contribute. */
      gint64 first = o->shards > 1 ? 0 : offset;
      Cmd cmd;

      cmd_init (&cmd);
      cmd_add_str (&cmd, "ZRANGE");
      cmd_add_key (&cmd, board, call->period.label, shard, o->shards,
                   RANK_KEY_SUFFIX_SCORES);
      cmd_add_int (&cmd, first);
      cmd_add_int (&cmd, offset + n - 1);
      cmd_add_str (&cmd, "WITHSCORES");
      op_start (store, node, NULL, 0, &cmd, top_read, call, shard);
    }
}

/* ---- Sample ---- */

typedef struct
{
  RankStore *store;
  RankBoardOptions options; /* a copy: a reload may free the config */
  RankPeriod period;
  char *board;
  RankStoreTopFunc func;
  gpointer data;
  Countdown countdown;
  gint count;
  /* Round 1, per shard: entries before the range, and in it. */
  gint64 below[RANK_SHARDS_MAX];
  gint64 in_range[RANK_SHARDS_MAX];
  /* Round 2: the drawn entries. */
  guint n;
  char *keys[RANK_SAMPLE_COUNT_MAX];
  gsize key_lens[RANK_SAMPLE_COUNT_MAX];
  gint64 zscores[RANK_SAMPLE_COUNT_MAX];
} SampleCall;

static void
sample_finish (SampleCall *call)
{
  RankEntry entries[RANK_SAMPLE_COUNT_MAX];
  gsize n = 0;

  if (call->countdown.error != NULL)
    call->func (NULL, 0, call->countdown.error, call->data);
  else
    {
      for (guint i = 0; i < call->n; i++)
        if (call->keys[i] != NULL) /* gone since round 1: skipped */
          entry_from_key (&call->options, call->keys[i], call->key_lens[i],
                          call->zscores[i], &entries[n++]);
      call->func (entries, n, NULL, call->data);
    }
  for (guint i = 0; i < call->n; i++)
    g_free (call->keys[i]);
  g_clear_error (&call->countdown.error);
  g_free (call->board);
  g_free (call);
}

static void
sample_entry (Op *op, const redisReply *reply, const GError *error)
{
  SampleCall *call = op->data;
  g_autoptr (GError) bad = NULL;
  Page page = { 0 };

  if (error == NULL)
    error = bad = page_read (&page, reply, prefix_len (&call->options));
  if (error == NULL && page.len == 1)
    {
      call->keys[op->part]
          = g_memdup2 (page.entries[0].key, page.entries[0].key_len);
      call->key_lens[op->part] = page.entries[0].key_len;
      call->zscores[op->part] = page.entries[0].zscore;
    }
  g_free (page.entries);
  g_free (page.keys);
  if (countdown_done (&call->countdown, error))
    sample_finish (call);
}

/* Round 1 is in: draw count distinct positions among all the entries in
 * range (Floyd's algorithm: uniform, no rejection loop), then read each by
 * its index in its shard's sorted set. */
static void
sample_draw (SampleCall *call)
{
  const RankBoardOptions *o = &call->options;
  gint64 total = 0;
  gint64 picks[RANK_SAMPLE_COUNT_MAX];
  guint k;
  GHashTable *chosen;

  for (guint i = 0; i < o->shards; i++)
    total += call->in_range[i];
  k = (guint) MIN ((gint64) call->count, total);
  chosen = g_hash_table_new (g_int64_hash, g_int64_equal);
  for (gint64 j = total - k, m = 0; j < total; j++)
    {
      gint64 t
          = (gint64) (g_rand_double (call->store->rand) * (double) (j + 1));

      t = MIN (t, j);
      picks[m] = g_hash_table_contains (chosen, &t) ? j : t;
      g_hash_table_add (chosen, &picks[m]);
      m++;
    }
  g_hash_table_unref (chosen);
  call->n = k;
  call->countdown.pending = k + 1;
  for (guint p = 0; p < k; p++)
    {
      gint64 at = picks[p];
      guint shard = 0;
      Cmd cmd;

      while (at >= call->in_range[shard])
        at -= call->in_range[shard++];
      cmd_init (&cmd);
      cmd_add_str (&cmd, "ZRANGE");
      cmd_add_key (&cmd, call->board, call->period.label, shard, o->shards,
                   RANK_KEY_SUFFIX_SCORES);
      cmd_add_int (&cmd, call->below[shard] + at);
      cmd_add_int (&cmd, call->below[shard] + at);
      cmd_add_str (&cmd, "WITHSCORES");
      op_start (call->store, rank_shard_node (shard, call->store->n_links),
                NULL, 0, &cmd, sample_entry, call, p);
    }
  if (countdown_done (&call->countdown, NULL))
    sample_finish (call);
}

static void
sample_counted (Op *op, const redisReply *reply, const GError *error)
{
  SampleCall *call = op->data;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && reply->type != REDIS_REPLY_INTEGER)
    error = bad = unexpected (reply, "ZCOUNT");
  if (error == NULL)
    (op->part % 2 ? call->in_range : call->below)[op->part / 2]
        = reply->integer;
  if (!countdown_done (&call->countdown, error))
    return;
  if (call->countdown.error != NULL)
    sample_finish (call);
  else
    sample_draw (call);
}

void
rank_store_sample (RankStore *store, const char *board, gint64 min, gint64 max,
                   gint count, guint periods_back, RankStoreTopFunc func,
                   gpointer data)
{
  SampleCall *call = g_new0 (SampleCall, 1);
  const RankBoardOptions *o;
  gint64 lo, hi;

  call->store = store;
  call->options = *rank_config_board (store->config, board);
  o = &call->options;
  call->board = g_strdup (board);
  call->func = func;
  call->data = data;
  call->count = MIN (count, RANK_SAMPLE_COUNT_MAX);
  rank_period_back (&o->period, g_get_real_time () / 1000, periods_back,
                    &call->period);
  zscore_bounds (o, min, max, &lo, &hi);
  call->countdown.pending = 2 * o->shards;
  for (guint shard = 0; shard < o->shards; shard++)
    for (int which = 0; which < 2; which++)
      {
        char from[24];
        Cmd cmd;

        g_snprintf (from, sizeof from, "(%" G_GINT64_FORMAT, lo);
        cmd_init (&cmd);
        cmd_add_str (&cmd, "ZCOUNT");
        cmd_add_key (&cmd, board, call->period.label, shard, o->shards,
                     RANK_KEY_SUFFIX_SCORES);
        if (which == 0)
          {
            cmd_add_str (&cmd, "-inf");
            cmd_add_str (&cmd, from);
          }
        else
          {
            cmd_add_int (&cmd, lo);
            cmd_add_int (&cmd, hi);
          }
        op_start (store, rank_shard_node (shard, store->n_links), NULL, 0, &cmd,
                  sample_counted, call, shard * 2 + (guint) which);
      }
}

/* ---- member data ---- */

typedef struct
{
  RankStoreDoneFunc set_func;
  RankStoreDataFunc get_func;
  gpointer data;
  char *board;
  char *member;
} DataCall;

static void
data_done (Op *op, const redisReply *reply, const GError *error)
{
  DataCall *call = op->data;
  g_autoptr (GError) bad = NULL;

  if (error == NULL && reply->type == REDIS_REPLY_NIL)
    error = bad = g_error_new (RANK_ERROR, RANK_ERROR_NOT_FOUND,
                               "member '%s' is not on board '%s'", call->member,
                               call->board);
  else if (error == NULL
           && reply->type
                  != (call->get_func != NULL ? REDIS_REPLY_STRING
                                             : REDIS_REPLY_INTEGER))
    error = bad = unexpected (reply, "data.lua");
  if (call->get_func != NULL)
    call->get_func (error == NULL ? reply->str : NULL,
                    error == NULL ? reply->len : 0, error, call->data);
  else
    call->set_func (error, call->data);
  g_free (call->board);
  g_free (call->member);
  g_free (call);
}

static void
data_call (RankStore *store, DataCall *call, guint periods_back,
           const char *value, gsize len)
{
  const RankBoardOptions *o = rank_config_board (store->config, call->board);
  gsize member_len = strlen (call->member);
  guint shard = rank_shard_of (call->member, member_len, o->shards);
  RankPeriod period;
  Cmd cmd;

  rank_period_back (&o->period, g_get_real_time () / 1000, periods_back,
                    &period);
  cmd_init (&cmd);
  cmd_add_key (&cmd, call->board, period.label, shard, o->shards,
               RANK_KEY_SUFFIX_TIMES);
  cmd_add_key (&cmd, call->board, period.label, shard, o->shards,
               RANK_KEY_SUFFIX_DATA);
  cmd_add_str (&cmd, value != NULL ? "set" : "get");
  cmd_add (&cmd, call->member, member_len);
  if (value != NULL)
    cmd_add (&cmd, value, len);
  op_start (store, rank_shard_node (shard, store->n_links), &store->data, 2,
            &cmd, data_done, call, 0);
}

void
rank_store_set_data (RankStore *store, const char *board, const char *member,
                     const char *data, gsize len, RankStoreDoneFunc func,
                     gpointer user_data)
{
  DataCall *call = g_new0 (DataCall, 1);

  call->set_func = func;
  call->data = user_data;
  call->board = g_strdup (board);
  call->member = g_strdup (member);
  data_call (store, call, 0, data != NULL ? data : "", len);
}

void
rank_store_get_data (RankStore *store, const char *board, const char *member,
                     guint periods_back, RankStoreDataFunc func,
                     gpointer user_data)
{
  DataCall *call = g_new0 (DataCall, 1);

  call->get_func = func;
  call->data = user_data;
  call->board = g_strdup (board);
  call->member = g_strdup (member);
  data_call (store, call, periods_back, NULL, 0);
}
