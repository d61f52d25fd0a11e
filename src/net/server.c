/* server.c -- accept loop, event-loop workers, connections (see server.h).
 *
 * A connection may pipeline: each whole request buffered is decoded and
 * dispatched at once, up to RANK_CONN_MAX_CALLS calls in flight. Every call
 * encodes its reply into a buffer of its own and hands it back when it
 * finishes; the connection keeps its requests in the order they came and,
 * before the loop sleeps, writes every reply that is ready at the head of
 * that queue with one writev.
 *
 * What a connection holds is bounded whatever its client does: it decodes
 * no more requests while the replies it holds -- sent to nobody yet, or the
 * largest a call in flight could make -- reach RANK_CONN_REPLY_BUDGET. A
 * client that stops reading therefore holds its connection, that budget and
 * one reply; one that stops reading and closes, or whose socket fails, has
 * its unsent replies dropped and its connection freed once its calls in
 * flight answer (their replies go nowhere).
 *
 * Requests are decoded with the c_glib protocols over the connection's
 * request reader (connbuf.h). The message header is checked here (c_glib's
 * own check lets garbage through); a request whose arguments do not decode
 * gets a TApplicationException naming the problem, and with framing the
 * connection goes on. Hostile bytes close only their own connection.
 *
 * Shutdown: the accept loop stops; each worker closes idle connections,
 * serves requests already received, closes the rest as their calls finish;
 * then the workers stop.
 */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <thrift/c_glib/thrift_application_exception.h>

#include "backend.h"
#include "connbuf.h"
#include "constants.h"
#include "handler.h"
#include "drain.h"
#include "tracking.h"
#include "loop.h"
#include "wire.h"
#include "metrics.h"
#include "store.h"

typedef struct _Worker Worker;
typedef struct _Conn Conn;

/* One request of a connection, from its decoding until its reply is sent
 * (or dropped): the handler writes the reply into reply and says when it is
 * done. */
typedef struct
{
  Conn *conn;
  GList link;        /* in conn->requests */
  GByteArray *reply; /* the call's own buffer */
  gsize reserved;    /* counted in conn->held until answered */
  gboolean answered; /* reply is whole */
} Request;

struct _Conn
{
  Worker *worker;
  GList node;       /* in worker->conns */
  GList ready_node; /* in worker->ready while it may have replies to send */
  int fd;           /* -1 once the socket is closed */
  RankLoopWatch *watch;
  RankRequestReader *reader;
  ThriftProtocol *in;
  GQueue requests;       /* Request, in the order they came */
  guint in_flight;       /* requests not answered yet */
  gsize held;            /* unsent reply bytes, and what calls in flight
                            reserved */
  gsize sent;            /* bytes of the head request's reply already sent */
  gboolean parked;       /* stopped reading: a whole request is buffered */
  gboolean want_bytes;   /* the next request is not whole yet */
  gboolean eof;          /* the client half-closed: serve what it sent */
  gboolean input_closed; /* draining: read nothing more, serve, close */
  gboolean closing;      /* close once the requests are answered and sent */
  gboolean blocked;      /* the socket is full: EPOLLOUT resumes sending */
  gboolean sniffed;      /* its first bytes speak the port's wire */
  gint64 last_progress;  /* monotonic us: bytes in, or bytes out */
  gint64 last_received;  /* monotonic us: bytes in */
  gint64 partial_since;  /* monotonic us: a request began and is not whole */
};

struct _Worker
{
  RankServer *server;
  RankLoop *loop;
  RankBackend *backend; /* its links to Redis */
  RankStore *store;
  RankHandler *handler;
  RankQueue *queue;       /* worker 0: the update queue's drain */
  RankTracking *tracking; /* worker 0: the read cache's invalidations */
  GQueue conns;
  GQueue ready; /* connections with replies to send before the loop sleeps */
  GPtrArray *spare;  /* reply buffers to reuse */
  guint in_flight;   /* calls of all its connections not answered yet */
  gsize large_freed; /* bytes of large replies freed since the last trim */
  gboolean draining;
  gint64 next_sweep;
};

