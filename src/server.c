/* server.c -- accept loop, event-loop workers, connections (see server.h).
 *
 * A connection may pipeline: each whole request buffered is decoded and
 * dispatched at once, up to RANK_CONN_MAX_CALLS calls in flight, and the
 * replies go back in the order of the requests (a reply that completes
 * before an earlier one is captured until that one is written). Replies are
 * sent once per loop iteration, so those that complete together leave in one
 * write. A connection whose client does not read its replies reads nothing
 * more once RANK_CONN_OUTPUT_HIGH bytes are unsent: however fast or slow its
 * client is, it holds a bounded number of requests and replies.
 *
 * Requests are decoded with the c_glib protocols over the connection's
 * event-driven transport. The message header is checked here (c_glib's own
 * check lets garbage through); a request whose arguments do not decode gets a
 * TApplicationException naming the problem, and with framing the connection
 * goes on. Hostile bytes close only their own connection.
 *
 * Shutdown: the accept loop stops; each worker closes idle connections,
 * serves requests already received, closes the rest as their calls finish;
 * then the workers stop.
 */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thrift/c_glib/thrift_application_exception.h>

#include "cluster.h"
#include "constants.h"
#include "handler.h"
#include "loop.h"
#include "metrics.h"
#include "redis_link.h"
#include "store.h"
#include "transport.h"

typedef struct _Worker Worker;

typedef struct
{
  Worker *worker;
  GList node;        /* in worker->conns */
  GList unsent_node; /* in worker->unsent while queued there */
  RankTransport *transport;
  ThriftProtocol *protocol;
  RankLoopWatch *watch;
  GQueue calls;          /* Slot: the calls in flight, oldest first */
  gboolean input_parked; /* stopped reading: enough is buffered already */
  gboolean processing;   /* inside process(): finished() must not recurse */
  gboolean closing;      /* close once the calls and their replies are done */
  gboolean broken;       /* a reply failed: later ones are dropped */
  gboolean eof;          /* the client half-closed: serve what it sent, close */
  gboolean input_closed; /* draining: read nothing more, serve, close */
  gint64 last_io;        /* monotonic us: last bytes in, or last reply */
} Conn;

/* A call in flight on a connection: the handler's reply sink. */
typedef struct
{
  Conn *conn;
  GByteArray *out; /* its reply, written while an earlier call was in flight */
  gboolean done;
  gboolean ok;
} Slot;

struct _Worker
{
  RankServer *server;
  RankLoop *loop;
  RankRedisLink **links; /* one per Redis node; NULL on Redis Cluster */
  RankCluster *cluster;  /* Redis Cluster: the slot map and its links */
  RankStore *store;
  RankHandler *handler;
  GQueue conns;
  GQueue unsent; /* connections with replies to send before the loop sleeps */
  gboolean draining;
  gint64 next_sweep;
};

struct _RankServer
{
  RankServerConfig config;
  RankAddress *nodes;
  guint n_nodes;
  int listen_fd;
  guint16 port;
  Worker *workers;
  guint next_worker;
  gint connections; /* atomic */

  GMutex lock;
  GCond drained_cond;
  guint drained; /* workers with no connection left after drain */
  gint64 last_refusal_log;
};

static void process (Conn *c);

/* ---- connections ---- */

static void
slot_free (gpointer data)
{
  Slot *s = data;

  if (s->out != NULL)
    g_byte_array_unref (s->out);
  g_free (s);
}

static void
conn_free (Conn *c)
{
  Worker *w = c->worker;

  rank_loop_unwatch (c->watch);
  /* Calls still in flight only when the loop has stopped. */
  g_queue_clear_full (&c->calls, slot_free);
  g_queue_unlink (&w->conns, &c->node);
  if (c->unsent_node.data != NULL)
    g_queue_unlink (&w->unsent, &c->unsent_node);
  g_object_unref (c->protocol);
  g_object_unref (c->transport); /* closes the socket */
  g_free (c);
  g_atomic_int_add (&w->server->connections, -1);
  rank_metrics_connection_closed ();
  if (w->draining && w->conns.length == 0)
    {
      g_mutex_lock (&w->server->lock);
      w->server->drained++;
      g_cond_broadcast (&w->server->drained_cond);
      g_mutex_unlock (&w->server->lock);
    }
}

