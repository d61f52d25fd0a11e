/* backend.c -- what both backends share (see backend.h): assembly, scripts,
 * batches, NOSCRIPT, redirects, WAIT, errors.
 *
 * A command in flight is an Op: where it went, what to call with its reply,
 * and a private copy of its arguments (to send it again after a NOSCRIPT or
 * a redirect). NOSCRIPT means the script did not run, so loading it on the
 * same connection and sending the call again is safe.
 *
 * A batch is open from its first item until the loop is about to sleep
 * (then every open batch becomes one Op, before the links write), until it
 * is full, or until another command for the same keyspace (the same hash
 * tag: one board, or one shard of it) is sent on its node: Redis then runs
 * the commands of a keyspace in the order the calls sent them.
 */
#include "backend.h"
#include "metrics.h"

#include <string.h>

#include "backend_impl.h"
#include "constants.h"
#include "error.h"
#include "lua_scripts.h"

typedef struct
{
  const char *name;
  const char *source;
  /* How it is called and loaded, from script_init. An EVAL script:
   * EVALSHA <sha>, SCRIPT LOAD on every connection and again after
   * NOSCRIPT. A function library (update.lua): FCALL <function>, FUNCTION
   * LOAD when Redis says it has no such function. */
  gboolean library;
  const char *call;    /* EVALSHA or FCALL */
  const char *callee;  /* sha or the function's name */
  const char *load;    /* SCRIPT or FUNCTION (LOAD) */
  const char *missing; /* how Redis's error starts when it lacks it */
  char sha[41];
  /* A library's name (its first line's "name=", rankd_<digest>): also the
   * name of every connection of this rankd (CLIENT SETNAME), which keeps
   * other rankds from deleting it (drop_old_libraries). */
  char library_name[64];
  /* A batch's answer: 0, one reply per item (an array or an error); n,
   * the items' replies one after another, n elements each, or one error
   * (a table per item costs the script's reply about 7k instructions of
   * Redis's: the checks of its fields). */
  guint flat_width;
} Script;

struct _RankBackend
{
  const RankBackendImpl *impl;
  gpointer impl_data;
  Script scripts[RANK_SCRIPTS];
  guint wait_replicas;
  int wait_timeout_ms;
  RankBackendHook hook; /* tests */
  gpointer hook_data;
  RankBackendWriteFunc on_write;
  gpointer on_write_data;
  GHashTable *batches; /* id -> MergedCall, the open ones */
  GQueue open;         /* the open batches, oldest first */
};

static int flush_batches (gpointer data);
static void fail_batches (RankBackend *backend);

/* One item of a batch: who gets its reply. */
typedef struct
{
  RankBackendFunc func;
  gpointer data;
} Waiter;

/* A batch: the items (calls of one script, or of one command, on one
 * keyspace) of any number of callers, sent to Redis as one command, one
 * call of the script with every item's arguments after its head; each
 * item's reply is cut from its answer for its waiter. */
typedef struct
{
  guint node;
  GBytes *id; /* the table key: node, and the head's arguments */
  char *tag;  /* the hash tag of its keys */
  gsize tag_len;
  RankScriptId script;
  guint flat_width; /* its script's */
  int nkeys;
  guint flags; /* RANK_SEND_RANKS: a transaction of rank reads */
  /* Reads: a replica may answer if every item allows one (the strictest
   * of their bounds). */
  gboolean replica_ok;
  int max_lag_ms;
  gint64 fresh_after_us;
  GByteArray *bytes; /* every argument, the head's then the items' */
  GArray *lens;      /* gsize, each argument's */
  GArray *waiters;   /* Waiter, one per item */
  GList link;        /* in backend->open */
} MergedCall;

typedef struct
{
  RankBackend *backend;
  RankRedisLink *link;
  RankRedisLink *primary; /* a read sent to a replica: who answers if it
                             cannot */
  RankScriptId script;
  gboolean retried;
  guint redirects; /* MOVED and ASK followed so far */
  guint flags;
  RankBackendFunc func;
  gpointer data;
  int argc;
  const char **argv;
  size_t *argvlen; /* RANK_SEND_RANKS: ranks_send's */
} Op;

/* ---- assembly ---- */

static void
script_init (Script *script, const char *name, const char *source,
             const char *function, guint flat_width)
{
  g_autofree char *sha
      = g_compute_checksum_for_string (G_CHECKSUM_SHA1, source, -1);

  script->name = name;
  script->source = source;
  script->flat_width = flat_width;
  g_strlcpy (script->sha, sha, sizeof script->sha);
  script->library = function != NULL;
  script->call = script->library ? "FCALL" : "EVALSHA";
  script->callee = script->library ? function : script->sha;
  script->load = script->library ? "FUNCTION" : "SCRIPT";
  script->missing = script->library ? "ERR Function not found" : "NOSCRIPT";
  if (script->library)
    {
      const char *at = strstr (source, "name=");
      gsize len = at != NULL ? strcspn (at + 5, " \n") : 0;

      g_assert (len > 0 && len < sizeof script->library_name);
      memcpy (script->library_name, at + 5, len);
      script->library_name[len] = '\0';
    }
}

