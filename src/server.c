/* server.c -- accept loop, connection threads, message dispatch
 * (see server.h).
 *
 * Each connection: wait for a request (idle timeout, or shutdown), read it
 * whole, check its header ourselves (c_glib's own check lets garbage
 * through), then call the generated processor's dispatch_call directly.
 * A request whose arguments do not decode gets a TApplicationException
 * naming the problem; with framing the connection goes on (the frame
 * boundary is known), without it the connection closes. Hostile or broken
 * bytes only ever close their own connection.
 *
 * Shutdown: the stop event wakes the accept loop and every connection
 * waiting between requests; a call in flight finishes and sends its reply
 * first.
 */
#include "server.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thrift/c_glib/thrift_application_exception.h>

#include "constants.h"
#include "transport.h"

struct _RankServer
{
  RankServerConfig config;
  ThriftDispatchProcessor *processor;
  int listen_fd;
  guint16 port;
  int stop_event;     /* wakes the accept loop */
  int shutdown_event; /* wakes connection threads: stop after this call */

  GMutex lock;
  GCond drained;
  guint connections;
  gint64 last_refusal_log;
};

typedef struct
{
  RankServer *server;
  int fd;
} Connection;

static void
signal_event (int fd)
{
  guint64 one = 1;

  if (write (fd, &one, sizeof one) < 0 && errno != EAGAIN)
    g_warning ("cannot signal event: %s", g_strerror (errno));
}

/* Replies to a request whose arguments did not decode. */
static gboolean
reply_exception (RankTransport *transport, ThriftProtocol *protocol,
                 const char *method, gint32 seqid,
                 ThriftApplicationExceptionError type, const char *message)
{
  g_autoptr (GError) error = NULL;
  ThriftApplicationException *x;
  gboolean ok;

  rank_transport_abort_message (transport);
  x = g_object_new (THRIFT_TYPE_APPLICATION_EXCEPTION, "type", type, "message",
                    message, NULL);
  ok = thrift_protocol_write_message_begin (protocol, method, T_EXCEPTION,
                                            seqid, &error)
           >= 0
       && thrift_struct_write (THRIFT_STRUCT (x), protocol, &error) >= 0
       && thrift_protocol_write_message_end (protocol, &error) >= 0
       && thrift_transport_flush (THRIFT_TRANSPORT (transport), &error);
  g_object_unref (x);
  return ok;
}

/* Serves one request; FALSE when the connection must close. */
static gboolean
serve_one (RankServer *server, RankTransport *transport,
           ThriftProtocol *protocol)
{
  g_autoptr (GError) error = NULL;
  char method[RANK_METHOD_NAME_MAX_BYTES + 1];
  gchar *name = NULL;
  ThriftMessageType type;
  gint32 seqid;
  gboolean ok;

  if (!rank_transport_begin_message (transport, &error)
      || thrift_protocol_read_message_begin (protocol, &name, &type, &seqid,
                                             &error)
             < 0)
    {
      g_debug ("closing connection: %s", error ? error->message : "?");
      g_free (name);
      return FALSE;
    }
  if (type != T_CALL || name == NULL
      || strlen (name) > RANK_METHOD_NAME_MAX_BYTES)
    {
      g_debug ("closing connection: message type %d is not a call", type);
      g_free (name);
      return FALSE;
    }
  g_strlcpy (method, name, sizeof method);
  /* dispatch_call takes ownership of name. */
  ok = THRIFT_DISPATCH_PROCESSOR_GET_CLASS (server->processor)
           ->dispatch_call (server->processor, protocol, protocol, name, seqid,
                            &error);
  if (ok)
    return TRUE;
  if (error != NULL && error->domain == THRIFT_PROTOCOL_ERROR)
    {
      g_debug ("bad arguments to %s: %s", method, error->message);
      return reply_exception (transport, protocol, method, seqid,
                              THRIFT_APPLICATION_EXCEPTION_ERROR_PROTOCOL_ERROR,
                              error->message)
             && server->config.framed;
    }
  g_debug ("closing connection during %s: %s", method,
           error ? error->message : "?");
  return FALSE;
}

static void *
connection_main (void *data)
{
  Connection *conn = data;
  RankServer *server = conn->server;
  RankTransport *transport = rank_transport_new (
      conn->fd, server->config.framed, server->config.max_frame);
  ThriftProtocol *protocol
      = rank_protocol_new (server->config.protocol, transport);

  rank_transport_set_wake_fd (transport, server->shutdown_event);
  for (;;)
    {
      RankWaitResult wait = rank_transport_wait_message (
          transport, server->config.idle_timeout_ms);

      if (wait != RANK_WAIT_READY || !serve_one (server, transport, protocol))
        break;
    }
  g_object_unref (protocol);
  g_object_unref (transport); /* closes the socket */
  g_free (conn);

  g_mutex_lock (&server->lock);
  server->connections--;
  g_cond_broadcast (&server->drained);
  g_mutex_unlock (&server->lock);
  return NULL;
}