static gboolean
done (Conn *c)
{
  return c->calls.length == 0 && !rank_transport_output_pending (c->transport);
}

/* Closes now, or as soon as the calls in flight and their replies are done.
 * Inside process() only marks it: process() frees it on the way out. */
static void
conn_close (Conn *c)
{
  c->closing = TRUE;
  if (!c->processing && done (c))
    conn_free (c);
}

/* Frees the connection if it is closing and done. Returns FALSE if c was
 * freed. (The watch is edge-triggered for both directions and never
 * changes: no epoll_ctl per request.) */
static gboolean
update_interest (Conn *c)
{
  if (c->closing && done (c))
    {
      conn_free (c);
      return FALSE;
    }
  return TRUE;
}

/* Replies go out before the loop sleeps (send_unsent). */
static void
queue_unsent (Conn *c)
{
  if (c->unsent_node.data == NULL
      && rank_transport_output_pending (c->transport))
    {
      c->unsent_node.data = c;
      g_queue_push_tail_link (&c->worker->unsent, &c->unsent_node);
    }
}

/* Reads what the socket has, unless a whole request or more is already
 * buffered (a client cannot make us buffer more than one max-size frame).
 * With an edge-triggered watch a parked read must be resumed by hand. */
static gboolean
receive (Conn *c)
{
  RankIoResult r;

  if (rank_transport_buffered_input (c->transport)
      > (gsize) c->worker->server->config.max_frame + 4)
    {
      c->input_parked = TRUE;
      return TRUE;
    }
  c->input_parked = FALSE;
  if (c->input_closed)
    return TRUE;
  r = rank_transport_receive (c->transport);
  if (r == RANK_IO_CLOSED)
    {
      c->eof = TRUE;
      return TRUE;
    }
  if (r != RANK_IO_OK)
    return FALSE;
  c->last_io = g_get_monotonic_time ();
  return TRUE;
}

/* The oldest call in flight writes its reply to the pending output; a later
 * one to its own buffer, until those before it are done. */
static ThriftProtocol *
sink_protocol (gpointer slot)
{
  Slot *s = slot;
  Conn *c = s->conn;

  if (c->broken || g_queue_peek_head (&c->calls) != s)
    {
      s->out = g_byte_array_new ();
      rank_transport_capture (c->transport, s->out);
    }
  return c->protocol;
}

/* Retires the calls done at the head of the queue, their captured replies
 * in order. */
static void
retire (Conn *c)
{
  Slot *s;

  while ((s = g_queue_peek_head (&c->calls)) != NULL && s->done)
    {
      g_queue_pop_head (&c->calls);
      if (!s->ok)
        c->broken = c->closing = TRUE;
      else if (s->out != NULL && !c->broken)
        rank_transport_queue_output (c->transport, s->out->data, s->out->len);
      slot_free (s);
    }
}

static void
sink_finished (gpointer slot, gboolean reply_ok)
{
  Slot *s = slot;
  Conn *c = s->conn;

  rank_transport_capture (c->transport, NULL);
  if (!reply_ok)
    rank_transport_discard_write (c->transport);
  s->done = TRUE;
  s->ok = reply_ok;
  retire (c);
  c->last_io = g_get_monotonic_time ();
  queue_unsent (c);
  if (c->processing)
    return; /* process() goes on with the next request itself */
  if (!update_interest (c))
    return;
  process (c);
}

static const RankReplySink sink = { sink_protocol, sink_finished };

/* Replies to a request whose arguments did not decode, in its turn. */
static gboolean
reply_protocol_error (Slot *s, const char *method, gint32 seqid,
                      const char *message)
{
  gboolean ok;

  rank_transport_abort_message (s->conn->transport);
  ok = rank_handler_write_exception (
      sink_protocol (s), method, seqid,
      THRIFT_APPLICATION_EXCEPTION_ERROR_PROTOCOL_ERROR, message, NULL);
  sink_finished (s, ok);
  return ok;
}

/* Serves the next buffered request. FALSE: stop for now (wait for more
 * bytes, or the connection is closing). */