/* The rolling windows' function, in update.lua's library (window.lua). */
static const char *
roll_function (void)
{
  static char name[sizeof rank_lua_update_function + 8];

  g_snprintf (name, sizeof name, "%s_roll", rank_lua_update_function);
  return name;
}

RankBackend *
rank_backend_new (RankLoop *loop, const RankBackendConfig *config)
{
  RankBackend *backend = g_new0 (RankBackend, 1);
  g_autoptr (GPtrArray) startup
      = g_ptr_array_new_with_free_func ((GDestroyNotify) g_strfreev);

  backend->batches = g_hash_table_new (g_bytes_hash, g_bytes_equal);
  /* Before the links' own hooks: batches leave in this iteration's write. */
  rank_loop_add_prepare (loop, flush_batches, backend);
  script_init (&backend->scripts[RANK_SCRIPT_UPDATE], "update.lua",
               rank_lua_update, rank_lua_update_function,
               RANK_UPDATE_REPLY_WIDTH);
  script_init (&backend->scripts[RANK_SCRIPT_RANK], "rank.lua", rank_lua_rank,
               NULL, 0);
  script_init (&backend->scripts[RANK_SCRIPT_DATA], "data.lua", rank_lua_data,
               NULL, 0);
  script_init (&backend->scripts[RANK_SCRIPT_QUEUE], "queue.lua",
               rank_lua_queue, NULL, 0);
  script_init (&backend->scripts[RANK_SCRIPT_CLEAR], "clear.lua",
               rank_lua_clear, NULL, 0);
  script_init (&backend->scripts[RANK_SCRIPT_EXPORT], "export.lua",
               rank_lua_export, NULL, 0);
  script_init (&backend->scripts[RANK_SCRIPT_QUEUES], "queues.lua",
               rank_lua_queues, NULL, 0);
  script_init (&backend->scripts[RANK_SCRIPT_ROLL], "update.lua (roll)",
               rank_lua_update, roll_function (), 0);
  /* First on every connection, before the scripts load. */
  if (config->password != NULL)
    {
      const char *auth[] = { "AUTH", config->user, config->password, NULL };

      if (config->user == NULL)
        auth[1] = config->password, auth[2] = NULL;
      g_ptr_array_add (startup, g_strdupv ((char **) auth));
    }
  /* Every connection named after the library this rankd calls: while it
   * is connected, no other rankd deletes that library. */
  {
    const char *name[]
        = { "CLIENT", "SETNAME",
            backend->scripts[RANK_SCRIPT_UPDATE].library_name, NULL };

    g_ptr_array_add (startup, g_strdupv ((char **) name));
  }
  for (int s = RANK_SCRIPT_NONE + 1; s < RANK_SCRIPTS; s++)
    if (!backend->scripts[s].library)
      {
        const char *load[] = { backend->scripts[s].load, "LOAD",
                               backend->scripts[s].source, NULL };

        g_ptr_array_add (startup, g_strdupv ((char **) load));
      }
  backend->impl
      = config->cluster ? &rank_backend_cluster_impl : &rank_backend_nodes_impl;
  backend->impl_data
      = config->cluster
            ? rank_backend_cluster_new (loop, config->nodes, config->n_nodes,
                                        config->timeout_ms, config->tls,
                                        startup)
            : rank_backend_nodes_new (loop, config->nodes, config->n_nodes,
                                      config->replicas, config->replica_of,
                                      config->n_replicas, config->timeout_ms,
                                      config->tls, startup);
  backend->wait_replicas = config->wait_replicas;
  /* WAIT answers within half the link's timeout, which stays the bound
   * for the connection itself. */
  backend->wait_timeout_ms = MAX (config->timeout_ms / 2, 1);
  return backend;
}

void
rank_backend_start (RankBackend *backend)
{
  backend->impl->start (backend->impl_data);
}

gboolean
rank_backend_wait_ready (RankBackend *backend, int timeout_ms, GError **error)
{
  return backend->impl->wait_ready (backend->impl_data, timeout_ms, error);
}

void
rank_backend_free (RankBackend *backend)
{
  if (backend == NULL)
    return;
  fail_batches (backend);
  backend->impl->free (backend->impl_data);
  g_hash_table_unref (backend->batches);
  g_free (backend);
}

gboolean
rank_backend_watch_nodes (RankBackend *backend, RankBackendNodesFunc func,
                          gpointer data)
{
  if (backend->impl->watch_nodes == NULL)
    return FALSE;
  backend->impl->watch_nodes (backend->impl_data, func, data);
  return TRUE;
}

guint
rank_backend_nodes (RankBackend *backend)
{
  return backend->impl->nodes (backend->impl_data);
}

void
rank_backend_set_hook (RankBackend *backend, RankBackendHook hook,
                       gpointer data)
{
  backend->hook = hook;
  backend->hook_data = data;
}

/* ---- errors ---- */