struct _RankServer
{
  RankServerConfig config;
  RankAddress *nodes;
  guint n_nodes;
  RankAddress *replicas; /* of nodes replica_of[i] */
  guint *replica_of;
  guint n_replicas;
  int listen_fd;
  guint16 port;
  Worker *workers;
  guint next_worker;
  RankReadCache *cache; /* the workers' one read cache */
  gint connections;     /* atomic */

  GMutex lock;
  GCond drained_cond;
  guint drained; /* workers with no connection left after drain */
  guint swapped; /* workers that took the board options of a reload */
  gint64 last_refusal_log;
  RankWireLog *wire_log; /* clients speaking another wire */
};

static void serve (Conn *c);

/* ---- reply buffers ---- */

/* Reused while small: a buffer per call costs a malloc otherwise. */
#define SPARE_MAX 64
#define SPARE_BYTES 4096

static GByteArray *
buffer_take (Worker *w)
{
  if (w->spare->len > 0)
    return g_ptr_array_steal_index_fast (w->spare, w->spare->len - 1);
  return g_byte_array_sized_new (256);
}

static void
buffer_give (Worker *w, GByteArray *buf)
{
  if (w->spare->len < SPARE_MAX && buf->len <= SPARE_BYTES)
    {
      g_byte_array_set_size (buf, 0);
      g_ptr_array_add (w->spare, buf);
    }
  else
    g_byte_array_unref (buf);
}

/* ---- connections ---- */

static void
request_free (Conn *c, Request *r)
{
  if (r->reply->len > SPARE_BYTES)
    c->worker->large_freed += r->reply->len;
  g_queue_unlink (&c->requests, &r->link);
  c->held -= r->answered ? r->reply->len : r->reserved;
  buffer_give (c->worker, r->reply);
  g_free (r);
}

/* Closes the socket: the client is gone, or will get nothing more. The
 * connection itself lives on until its calls in flight answer. */
static void
conn_close_socket (Conn *c)
{
  if (c->fd < 0)
    return;
  rank_loop_unwatch (c->watch);
  c->watch = NULL;
  close (c->fd);
  c->fd = -1;
  g_atomic_int_add (&c->worker->server->connections, -1);
  rank_metrics_connection_closed ();
}

static void
conn_free (Conn *c)
{
  Worker *w = c->worker;

  conn_close_socket (c);
  /* Calls still in flight only when the loop has stopped. */
  while (c->requests.head != NULL)
    request_free (c, c->requests.head->data);
  g_queue_unlink (&w->conns, &c->node);
  if (c->ready_node.data != NULL)
    g_queue_unlink (&w->ready, &c->ready_node);
  g_object_unref (c->in);
  g_object_unref (c->reader);
  g_free (c);
  if (w->draining && w->conns.length == 0)
    {
      g_mutex_lock (&w->server->lock);
      w->server->drained++;
      g_cond_broadcast (&w->server->drained_cond);
      g_mutex_unlock (&w->server->lock);
    }
}

/* The head request's reply is ready to go. */
static gboolean
head_answered (Conn *c)
{
  Request *r = g_queue_peek_head (&c->requests);

  return r != NULL && r->answered;
}

/* The client gets nothing more: replies not sent yet are dropped, and so
 * will be those of the calls still in flight. */
static void
conn_break (Conn *c)
{
  GList *l = c->requests.head;

  c->closing = TRUE;
  rank_request_reader_skip (c->reader);
  conn_close_socket (c);
  while (l != NULL)
    {
      Request *r = l->data;

      l = l->next;
      if (r->answered)
        request_free (c, r);
    }
  c->sent = 0;
}

/* Frees c if it is closing and has nothing left to do. FALSE if c was
 * freed. Called where events end (never from a call's answer), so nothing
 * up the stack still holds c. */
