/* connection.c -- a worker's connections (see server.h, server_private.h).
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
 * TLS: a connection of a TLS listener first completes its handshake,
 * held to a request's clock (RANK_REQUEST_READ_TIMEOUT_MS from the accept,
 * the sweep's stall rule), and is then served like any other, its bytes in
 * and out going through its session. A session's read returns one record
 * at most: it reads until the session wants the socket (WANT_READ) or is
 * drained (nothing left in it, and the socket gave less than asked: the
 * edge-triggered watch fires for the next bytes); a read or write that
 * needs the other direction waits for that event. Failed handshakes are
 * counted by reason (metrics.h) and logged at most once a second.
 *
 * Shutdown: each worker closes its idle connections, serves requests
 * already received, and closes the rest as their calls finish; server.c
 * then stops the loops. A connection still in its handshake just closes.
 */
#include "server_private.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <thrift/c_glib/thrift_application_exception.h>

#include "constants.h"
#include "metrics.h"

static void serve (Conn *c);
static void peer_name (Conn *c, char *out, gsize size);

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

/* w has no connection left after the drain began: rank_server_drain
 * waits for every worker's. */
static void
worker_drained (Worker *w)
{
  g_mutex_lock (&w->server->lock);
  w->server->drained++;
  g_cond_broadcast (&w->server->drained_cond);
  g_mutex_unlock (&w->server->lock);
}

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
  if (c->tls != NULL)
    {
      /* close_notify, if the session is whole and the socket takes it. */
      if (!c->handshaking && !c->tls_failed)
        rank_tls_shutdown (c->tls);
      g_clear_pointer (&c->tls, rank_tls_session_free);
      rank_metrics_tls_closed ();
    }
  close (c->fd);
  c->fd = -1;
  g_atomic_int_add (&c->worker->server->connections, -1);
  rank_metrics_connection_closed ();
}

void
rank_conn_free (Conn *c)
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
  g_free (c->peer.identity);
  g_free (c->tls_peer);
  g_free (c);
  if (w->draining && w->conns.length == 0)
    worker_drained (w);
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
  rank_conn_free (c);
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

/* Replies go out before the loop sleeps (rank_worker_send_ready). */
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
void
rank_request_answered (gpointer data, gboolean ok)
{
  Request *r = data;
  Conn *c = r->conn;

  if (c == NULL)
    {
      rank_call_answered (r, ok);
      return;
    }
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

/* wrote bytes of the replies at the head went out. */
static void
replies_sent (Conn *c, gsize wrote)
{
  if (wrote > 0)
    c->last_progress = g_get_monotonic_time ();
  c->sent += wrote;
  while (head_answered (c))
    {
      Request *r = g_queue_peek_head (&c->requests);

      if (c->sent < r->reply->len)
        break;
      c->sent -= r->reply->len;
      request_free (c, r);
    }
}

/* Writes iov through c's TLS session: as writev does, -1 with errno
 * EAGAIN when the session waits for the socket (c->write_wants_read says
 * which way), -1 with errno EPIPE when it failed. */
static gssize
tls_writev (Conn *c, const struct iovec *iov, int n)
{
  g_autoptr (GError) error = NULL;
  gsize wrote = 0;
  RankTlsStatus s = rank_tls_writev (c->tls, iov, n, &wrote, &error);

  c->write_wants_read = s == RANK_TLS_WANT_READ;
  if (s == RANK_TLS_OK)
    return (gssize) wrote;
  if (s == RANK_TLS_WANT_READ || s == RANK_TLS_WANT_WRITE)
    {
      /* What went counts; the rest is written again from its start. */
      replies_sent (c, wrote);
      errno = EAGAIN;
      return -1;
    }
  g_debug ("closing connection: %s",
           error != NULL ? error->message : "the client closed it");
  c->tls_failed = TRUE;
  errno = EPIPE;
  return -1;
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
      wrote = c->tls != NULL ? tls_writev (c, iov, n) : writev (c->fd, iov, n);
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
      replies_sent (c, (gsize) wrote);
    }
  return TRUE;
}

/* Reads what c's TLS session has, until it waits for the socket (or a
 * whole largest frame is buffered: c is parked, to read the rest once
 * that is decoded). */
static RankIoResult
tls_receive (Conn *c)
{
  for (;;)
    {
      g_autoptr (GError) error = NULL;
      gsize room, got = 0;
      guint8 *into = rank_request_reader_space (c->reader, &room);

      if (into == NULL)
        {
          c->parked = TRUE;
          return RANK_IO_OK;
        }
      switch (rank_tls_read (c->tls, into, room, &got, &error))
        {
        case RANK_TLS_OK:
          rank_request_reader_commit (c->reader, got);
          if (rank_tls_drained (c->tls))
            return RANK_IO_OK; /* the next bytes raise an event */
          break;
        case RANK_TLS_WANT_READ:
          return RANK_IO_OK;
        case RANK_TLS_WANT_WRITE:
          c->read_wants_write = TRUE; /* EPOLLOUT resumes it */
          return RANK_IO_OK;
        case RANK_TLS_CLOSED:
          return RANK_IO_CLOSED;
        case RANK_TLS_FAILED:
          g_debug ("closing connection: %s", error->message);
          c->tls_failed = TRUE;
          return RANK_IO_FAILED;
        }
    }
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
  r = c->tls != NULL ? tls_receive (c)
                     : rank_request_reader_receive (c->reader, c->fd);
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
      rank_request_answered (r, FALSE);
      return;
    }
  rank_request_answered (r, TRUE);
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
  d = rank_handler_dispatch (w->handler, r, &c->peer, r->reply, method, seqid,
                             c->in, &bound, &error);
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

