/* main.c -- rankd: command line, start-up order, signals, shutdown.
 *
 * Start-up: read --config (fail at once on any error in it), bind the
 * listening port (fail fast if taken), start the embedded Redis unless Redis
 * nodes were given (--redis, or [redis] nodes in the config), connect,
 * serve. SIGINT/SIGTERM: stop
 * accepting, let calls in flight finish, stop the embedded Redis, exit 0.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "address.h"
#include "api.h"
#include "config.h"
#include "embedded_redis.h"
#include "error.h"
#include "constants.h"
#include "http.h"
#include "protocol.h"
#include "redis_tls.h"
#include "server.h"
#include "thrift_fixes.h"

#ifndef RANKD_VERSION
#define RANKD_VERSION "dev"
#endif

typedef struct
{
  char **listen;
  char **tls_listen;
  char *tls_cert;
  char *tls_key;
  char *tls_ca;
  char *tls_client_cert;
  char *tls_identity;
  GArray *listeners; /* RankListenerConfig: --listen, then --tls-listen */
  char **redis;
  char *config;
  char *data_dir;
  int dedup_window_s;
  double redis_timeout_s;
  int idle_timeout_s;
  int max_connections;
  int max_frame;
  gint64 read_cache_bytes;
  gint64 read_cache_tracked_boards;
  int io_threads;
  char *transport;
  char *protocol;
  gboolean version;
  gint64 random_seed;
  char *redis_cluster;
  int wait_replicas;
  char *metrics_listen;
  RankAddress metrics; /* parsed --metrics-listen */
  RankConfig *boards;
  GArray *nodes; /* RankAddress: --redis, or [redis] nodes; empty: embedded */
  GArray *replicas;   /* RankAddress: [redis] replicas of the nodes */
  GArray *replica_of; /* guint: the node of each */
  /* TLS to Redis: --redis-tls*, over [redis] tls* (the files are loaded
   * by run). */
  gboolean redis_tls;
  char *redis_tls_ca;
  char *redis_tls_cert;
  char *redis_tls_key;
  char *redis_tls_server_name;
  /* Merged (pointers into the above and o->boards as loaded at start;
   * run loads them once, before any reload). */
  RankRedisTlsOptions redis_tls_files;
  gboolean redis_tls_on;
  char **grants; /* --grant NAME=ROLE[,ROLE...] (access.h) */
} Options;

static void
clear_address (gpointer address)
{
  rank_address_clear (address);
}

static void
options_clear (Options *o)
{
  g_strfreev (o->listen);
  g_strfreev (o->tls_listen);
  g_free (o->tls_cert);
  g_free (o->tls_key);
  g_free (o->tls_ca);
  g_free (o->tls_client_cert);
  g_free (o->tls_identity);
  if (o->listeners != NULL)
    g_array_unref (o->listeners);
  g_strfreev (o->redis);
  g_free (o->config);
  g_free (o->data_dir);
  g_free (o->transport);
  g_free (o->protocol);
  g_free (o->redis_cluster);
  g_free (o->metrics_listen);
  g_strfreev (o->grants);
  rank_address_clear (&o->metrics);
  rank_config_unref (o->boards);
  if (o->nodes != NULL)
    g_array_unref (o->nodes);
  if (o->replicas != NULL)
    g_array_unref (o->replicas);
  if (o->replica_of != NULL)
    g_array_unref (o->replica_of);
  g_free (o->redis_tls_ca);
  g_free (o->redis_tls_cert);
  g_free (o->redis_tls_key);
  g_free (o->redis_tls_server_name);
}

static gboolean usage_error (GError **error, const char *fmt, ...)
    G_GNUC_PRINTF (2, 3);

static void
clear_listener (gpointer listener)
{
  rank_address_clear (&((RankListenerConfig *) listener)->address);
}

/* The listeners: every --listen (default RANK_DEFAULT_LISTEN; "none": no
 * plain one), then every --tls-listen; and the TLS options, which go with
 * --tls-listen. */