static GError *
classify (const RankReply *reply)
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
  if (g_str_has_prefix (msg, "RANK_UNAVAILABLE "))
    return g_error_new_literal (RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                                msg + strlen ("RANK_UNAVAILABLE "));
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
  /* A transaction of ranks (RANK_SEND_RANKS) with a command Redis would
   * not queue, a MOVED on a Cluster say: its items are read again by
   * rank.lua, which follows the redirect. */
  if (g_str_has_prefix (msg, "EXECABORT "))
    return g_error_new (RANK_ERROR, RANK_ERROR_INTERNAL, "%s", msg);
  /* A stream's consumer group missing, or there already; a stream
   * missing (XINFO) (src/methods/drain.h). */
  if (g_str_has_prefix (msg, "NOGROUP ") || g_str_has_prefix (msg, "BUSYGROUP ")
      || strcmp (msg, "ERR no such key") == 0)
    return g_error_new (RANK_ERROR, RANK_ERROR_NOT_FOUND, "%s", msg);
  /* Updates run as a function (update.lua): Redis 7.0 has them. */
  if (g_str_has_prefix (msg, "ERR unknown command 'FCALL'")
      || g_str_has_prefix (msg, "ERR unknown command `FCALL`"))
    return g_error_new (RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                        "Redis does not know FCALL: rankd needs Redis 7.0 or "
                        "later (%s)",
                        msg);
  for (gsize i = 0; i < G_N_ELEMENTS (unavailable); i++)
    if (g_str_has_prefix (msg, unavailable[i]))
      return g_error_new (RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                          "Redis refused the command: %s", msg);
  g_warning ("unexpected Redis error: %s", msg);
  return g_error_new (RANK_ERROR, RANK_ERROR_INTERNAL,
                      "unexpected Redis error: %s", msg);
}

/* ---- sending ---- */

static void on_reply (const RankReply *reply, const GError *error,
                      gpointer data);

/* A transaction of rank reads (RANK_SEND_RANKS): argv is HMGET, the times
 * hash, the sorted set, the prefix length (one byte), then the members'
 * sorted-set keys. It leaves as MULTI, an HMGET of the members (each key
 * past its prefix), a ZRANK of each key, EXEC; only EXEC's reply is op's
 * (an error queueing a command makes EXEC's an EXECABORT). */
static void
ranks_send (Op *op)
{
  static const char *const multi[] = { "MULTI" }, *const exec[] = { "EXEC" };
  int n = op->argc - 4;
  gsize prefix_len = (guint8) op->argv[3][0];
  /* A batch holds at most RANK_BATCH_MAX_ITEMS (rank_backend_send_item). */
  const char *argv[RANK_BATCH_MAX_ITEMS + 2];
  size_t lens[RANK_BATCH_MAX_ITEMS + 2];

  g_assert (n >= 1 && n <= RANK_BATCH_MAX_ITEMS && op->argvlen[3] == 1);
  argv[0] = op->argv[0], lens[0] = op->argvlen[0];
  argv[1] = op->argv[1], lens[1] = op->argvlen[1];
  for (int i = 0; i < n; i++)
    {
      g_assert (op->argvlen[4 + i] > prefix_len);
      argv[2 + i] = op->argv[4 + i] + prefix_len;
      lens[2 + i] = op->argvlen[4 + i] - prefix_len;
    }
  rank_redis_link_send (op->link, 1, (const char **) multi, NULL, NULL, NULL);
  rank_redis_link_send (op->link, n + 2, argv, lens, NULL, NULL);
  for (int i = 0; i < n; i++)
    {
      const char *zrank[] = { "ZRANK", op->argv[2], op->argv[4 + i] };
      size_t zlens[] = { 5, op->argvlen[2], op->argvlen[4 + i] };

      rank_redis_link_send (op->link, 3, zrank, zlens, NULL, NULL);
    }
  rank_redis_link_send (op->link, 1, (const char **) exec, NULL, on_reply, op);
}

static void
op_send (Op *op)
{
  if (op->flags & RANK_SEND_RANKS)
    ranks_send (op);
  else
    rank_redis_link_send (op->link, op->argc, op->argv, op->argvlen, on_reply,
                          op);
}

/* An Op for argc arguments (after EVALSHA, the script's SHA1 and nkeys, or
 * FCALL, its function and nkeys, for a script), copied; routed by key. */
static Op *
op_new (RankBackend *backend, guint node, RankScriptId script, int nkeys,
        int argc, const char *const *args, const gsize *lens, const char *key,
        gsize key_len)
{
  const Script *s
      = script != RANK_SCRIPT_NONE ? &backend->scripts[script] : NULL;
  char numkeys[12];
  const char *pre[3] = { s ? s->call : NULL, s ? s->callee : NULL, numkeys };
  int npre = s != NULL ? 3 : 0;
  int total = npre + argc;
  gsize bytes = (gsize) total;
  Op *op;
  char *p;

  g_snprintf (numkeys, sizeof numkeys, "%d", nkeys);
  for (int i = 0; i < npre; i++)
    bytes += strlen (pre[i]);
  for (int i = 0; i < argc; i++)
    bytes += lens[i];
  op = g_malloc0 (sizeof (Op)
                  + (gsize) total * (sizeof (char *) + sizeof (size_t))
                  + bytes);
  op->backend = backend;
  op->link = backend->impl->link_for (backend->impl_data, node, key, key_len);
  op->script = script;
  op->argc = total;
  op->argv = (const char **) (op + 1);
  op->argvlen = (size_t *) (op->argv + total);
  p = (char *) (op->argvlen + total);
  for (int i = 0; i < total; i++)
    {
      const char *arg = i < npre ? pre[i] : args[i - npre];
      gsize len = i < npre ? strlen (pre[i]) : lens[i - npre];

      memcpy (p, arg, len);
      p[len] = '\0';
      op->argv[i] = p;
      op->argvlen[i] = len;
      p += len + 1;
    }
  return op;
}