/* c's client sent a TLS ClientHello to a plain port: said in the log
 * (rate-limited, as log_wrong_wire). */
static void
log_tls_on_plain (Conn *c)
{
  const RankServerConfig *config = &c->worker->server->config;
  char peer[INET6_ADDRSTRLEN + 16];

  peer_name (c, peer, sizeof peer);
  if (rank_wire_log_admit (c->worker->server->wire_log, peer, "TLS",
                           g_get_monotonic_time ()))
    g_message ("a client from %s speaks TLS; this port expects plain Thrift "
               "(%s; --tls-listen serves TLS): closing its connection",
               peer, rank_wire_name (config->framed, config->protocol));
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
    case RANK_WIRE_TLS:
      log_tls_on_plain (c);
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
int
rank_worker_send_ready (gpointer data)
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

/* ---- TLS handshakes ---- */

/* What a failed handshake's error says, as a reason. */
static RankTlsFailure
tls_failure_of (const char *why)
{
  if (strstr (why, "unsupported protocol") != NULL
      || strstr (why, "protocol version") != NULL
      || strstr (why, "version too low") != NULL)
    return RANK_TLS_FAILURE_VERSION;
  if (strstr (why, "certificate") != NULL || strstr (why, "unknown ca") != NULL)
    return RANK_TLS_FAILURE_CERTIFICATE;
  if (strstr (why, "closed the connection") != NULL
      || strstr (why, "unexpected eof") != NULL)
    return RANK_TLS_FAILURE_CLOSED;
  return RANK_TLS_FAILURE_PROTOCOL;
}

/* c's handshake failed for reason (why): counted, and logged at most once
 * a second (a client that closes mid-way, e.g. a port probe, at debug
 * level only). */
static void
tls_failed (Conn *c, RankTlsFailure reason, const char *why)
{
  RankServer *server = c->worker->server;
  gint64 now = g_get_monotonic_time ();
  char peer[INET6_ADDRSTRLEN + 16];
  gboolean log = FALSE;
  guint unlogged = 0;

  rank_metrics_tls_handshake_failed (reason);
  g_strlcpy (peer, c->tls_peer != NULL ? c->tls_peer : "?", sizeof peer);
  if (reason == RANK_TLS_FAILURE_CLOSED)
    {
      g_debug ("TLS handshake with a client from %s: %s", peer, why);
      return;
    }
  g_mutex_lock (&server->lock);
  if (now - server->last_tls_log >= G_USEC_PER_SEC)
    {
      log = TRUE;
      server->last_tls_log = now;
      unlogged = server->tls_unlogged;
      server->tls_unlogged = 0;
    }
  else
    server->tls_unlogged++;
  g_mutex_unlock (&server->lock);
  if (!log)
    return;
  if (unlogged > 0)
    g_message ("TLS handshake with a client from %s failed (%s): %s; and %u "
               "more since the last such line",
               peer, rank_metrics_tls_failure_name (reason), why, unlogged);
  else
    g_message ("TLS handshake with a client from %s failed (%s): %s", peer,
               rank_metrics_tls_failure_name (reason), why);
}

/* "anonymous" and "uid:N" name callers without a certificate: a
 * certificate may not claim them. */
static gboolean
identity_reserved (const char *identity)
{
  return g_strcmp0 (identity, "anonymous") == 0
         || g_str_has_prefix (identity, "uid:");
}

/* Advances c's handshake; once done, c's peer is its certificate's
 * identity (none: anonymous). FALSE: it failed, and c is broken. */
static gboolean
handshake (Conn *c)
{
  const RankServerConfig *config = &c->worker->server->config;
  g_autoptr (GError) error = NULL;
  RankTlsStatus s = rank_tls_handshake (c->tls, &error);
  char *identity;

  if (s == RANK_TLS_WANT_READ || s == RANK_TLS_WANT_WRITE)
    return TRUE;
  if (s != RANK_TLS_OK)
    {
      c->tls_failed = TRUE;
      tls_failed (c,
                  error == NULL ? RANK_TLS_FAILURE_CLOSED
                                : tls_failure_of (error->message),
                  error == NULL ? "the client closed the connection"
                                : error->message);
      conn_break (c);
      return FALSE;
    }
  c->handshaking = FALSE;
  identity = rank_tls_peer_identity (c->tls, config->tls_identity);
  if (identity != NULL && identity_reserved (identity))
    {
      g_autofree char *why = g_strdup_printf (
          "its certificate names '%s', a reserved identity", identity);

      g_free (identity);
      tls_failed (c, RANK_TLS_FAILURE_RESERVED, why);
      conn_break (c);
      return FALSE;
    }
  c->peer.tls = TRUE;
  c->peer.identity = identity;
  c->partial_since = 0;
  c->last_progress = c->last_received = g_get_monotonic_time ();
  rank_metrics_tls_handshake_done ();
  g_debug ("a %s connection from %s", rank_tls_version (c->tls),
           identity != NULL ? identity : "anonymous");
  return TRUE;
}

/* ---- events ---- */

static void
conn_io (gpointer data, guint32 events)
{
  Conn *c = data;
  /* A TLS session may wait for the other direction than its call's. */
  gboolean writable
      = (events & EPOLLOUT) || ((events & EPOLLIN) && c->write_wants_read);
  gboolean readable = (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                      || ((events & EPOLLOUT) && c->read_wants_write);

  if (c->handshaking)
    {
      if (!handshake (c))
        {
          conn_settle (c);
          return;
        }
      if (c->handshaking)
        return;
      readable = TRUE; /* requests may have come right after it */
    }
  if (writable)
    {
      c->blocked = FALSE;
      c->write_wants_read = FALSE;
    }
  if (writable && head_answered (c) && !send_replies (c))
    return;
  /* With edge-triggered events a FIN that arrives with the last request
   * raises no event of its own: EPOLLRDHUP tells it. */
  if (events & EPOLLRDHUP)
    c->eof = TRUE;
  if (readable)
    c->read_wants_write = FALSE;
  if (readable && !receive (c))
    {
      /* A receive error: the connection is broken. */
      conn_break (c);
      conn_settle (c);
      return;
    }
  serve (c);
}

void
rank_conn_add (Worker *w, int fd, RankTlsContext *tls, gboolean local)
{
  Conn *c = g_new0 (Conn, 1);
  int one = 1;

  c->worker = w;
  c->node.data = c;
  c->fd = fd;
  (void) fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) | O_NONBLOCK);
  if (local)
    {
      struct ucred cred;
      socklen_t len = sizeof cred;

      /* A unix socket's peer is the user it runs as. */
      if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
        c->peer.identity = g_strdup_printf ("uid:%u", (guint) cred.uid);
      g_debug ("a connection on a unix socket from %s",
               c->peer.identity != NULL ? c->peer.identity : "an unknown user");
    }
  else
    (void) setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  c->reader = rank_request_reader_new (w->server->config.framed,
                                       w->server->config.max_frame);
  c->in = rank_protocol_new (w->server->config.protocol,
                             THRIFT_TRANSPORT (c->reader));
  c->last_progress = c->last_received = g_get_monotonic_time ();
  if (tls != NULL)
    {
      c->tls = rank_tls_session_new (tls, fd, NULL);
      char peer[INET6_ADDRSTRLEN + 16];

      /* For the log: a client that failed may be gone by then. */
      peer_name (c, peer, sizeof peer);
      c->tls_peer = g_strdup (peer);
      c->handshaking = TRUE;
      /* The handshake runs on a request's clock (the sweep's stall rule). */
      c->partial_since = c->last_received;
      rank_metrics_tls_opened ();
    }
  c->watch = rank_loop_watch (
      w->loop, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, conn_io, c);
  g_queue_push_tail_link (&w->conns, &c->node);
  if (w->draining)
    conn_close (c);
}