static gboolean
parse_listeners (Options *o, RankServerConfig *server, GError **error)
{
  const char *const default_listen[] = { RANK_DEFAULT_LISTEN, NULL };
  const char *const *plain
      = o->listen != NULL ? (const char *const *) o->listen : default_listen;
  guint n_tls = o->tls_listen != NULL ? g_strv_length (o->tls_listen) : 0;

  o->listeners = g_array_new (FALSE, TRUE, sizeof (RankListenerConfig));
  g_array_set_clear_func (o->listeners, clear_listener);
  if (g_strv_contains (plain, "none") && g_strv_length ((GStrv) plain) > 1)
    return usage_error (error, "--listen none: not with another --listen");
  for (guint i = 0; plain[i] != NULL && g_strcmp0 (plain[i], "none") != 0; i++)
    {
      RankListenerConfig l = { .tls = FALSE };

      if (!rank_address_parse (plain[i], RANK_DEFAULT_PORT, &l.address, error))
        {
          g_prefix_error (error, "--listen: ");
          return FALSE;
        }
      g_array_append_val (o->listeners, l);
    }
  for (guint i = 0; i < n_tls; i++)
    {
      RankListenerConfig l = { .tls = TRUE };

      if (!rank_address_parse (o->tls_listen[i], 0, &l.address, error))
        {
          g_prefix_error (error, "--tls-listen: ");
          return FALSE;
        }
      g_array_append_val (o->listeners, l);
      if (l.address.path != NULL)
        return usage_error (error,
                            "--tls-listen: '%s': TLS is served on TCP; a "
                            "unix socket is --listen unix:PATH (its peers "
                            "are known by their uid)",
                            o->tls_listen[i]);
    }
  if (o->listeners->len == 0)
    return usage_error (error, "--listen none: give a --tls-listen address, "
                               "or rankd serves nothing");
  server->listeners
      = (const RankListenerConfig *) (gpointer) o->listeners->data;
  server->n_listeners = o->listeners->len;
  if (n_tls == 0)
    {
      const char *stray = o->tls_cert          ? "--tls-cert"
                          : o->tls_key         ? "--tls-key"
                          : o->tls_ca          ? "--tls-ca"
                          : o->tls_client_cert ? "--tls-client-cert"
                          : o->tls_identity    ? "--tls-identity"
                                               : NULL;

      if (stray != NULL)
        return usage_error (error, "%s: only with --tls-listen", stray);
      return TRUE;
    }
  if (o->tls_cert == NULL || o->tls_key == NULL)
    return usage_error (error, "--tls-listen: needs %s (PEM files)",
                        o->tls_cert == NULL ? "--tls-cert" : "--tls-key");
  if (o->tls_client_cert != NULL && o->tls_ca == NULL)
    return usage_error (error, "--tls-client-cert: needs --tls-ca, the CA "
                               "client certificates are verified against");
  if (o->tls_client_cert != NULL
      && g_strcmp0 (o->tls_client_cert, "required") != 0
      && g_strcmp0 (o->tls_client_cert, "optional") != 0)
    return usage_error (error,
                        "--tls-client-cert: '%s' is not required or optional",
                        o->tls_client_cert);
  if (o->tls_identity != NULL
      && !rank_tls_identity_parse (o->tls_identity, &server->tls_identity,
                                   error))
    {
      g_prefix_error (error, "--tls-identity: ");
      return FALSE;
    }
  {
    const char *const files[][2] = { { "--tls-cert", o->tls_cert },
                                     { "--tls-key", o->tls_key },
                                     { "--tls-ca", o->tls_ca } };

    for (guint i = 0; i < G_N_ELEMENTS (files); i++)
      if (files[i][1] != NULL && access (files[i][1], R_OK) != 0)
        return usage_error (error, "%s: cannot read %s: %s", files[i][0],
                            files[i][1], g_strerror (errno));
  }
  server->tls.cert_file = o->tls_cert;
  server->tls.key_file = o->tls_key;
  server->tls.ca_file = o->tls_ca;
  server->tls.client_cert_optional
      = g_strcmp0 (o->tls_client_cert, "optional") == 0;
  return TRUE;
}

/* "127.0.0.1:9090, TLS 0.0.0.0:9443, unix:/run/rankd.sock" for the log,
 * with the ports bound. */
static char *
listeners_to_string (const Options *o, RankServer *server)
{
  GString *out = g_string_new (NULL);

  for (guint i = 0; i < o->listeners->len; i++)
    {
      const RankListenerConfig *l
          = &g_array_index (o->listeners, RankListenerConfig, i);
      RankAddress bound = l->address;
      g_autofree char *name = NULL;

      if (bound.path == NULL)
        bound.port = rank_server_listener_port (server, i);
      name = rank_address_to_string (&bound);
      g_string_append_printf (out, "%s%s%s", i ? ", " : "",
                              l->tls ? "TLS " : "", name);
    }
  return g_string_free (out, FALSE);
}

/* The Redis nodes: --redis replaces the config file's list; with
 * --redis-cluster, the seeds of the cluster. */
/* [redis] replicas of the nodes named (names[i] is node i). */
static gboolean
parse_replicas (Options *o, const char *const *names, GError **error)
{
  guint given = 0;

  o->replicas = g_array_new (FALSE, TRUE, sizeof (RankAddress));
  g_array_set_clear_func (o->replicas, clear_address);
  o->replica_of = g_array_new (FALSE, TRUE, sizeof (guint));
  for (guint i = 0; names[i] != NULL; i++)
    {
      const char *const *replicas
          = rank_config_redis_replicas (o->boards, names[i]);

      for (guint r = 0; replicas != NULL && replicas[r] != NULL; r++)
        {
          RankAddress address;

          if (!rank_address_parse (replicas[r], 6379, &address, error))
            return FALSE;
          g_array_append_val (o->replicas, address);
          g_array_append_val (o->replica_of, i);
        }
      given += replicas != NULL;
    }
  if (o->replicas->len > 0 && o->redis_cluster != NULL)
    return usage_error (error, "[redis] replicas: not with --redis-cluster "
                               "(its replicas come from the slot map)");
  if (given < rank_config_redis_replica_sets (o->boards))
    return usage_error (error, "[redis] replicas: a primary is not one of "
                               "the Redis nodes in use (--redis or [redis] "
                               "nodes)");
  return TRUE;
}