static gboolean
serve_one (Conn *c)
{
  Worker *w = c->worker;
  g_autoptr (GError) error = NULL;
  char method[RANK_METHOD_NAME_MAX_BYTES + 1];
  gchar *name = NULL;
  ThriftMessageType type;
  gint32 seqid;
  RankDispatch d;
  Slot *s;

  if (!rank_transport_begin_message (c->transport, &error)
      || thrift_protocol_read_message_begin (c->protocol, &name, &type, &seqid,
                                             &error)
             < 0)
    {
      g_free (name);
      if (rank_transport_starved (c->transport))
        {
          rank_transport_rewind_message (c->transport);
          return FALSE;
        }
      g_debug ("closing connection: %s", error ? error->message : "?");
      conn_close (c);
      return FALSE;
    }
  if (type != T_CALL || strlen (name) > RANK_METHOD_NAME_MAX_BYTES)
    {
      g_debug ("closing connection: message type %d is not a call", type);
      g_free (name);
      conn_close (c);
      return FALSE;
    }
  g_strlcpy (method, name, sizeof method);
  g_free (name);

  s = g_new0 (Slot, 1);
  s->conn = c;
  g_queue_push_tail (&c->calls, s);
  d = rank_handler_dispatch (w->handler, s, method, seqid, c->protocol, &error);
  if (d == RANK_DISPATCH_PENDING)
    return TRUE;
  if (error != NULL && error->domain == THRIFT_PROTOCOL_ERROR
      && !rank_transport_starved (c->transport))
    {
      g_debug ("bad arguments to %s: %s", method, error->message);
      if (!reply_protocol_error (s, method, seqid, error->message)
          || !w->server->config.framed)
        c->closing = TRUE; /* unframed: the next message's start is lost */
      return !c->closing;
    }
  g_queue_pop_tail (&c->calls);
  g_free (s);
  if (rank_transport_starved (c->transport))
    {
      rank_transport_rewind_message (c->transport);
      return FALSE;
    }
  g_debug ("closing connection during %s: %s", method,
           error ? error->message : "?");
  conn_close (c);
  return FALSE;
}

static void
process (Conn *c)
{
  c->processing = TRUE;
  while (c->calls.length < RANK_CONN_MAX_CALLS && !c->closing
         && rank_transport_output_bytes (c->transport) < RANK_CONN_OUTPUT_HIGH)
    {
      if (c->input_parked && !receive (c))
        {
          c->closing = TRUE;
          break;
        }
      g_autoptr (GError) error = NULL;

      if (!rank_transport_message_ready (c->transport, &error))
        {
          if (error != NULL)
            {
              g_debug ("closing connection: %s", error->message);
              c->closing = TRUE;
            }
          break;
        }
      if (!serve_one (c))
        break;
    }
  /* A client that half-closed (or a worker draining) gets the replies to
   * every whole request it sent; then the connection closes. (Here nothing
   * is in flight or unsent, so no whole request is left: the loop above
   * served them all.) */
  if ((c->eof || c->input_closed) && done (c))
    c->closing = TRUE;
  c->processing = FALSE;
  update_interest (c);
}

/* Sends the pending replies. FALSE: the socket failed, and c is freed or
 * closing. */
static gboolean
send_replies (Conn *c)
{
  if (rank_transport_send_pending (c->transport) == RANK_IO_FAILED)
    {
      c->broken = c->closing = TRUE;
      rank_transport_abort_message (c->transport);
      update_interest (c);
      return FALSE;
    }
  return TRUE;
}

/* Before the loop sleeps: every reply completed in this iteration goes out,
 * one write per connection. What the socket does not take waits for
 * EPOLLOUT. Serving the requests buffered behind them may complete more at
 * once: the loop goes on until none is left. Runs before the Redis links'
 * hooks, so commands those requests queued are sent in this iteration too. */
static int
send_unsent (gpointer data)
{
  Worker *w = data;
  GList *l;

  while ((l = g_queue_pop_head_link (&w->unsent)) != NULL)
    {
      Conn *c = l->data;

      l->data = NULL;
      if (!rank_transport_output_pending (c->transport))
        continue;
      if (!send_replies (c))
        continue;
      if (!rank_transport_output_pending (c->transport))
        process (c);
    }
  return -1;
}