/* Closes connections idle past --idle-timeout, and those whose request
 * stalled half-way. At most once a second. */
int
rank_worker_sweep (gpointer data)
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
      /* An idle TLS connection gives its session's buffers back (about
       * 35 KB; a busy one keeps them). */
      if (c->tls != NULL && !c->handshaking && c->requests.length == 0
          && now - c->last_progress >= G_USEC_PER_SEC)
        rank_tls_trim (c->tls);
      /* A request must arrive whole within RANK_REQUEST_READ_TIMEOUT_MS of
       * its first byte; otherwise neither bytes in nor replies out for
       * --idle-timeout (a client that reads nothing it asked for too). */
      if ((c->partial_since != 0 && now - c->partial_since > stalled)
          || now - c->last_progress > idle)
        {
          if (c->handshaking)
            {
              g_autofree char *why = g_strdup_printf (
                  "not done within %d ms", (int) (MIN (stalled, idle) / 1000));

              c->tls_failed = TRUE;
              tls_failed (c, RANK_TLS_FAILURE_TIMEOUT, why);
            }
          conn_break (c);
          conn_settle (c);
        }
    }
  return 1000;
}

void
rank_worker_start_drain (gpointer data)
{
  Worker *w = data;
  GList *l = w->conns.head;

  w->draining = TRUE;
  /* The drain reads nothing more; what it read and has not applied stays
   * pending, for another rankd (or this one's successor) to claim. */
  rank_queue_stop (w->queue);
  if (w->conns.length == 0)
    {
      worker_drained (w);
      return;
    }
  while (l != NULL)
    {
      Conn *c = l->data;

      l = l->next;
      /* Serve what was already sent to us, then close. */
      if (c->handshaking)
        {
          conn_break (c);
          conn_settle (c);
        }
      else if (receive (c))
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