static gboolean
parse_nodes (Options *o, GError **error)
{
  g_auto (GStrv) seeds = o->redis_cluster != NULL
                             ? g_strsplit (o->redis_cluster, ",", -1)
                             : NULL;
  const char *const *names = seeds != NULL ? (const char *const *) seeds
                             : o->redis != NULL
                                 ? (const char *const *) o->redis
                                 : rank_config_redis_nodes (o->boards);
  const char *what = seeds != NULL      ? "--redis-cluster"
                     : o->redis != NULL ? "--redis"
                                        : "[redis] nodes";

  if (seeds != NULL && o->redis != NULL)
    return usage_error (error, "--redis-cluster and --redis: give one");
  if (seeds != NULL && (seeds[0] == NULL || *seeds[0] == '\0'))
    return usage_error (error, "--redis-cluster: name at least one "
                               "HOST:PORT");
  o->nodes = g_array_new (FALSE, TRUE, sizeof (RankAddress));
  g_array_set_clear_func (o->nodes, clear_address);
  for (guint i = 0; names[i] != NULL; i++)
    {
      RankAddress address;

      if (!rank_address_parse (names[i], 6379, &address, error))
        {
          g_prefix_error (error, "%s: ", what);
          return FALSE;
        }
      g_array_append_val (o->nodes, address);
      if (seeds != NULL && address.path != NULL)
        return usage_error (error,
                            "--redis-cluster: '%s': a cluster is "
                            "reached over TCP, not a unix socket",
                            names[i]);
    }
  return parse_replicas (o, names, error);
}

/* --redis-tls* over [redis] tls*: each option replaces its key. What is
 * given must make sense together; the files are loaded later (run). */
static gboolean
parse_redis_tls (Options *o, GError **error)
{
  const RankConfigRedisTls *file = rank_config_redis_tls (o->boards);
  RankRedisTlsOptions *tls = &o->redis_tls_files;
  const char *on = o->redis_tls ? "--redis-tls" : "[redis] tls";
  const char *cert
      = o->redis_tls_cert ? "--redis-tls-cert" : "[redis] tls_cert";
  const char *key = o->redis_tls_key ? "--redis-tls-key" : "[redis] tls_key";
  struct
  {
    const char *value, *name;
  } given[] = {
    { o->redis_tls_ca ? o->redis_tls_ca : file->ca_file,
      o->redis_tls_ca ? "--redis-tls-ca" : "[redis] tls_ca" },
    { o->redis_tls_cert ? o->redis_tls_cert : file->cert_file, cert },
    { o->redis_tls_key ? o->redis_tls_key : file->key_file, key },
    { o->redis_tls_server_name ? o->redis_tls_server_name : file->server_name,
      o->redis_tls_server_name ? "--redis-tls-server-name"
                               : "[redis] tls_server_name" },
  };
  gboolean any_tcp = FALSE;

  o->redis_tls_on = o->redis_tls || file->tls;
  tls->ca_file = given[0].value;
  tls->cert_file = given[1].value;
  tls->key_file = given[2].value;
  tls->server_name = given[3].value;
  for (guint i = 0; i < G_N_ELEMENTS (given); i++)
    {
      if (given[i].value != NULL && *given[i].value == '\0')
        return usage_error (error, "%s: must not be empty", given[i].name);
      if (given[i].value != NULL && !o->redis_tls_on)
        return usage_error (error,
                            "%s: given without --redis-tls (or [redis] "
                            "tls=true): Redis would be reached without TLS",
                            given[i].name);
    }
  if ((tls->cert_file == NULL) != (tls->key_file == NULL))
    return usage_error (error,
                        "%s: a client certificate needs its key, "
                        "and a key its certificate (%s)",
                        tls->cert_file != NULL ? cert : key,
                        tls->cert_file != NULL ? key : cert);
  for (guint i = 0; i < o->nodes->len; i++)
    any_tcp = any_tcp || g_array_index (o->nodes, RankAddress, i).path == NULL;
  if (o->redis_tls_on && !any_tcp)
    return usage_error (error,
                        "%s: no Redis node is reached over TCP (the "
                        "embedded Redis and unix sockets never use TLS); "
                        "name the nodes with --redis, --redis-cluster or "
                        "[redis] nodes",
                        on);
  return TRUE;
}

static gboolean
usage_error (GError **error, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  g_propagate_error (
      error, g_error_new_valist (RANK_ERROR, RANK_ERROR_INVALID, fmt, ap));
  va_end (ap);
  return FALSE;
}

/* ---- grants (access.h): --grant, and the warning of an open port ---- */

/* Adds the --grant options to config (just loaded, not yet shared). */
static gboolean
add_grant_options (const Options *o, RankConfig *config, GError **error)
{
  for (char **g = o->grants; g != NULL && *g != NULL; g++)
    if (!rank_config_add_grant_option (config, *g, error))
      return FALSE;
  return TRUE;
}

/* Whether host (as --listen gives it) is a loopback address: 127.0.0.0/8,
 * ::1 or localhost. A name is taken for what it says, not resolved. */
static gboolean
loopback_host (const char *host)
{
  struct in_addr v4;
  struct in6_addr v6;

  if (host == NULL)
    return TRUE; /* a unix socket */
  if (g_ascii_strcasecmp (host, "localhost") == 0)
    return TRUE;
  if (inet_pton (AF_INET, host, &v4) == 1)
    return (ntohl (v4.s_addr) >> 24) == 127;
  if (inet_pton (AF_INET6, host, &v6) == 1)
    return IN6_IS_ADDR_LOOPBACK (&v6);
  return FALSE;
}