static void
conn_io (gpointer data, guint32 events)
{
  Conn *c = data;

  if ((events & EPOLLOUT) && rank_transport_output_pending (c->transport))
    {
      if (!send_replies (c))
        return;
      c->last_io = g_get_monotonic_time ();
    }
  /* With edge-triggered events a FIN that arrives with the last request
   * raises no event of its own: EPOLLRDHUP tells it. */
  if (events & EPOLLRDHUP)
    c->eof = TRUE;
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !receive (c))
    {
      /* A receive error: the connection is broken. */
      conn_close (c);
      return;
    }
  process (c);
}

static void
conn_add (Worker *w, int fd)
{
  Conn *c = g_new0 (Conn, 1);

  c->worker = w;
  c->node.data = c;
  c->transport = rank_transport_new_event_driven (fd, w->server->config.framed,
                                                  w->server->config.max_frame);
  c->protocol = rank_protocol_new (w->server->config.protocol, c->transport);
  c->last_io = g_get_monotonic_time ();
  c->watch = rank_loop_watch (
      w->loop, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, conn_io, c);
  g_queue_push_tail_link (&w->conns, &c->node);
  if (w->draining)
    conn_close (c);
}

/* ---- workers ---- */

typedef struct
{
  Worker *worker;
  int fd;
} NewConn;

static void
take_conn (gpointer data)
{
  NewConn *n = data;

  conn_add (n->worker, n->fd);
  g_free (n);
}

/* Closes connections idle past --idle-timeout, and those whose request
 * stalled half-way. At most once a second. */
static int
sweep (gpointer data)
{
  Worker *w = data;
  gint64 now = g_get_monotonic_time ();
  gint64 idle = (gint64) w->server->config.idle_timeout_ms * 1000;
  gint64 stalled = (gint64) RANK_REQUEST_READ_TIMEOUT_MS * 1000;
  GList *l = w->conns.head;

  if (now < w->next_sweep)
    return (int) ((w->next_sweep - now) / 1000) + 1;
  w->next_sweep = now + G_USEC_PER_SEC;
  while (l != NULL)
    {
      Conn *c = l->data;

      l = l->next;
      if (c->calls.length > 0)
        continue;
      if (rank_transport_buffered_input (c->transport) > 0
              ? now - c->last_io > stalled
              : now - c->last_io > idle)
        {
          rank_transport_abort_message (c->transport);
          conn_close (c);
        }
    }
  return 1000;
}

static void
start_drain (gpointer data)
{
  Worker *w = data;
  GList *l = w->conns.head;

  w->draining = TRUE;
  if (w->conns.length == 0)
    {
      g_mutex_lock (&w->server->lock);
      w->server->drained++;
      g_cond_broadcast (&w->server->drained_cond);
      g_mutex_unlock (&w->server->lock);
      return;
    }
  while (l != NULL)
    {
      Conn *c = l->data;

      l = l->next;
      /* Serve what was already sent to us, then close. */
      if (receive (c))
        {
          c->input_closed = TRUE;
          process (c);
        }
      else
        conn_close (c);
    }
}

/* On Redis Cluster: the nodes are seeds; the cluster makes the links. */
static void
worker_init_cluster (Worker *w, RankServer *server, guint index)
{
  const char *user = server->config.redis_user;
  const char *password = server->config.redis_password;
  const char *auth[] = { "AUTH", user ? user : password, password };

  w->cluster = rank_cluster_new (w->loop, server->nodes, server->n_nodes,
                                 server->config.redis_timeout_ms,
                                 password == NULL ? 0
                                 : user           ? 3
                                                  : 2,
                                 auth);
  w->store = rank_store_new_cluster (
      w->cluster, server->config.boards, server->config.dedup_window_ms,
      server->config.random_seed ? server->config.random_seed + index : 0);
}

