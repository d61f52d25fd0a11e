/* server.h -- rankd's accept loop and connection threads.
 *
 * c_glib ships only a server that serves one connection at a time. This one
 * gives every connection its own thread (small stack, blocking I/O with
 * timeouts) running the generated processor, which threads may share. The
 * Redis traffic of all threads meets in the shared links, where it is
 * pipelined.
 */
#ifndef RANK_SERVER_H
#define RANK_SERVER_H

#include <thrift/c_glib/processor/thrift_dispatch_processor.h>

#include "address.h"
#include "protocol.h"

typedef struct
{
  RankAddress listen;
  gboolean framed;
  RankProtocolKind protocol;
  guint32 max_frame;
  int idle_timeout_ms;
  guint max_connections;
} RankServerConfig;

typedef struct _RankServer RankServer;

/* Binds the listening socket. */
RankServer *rank_server_new (const RankServerConfig *config, GError **error);

/* The bound port (useful with port 0). */
guint16 rank_server_port (RankServer *server);

/* Serves calls with processor (referenced) until rank_server_stop is
 * called or stop_fd (if >= 0) becomes readable; then stops accepting, lets
 * calls in flight finish (at most RANK_DRAIN_TIMEOUT_MS) and closes every
 * connection. */
void rank_server_run (RankServer *server, ThriftDispatchProcessor *processor,
                      int stop_fd);

/* Makes rank_server_run return; callable from any thread. */
void rank_server_stop (RankServer *server);

/* Open connections right now. */
guint rank_server_connections (RankServer *server);

void rank_server_free (RankServer *server);

#endif /* RANK_SERVER_H */