static gboolean
conn_settle (Conn *c)
{
  if (!c->closing || c->requests.length > 0)
    return TRUE;
  conn_free (c);
  return FALSE;
}

/* Closes now, or as soon as the calls in flight and their replies are
 * done. */
static void
conn_close (Conn *c)
{
  c->closing = TRUE;
  conn_settle (c);
}

/* Replies go out before the loop sleeps (send_ready). */
static void
queue_ready (Conn *c)
{
  if (c->ready_node.data == NULL && !c->blocked)
    {
      c->ready_node.data = c;
      g_queue_push_tail_link (&c->worker->ready, &c->ready_node);
    }
}

/* Called by the handler when a call's reply is whole (ok) or could not be
 * encoded (!ok: the connection's reply stream is lost). Never recurses into
 * serve(): the next requests are served when the loop sends this reply. */
static void
request_answered (gpointer data, gboolean ok)
{
  Request *r = data;
  Conn *c = r->conn;

  c->in_flight--;
  c->worker->in_flight--;
  c->held -= r->reserved;
  r->answered = TRUE;
  c->held += r->reply->len;
  if (!ok)
    {
      g_debug ("closing connection: a reply could not be encoded");
      conn_break (c);
    }
  else if (c->fd < 0)
    request_free (c, r); /* the client is gone */
  queue_ready (c);
}

/* Writes the ready replies at the head of the queue, as many as one writev
 * takes. FALSE: the socket failed, and c is broken (maybe freed). */