static void
worker_init (Worker *w, RankServer *server, guint index)
{
  g_autofree char *name = g_strdup_printf ("rankd-io-%u", index);

  w->server = server;
  w->loop = rank_loop_new ();
  g_queue_init (&w->unsent);
  rank_loop_add_prepare (w->loop, send_unsent, w);
  if (server->config.redis_cluster)
    worker_init_cluster (w, server, index);
  else
    w->links = g_new0 (RankRedisLink *, server->n_nodes);
  for (guint i = 0; w->links != NULL && i < server->n_nodes; i++)
    {
      w->links[i] = rank_redis_link_new (w->loop, &server->nodes[i],
                                         server->config.redis_timeout_ms);
      /* First on every connection, before the scripts load. */
      if (server->config.redis_password != NULL)
        {
          const char *user = server->config.redis_user;
          const char *auth[]
              = { "AUTH", user ? user : server->config.redis_password,
                  server->config.redis_password };

          rank_redis_link_add_startup (w->links[i], user ? 3 : 2, auth, NULL);
        }
    }
  if (w->links != NULL)
    w->store = rank_store_new (
        w->links, server->n_nodes, server->config.boards,
        server->config.dedup_window_ms,
        server->config.random_seed ? server->config.random_seed + index : 0);
  /* WAIT answers within half the link's timeout, which stays the bound
   * for the connection itself. */
  rank_store_set_wait_replicas (w->store, server->config.wait_replicas,
                                MAX (server->config.redis_timeout_ms / 2, 1));
  w->handler = rank_handler_new (w->store, &sink);
  g_queue_init (&w->conns);
  rank_loop_add_prepare (w->loop, sweep, w);
  for (guint i = 0; w->links != NULL && i < server->n_nodes; i++)
    rank_redis_link_start (w->links[i]);
  if (w->cluster != NULL)
    rank_cluster_start (w->cluster);
  rank_loop_start (w->loop, name);
}

/* After the loop stopped: what is still pending runs now (calls in flight
 * fail with Unavailable), then everything is freed. */
static void
worker_clear (Worker *w)
{
  rank_loop_run_pending (w->loop);
  for (guint i = 0; w->links != NULL && i < w->server->n_nodes; i++)
    rank_redis_link_free (w->links[i]);
  g_free (w->links);
  rank_cluster_free (w->cluster);
  rank_loop_run_pending (w->loop);
  while (w->conns.head != NULL)
    {
      conn_free (w->conns.head->data);
    }
  rank_handler_free (w->handler);
  rank_store_free (w->store);
  rank_loop_free (w->loop);
}

/* ---- accepting ---- */

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
  NewConn *n;
  int fd = accept4 (server->listen_fd, NULL, NULL, SOCK_CLOEXEC);

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
  if ((guint) g_atomic_int_add (&server->connections, 1)
      >= server->config.max_connections)
    {
      g_atomic_int_add (&server->connections, -1);
      refuse (server, fd, "--max-connections reached");
      return;
    }
  rank_metrics_connection_opened ();
  n = g_new (NewConn, 1);
  n->worker
      = &server->workers[server->next_worker++ % server->config.io_threads];
  n->fd = fd;
  rank_loop_post (n->worker->loop, take_conn, n);
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
  if (server->config.io_threads < 1)
    server->config.io_threads = 1;
  server->listen_fd = fd;
  if (getsockname (fd, (struct sockaddr *) &ss, &len) == 0)
    server->port = ntohs (ss.ss_family == AF_INET6
                              ? ((struct sockaddr_in6 *) &ss)->sin6_port
                              : ((struct sockaddr_in *) &ss)->sin_port);
  g_mutex_init (&server->lock);
  g_cond_init (&server->drained_cond);
  return server;
}

void
rank_server_start (RankServer *server, const RankAddress *nodes, guint n_nodes)
{
  g_assert (n_nodes >= 1);
  server->nodes = g_new0 (RankAddress, n_nodes);
  server->n_nodes = n_nodes;
  for (guint i = 0; i < n_nodes; i++)
    {
      server->nodes[i].host = g_strdup (nodes[i].host);
      server->nodes[i].port = nodes[i].port;
      server->nodes[i].path = g_strdup (nodes[i].path);
    }
  server->workers = g_new0 (Worker, server->config.io_threads);
  for (guint i = 0; i < server->config.io_threads; i++)
    worker_init (&server->workers[i], server, i);
  /* The stores hold it now; later ones come by rank_server_set_boards. The
   * links hold the credentials. */
  server->config.boards = NULL;
  server->config.redis_user = NULL;
  server->config.redis_password = NULL;
}