static void
refuse (RankServer *server, int fd, const char *why)
{
  gint64 now = g_get_monotonic_time ();

  close (fd);
  /* One line a second at most: a flood must not flood the log too. */
  if (now - server->last_refusal_log > G_USEC_PER_SEC)
    {
      server->last_refusal_log = now;
      g_warning ("refused a connection: %s", why);
    }
}

static void
accept_one (RankServer *server)
{
  pthread_attr_t attr;
  pthread_t thread;
  Connection *conn;
  int fd = accept4 (server->listen_fd, NULL, NULL, SOCK_CLOEXEC);
  int rc;

  if (fd < 0)
    {
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
        {
          g_warning ("accept failed: %s", g_strerror (errno));
          /* Out of descriptors: do not spin on the ready socket. */
          g_usleep (10 * 1000);
        }
      return;
    }
  g_mutex_lock (&server->lock);
  if (server->connections >= server->config.max_connections)
    {
      g_mutex_unlock (&server->lock);
      refuse (server, fd, "--max-connections reached");
      return;
    }
  server->connections++;
  g_mutex_unlock (&server->lock);

  conn = g_new (Connection, 1);
  conn->server = server;
  conn->fd = fd;
  pthread_attr_init (&attr);
  pthread_attr_setstacksize (&attr, RANK_CONN_STACK_BYTES);
  pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
  rc = pthread_create (&thread, &attr, connection_main, conn);
  pthread_attr_destroy (&attr);
  if (rc != 0)
    {
      g_free (conn);
      g_mutex_lock (&server->lock);
      server->connections--;
      g_mutex_unlock (&server->lock);
      refuse (server, fd, g_strerror (rc));
    }
}

RankServer *
rank_server_new (const RankServerConfig *config, GError **error)
{
  RankServer *server;
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  int fd = rank_address_listen (&config->listen, 1024, error);

  if (fd < 0)
    return NULL;
  server = g_new0 (RankServer, 1);
  server->config = *config;
  server->config.listen.host = g_strdup (config->listen.host);
  server->config.listen.path = NULL;
  server->listen_fd = fd;
  if (getsockname (fd, (struct sockaddr *) &ss, &len) == 0)
    server->port = ntohs (ss.ss_family == AF_INET6
                              ? ((struct sockaddr_in6 *) &ss)->sin6_port
                              : ((struct sockaddr_in *) &ss)->sin_port);
  server->stop_event = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  server->shutdown_event = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  g_mutex_init (&server->lock);
  g_cond_init (&server->drained);
  return server;
}

guint16
rank_server_port (RankServer *server)
{
  return server->port;
}

guint
rank_server_connections (RankServer *server)
{
  guint n;

  g_mutex_lock (&server->lock);
  n = server->connections;
  g_mutex_unlock (&server->lock);
  return n;
}

void
rank_server_stop (RankServer *server)
{
  signal_event (server->stop_event);
}

void
rank_server_run (RankServer *server, ThriftDispatchProcessor *processor,
                 int stop_fd)
{
  struct pollfd pfd[3] = {
    { server->listen_fd, POLLIN, 0 },
    { server->stop_event, POLLIN, 0 },
    { stop_fd, POLLIN, 0 },
  };
  gint64 deadline;

  server->processor = g_object_ref (processor);
  for (;;)
    {
      int rc = poll (pfd, stop_fd >= 0 ? 3 : 2, -1);

      if (rc < 0 && errno == EINTR)
        continue;
      if (rc < 0)
        g_error ("poll on the listening socket failed: %s", g_strerror (errno));
      if ((pfd[1].revents & POLLIN)
          || (stop_fd >= 0 && (pfd[2].revents & POLLIN)))
        break;
      if (pfd[0].revents & POLLIN)
        accept_one (server);
    }

  close (server->listen_fd);
  server->listen_fd = -1;
  signal_event (server->shutdown_event);
  deadline = g_get_monotonic_time () + RANK_DRAIN_TIMEOUT_MS * 1000;
  g_mutex_lock (&server->lock);
  if (server->connections > 0)
    g_message ("draining %u connections", server->connections);
  while (server->connections > 0
         && g_cond_wait_until (&server->drained, &server->lock, deadline))
    ;
  if (server->connections > 0)
    g_warning ("%u connections still busy after %d ms; leaving them",
               server->connections, RANK_DRAIN_TIMEOUT_MS);
  g_mutex_unlock (&server->lock);
}

void
rank_server_free (RankServer *server)
{
  if (server == NULL)
    return;
  if (server->listen_fd >= 0)
    close (server->listen_fd);
  /* Connection threads still running (drain timed out) keep using the
   * events and the processor: leave those to process exit. */
  if (rank_server_connections (server) == 0)
    {
      close (server->stop_event);
      close (server->shutdown_event);
      g_clear_object (&server->processor);
      rank_address_clear (&server->config.listen);
      g_mutex_clear (&server->lock);
      g_cond_clear (&server->drained);
      g_free (server);
    }
}