static void batch_send (RankBackend *backend, MergedCall *b);

/* Sends the open batches of node and of the hash tag of key (NULL: all),
 * oldest first. */
static void
flush_open (RankBackend *backend, guint node, const char *key, gsize key_len)
{
  gsize tag_len = 0;
  const char *tag
      = key != NULL ? rank_command_hash_tag (key, key_len, &tag_len) : NULL;
  GList *l = backend->open.head;

  while (l != NULL)
    {
      MergedCall *b = l->data;

      l = l->next;
      if (tag == NULL
          || (b->node == node && b->tag_len == tag_len
              && memcmp (b->tag, tag, tag_len) == 0))
        batch_send (backend, b);
    }
}

static int
flush_batches (gpointer data)
{
  flush_open (data, 0, NULL, 0);
  return -1;
}

/* A read a replica may answer goes to one that is fresh enough, if any. */
static void
route_read (Op *op, guint node, const char *key, gsize key_len,
            gboolean replica_ok, int max_lag_ms, gint64 fresh_after_us)
{
  const RankBackendImpl *impl = op->backend->impl;
  RankRedisLink *replica;

  if (!replica_ok || impl->replica_for == NULL)
    return;
  replica = impl->replica_for (op->backend->impl_data, node, key, key_len,
                               max_lag_ms, fresh_after_us);
  rank_metrics_read_source (replica != NULL);
  if (replica != NULL)
    {
      op->primary = op->link;
      op->link = replica;
    }
}

/* Commands that change nothing a GetRank reads: rank.lua, and the reads
 * rankd sends outside scripts. */
static gboolean
read_only (const RankCommand *cmd)
{
  static const char *const reads[]
      = { "HMGET", "ZMSCORE", "ZRANGE", "ZCOUNT", "ZSCAN",  "SCAN",
          "GET",   "MEMORY",  "XINFO",  "XLEN",   "XRANGE", "XPENDING" };

  if (cmd->script != RANK_SCRIPT_NONE)
    return cmd->script == RANK_SCRIPT_RANK;
  for (gsize i = 0; i < G_N_ELEMENTS (reads); i++)
    if (cmd->len[0] == strlen (reads[i])
        && memcmp (cmd->bytes + cmd->offset[0], reads[i], cmd->len[0]) == 0)
      return TRUE;
  return FALSE;
}

/* A write of cmd's keys is about to be queued: the watcher first. */
static void
tell_write (RankBackend *backend, const RankCommand *cmd)
{
  gsize key_len, tag_len;
  const char *key, *tag;

  if (backend->on_write == NULL || read_only (cmd))
    return;
  key = rank_command_key (cmd, &key_len);
  tag = rank_command_hash_tag (key, key_len, &tag_len);
  backend->on_write (tag, tag_len, backend->on_write_data);
}

void
rank_backend_watch_writes (RankBackend *backend, RankBackendWriteFunc func,
                           gpointer data)
{
  backend->on_write = func;
  backend->on_write_data = data;
}

void
rank_backend_send (RankBackend *backend, guint node, RankCommand *cmd,
                   guint flags, RankBackendFunc func, gpointer data)
{
  const char *args[RANK_COMMAND_MAX_ARGS];
  size_t lens[RANK_COMMAND_MAX_ARGS];
  gsize key_len;
  const char *key = rank_command_key (cmd, &key_len);
  int argc = rank_command_argv (cmd, args, lens);
  Op *op;

  if (backend->hook != NULL)
    backend->hook (cmd, backend->hook_data);
  tell_write (backend, cmd);
  if (backend->open.length > 0)
    flush_open (backend, node, key, key_len);
  op = op_new (backend, node, cmd->script, cmd->nkeys, argc, args, lens, key,
               key_len);
  op->flags = flags;
  op->func = func;
  op->data = data;
  route_read (op, node, key, key_len, cmd->replica_ok, cmd->max_lag_ms,
              cmd->fresh_after_us);
  rank_command_clear (cmd);
  op_send (op);
}

/* ---- batches ---- */

/* The table key of a batch: its node, script and keys, then its head's
 * arguments, each with its length (binary: this runs for every item). */
static GBytes *
batch_id (guint node, const RankCommand *head, guint flags)
{
  gsize size = sizeof (guint) + 2 * sizeof (int)
               + (gsize) head->argc * sizeof (gsize) + head->used;
  guint8 *id = g_malloc (size), *p = id;
  /* A transaction of ranks is not an HMGET. */
  int script = (flags & RANK_SEND_RANKS) ? -1 : (int) head->script;

  memcpy (p, &node, sizeof node);
  p += sizeof node;
  memcpy (p, &script, sizeof script);
  p += sizeof script;
  memcpy (p, &head->nkeys, sizeof (int));
  p += sizeof (int);
  memcpy (p, head->len, (gsize) head->argc * sizeof (gsize));
  p += (gsize) head->argc * sizeof (gsize);
  memcpy (p, head->bytes, head->used);
  return g_bytes_new_take (id, size);
}