static gboolean
send_replies (Conn *c)
{
  struct iovec iov[64];
  GList *l;

  while (c->fd >= 0 && head_answered (c))
    {
      int n = 0;
      gssize wrote;

      for (l = c->requests.head; l != NULL && n < (int) G_N_ELEMENTS (iov);
           l = l->next)
        {
          Request *r = l->data;
          gsize skip = n == 0 ? c->sent : 0;

          if (!r->answered)
            break;
          iov[n].iov_base = r->reply->data + skip;
          iov[n++].iov_len = r->reply->len - skip;
        }
      wrote = writev (c->fd, iov, n);
      if (wrote < 0 && errno == EINTR)
        continue;
      if (wrote < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        {
          c->blocked = TRUE; /* EPOLLOUT resumes it */
          return TRUE;
        }
      if (wrote < 0)
        {
          g_debug ("closing connection: send failed: %s", g_strerror (errno));
          conn_break (c);
          conn_settle (c);
          return FALSE;
        }
      c->last_progress = g_get_monotonic_time ();
      c->sent += (gsize) wrote;
      while (head_answered (c))
        {
          Request *r = g_queue_peek_head (&c->requests);

          if (c->sent < r->reply->len)
            break;
          c->sent -= r->reply->len;
          request_free (c, r);
        }
    }
  return TRUE;
}

/* Reads what the socket has, unless a whole request or more is already
 * buffered (a client cannot make us buffer more than one max-size frame).
 * With an edge-triggered watch a parked read must be resumed by hand.
 * FALSE: the socket failed. */
static gboolean
receive (Conn *c)
{
  RankIoResult r;
  gsize before = rank_request_reader_buffered (c->reader);

  if (before > (gsize) c->worker->server->config.max_frame + 4)
    {
      c->parked = TRUE;
      return TRUE;
    }
  c->parked = FALSE;
  if (c->input_closed || c->fd < 0)
    return TRUE;
  r = rank_request_reader_receive (c->reader, c->fd);
  if (r == RANK_IO_CLOSED)
    c->eof = TRUE;
  else if (r != RANK_IO_OK)
    return FALSE;
  if (rank_request_reader_buffered (c->reader) > before)
    c->last_progress = c->last_received = g_get_monotonic_time ();
  /* A request's time runs from its first byte (the stall rule). */
  if (before == 0 && rank_request_reader_buffered (c->reader) > 0)
    c->partial_since = c->last_received;
  return TRUE;
}

/* Replies to a request whose arguments did not decode, in its turn. */
static void
reply_protocol_error (Request *r, const char *method, gint32 seqid,
                      const char *message)
{
  Conn *c = r->conn;

  rank_request_reader_skip (c->reader);
  if (!rank_handler_write_exception (
          c->worker->handler, r->reply, method, seqid,
          THRIFT_APPLICATION_EXCEPTION_ERROR_PROTOCOL_ERROR, message))
    {
      request_answered (r, FALSE);
      return;
    }
  request_answered (r, TRUE);
}

/* The next request is not whole: wait for its bytes. */
static gboolean
wait_for_bytes (Conn *c)
{
  rank_request_reader_rewind (c->reader);
  c->want_bytes = TRUE;
  return FALSE;
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
  Request *r;
  gsize bound = 0;

  if (!rank_request_reader_begin (c->reader, &error)
      || thrift_protocol_read_message_begin (c->in, &name, &type, &seqid,
                                             &error)
             < 0)
    {
      g_free (name);
      if (rank_request_reader_starved (c->reader))
        return wait_for_bytes (c);
      g_debug ("closing connection: %s", error ? error->message : "?");
      c->closing = TRUE;
      return FALSE;
    }
  if (type != T_CALL || strlen (name) > RANK_METHOD_NAME_MAX_BYTES)
    {
      g_debug ("closing connection: message type %d is not a call", type);
      g_free (name);
      c->closing = TRUE;
      return FALSE;
    }
  g_strlcpy (method, name, sizeof method);
  g_free (name);

  r = g_new0 (Request, 1);
  r->conn = c;
  r->link.data = r;
  r->reply = buffer_take (w);
  g_queue_push_tail_link (&c->requests, &r->link);
  c->in_flight++;
  w->in_flight++;
  d = rank_handler_dispatch (w->handler, r, r->reply, method, seqid, c->in,
                             &bound, &error);
  if (d == RANK_DISPATCH_PENDING)
    {
      /* What its reply may take counts until it is answered. */
      if (!r->answered)
        {
          r->reserved = bound;
          c->held += bound;
        }
      return !c->closing;
    }
  if (error != NULL && error->domain == THRIFT_PROTOCOL_ERROR
      && !rank_request_reader_starved (c->reader))
    {
      g_debug ("bad arguments to %s: %s", method, error->message);
      reply_protocol_error (r, method, seqid, error->message);
      if (!w->server->config.framed)
        c->closing = TRUE; /* unframed: the next message's start is lost */
      return !c->closing;
    }
  c->in_flight--;
  w->in_flight--;
  request_free (c, r);
  if (rank_request_reader_starved (c->reader))
    return wait_for_bytes (c);
  g_debug ("closing connection during %s: %s", method,
           error ? error->message : "?");
  c->closing = TRUE;
  return FALSE;
}

/* The address c's client connects from, without its port. */
static void
peer_name (Conn *c, char *out, gsize size)
{
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  const void *addr = NULL;

  if (getpeername (c->fd, (struct sockaddr *) &ss, &len) == 0)
    addr = ss.ss_family == AF_INET6
               ? (const void *) &((struct sockaddr_in6 *) &ss)->sin6_addr
           : ss.ss_family == AF_INET
               ? (const void *) &((struct sockaddr_in *) &ss)->sin_addr
               : NULL;
  if (addr == NULL
      || inet_ntop (ss.ss_family, addr, out, (socklen_t) size) == NULL)
    g_strlcpy (out, "a local socket", size);
}

/* c's client speaks spoke, not the port's transport and protocol: said in
 * the log (wire.h: rate-limited). */
static void
log_wrong_wire (Conn *c, const char *spoke)
{
  const RankServerConfig *config = &c->worker->server->config;
  char peer[INET6_ADDRSTRLEN + 16];

  peer_name (c, peer, sizeof peer);
  if (rank_wire_log_admit (c->worker->server->wire_log, peer, spoke,
                           g_get_monotonic_time ()))
    g_message ("a client from %s speaks %s; this port expects %s "
               "(--transport, --protocol): closing its connection",
               peer, spoke, rank_wire_name (config->framed, config->protocol));
}

/* c's first bytes are Thrift in another framing or protocol (framed,
 * protocol) than the port's: the client gets a TApplicationException it
 * can read, in its own, and the connection closes once it is sent. */
static void
refuse_wrong_wire (Conn *c, gboolean framed, RankProtocolKind protocol)
{
  const RankServerConfig *config = &c->worker->server->config;
  g_autofree char *message
      = g_strdup_printf ("rankd expects %s on this port; this client spoke %s",
                         rank_wire_name (config->framed, config->protocol),
                         rank_wire_name (framed, protocol));
  gsize len;
  const guint8 *bytes = rank_request_reader_peek (c->reader, &len);
  GByteArray *reply
      = rank_wire_exception (bytes, len, framed, protocol, message);

  log_wrong_wire (c, rank_wire_name (framed, protocol));
  c->closing = TRUE;
  c->input_closed = TRUE;
  if (reply != NULL)
    {
      Request *r = g_new0 (Request, 1);

      r->conn = c;
      r->link.data = r;
      r->reply = reply;
      r->answered = TRUE;
      c->held += reply->len;
      g_queue_push_tail_link (&c->requests, &r->link);
    }
}

/* Before c's first request is decoded: whether its client speaks the
 * port's transport and protocol. One that speaks another, or HTTP, is
 * logged and closed. FALSE: stop for now (more bytes are needed to tell,
 * or the connection closes). */
static gboolean
first_bytes_fit (Conn *c)
{
  const RankServerConfig *config = &c->worker->server->config;
  gsize len;
  const guint8 *bytes = rank_request_reader_peek (c->reader, &len);
  gboolean framed = FALSE;
  RankProtocolKind protocol = RANK_PROTOCOL_BINARY;

  switch (rank_wire_sniff (bytes, len, config->max_frame, &framed, &protocol))
    {
    case RANK_WIRE_MORE:
      if (!c->eof && !c->input_closed)
        {
          c->want_bytes = TRUE;
          return FALSE;
        }
      break; /* all the client will send: decoding tells */
    case RANK_WIRE_HTTP:
      log_wrong_wire (c, "HTTP");
      c->closing = TRUE;
      return FALSE;
    case RANK_WIRE_THRIFT:
      if (framed != config->framed || protocol != config->protocol)
        {
          refuse_wrong_wire (c, framed, protocol);
          return FALSE;
        }
      break;
    case RANK_WIRE_UNKNOWN:
      break; /* not Thrift as clients write it: decoding refuses it */
    }
  c->sniffed = TRUE;
  return TRUE;
}

/* Decodes and dispatches the buffered requests while the connection may
 * take more: fewer than RANK_CONN_MAX_CALLS in flight and less than
 * RANK_CONN_REPLY_BUDGET held. */
static void
serve (Conn *c)
{
  c->want_bytes = FALSE;
  while (c->in_flight < RANK_CONN_MAX_CALLS && !c->closing
         && c->held < RANK_CONN_REPLY_BUDGET)
    {
      g_autoptr (GError) error = NULL;

      if (c->parked && !receive (c))
        {
          conn_break (c);
          break;
        }
      if (!c->sniffed && !first_bytes_fit (c))
        break;
      if (!rank_request_reader_ready (c->reader, &error))
        {
          if (error != NULL)
            {
              g_debug ("closing connection: %s", error->message);
              c->closing = TRUE;
            }
          else
            c->want_bytes = TRUE;
          break;
        }
      if (!serve_one (c))
        break;
      /* The next request, if any is buffered, started arriving no later
       * than the last bytes did. */
      c->partial_since = c->last_received;
    }
  if (!c->want_bytes || rank_request_reader_buffered (c->reader) == 0)
    c->partial_since = 0;
  /* A client that half-closed (or a worker draining) gets the replies to
   * every whole request it sent; then the connection closes. */
  if ((c->eof || c->input_closed) && c->requests.length == 0
      && (c->want_bytes || rank_request_reader_buffered (c->reader) == 0))
    c->closing = TRUE;
  if (head_answered (c))
    queue_ready (c);
  conn_settle (c);
}

/* Before the loop sleeps: every reply completed in this iteration goes out,
 * one writev per connection; what the socket does not take waits for
 * EPOLLOUT. Serving the requests buffered behind them may complete more at
 * once: the loop goes on until none is left. Runs before the Redis links'
 * hooks, so commands those requests queued are sent in this iteration too. */
static int
send_ready (gpointer data)
{
  Worker *w = data;
  GList *l;

  while ((l = g_queue_pop_head_link (&w->ready)) != NULL)
    {
      Conn *c = l->data;

      l->data = NULL;
      if (!send_replies (c))
        continue;
      serve (c);
    }
  return -1;
}

static void
conn_io (gpointer data, guint32 events)
{
  Conn *c = data;

  if (events & EPOLLOUT)
    c->blocked = FALSE;
  if ((events & EPOLLOUT) && head_answered (c) && !send_replies (c))
    return;
  /* With edge-triggered events a FIN that arrives with the last request
   * raises no event of its own: EPOLLRDHUP tells it. */
  if (events & EPOLLRDHUP)
    c->eof = TRUE;
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !receive (c))
    {
      /* A receive error: the connection is broken. */
      conn_break (c);
      conn_settle (c);
      return;
    }
  serve (c);
}