gboolean
rank_server_wait_redis (RankServer *server, int timeout_ms, GError **error)
{
  for (guint i = 0; i < server->config.io_threads; i++)
    if (server->workers[i].cluster != NULL
        && !rank_cluster_wait_ready (server->workers[i].cluster, timeout_ms,
                                     error))
      return FALSE;
  for (guint i = 0; i < server->config.io_threads; i++)
    for (guint j = 0; server->workers[i].links != NULL && j < server->n_nodes;
         j++)
      if (!rank_redis_link_wait_ready (server->workers[i].links[j], timeout_ms,
                                       error))
        return FALSE;
  return TRUE;
}

guint16
rank_server_port (RankServer *server)
{
  return server->port;
}

guint
rank_server_connections (RankServer *server)
{
  return (guint) g_atomic_int_get (&server->connections);
}

int
rank_server_accept (RankServer *server, int signal_fd)
{
  struct pollfd pfd[2] = {
    { server->listen_fd, POLLIN, 0 },
    { signal_fd, POLLIN, 0 },
  };

  for (;;)
    {
      int rc = poll (pfd, 2, -1);

      if (rc < 0 && errno == EINTR)
        continue;
      if (rc < 0)
        g_error ("poll on the listening socket failed: %s", g_strerror (errno));
      if (pfd[1].revents & POLLIN)
        {
          struct signalfd_siginfo info;

          if (read (signal_fd, &info, sizeof info) == sizeof info)
            return (int) info.ssi_signo;
        }
      if (pfd[0].revents & POLLIN)
        accept_one (server);
    }
}

void
rank_server_drain (RankServer *server)
{
  gint64 deadline;
  guint n = server->config.io_threads;

  /* Connections the kernel already accepted may carry requests sent before
   * the signal: take them too, so that draining answers them. */
  fcntl (server->listen_fd, F_SETFL,
         fcntl (server->listen_fd, F_GETFL) | O_NONBLOCK);
  for (;;)
    {
      struct pollfd last = { server->listen_fd, POLLIN, 0 };

      if (poll (&last, 1, 0) <= 0)
        break;
      accept_one (server);
    }
  close (server->listen_fd);
  server->listen_fd = -1;
  if (rank_server_connections (server) > 0)
    g_message ("draining %u connections", rank_server_connections (server));
  for (guint i = 0; i < n; i++)
    rank_loop_post (server->workers[i].loop, start_drain, &server->workers[i]);
  deadline = g_get_monotonic_time () + RANK_DRAIN_TIMEOUT_MS * 1000;
  g_mutex_lock (&server->lock);
  while (server->drained < n
         && g_cond_wait_until (&server->drained_cond, &server->lock, deadline))
    ;
  if (server->drained < n)
    g_warning ("%u connections still busy after %d ms; closing them",
               rank_server_connections (server), RANK_DRAIN_TIMEOUT_MS);
  g_mutex_unlock (&server->lock);
  for (guint i = 0; i < n; i++)
    rank_loop_quit_and_join (server->workers[i].loop);
}

typedef struct
{
  Worker *worker;
  RankConfig *boards;
} Swap;

static void
swap_boards (gpointer data)
{
  Swap *swap = data;

  rank_store_set_config (swap->worker->store, swap->boards);
  rank_config_unref (swap->boards);
  g_free (swap);
}

void
rank_server_set_boards (RankServer *server, RankConfig *boards)
{
  for (guint i = 0; i < server->config.io_threads; i++)
    {
      Swap *swap = g_new (Swap, 1);

      swap->worker = &server->workers[i];
      swap->boards = rank_config_ref (boards);
      rank_loop_post (swap->worker->loop, swap_boards, swap);
    }
}

void
rank_server_free (RankServer *server)
{
  if (server == NULL)
    return;
  if (server->listen_fd >= 0)
    close (server->listen_fd);
  if (server->workers != NULL)
    {
      for (guint i = 0; i < server->config.io_threads; i++)
        {
          rank_loop_quit_and_join (server->workers[i].loop);
          worker_clear (&server->workers[i]);
        }
      g_free (server->workers);
    }
  rank_address_clear (&server->config.listen);
  for (guint i = 0; i < server->n_nodes; i++)
    rank_address_clear (&server->nodes[i]);
  g_free (server->nodes);
  g_mutex_clear (&server->lock);
  g_cond_clear (&server->drained_cond);
  g_free (server);
}