static void
batch_add_args (MergedCall *b, const RankCommand *cmd)
{
  g_byte_array_append (b->bytes, (const guint8 *) cmd->bytes,
                       (guint) cmd->used);
  for (int i = 0; i < cmd->argc; i++)
    g_array_append_val (b->lens, cmd->len[i]);
}

/* A packed item (RANK_SEND_PACKED): its one argument goes on the end of
 * the batch's last, the packed items before it. */
static void
batch_add_packed (MergedCall *b, const RankCommand *cmd)
{
  g_assert (cmd->argc == 1 && cmd->len[0] == cmd->used && b->lens->len > 0);
  g_byte_array_append (b->bytes, (const guint8 *) cmd->bytes,
                       (guint) cmd->used);
  g_array_index (b->lens, gsize, b->lens->len - 1) += cmd->used;
}

static void
merged_call_free (MergedCall *b)
{
  g_bytes_unref (b->id);
  g_free (b->tag);
  g_byte_array_unref (b->bytes);
  g_array_unref (b->lens);
  g_array_unref (b->waiters);
  g_free (b);
}

/* No longer open: it is sent, or failed. */
static void
batch_close (RankBackend *backend, MergedCall *b)
{
  g_hash_table_remove (backend->batches, b->id);
  g_queue_unlink (&backend->open, &b->link);
}

/* How many items a batch of items sent with flags holds: a group's, and
 * the queue's drain's (one element each, RANK_SEND_ONE_ELEMENT), up to
 * RANK_GROUP_MAX_ITEMS, so that a call's own costs are shared by more
 * updates; others RANK_BATCH_MAX_ITEMS, which bounds how long one call
 * holds Redis for the calls that wait behind it. */
static guint
batch_max_items (guint flags)
{
  return (flags & (RANK_SEND_GROUP | RANK_SEND_ONE_ELEMENT))
             ? RANK_GROUP_MAX_ITEMS
             : RANK_BATCH_MAX_ITEMS;
}

void
rank_backend_send_item (RankBackend *backend, guint node,
                        const RankCommand *head, RankCommand *item, guint flags,
                        RankBackendFunc func, gpointer data)
{
  g_autoptr (GBytes) id = batch_id (node, head, flags);
  /* The newest open batch first: an UpdateBatch's items mostly join it,
   * and comparing costs less than hashing the head. */
  MergedCall *b = backend->open.tail != NULL ? backend->open.tail->data : NULL;
  Waiter w = { func, data };

  if (b == NULL || !g_bytes_equal (b->id, id))
    b = g_hash_table_lookup (backend->batches, id);
  g_assert (head->script == RANK_SCRIPT_NONE ? head->argc >= 2
                                             : head->nkeys > 0);
  if (backend->hook != NULL)
    backend->hook (head, backend->hook_data);
  /* A write that joins an open batch follows what that batch follows. */
  if (b == NULL)
    tell_write (backend, head);
  if (b != NULL && b->waiters->len >= batch_max_items (flags))
    {
      batch_send (backend, b);
      b = NULL;
    }
  if (b == NULL)
    {
      gsize key_len, tag_len;
      const char *key = rank_command_key (head, &key_len);
      const char *tag = rank_command_hash_tag (key, key_len, &tag_len);

      /* What was sent for this keyspace before goes first. */
      flush_open (backend, node, key, key_len);
      b = g_new0 (MergedCall, 1);
      b->node = node;
      b->tag = g_strndup (tag, tag_len);
      b->tag_len = tag_len;
      b->id = g_steal_pointer (&id);
      b->script = head->script;
      b->flat_width = (flags & RANK_SEND_ONE_ELEMENT)
                          ? 1
                          : backend->scripts[head->script].flat_width;
      b->nkeys = head->nkeys;
      b->bytes = g_byte_array_sized_new ((guint) head->used + 256);
      b->lens = g_array_new (FALSE, FALSE, sizeof (gsize));
      b->waiters = g_array_new (FALSE, FALSE, sizeof (Waiter));
      b->link.data = b;
      b->replica_ok = item->replica_ok;
      b->max_lag_ms = item->max_lag_ms;
      b->fresh_after_us = item->fresh_after_us;
      batch_add_args (b, head);
      g_hash_table_insert (backend->batches, b->id, b);
      g_queue_push_tail_link (&backend->open, &b->link);
    }
  /* A group's head is its own: its items are all packed, or none; and
   * the answer a head asks for is the same for all its items. */
  g_assert (b->waiters->len == 0
            || ((b->flags ^ flags) & (RANK_SEND_PACKED | RANK_SEND_ONE_ELEMENT))
                   == 0);
  b->flags |= flags;
  b->replica_ok = b->replica_ok && item->replica_ok;
  b->max_lag_ms = MIN (b->max_lag_ms, item->max_lag_ms);
  b->fresh_after_us = MAX (b->fresh_after_us, item->fresh_after_us);
  if ((flags & RANK_SEND_PACKED) && b->waiters->len > 0)
    batch_add_packed (b, item);
  else
    batch_add_args (b, item);
  g_array_append_val (b->waiters, w);
  rank_command_clear (item);
}