static void
conn_add (Worker *w, int fd)
{
  Conn *c = g_new0 (Conn, 1);
  int one = 1;

  c->worker = w;
  c->node.data = c;
  c->fd = fd;
  (void) fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) | O_NONBLOCK);
  (void) setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  c->reader = rank_request_reader_new (w->server->config.framed,
                                       w->server->config.max_frame);
  c->in = rank_protocol_new (w->server->config.protocol,
                             THRIFT_TRANSPORT (c->reader));
  c->last_progress = c->last_received = g_get_monotonic_time ();
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
  /* Large replies (and the Redis replies they were made of) leave the
   * arena fragmented; a quiet moment hands its free pages back. */
  if (w->large_freed > 0 && w->in_flight == 0)
    {
      malloc_trim (0);
      w->large_freed = 0;
    }
  while (l != NULL)
    {
      Conn *c = l->data;

      l = l->next;
      /* Calls in flight wait for Redis, which --redis-timeout bounds. */
      if (c->in_flight > 0 || c->fd < 0)
        continue;
      /* A request must arrive whole within RANK_REQUEST_READ_TIMEOUT_MS of
       * its first byte; otherwise neither bytes in nor replies out for
       * --idle-timeout (a client that reads nothing it asked for too). */
      if ((c->partial_since != 0 && now - c->partial_since > stalled)
          || now - c->last_progress > idle)
        {
          conn_break (c);
          conn_settle (c);
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
  /* The drain reads nothing more; what it read and has not applied stays
   * pending, for another rankd (or this one's successor) to claim. */
  rank_queue_stop (w->queue);
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
          serve (c);
        }
      else
        {
          conn_break (c);
          conn_settle (c);
        }
    }
}