/* A plain listener beyond loopback with no grant configured: anyone who
 * reaches it may read and write every board. Said loudly, at start and
 * after a reload that leaves it so. */
static void
warn_if_open (const Options *o, const RankServerConfig *server,
              const RankConfig *config)
{
  if (g_getenv ("RANKD_TEST_CLOCK_FILE") != NULL)
    g_warning ("RANKD_TEST_CLOCK_FILE is set: rankd's clock is read from %s "
               "(for tests only)",
               g_getenv ("RANKD_TEST_CLOCK_FILE"));
  /* The viewer's reads are rankd's own calls, which no grant limits. */
  if (o->metrics_listen != NULL && !loopback_host (o->metrics.host))
    g_warning ("the HTTP port (--metrics-listen %s) serves the board viewer "
               "to anyone who reaches it: the names and entries of every "
               "board, whatever the grants; keep it on loopback or behind "
               "a proxy that checks who calls",
               o->metrics_listen);
  if (rank_grants_configured (rank_config_grants (config)))
    return;
  for (guint i = 0; i < server->n_listeners; i++)
    {
      const RankListenerConfig *l = &server->listeners[i];

      if (l->tls || loopback_host (l->address.host))
        continue;
      g_warning ("rankd listens on %s:%u without TLS and without any grant: "
                 "ANYONE WHO REACHES THIS PORT CAN READ AND WRITE EVERY "
                 "BOARD (only admin calls, DeleteBoard, ResetBoard, Export, "
                 "ListBoards, GetBoardInfo, are refused).",
                 l->address.host, l->address.port);
      g_warning ("to fix it: listen on 127.0.0.1 (--listen), or grant roles "
                 "to whom they belong ([grant NAME] sections in --config, "
                 "e.g. [grant anonymous] read=*; or --grant "
                 "NAME=ROLE[,ROLE...]), and serve clients over TLS with "
                 "client certificates (--tls-listen, see "
                 "docs/security.md)");
    }
}

