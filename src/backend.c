/* backend.c -- what both backends share (see backend.h): assembly, scripts,
 * NOSCRIPT, redirects, WAIT, errors.
 *
 * A command in flight is an Op: where it went, what to call with its reply,
 * and a private copy of its arguments (to send it again after a NOSCRIPT or
 * a redirect). NOSCRIPT means the script did not run, so loading it on the
 * same connection and sending the call again is safe.
 */
#include "backend.h"

#include <string.h>

#include "backend_impl.h"
#include "constants.h"
#include "error.h"
#include "lua_scripts.h"

typedef struct
{
  const char *name;
  const char *source;
  char sha[41];
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
};

typedef struct
{
  RankBackend *backend;
  RankRedisLink *link;
  RankScriptId script;
  gboolean retried;
  guint redirects; /* MOVED and ASK followed so far */
  guint flags;
  RankBackendFunc func;
  gpointer data;
  int argc;
  const char **argv;
  size_t *argvlen;
} Op;

/* ---- assembly ---- */

static void
script_init (Script *script, const char *name, const char *source)
{
  g_autofree char *sha
      = g_compute_checksum_for_string (G_CHECKSUM_SHA1, source, -1);

  script->name = name;
  script->source = source;
  g_strlcpy (script->sha, sha, sizeof script->sha);
}

RankBackend *
rank_backend_new (RankLoop *loop, const RankBackendConfig *config)
{
  RankBackend *backend = g_new0 (RankBackend, 1);
  g_autoptr (GPtrArray) startup
      = g_ptr_array_new_with_free_func ((GDestroyNotify) g_strfreev);

  script_init (&backend->scripts[RANK_SCRIPT_UPDATE], "update.lua",
               rank_lua_update);
  script_init (&backend->scripts[RANK_SCRIPT_RANK], "rank.lua", rank_lua_rank);
  script_init (&backend->scripts[RANK_SCRIPT_DATA], "data.lua", rank_lua_data);
  /* First on every connection, before the scripts load. */
  if (config->password != NULL)
    {
      const char *auth[] = { "AUTH", config->user, config->password, NULL };

      if (config->user == NULL)
        auth[1] = config->password, auth[2] = NULL;
      g_ptr_array_add (startup, g_strdupv ((char **) auth));
    }
  for (int s = RANK_SCRIPT_NONE + 1; s < RANK_SCRIPTS; s++)
    {
      const char *load[]
          = { "SCRIPT", "LOAD", backend->scripts[s].source, NULL };

      g_ptr_array_add (startup, g_strdupv ((char **) load));
    }
  backend->impl
      = config->cluster ? &rank_backend_cluster_impl : &rank_backend_nodes_impl;
  backend->impl_data
      = config->cluster
            ? rank_backend_cluster_new (loop, config->nodes, config->n_nodes,
                                        config->timeout_ms, startup)
            : rank_backend_nodes_new (loop, config->nodes, config->n_nodes,
                                      config->timeout_ms, startup);
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
  backend->impl->free (backend->impl_data);
  g_free (backend);
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

/* ---- sending ---- */

static void on_reply (const RankReply *reply, const GError *error,
                      gpointer data);

static void
op_send (Op *op)
{
  rank_redis_link_send (op->link, op->argc, op->argv, op->argvlen, on_reply,
                        op);
}

void
rank_backend_send (RankBackend *backend, guint node, RankCommand *cmd,
                   guint flags, RankBackendFunc func, gpointer data)
{
  const Script *script
      = cmd->script != RANK_SCRIPT_NONE ? &backend->scripts[cmd->script] : NULL;
  char numkeys[8];
  const char *pre[3] = { "EVALSHA", script ? script->sha : NULL, numkeys };
  int npre = script != NULL ? 3 : 0;
  int argc = npre + cmd->argc;
  gsize bytes = cmd->used + (gsize) argc;
  gsize key_len;
  const char *key = rank_command_key (cmd, &key_len);
  Op *op;
  char *p;

  if (backend->hook != NULL)
    backend->hook (cmd, backend->hook_data);
  g_snprintf (numkeys, sizeof numkeys, "%d", cmd->nkeys);
  for (int i = 0; i < npre; i++)
    bytes += strlen (pre[i]);
  op = g_malloc0 (sizeof (Op)
                  + (gsize) argc * (sizeof (char *) + sizeof (size_t)) + bytes);
  op->backend = backend;
  op->link = backend->impl->link_for (backend->impl_data, node, key, key_len);
  op->script = cmd->script;
  op->flags = flags;
  op->func = func;
  op->data = data;
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
  rank_command_clear (cmd);
  op_send (op);
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

/* The script did not run (a SCRIPT FLUSH, a failover): load it first on
 * the same connection, so that the call sent again after it finds it. */
static gboolean
reload_script (Op *op, const RankReply *reply)
{
  const Script *script;

  if (op->script == RANK_SCRIPT_NONE || op->retried
      || !g_str_has_prefix (reply->str, "NOSCRIPT"))
    return FALSE;
  script = &op->backend->scripts[op->script];
  {
    const char *load[] = { "SCRIPT", "LOAD", script->source };

    g_message ("redis %s: reloading %s after NOSCRIPT",
               rank_redis_link_name (op->link), script->name);
    rank_redis_link_send (op->link, 3, load, NULL, NULL, NULL);
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