/* On a Redis Cluster, says which boards ask for read_cache=tracked, which
 * they do not get there. */
/* Whether any board (or [defaults], which every other board takes) is
 * read_cache=tracked. */
static gboolean
any_tracked (const RankConfig *boards)
{
  g_auto (GStrv) names = rank_config_board_names (boards);
  gboolean any = rank_config_board (boards, "")->read_cache_tracked;

  for (guint i = 0; !any && names[i] != NULL; i++)
    any = rank_config_board (boards, names[i])->read_cache_tracked;
  return any;
}

/* Worker 0's Cluster map changed: the tracking follows it. */
static void
cluster_nodes (const RankAddress *nodes, guint n, gpointer data)
{
  rank_tracking_set_nodes (data, nodes, n);
}

static void
worker_init (Worker *w, RankServer *server, guint index)
{
  g_autofree char *name = g_strdup_printf ("rankd-io-%u", index);
  RankTrackingOptions tracking = {
    .timeout_ms = server->config.redis_timeout_ms,
    .max_boards = server->config.read_cache_tracked_boards,
    .user = server->config.redis_user,
    .password = server->config.redis_password,
  };
  RankBackendConfig backend = {
    .nodes = server->nodes,
    .n_nodes = server->n_nodes,
    .cluster = server->config.redis_cluster,
    .timeout_ms = server->config.redis_timeout_ms,
    .user = server->config.redis_user,
    .password = server->config.redis_password,
    .wait_replicas = server->config.wait_replicas,
    .replicas = server->replicas,
    .replica_of = server->replica_of,
    .n_replicas = server->n_replicas,
  };

  w->server = server;
  w->loop = rank_loop_new ();
  g_queue_init (&w->ready);
  w->spare
      = g_ptr_array_new_with_free_func ((GDestroyNotify) g_byte_array_unref);
  rank_loop_add_prepare (w->loop, send_ready, w);
  w->backend = rank_backend_new (w->loop, &backend);
  w->store = rank_store_new (
      w->backend,
      server->config.random_seed ? server->config.random_seed + index : 0);
  w->handler = rank_handler_new (
      w->store, server->config.boards, server->config.dedup_window_ms,
      server->config.protocol, server->config.framed, request_answered);
  rank_handler_set_cache (w->handler, server->cache);
  if (index == 0)
    w->queue = rank_queue_new (w->loop, w->store, w->handler);
  /* Worker 0 runs the tracking session: on plain nodes of the nodes
   * configured, on a Redis Cluster of every node of its map, as the map
   * changes (tracking.h); only a tracked board has it asked for the map
   * every few seconds. */
  if (index == 0 && !server->config.redis_cluster)
    w->tracking = rank_tracking_new (w->loop, server->cache, server->nodes,
                                     server->n_nodes, &tracking);
  else if (index == 0 && any_tracked (server->config.boards))
    {
      w->tracking
          = rank_tracking_new (w->loop, server->cache, NULL, 0, &tracking);
      rank_backend_watch_nodes (w->backend, cluster_nodes, w->tracking);
    }
  g_queue_init (&w->conns);
  rank_loop_add_prepare (w->loop, sweep, w);
  rank_backend_start (w->backend);
  rank_loop_start (w->loop, name);
}