static void batch_replied (const RankReply *reply, const GError *error,
                           gpointer data);

/* The batch becomes one command. */
static void
batch_send (RankBackend *backend, MergedCall *b)
{
  guint argc = b->lens->len;
  const char **args = g_new (const char *, argc);
  const gsize *lens = (const gsize *) b->lens->data;
  gsize at = 0;
  /* The key that routes it: a script's first, a command's first argument. */
  guint k = b->script != RANK_SCRIPT_NONE ? 0 : 1;
  Op *op;

  batch_close (backend, b);
  for (guint i = 0; i < argc; i++)
    {
      args[i] = (const char *) b->bytes->data + at;
      at += lens[i];
    }
  op = op_new (backend, b->node, b->script, b->nkeys, (int) argc, args, lens,
               args[k], lens[k]);
  route_read (op, b->node, args[k], lens[k], b->replica_ok, b->max_lag_ms,
              b->fresh_after_us);
  g_free (args);
  op->flags = b->flags;
  op->func = batch_replied;
  op->data = b;
  op_send (op);
}

/* Whether a flat answer is the count of b's items instead: each was
 * applied as sent (update.lua, as_sent), and each item's reply is that
 * count, which its waiter knows how to read. */
static gboolean
batch_as_sent (const MergedCall *b, const RankReply *reply)
{
  return b->flat_width > 0 && !(b->flags & RANK_SEND_RANKS)
         && reply->type == RANK_REPLY_INTEGER
         && reply->integer == (gint64) b->waiters->len;
}

/* Whether reply has the shape of b's answer: the script's array, one
 * reply per item, or with a flat_width, the items' replies one after
 * another (or batch_as_sent); for a transaction of ranks, {HMGET's
 * array (or its error), a ZRANK per item}. */
static gboolean
batch_shaped (const MergedCall *b, const RankReply *reply)
{
  guint n = b->waiters->len;
  const RankReply *scores;
  gsize at = 0;

  if (batch_as_sent (b, reply))
    return TRUE;
  if (reply->type != RANK_REPLY_ARRAY)
    return FALSE;
  if (b->flags & RANK_SEND_RANKS)
    {
      if (reply->elements != n + 1)
        return FALSE;
      scores = reply->element[0];
      return scores->type == RANK_REPLY_ERROR
             || (scores->type == RANK_REPLY_ARRAY && scores->elements == n);
    }
  if (b->flat_width == 0)
    return reply->elements == n;
  for (guint i = 0; i < n && at < reply->elements; i++)
    at += reply->element[at]->type == RANK_REPLY_ERROR ? 1 : b->flat_width;
  return at == reply->elements;
}

/* Item i's reply in b's answer (batch_shaped): element i; in a flat
 * answer, the elements from at (which moves past them), seen through one,
 * or the count of an answer batch_as_sent; for a transaction of ranks,
 * {its value in the times hash, its rank} in one (pair holds the two), or
 * whichever of the two is an error. */
static const RankReply *
batch_item (const MergedCall *b, const RankReply *reply, guint i, gsize *at,
            RankReply *one, RankReply *pair[2])
{
  const RankReply *scores, *first;

  if (batch_as_sent (b, reply))
    return reply;
  if (!(b->flags & RANK_SEND_RANKS))
    {
      if (b->flat_width == 0)
        return reply->element[i];
      first = reply->element[*at];
      if (first->type == RANK_REPLY_ERROR)
        {
          ++*at;
          return first;
        }
      *one = (RankReply){ .type = RANK_REPLY_ARRAY,
                          .elements = b->flat_width,
                          .element = reply->element + *at };
      *at += b->flat_width;
      return one;
    }
  scores = reply->element[0];
  pair[0] = scores->type == RANK_REPLY_ARRAY ? scores->element[i]
                                             : (RankReply *) scores;
  pair[1] = reply->element[i + 1];
  if (pair[0]->type == RANK_REPLY_ERROR)
    return pair[0];
  if (pair[1]->type == RANK_REPLY_ERROR)
    return pair[1];
  *one
      = (RankReply){ .type = RANK_REPLY_ARRAY, .elements = 2, .element = pair };
  return one;
}

/* The batch's answer: one reply per item, each to its own waiter. */
static void
batch_replied (const RankReply *reply, const GError *error, gpointer data)
{
  MergedCall *b = data;
  g_autoptr (GError) bad = NULL;
  gsize at = 0;

  if (error == NULL && !batch_shaped (b, reply))
    {
      g_warning ("unexpected Redis reply (type %d) to a batch of %u",
                 reply->type, b->waiters->len);
      error = bad = g_error_new (RANK_ERROR, RANK_ERROR_INTERNAL,
                                 "unexpected Redis reply to a batch");
    }
  for (guint i = 0; i < b->waiters->len; i++)
    {
      Waiter *w = &g_array_index (b->waiters, Waiter, i);
      RankReply built, *pair[2];
      const RankReply *one
          = error == NULL ? batch_item (b, reply, i, &at, &built, pair) : NULL;
      g_autoptr (GError) refused = NULL;

      if (one != NULL && one->type == RANK_REPLY_ERROR)
        refused = classify (one);
      w->func (refused != NULL || error != NULL ? NULL : one,
               refused != NULL ? refused : error, w->data);
    }
  merged_call_free (b);
}