static gboolean
parse_options (int *argc, char ***argv, Options *o, RankServerConfig *server,
               GError **error)
{
  GOptionEntry entries[] = {
    { "listen", 'l', 0, G_OPTION_ARG_STRING_ARRAY, &o->listen,
      "Address to serve plain Thrift on (default " RANK_DEFAULT_LISTEN
      "); repeat it for several; unix:PATH is a unix socket whose clients "
      "are known by their uid; 'none': no plain listener (with "
      "--tls-listen)",
      "HOST:PORT|unix:PATH|none" },
    { "tls-listen", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o->tls_listen,
      "Address to serve Thrift over TLS on (TLS 1.2 and later), beside "
      "--listen; repeat it for several",
      "HOST:PORT" },
    { "tls-cert", 0, 0, G_OPTION_ARG_FILENAME, &o->tls_cert,
      "The TLS listeners' certificate (PEM, with its chain); SIGHUP reads "
      "it again",
      "FILE" },
    { "tls-key", 0, 0, G_OPTION_ARG_FILENAME, &o->tls_key,
      "Its private key (PEM); SIGHUP reads it again", "FILE" },
    { "tls-ca", 0, 0, G_OPTION_ARG_FILENAME, &o->tls_ca,
      "Ask clients for certificates and verify them against these CAs "
      "(PEM): mutual TLS; SIGHUP reads it again",
      "FILE" },
    { "tls-client-cert", 0, 0, G_OPTION_ARG_STRING, &o->tls_client_cert,
      "With --tls-ca: whether a client must show a certificate (default "
      "required; optional: one without is anonymous)",
      "required|optional" },
    { "tls-identity", 0, 0, G_OPTION_ARG_STRING, &o->tls_identity,
      "Which name of a client's certificate is its identity: the subject's "
      "CN (default), or its first DNS, URI or email subjectAltName",
      "cn|dns|uri|email" },
    { "redis", 'r', 0, G_OPTION_ARG_STRING_ARRAY, &o->redis,
      "Redis to use instead of the embedded one; repeat it for several "
      "nodes (sharded boards spread over them)",
      "HOST:PORT|unix:PATH" },
    { "redis-cluster", 0, 0, G_OPTION_ARG_STRING, &o->redis_cluster,
      "Use a Redis Cluster (instead of --redis): seed nodes to discover it "
      "from; boards and their shards spread over its masters",
      "HOST:PORT[,HOST:PORT...]" },
    /* TLS to Redis (the [redis] tls* keys, which these replace). */
    { "redis-tls", 0, 0, G_OPTION_ARG_NONE, &o->redis_tls,
      "Speak TLS to the Redis nodes (not to a unix socket)", NULL },
    { "redis-tls-ca", 0, 0, G_OPTION_ARG_FILENAME, &o->redis_tls_ca,
      "CAs that sign the Redis nodes' certificates (PEM; default the "
      "system's)",
      "FILE" },
    { "redis-tls-cert", 0, 0, G_OPTION_ARG_FILENAME, &o->redis_tls_cert,
      "Client certificate for Redis (PEM; with --redis-tls-key)", "FILE" },
    { "redis-tls-key", 0, 0, G_OPTION_ARG_FILENAME, &o->redis_tls_key,
      "Key of --redis-tls-cert (PEM)", "FILE" },
    { "redis-tls-server-name", 0, 0, G_OPTION_ARG_STRING,
      &o->redis_tls_server_name,
      "The name the nodes' certificates must carry (default: each node's "
      "host as given)",
      "NAME" },
    { "wait-replicas", 0, 0, G_OPTION_ARG_INT, &o->wait_replicas,
      "Acknowledge an update only once this many Redis replicas have it "
      "(WAIT; default 0: once the master has it)",
      "N" },
    { "config", 'c', 0, G_OPTION_ARG_FILENAME, &o->config,
      "Board options and Redis nodes (GLib key file; see README)", "FILE" },
    { "data-dir", 'd', 0, G_OPTION_ARG_FILENAME, &o->data_dir,
      "Directory of the embedded Redis (default " RANK_DEFAULT_DATA_DIR ")",
      "DIR" },
    { "dedup-window", 0, 0, G_OPTION_ARG_INT, &o->dedup_window_s,
      "How long a request_id is remembered (default 3600)", "SECONDS" },
    { "redis-timeout", 0, 0, G_OPTION_ARG_DOUBLE, &o->redis_timeout_s,
      "Answer Unavailable when Redis has not replied within this (default 2)",
      "SECONDS" },
    { "idle-timeout", 0, 0, G_OPTION_ARG_INT, &o->idle_timeout_s,
      "Close connections idle this long (default 60)", "SECONDS" },
    { "max-connections", 0, 0, G_OPTION_ARG_INT, &o->max_connections,
      "Refuse connections beyond this many (default 1024)", "N" },
    { "read-cache-bytes", 0, 0, G_OPTION_ARG_INT64, &o->read_cache_bytes,
      "Memory the read cache of boards with read_cache=tracked or "
      "read_cache_ms may take (default 67108864)",
      "BYTES" },
    { "read-cache-tracked-boards", 0, 0, G_OPTION_ARG_INT64,
      &o->read_cache_tracked_boards,
      "Boards with read_cache=tracked whose changes Redis reports at once, "
      "the most recently read (a board of S shards counts S+1; default "
      "100)",
      "N" },
    { "max-frame", 0, 0, G_OPTION_ARG_INT, &o->max_frame,
      "Largest request accepted, in bytes (default 1048576)", "BYTES" },
    { "io-threads", 0, 0, G_OPTION_ARG_INT, &o->io_threads,
      "Event-loop threads, each with its own connection to each Redis "
      "node (default: "
      "the number of CPUs, at most 8)",
      "N" },
    { "transport", 't', 0, G_OPTION_ARG_STRING, &o->transport,
      "Thrift transport: framed (default) or buffered", "framed|buffered" },
    { "protocol", 'p', 0, G_OPTION_ARG_STRING, &o->protocol,
      "Thrift protocol: binary (default) or compact", "binary|compact" },
    { "metrics-listen", 0, 0, G_OPTION_ARG_STRING, &o->metrics_listen,
      "Serve HTTP here: /metrics (Prometheus), /healthz and the board "
      "viewer (default: off)",
      "HOST:PORT" },
    { "grant", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o->grants,
      "Give NAME (a client identity, or anonymous: calls without one) these "
      "roles on every board (repeatable; added to the config file's "
      "[grant NAME] sections; any grant turns off the default of read and "
      "write for everyone)",
      "NAME=read|write|admin[,...]" },
    { "random-seed", 0, 0, G_OPTION_ARG_INT64, &o->random_seed,
      "Seed of Sample's random draws, for repeatable tests (default: "
      "unpredictable)",
      "N" },
    { "version", 'V', 0, G_OPTION_ARG_NONE, &o->version,
      "Print the version and exit", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) context
      = g_option_context_new ("- leaderboard service over Apache Thrift");

  g_option_context_set_summary (
      context,
      "Serves the Ranking service of idl/ranking.thrift. Without --redis, "
      "starts its own\nredis-server in --data-dir (append-only, unix socket) "
      "and stops it on exit.");
  g_option_context_set_description (
      context, "Examples:\n"
               "  rankd                                  embedded Redis in "
               "./rankd-data\n"
               "  rankd --redis 127.0.0.1:6379 --listen 0.0.0.0:9090\n"
               "  rankd --config rankd.conf --redis 10.0.0.1:6379 "
               "--redis 10.0.0.2:6379\n"
               "  rankd --redis-cluster 10.0.0.1:7000,10.0.0.2:7000\n"
               "  rankd --transport buffered --protocol compact\n"
               "  rankd --listen none --tls-listen 0.0.0.0:9443 --tls-cert "
               "server.pem \\\n"
               "        --tls-key server.key --tls-ca ca.pem   mutual TLS "
               "only\n");
  g_option_context_add_main_entries (context, entries, NULL);
  if (!g_option_context_parse (context, argc, argv, error))
    return FALSE;
  if (*argc > 1)
    return usage_error (error, "unexpected argument '%s'", (*argv)[1]);
  if (o->version)
    return TRUE;

  if (!parse_listeners (o, server, error))
    return FALSE;
  if (o->metrics_listen != NULL
      && !rank_http_parse_listen (o->metrics_listen, &o->metrics, error))
    return FALSE;
  if (o->transport == NULL || g_strcmp0 (o->transport, "framed") == 0)
    server->framed = TRUE;
  else if (g_strcmp0 (o->transport, "buffered") == 0)
    server->framed = FALSE;
  else
    return usage_error (error, "--transport: '%s' is not framed or buffered",
                        o->transport);
  if (!rank_protocol_kind_parse (o->protocol ? o->protocol : "binary",
                                 &server->protocol))
    return usage_error (error, "--protocol: '%s' is not binary or compact",
                        o->protocol);
  if (o->dedup_window_s < 1 || o->dedup_window_s > RANK_DEDUP_WINDOW_MAX_S)
    return usage_error (error, "--dedup-window: must be 1-%d seconds, got %d",
                        RANK_DEDUP_WINDOW_MAX_S, o->dedup_window_s);
  if (!(o->redis_timeout_s >= 0.01 && o->redis_timeout_s <= 600))
    return usage_error (error, "--redis-timeout: must be 0.01-600 seconds");
  if (o->idle_timeout_s < 1)
    return usage_error (error, "--idle-timeout: must be at least 1 second");
  if (o->max_connections < 1)
    return usage_error (error, "--max-connections: must be at least 1");
  if (o->io_threads < 1 || o->io_threads > 64)
    return usage_error (error, "--io-threads: must be 1-64, got %d",
                        o->io_threads);
  if (o->redis != NULL && g_strv_length (o->redis) > RANK_NODES_MAX)
    return usage_error (error, "--redis: at most %d nodes, got %u",
                        RANK_NODES_MAX, g_strv_length (o->redis));
  if (o->max_frame < RANK_MIN_MAX_FRAME || o->max_frame > RANK_MAX_MAX_FRAME)
    return usage_error (error, "--max-frame: must be %d-%d bytes, got %d",
                        RANK_MIN_MAX_FRAME, RANK_MAX_MAX_FRAME, o->max_frame);
  if (o->read_cache_bytes < 0
      || o->read_cache_bytes > RANK_READ_CACHE_BYTES_MAX)
    return usage_error (error,
                        "--read-cache-bytes: must be 0-%" G_GINT64_FORMAT
                        ", got %" G_GINT64_FORMAT,
                        (gint64) RANK_READ_CACHE_BYTES_MAX,
                        o->read_cache_bytes);
  if (o->read_cache_tracked_boards < 0
      || o->read_cache_tracked_boards > RANK_READ_CACHE_TRACKED_BOARDS_MAX)
    return usage_error (error,
                        "--read-cache-tracked-boards: must be 0-%d, got "
                        "%" G_GINT64_FORMAT,
                        RANK_READ_CACHE_TRACKED_BOARDS_MAX,
                        o->read_cache_tracked_boards);
  o->boards = o->config != NULL ? rank_config_load (o->config, error)
                                : rank_config_new ();
  if (o->boards == NULL || !add_grant_options (o, o->boards, error)
      || !parse_nodes (o, error) || !parse_redis_tls (o, error))
    return FALSE;
  server->redis_cluster = o->redis_cluster != NULL;
  if (o->wait_replicas < 0 || o->wait_replicas > RANK_WAIT_REPLICAS_MAX)
    return usage_error (error, "--wait-replicas: must be 0-%d, got %d",
                        RANK_WAIT_REPLICAS_MAX, o->wait_replicas);
  server->wait_replicas = (guint) o->wait_replicas;
  if (o->wait_replicas > 0 && o->nodes->len == 0)
    return usage_error (error, "--wait-replicas: the embedded Redis has no "
                               "replicas; use it with --redis or "
                               "--redis-cluster");
  server->boards = o->boards;
  /* Credentials never on the command line: the environment, or the file. */
  server->redis_user = g_getenv ("RANKD_REDIS_USER");
  if (server->redis_user == NULL)
    server->redis_user = rank_config_redis_user (o->boards);
  server->redis_password = g_getenv ("RANKD_REDIS_PASSWORD");
  if (server->redis_password == NULL)
    server->redis_password = rank_config_redis_password (o->boards);
  server->idle_timeout_ms = o->idle_timeout_s * 1000;
  server->max_connections = (guint) o->max_connections;
  server->max_frame = (guint32) o->max_frame;
  server->read_cache_bytes = (gsize) o->read_cache_bytes;
  server->read_cache_tracked_boards = (guint) o->read_cache_tracked_boards;
  server->io_threads = (guint) o->io_threads;
  server->redis_timeout_ms = (int) (o->redis_timeout_s * 1000);
  server->dedup_window_ms = (gint64) o->dedup_window_s * 1000;
  if (o->random_seed < 0 || o->random_seed > G_MAXUINT32)
    return usage_error (error, "--random-seed: must be 0-%u", G_MAXUINT32);
  server->random_seed = (guint32) o->random_seed;
  return TRUE;
}

/* SIGINT, SIGTERM and SIGHUP arrive through a signalfd the accept loop
 * polls; they are blocked in every thread (threads inherit the mask). */
static int
signals_setup (void)
{
  sigset_t set;

  signal (SIGPIPE, SIG_IGN);
  sigemptyset (&set);
  sigaddset (&set, SIGINT);
  sigaddset (&set, SIGTERM);
  sigaddset (&set, SIGHUP);
  pthread_sigmask (SIG_BLOCK, &set, NULL);
  return signalfd (-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* "a, b, c" for the log. */
static char *
nodes_to_string (const GArray *nodes)
{
  GString *out = g_string_new (NULL);

  for (guint i = 0; i < nodes->len; i++)
    {
      g_autofree char *name
          = rank_address_to_string (&g_array_index (nodes, RankAddress, i));

      g_string_append_printf (out, "%s%s", i ? ", " : "", name);
    }
  return g_string_free (out, FALSE);
}

/* Whether the [redis] tls keys of two loaded files differ. */
static gboolean
redis_tls_changed (const RankConfig *a, const RankConfig *b)
{
  const RankConfigRedisTls *x = rank_config_redis_tls (a);
  const RankConfigRedisTls *y = rank_config_redis_tls (b);

  return x->tls != y->tls || g_strcmp0 (x->ca_file, y->ca_file) != 0
         || g_strcmp0 (x->cert_file, y->cert_file) != 0
         || g_strcmp0 (x->key_file, y->key_file) != 0
         || g_strcmp0 (x->server_name, y->server_name) != 0;
}

/* SIGHUP: reads --config again and, if it loads, serves with its board
 * options from now on. A file with errors changes nothing. Redis nodes are
 * fixed at start. The TLS listeners' certificate, key and CA are read
 * again too (new connections use them; a set that does not load changes
 * nothing). */
static void
reload (Options *o, RankServer *server, RankHttp *http, RankRedisTls *tls)
{
  g_autoptr (GError) error = NULL;
  RankConfig *boards;

  /* The Redis TLS files named at start, read again: new connections to
   * Redis use them. */
  if (tls != NULL && !rank_redis_tls_reload (tls, &error))
    g_warning ("SIGHUP: Redis TLS files not reloaded, the loaded ones stay: "
               "%s",
               error->message);
  else if (tls != NULL)
    g_message ("SIGHUP: reloaded the Redis TLS files");
  g_clear_error (&error);
  if (o->tls_listen != NULL)
    {
      if (rank_server_reload_tls (server, &error))
        g_message ("SIGHUP: reloaded the TLS certificate %s%s%s", o->tls_cert,
                   o->tls_ca != NULL ? " and the CA " : "",
                   o->tls_ca != NULL ? o->tls_ca : "");
      else
        g_warning ("SIGHUP: TLS reload failed, the certificates in use "
                   "stay: %s",
                   error->message);
      g_clear_error (&error);
    }

  if (o->config == NULL)
    {
      if (o->tls_listen == NULL && tls == NULL)
        g_message ("SIGHUP: no --config to reload");
      return;
    }
  boards = rank_config_load (o->config, &error);
  if (boards != NULL && !add_grant_options (o, boards, &error))
    g_clear_pointer (&boards, rank_config_unref);
  if (boards == NULL)
    {
      g_warning ("SIGHUP: reload failed, board options unchanged: %s",
                 error->message);
      return;
    }
  if (o->redis == NULL
      && !g_strv_equal ((const char *const *) rank_config_redis_nodes (boards),
                        rank_config_redis_nodes (o->boards)))
    g_warning ("SIGHUP: [redis] nodes changed; the new list takes effect at "
               "the next start");
  if (redis_tls_changed (boards, o->boards))
    g_warning ("SIGHUP: [redis] tls settings changed; they take effect at "
               "the next start (the files named at start were read again)");
  rank_server_set_boards (server, boards);
  rank_http_set_boards (http, boards);
  rank_config_unref (o->boards);
  o->boards = boards;
  g_message ("SIGHUP: reloaded board options and grants from %s", o->config);
}

/* Each connection is a descriptor: raise the soft limit to the hard one,
 * and warn if --max-connections cannot be reached. */
static void
raise_fd_limit (guint max_connections)
{
  struct rlimit nofile;

  if (getrlimit (RLIMIT_NOFILE, &nofile) != 0)
    return;
  if (nofile.rlim_cur < nofile.rlim_max)
    {
      nofile.rlim_cur = nofile.rlim_max;
      setrlimit (RLIMIT_NOFILE, &nofile);
      getrlimit (RLIMIT_NOFILE, &nofile);
    }
  if (nofile.rlim_cur != RLIM_INFINITY
      && nofile.rlim_cur < (rlim_t) max_connections + 64)
    g_warning ("the descriptor limit (%lu) is below --max-connections (%u) "
               "+ 64; raise it (ulimit -n) or connections will be refused "
               "earlier",
               (unsigned long) nofile.rlim_cur, max_connections);
}

static int
run (Options *o, RankServerConfig *config)
{
  g_autoptr (GError) error = NULL;
  RankEmbeddedRedis *embedded = NULL;
  RankServer *server = NULL;
  RankHttp *http = NULL;
  int sfd = signals_setup ();
  int status = EXIT_FAILURE;

  raise_fd_limit (config->max_connections);
  if (o->redis_tls_on
      && (config->redis_tls = rank_redis_tls_new (&o->redis_tls_files, &error))
             == NULL)
    {
      g_prefix_error (&error, "Redis TLS: ");
      goto out;
    }
  /* Its pointers are into the configuration a reload replaces. */
  memset (&o->redis_tls_files, 0, sizeof o->redis_tls_files);
  config->replicas = (const RankAddress *) (gpointer) o->replicas->data;
  config->replica_of = (const guint *) (gpointer) o->replica_of->data;
  config->n_replicas = o->replicas->len;
  server = rank_server_new (config, &error);
  if (server == NULL)
    goto out;
  if (o->metrics_listen != NULL
      && (http = rank_http_new (&o->metrics, server, config->redis_timeout_ms,
                                o->boards, &error))
             == NULL)
    goto out;
  if (o->nodes->len == 0)
    {
      RankAddress redis = { 0 };

      embedded = rank_embedded_redis_start (
          o->data_dir ? o->data_dir : RANK_DEFAULT_DATA_DIR, &error);
      if (embedded == NULL)
        goto out;
      redis.path = g_strdup (rank_embedded_redis_address (embedded)->path);
      g_array_append_val (o->nodes, redis);
      /* The embedded Redis has no password: it listens on a private unix
       * socket only. */
      config->redis_user = config->redis_password = NULL;
    }
  rank_server_start (server, (RankAddress *) (gpointer) o->nodes->data,
                     o->nodes->len);
  if (!rank_server_wait_redis (server, config->redis_timeout_ms, &error))
    {
      /* Not fatal: calls answer Unavailable until Redis comes back. */
      g_warning ("%s; serving anyway", error->message);
      g_clear_error (&error);
    }
  else
    rank_server_check_layouts (server);
  if (http != NULL && !rank_http_start (http, &error))
    goto out;

  {
    g_autofree char *redis_name = nodes_to_string (o->nodes);
    g_autofree char *listen_name = listeners_to_string (o, server);

    g_message (
        "rankd %s listening on %s (%s, %s); redis %s%s; "
        "%u io threads; dedup window %d s; redis timeout %d ms; "
        "idle timeout %d s; max %u connections; max frame %u bytes%s%s%s%s",
        RANKD_VERSION, listen_name, config->framed ? "framed" : "buffered",
        config->protocol == RANK_PROTOCOL_COMPACT ? "compact" : "binary",
        redis_name, embedded ? " (embedded)" : "", config->io_threads,
        o->dedup_window_s, config->redis_timeout_ms, o->idle_timeout_s,
        config->max_connections, config->max_frame,
        o->config ? "; config " : "", o->config ? o->config : "",
        config->redis_password ? "; redis AUTH on" : "",
        config->redis_tls ? "; redis TLS on" : "");
  }
  warn_if_open (o, config, o->boards);
  while (rank_server_accept (server, sfd) == SIGHUP)
    {
      reload (o, server, http, config->redis_tls);
      warn_if_open (o, config, o->boards);
    }
  g_message ("stopped serving; shutting down");
  /* Its requests in progress call the workers: they finish first. */
  g_clear_pointer (&http, rank_http_free);
  rank_server_drain (server);
  status = EXIT_SUCCESS;

out:
  if (error != NULL)
    g_printerr ("rankd: %s\n", error->message);
  rank_http_free (http);
  rank_server_free (server);
  rank_embedded_redis_stop (embedded);
  rank_redis_tls_unref (config->redis_tls);
  if (sfd >= 0)
    close (sfd);
  return status;
}

int
main (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  Options o = {
    .dedup_window_s = RANK_DEFAULT_DEDUP_WINDOW_S,
    .redis_timeout_s = RANK_DEFAULT_REDIS_TIMEOUT_MS / 1000.0,
    .idle_timeout_s = RANK_DEFAULT_IDLE_TIMEOUT_S,
    .max_connections = RANK_DEFAULT_MAX_CONNECTIONS,
    .max_frame = RANK_DEFAULT_MAX_FRAME,
    .read_cache_bytes = RANK_READ_CACHE_BYTES_DEFAULT,
    .read_cache_tracked_boards = RANK_READ_CACHE_TRACKED_BOARDS_DEFAULT,
    .io_threads = (int) MIN (g_get_num_processors (), 8),
  };
  RankServerConfig config = { 0 };
  int status;

  /* Each worker thread's malloc arena gave memory back to the kernel
   * (madvise) whenever its top grew past 128 KiB and shrank again: 4% of
   * rankd's CPU on pipelined reads (perf). Trim only past a few MiB. */
  mallopt (M_TRIM_THRESHOLD, RANK_MALLOC_TRIM_BYTES);
  rank_thrift_fixes_apply ();
  if (!parse_options (&argc, &argv, &o, &config, &error))
    {
      g_printerr ("rankd: %s\nTry 'rankd --help'.\n", error->message);
      options_clear (&o);
      rank_address_clear (&config.listen);
      return 2;
    }
  if (o.version)
    {
      printf ("rankd %s (IDL %s)\n", RANKD_VERSION, RANK_API_IDL_VERSION);
      options_clear (&o);
      return EXIT_SUCCESS;
    }
  status = run (&o, &config);
  options_clear (&o);
  rank_address_clear (&config.listen);
  return status;
}