/* After the loop stopped: what is still pending runs now (calls in flight
 * fail with Unavailable), then everything is freed. */
static void
worker_clear (Worker *w)
{
  rank_loop_run_pending (w->loop);
  rank_queue_stop (w->queue);
  if (w->tracking != NULL)
    rank_backend_watch_nodes (w->backend, NULL, NULL);
  rank_tracking_free (w->tracking);
  rank_backend_free (w->backend);
  rank_loop_run_pending (w->loop);
  rank_queue_free (w->queue);
  while (w->conns.head != NULL)
    {
      conn_free (w->conns.head->data);
    }
  rank_handler_free (w->handler);
  rank_store_free (w->store);
  rank_loop_free (w->loop);
  g_ptr_array_unref (w->spare);
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
  server->wire_log = rank_wire_log_new ();
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
  server->n_replicas = server->config.n_replicas;
  server->replicas = g_new0 (RankAddress, MAX (server->n_replicas, 1));
  server->replica_of = g_memdup2 (server->config.replica_of,
                                  MAX (server->n_replicas, 1) * sizeof (guint));
  for (guint i = 0; i < server->n_replicas; i++)
    {
      server->replicas[i].host = g_strdup (server->config.replicas[i].host);
      server->replicas[i].port = server->config.replicas[i].port;
      server->replicas[i].path = g_strdup (server->config.replicas[i].path);
    }
  server->config.replicas = NULL;
  server->config.replica_of = NULL;
  server->cache = rank_read_cache_new (server->config.read_cache_bytes);
  server->workers = g_new0 (Worker, server->config.io_threads);
  for (guint i = 0; i < server->config.io_threads; i++)
    worker_init (&server->workers[i], server, i);
  /* The handlers hold it now; later ones come by rank_server_set_boards.
   * The links hold the credentials. */
  server->config.boards = NULL;
  server->config.redis_user = NULL;
  server->config.redis_password = NULL;
}

