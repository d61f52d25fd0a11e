/* server.h -- rankd's accept loop and event-loop workers.
 *
 * One thread accepts; --io-threads workers each run an event loop with its
 * own connections, its own pipelined link to each Redis node, and store. A
 * connection lives on one worker for its whole life, so nothing a request
 * touches is shared between threads.
 */
#ifndef RANK_SERVER_H
#define RANK_SERVER_H

#include <thrift/c_glib/thrift_struct.h>

#include "address.h"
#include "config.h"
#include "protocol.h"
#include "redis_tls.h"
#include "tls.h"

/* A port rankd serves Thrift on: TCP ("host:port") or a unix socket
 * ("unix:PATH", plain only: its peer is identified as "uid:N" by
 * SO_PEERCRED; the socket file is removed on exit). */
typedef struct
{
  RankAddress address;
  gboolean tls; /* TLS, as the config's tls fields say */
} RankListenerConfig;

typedef struct
{
  /* The listeners, copied by rank_server_new; none given: one plain
   * listener on listen. */
  const RankListenerConfig *listeners;
  guint n_listeners;
  RankAddress listen;
  /* The TLS listeners' certificate, key and client CA (files copied and
   * read again by rank_server_reload_tls), and which name of a client's
   * certificate is its identity. */
  RankTlsFiles tls;
  RankTlsIdentity tls_identity;
  gboolean framed;
  RankProtocolKind protocol;
  guint32 max_frame;
  int idle_timeout_ms;
  guint max_connections;
  guint io_threads;
  int redis_timeout_ms;
  gint64 dedup_window_ms;
  guint32 random_seed;        /* Sample's random numbers; 0: unpredictable */
  RankConfig *boards;         /* the workers' stores take references */
  const char *redis_user;     /* AUTH on every connection, if a password */
  const char *redis_password; /* is set; copied by rank_server_start */
  gboolean redis_cluster;     /* the nodes are Redis Cluster seeds */
  guint wait_replicas;        /* WAIT after each update (0: none) */
  gsize read_cache_bytes;     /* the read cache's bound (cache.h) */
  guint read_cache_tracked_boards; /* the tracked set's (tracking.h) */
  /* Replicas of the nodes (backend.h): replicas[i] of node replica_of[i];
   * copied by rank_server_start. */
  const RankAddress *replicas;
  const guint *replica_of;
  guint n_replicas;
  RankRedisTls *redis_tls; /* TLS to Redis (NULL: plain); links ref it */
} RankServerConfig;

typedef struct _RankServer RankServer;

/* Binds the listening sockets and loads the TLS context (nothing is served
 * yet): a taken port or a bad certificate fails before an embedded Redis is
 * started. */
RankServer *rank_server_new (const RankServerConfig *config, GError **error);

/* Starts the workers, each with a link to every Redis node (nodes[0] holds
 * the ordinary boards; see shard.h for the shards). */
void rank_server_start (RankServer *server, const RankAddress *nodes,
                        guint n_nodes);

/* Waits up to timeout_ms until every worker's Redis links are connected. */
gboolean rank_server_wait_redis (RankServer *server, int timeout_ms,
                                 GError **error);

/* The first listener's bound port (useful with port 0). */
guint16 rank_server_port (RankServer *server);

/* Listener i's bound port (0 for a unix socket), in the config's order. */
guint16 rank_server_listener_port (RankServer *server, guint i);

/* Reads the TLS listeners' certificate, key and CA again from the same
 * files (SIGHUP): new connections use them, open ones keep theirs. FALSE
 * with error, and the old ones kept, if they do not load. TRUE at once
 * without a TLS listener. */
gboolean rank_server_reload_tls (RankServer *server, GError **error);

/* Accepts connections until a signal arrives on signal_fd (a signalfd);
 * returns its number. Call again to go on accepting. */
int rank_server_accept (RankServer *server, int signal_fd);

/* Stops accepting, lets calls in flight finish (at most
 * RANK_DRAIN_TIMEOUT_MS), closes every connection and stops the workers. */
void rank_server_drain (RankServer *server);

/* Board options for calls from now on, in every worker (SIGHUP): returns
 * once every worker has them. Calls in flight finish with the options they
 * started with; connections stay. */
void rank_server_set_boards (RankServer *server, RankConfig *boards);

/* Has one worker read the stored layout of every configured board, so
 * that the log says at once which the options do not fit (layout.h); a
 * reload does the same by itself. */
void rank_server_check_layouts (RankServer *server);

/* Calls method in-process, as a Thrift client would over the port but
 * without a socket: args (the generated arguments struct, e.g.
 * rankRankingGetTopNArgs) go to a worker's handler, and its reply is read
 * into result (the generated result struct: success, or a declared
 * exception set). FALSE with error: a TApplicationException
 * (THRIFT_APPLICATION_EXCEPTION_ERROR), no answer within timeout_ms, or
 * RANK_ERROR_UNAVAILABLE when the workers are not running (before
 * rank_server_start, from rank_server_drain on). Any thread but a
 * worker's; blocks until the answer or the timeout. */
gboolean rank_server_call (RankServer *server, const char *method,
                           ThriftStruct *args, ThriftStruct *result,
                           int timeout_ms, GError **error);

/* Open connections right now. */
guint rank_server_connections (RankServer *server);

void rank_server_free (RankServer *server);

#endif /* RANK_SERVER_H */