/* Shutting down: the open batches fail. */
static void
fail_batches (RankBackend *backend)
{
  MergedCall *b;

  while ((b = g_queue_peek_head (&backend->open)) != NULL)
    {
      g_autoptr (GError) error = g_error_new (
          RANK_ERROR, RANK_ERROR_UNAVAILABLE, "Redis: rankd is stopping");

      batch_close (backend, b);
      for (guint i = 0; i < b->waiters->len; i++)
        {
          Waiter *w = &g_array_index (b->waiters, Waiter, i);

          w->func (NULL, error, w->data);
        }
      merged_call_free (b);
    }
}

/* A MOVED or ASK reply on Redis Cluster: sends op where it points. FALSE
 * if the reply is neither, or op has been redirected too often. */
static gboolean
follow_redirect (Op *op, const RankReply *reply)
{
  const RankBackendImpl *impl = op->backend->impl;
  RankRedisLink *to;
  gboolean ask = FALSE;

  if (impl->redirect == NULL || op->redirects >= RANK_CLUSTER_REDIRECTS_MAX)
    return FALSE;
  to = impl->redirect (op->backend->impl_data, reply->str, &ask);
  if (to == NULL)
    return FALSE;
  op->redirects++;
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

/* Old libraries. Each build's update.lua is a library of its own,
 * rankd_<digest> (src/store/embed.cmake), so that rankds of different
 * builds can share a Redis; left there, every build ever run would stay
 * in it. The rule: a rankd that loads its library into a Redis (which it
 * does when a call finds it missing: a new build's first call, a Redis
 * restarted or flushed) then deletes each other rankd_* library there
 * that no connected client is named after. Every connection of a rankd
 * is named after its own library (CLIENT SETNAME), so a library another
 * running rankd calls stays. After a rolling upgrade, the build before
 * goes at the next build's first call: a Redis keeps the libraries of
 * the builds that were running at its last load. Should one be deleted
 * all the same (a rankd connecting between the CLIENT LIST and the
 * FUNCTION DELETE, or whose ACL refuses CLIENT SETNAME), its next call
 * finds its function missing and loads it again, as after a Redis
 * restart (reload_script). The library is loaded where FCALL runs, on a
 * primary (each node of a Cluster loads it, and cleans up, on its own);
 * FUNCTION DELETE there reaches the replicas by replication. Errors (an
 * ACL without CLIENT LIST, a replica's READONLY) just leave the old
 * libraries. */
typedef struct
{
  RankRedisLink *link;
  char *own;
  GPtrArray *old; /* char *: the rankd_* libraries other than own */
} OldLibraries;

static void
old_libraries_free (OldLibraries *o)
{
  g_free (o->own);
  if (o->old != NULL)
    g_ptr_array_unref (o->old);
  g_free (o);
}

/* CLIENT LIST answered: a line per client, with " name=<its name> ". */
static void
clients_listed (const RankReply *reply, const GError *error, gpointer data)
{
  OldLibraries *o = data;

  if (error == NULL && reply->type == RANK_REPLY_STRING)
    for (guint i = 0; i < o->old->len; i++)
      {
        const char *name = g_ptr_array_index (o->old, i);
        g_autofree char *field = g_strdup_printf (" name=%s ", name);
        const char *argv[] = { "FUNCTION", "DELETE", name };

        if (strstr (reply->str, field) != NULL)
          continue;
        g_message ("redis %s: deleting the function library %s, which no "
                   "connected rankd uses",
                   rank_redis_link_name (o->link), name);
        rank_redis_link_send (o->link, 3, argv, NULL, NULL, NULL);
      }
  old_libraries_free (o);
}

/* FUNCTION LIST answered: per library, an array of fields and values. */
static void
libraries_listed (const RankReply *reply, const GError *error, gpointer data)
{
  OldLibraries *o = data;

  o->old = g_ptr_array_new_with_free_func (g_free);
  if (error == NULL && reply->type == RANK_REPLY_ARRAY)
    for (gsize i = 0; i < reply->elements; i++)
      {
        const RankReply *lib = reply->element[i];

        for (gsize f = 0;
             lib->type == RANK_REPLY_ARRAY && f + 1 < lib->elements; f += 2)
          {
            const RankReply *key = rank_reply_string_at (lib, f);
            const RankReply *value = rank_reply_string_at (lib, f + 1);

            if (key != NULL && value != NULL
                && strcmp (key->str, "library_name") == 0
                && g_str_has_prefix (value->str, "rankd_")
                && strcmp (value->str, o->own) != 0)
              g_ptr_array_add (o->old, g_strdup (value->str));
          }
      }
  if (o->old->len == 0)
    {
      old_libraries_free (o);
      return;
    }
  {
    const char *argv[] = { "CLIENT", "LIST" };

    rank_redis_link_send (o->link, 2, argv, NULL, clients_listed, o);
  }
}

static void
drop_old_libraries (RankRedisLink *link, const Script *script)
{
  OldLibraries *o = g_new0 (OldLibraries, 1);
  const char *argv[] = { "FUNCTION", "LIST", "LIBRARYNAME", "rankd_*" };

  o->link = link;
  o->own = g_strdup (script->library_name);
  rank_redis_link_send (link, 4, argv, NULL, libraries_listed, o);
}

/* The script did not run (a SCRIPT FLUSH, a failover; for a function, a
 * Redis that never had it, or a FUNCTION FLUSH): load it first on the same
 * connection, so that the call sent again after it finds it. A library
 * another rankd loaded meanwhile answers "already exists": as good. */
static gboolean
reload_script (Op *op, const RankReply *reply)
{
  const Script *script;

  if (op->script == RANK_SCRIPT_NONE || op->retried)
    return FALSE;
  script = &op->backend->scripts[op->script];
  if (!g_str_has_prefix (reply->str, script->missing))
    return FALSE;
  {
    const char *load[] = { script->load, "LOAD", script->source };

    /* A normal event (every first start does it): logged as one, with
     * Redis's error, which reads as a failure, for debugging only. */
    g_message ("redis %s: loading %s into Redis",
               rank_redis_link_name (op->link), script->name);
    g_debug ("redis %s: %s answered %s", rank_redis_link_name (op->link),
             script->name, reply->str);
    rank_redis_link_send (op->link, 3, load, NULL, NULL, NULL);
    if (script->library)
      drop_old_libraries (op->link, script);
  }
  op->retried = TRUE;
  op_send (op);
  return TRUE;
}

static void
op_done (Op *op, const RankReply *reply, const GError *error)
{
  op->func (error != NULL ? NULL : reply, error, op->data);
  g_free (op);
}

/* WAIT answered: the replicas that have the write. Too few, and the write
 * is as good as unacknowledged: Unavailable, and a retry with the same
 * request id finds it if it survives. */
typedef struct
{
  Op *op;
  RankReply *reply; /* the write's, kept until then */
} Replicated;

static void
replicated (const RankReply *reply, const GError *error, gpointer data)
{
  Replicated *r = data;
  RankBackend *backend = r->op->backend;
  g_autoptr (GError) few = NULL;

  if (error == NULL && reply->type == RANK_REPLY_ERROR)
    error = few = classify (reply);
  else if (error == NULL
           && (reply->type != RANK_REPLY_INTEGER
               || reply->integer < (long long) backend->wait_replicas))
    error = few = g_error_new (
        RANK_ERROR, RANK_ERROR_UNAVAILABLE,
        "the update reached %lld of the %u replicas asked for "
        "(--wait-replicas) within %d ms; retry with the same request_id",
        reply->type == RANK_REPLY_INTEGER ? reply->integer : 0LL,
        backend->wait_replicas, backend->wait_timeout_ms);
  op_done (r->op, r->reply, error);
  rank_reply_free (r->reply);
  g_free (r);
}

/* WAIT on the connection that ran the write covers its writes; a retry
 * that changed nothing waits too: the first try's writes may not have
 * reached the replicas yet. */
static void
wait_replicas (Op *op, const RankReply *reply)
{
  RankBackend *backend = op->backend;
  Replicated *r = g_new (Replicated, 1);
  char replicas[16], timeout[16];
  const char *argv[] = { "WAIT", replicas, timeout };

  r->op = op;
  r->reply = rank_reply_copy (reply);
  g_snprintf (replicas, sizeof replicas, "%u", backend->wait_replicas);
  g_snprintf (timeout, sizeof timeout, "%d", backend->wait_timeout_ms);
  rank_redis_link_send (op->link, 3, argv, NULL, replicated, r);
}

static void
on_reply (const RankReply *reply, const GError *error, gpointer data)
{
  Op *op = data;
  const RankBackendImpl *impl = op->backend->impl;
  g_autoptr (GError) failure = NULL;

  /* A replica that could not answer (down, timed out, loading, ...): the
   * primary does. NOSCRIPT is the replica's to fix. */
  if (op->primary != NULL
      && (error != NULL
          || (reply->type == RANK_REPLY_ERROR
              && !g_str_has_prefix (reply->str, "NOSCRIPT"))))
    {
      g_debug ("redis %s: a read failed (%s); asking the primary",
               rank_redis_link_name (op->link),
               error != NULL ? error->message : reply->str);
      rank_metrics_replica_fallback ();
      op->link = op->primary;
      op->primary = NULL;
      op_send (op);
      return;
    }
  if (error != NULL && impl->unreachable != NULL)
    impl->unreachable (op->backend->impl_data);
  if (error == NULL && reply->type == RANK_REPLY_ERROR)
    {
      if (follow_redirect (op, reply) || reload_script (op, reply))
        return;
      error = failure = classify (reply);
    }
  if (error == NULL && (op->flags & RANK_SEND_REPLICATED)
      && op->backend->wait_replicas > 0)
    {
      wait_replicas (op, reply);
      return;
    }
  op_done (op, reply, error);
}