gboolean
rank_server_wait_redis (RankServer *server, int timeout_ms, GError **error)
{
  for (guint i = 0; i < server->config.io_threads; i++)
    if (!rank_backend_wait_ready (server->workers[i].backend, timeout_ms,
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
check_layouts (gpointer data)
{
  Worker *w = data;

  rank_store_check_configured_layouts (w->store,
                                       rank_handler_config (w->handler),
                                       rank_handler_now (w->handler));
}

static void
swap_boards (gpointer data)
{
  Swap *swap = data;

  RankServer *server = swap->worker->server;

  rank_handler_set_config (swap->worker->handler, swap->boards);
  /* One worker tells the log which boards the new options do not fit. */
  if (swap->worker == &server->workers[0])
    check_layouts (swap->worker);
  rank_config_unref (swap->boards);
  g_free (swap);
  g_mutex_lock (&server->lock);
  server->swapped++;
  g_cond_broadcast (&server->drained_cond);
  g_mutex_unlock (&server->lock);
}

void
rank_server_check_layouts (RankServer *server)
{
  rank_loop_post (server->workers[0].loop, check_layouts, &server->workers[0]);
}

void
rank_server_set_boards (RankServer *server, RankConfig *boards)
{
  gint64 deadline = g_get_monotonic_time () + G_USEC_PER_SEC;

  g_mutex_lock (&server->lock);
  server->swapped = 0;
  g_mutex_unlock (&server->lock);
  for (guint i = 0; i < server->config.io_threads; i++)
    {
      Swap *swap = g_new (Swap, 1);

      swap->worker = &server->workers[i];
      swap->boards = rank_config_ref (boards);
      rank_loop_post (swap->worker->loop, swap_boards, swap);
    }
  /* Calls decoded from now on use them: the workers take them between two
   * events, at once. */
  g_mutex_lock (&server->lock);
  while (server->swapped < server->config.io_threads
         && g_cond_wait_until (&server->drained_cond, &server->lock, deadline))
    ;
  g_mutex_unlock (&server->lock);
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
      /* Every loop stops before any worker goes: they share the cache,
       * and worker 0's tracking session. */
      for (guint i = 0; i < server->config.io_threads; i++)
        rank_loop_quit_and_join (server->workers[i].loop);
      for (guint i = 0; i < server->config.io_threads; i++)
        worker_clear (&server->workers[i]);
      g_free (server->workers);
    }
  rank_read_cache_free (server->cache);
  rank_address_clear (&server->config.listen);
  for (guint i = 0; i < server->n_nodes; i++)
    rank_address_clear (&server->nodes[i]);
  g_free (server->nodes);
  for (guint i = 0; i < server->n_replicas; i++)
    rank_address_clear (&server->replicas[i]);
  g_free (server->replicas);
  g_free (server->replica_of);
  g_mutex_clear (&server->lock);
  g_cond_clear (&server->drained_cond);
  rank_wire_log_free (server->wire_log);
  g_free (server);
}
