/* client_transport.c -- a blocking socket transport with a real read buffer
 * (see client_transport.h).
 *
 * Invariants:
 *   rbuf[rpos, rlen) holds received bytes not yet consumed.
 *   Framed: while in_frame, frame_left bytes of the current frame remain and
 *   all of them are already in rbuf (the frame was read whole).
 *   Buffered: msg_used counts the bytes consumed by the current message.
 *   wbuf starts with 4 reserved bytes in framed mode for the length.
 *
 * Over TLS (tls != NULL) the socket is non-blocking: every read and write
 * goes through the session, and each wait the session asks for (readable,
 * writable) is a poll bounded by the timeout. Plain sockets stay blocking
 * with SO_RCVTIMEO/SO_SNDTIMEO as the bound (one recv per reply).
 */
#include "client_transport.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "address.h"
#include "constants.h"
#include "error.h"
#include "protocol.h"

struct _RankClientTransport
{
  ThriftTransport parent;

  int fd;
  gboolean framed;
  guint32 max_frame;
  int timeout_ms;
  RankTlsSession *tls; /* NULL: plain TCP */
  char *tls_failure;   /* why the session ended: said again by every call */

  guint8 *rbuf;
  gsize rcap, rpos, rlen;
  gboolean in_frame;
  gsize frame_left;
  gsize msg_used;

  GByteArray *wbuf;
  gsize frame_start; /* framed: where the message being written begins */
  gboolean corked;   /* flush keeps messages until uncorked */
};

G_DEFINE_TYPE (RankClientTransport, rank_client_transport,
               THRIFT_TYPE_TRANSPORT)

#define FRAME_HEADER 4

static void set_error (GError **error, int code, const char *fmt, ...)
    G_GNUC_PRINTF (3, 4);

static void
set_error (GError **error, int code, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  if (error != NULL && *error == NULL)
    *error = g_error_new_valist (THRIFT_TRANSPORT_ERROR, code, fmt, ap);
  va_end (ap);
}

static void
reset_write (RankClientTransport *self)
{
  self->frame_start = 0;
  g_byte_array_set_size (self->wbuf, self->framed ? FRAME_HEADER : 0);
}

/* Replaces a write buffer that grew for one large message, so that an idle
 * client does not keep it. */
static void
shed (RankClientTransport *self, guint len_before)
{
  if (len_before > 16 * RANK_CONN_BUFFER_BYTES)
    {
      g_byte_array_unref (self->wbuf);
      self->wbuf = g_byte_array_sized_new (256);
    }
}

static void
ensure_capacity (RankClientTransport *self, gsize need)
{
  if (self->rpos > 0 && self->rpos == self->rlen)
    self->rpos = self->rlen = 0;
  if (self->rcap - self->rlen >= need)
    return;
  if (self->rpos > 0)
    {
      memmove (self->rbuf, self->rbuf + self->rpos, self->rlen - self->rpos);
      self->rlen -= self->rpos;
      self->rpos = 0;
    }
  if (self->rcap - self->rlen < need)
    {
      gsize cap = MAX (self->rcap, (gsize) RANK_CONN_BUFFER_BYTES);

      while (cap - self->rlen < need)
        cap *= 2;
      self->rbuf = g_realloc (self->rbuf, cap);
      self->rcap = cap;
    }
}

/* ---- TLS ---- */

/* Waits up to timeout_ms (0: no bound) for fd to be ready for what a TLS
 * call asked (WANT_READ or WANT_WRITE); FALSE when the time ran out. */
static gboolean
tls_wait (int fd, RankTlsStatus want, int timeout_ms)
{
  struct pollfd pfd = { fd, want == RANK_TLS_WANT_WRITE ? POLLOUT : POLLIN, 0 };
  int rc;

  do
    rc = poll (&pfd, 1, timeout_ms > 0 ? timeout_ms : -1);
  while (rc < 0 && errno == EINTR);
  return rc != 0;
}

/* What an alert from the server means for the one who reads the error:
 * under TLS 1.3 a refused client certificate shows up on the first read,
 * not in the handshake. */
static const char *
tls_hint (const char *message)
{
  if (strstr (message, "alert certificate required") != NULL)
    return " (the server requires a client certificate and its key)";
  if (strstr (message, "alert unknown ca") != NULL
      || strstr (message, "alert bad certificate") != NULL
      || strstr (message, "alert certificate expired") != NULL
      || strstr (message, "alert certificate unknown") != NULL
      || strstr (message, "alert certificate revoked") != NULL
      || strstr (message, "alert access denied") != NULL)
    return " (the server refused this client's certificate)";
  return "";
}

/* A failed TLS call's error (RANK_ERROR's domain) as the transport's. The
 * session is over: later calls repeat why (a refused certificate, not
 * "closed"). */
static void
tls_error (RankClientTransport *self, GError **error, int code, GError *tls)
{
  const char *message = tls != NULL ? tls->message : "TLS failed";

  if (self->tls_failure == NULL)
    self->tls_failure = g_strdup_printf ("%s%s", message, tls_hint (message));
  set_error (error, code, "%s", self->tls_failure);
}

/* TRUE (error set) when the session already failed. */
static gboolean
tls_over (RankClientTransport *self, GError **error, int code)
{
  if (self->tls_failure == NULL)
    return FALSE;
  set_error (error, code, "%s", self->tls_failure);
  return TRUE;
}

static gboolean
tls_fill (RankClientTransport *self, GError **error)
{
  if (tls_over (self, error, THRIFT_TRANSPORT_ERROR_RECEIVE))
    return FALSE;
  for (;;)
    {
      g_autoptr (GError) tls = NULL;
      gsize got = 0;
      RankTlsStatus s = rank_tls_read (self->tls, self->rbuf + self->rlen,
                                       self->rcap - self->rlen, &got, &tls);

      switch (s)
        {
        case RANK_TLS_OK:
          self->rlen += got;
          return TRUE;
        case RANK_TLS_WANT_READ:
        case RANK_TLS_WANT_WRITE:
          if (tls_wait (self->fd, s, self->timeout_ms))
            continue;
          set_error (error, THRIFT_TRANSPORT_ERROR_RECEIVE,
                     "timed out after %d ms waiting for the peer to send",
                     self->timeout_ms);
          return FALSE;
        case RANK_TLS_CLOSED:
          g_clear_error (&tls);
          tls = g_error_new_literal (RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                                     "connection closed by peer");
          tls_error (self, error, THRIFT_TRANSPORT_ERROR_RECEIVE, tls);
          return FALSE;
        case RANK_TLS_FAILED:
        default:
          tls_error (self, error, THRIFT_TRANSPORT_ERROR_RECEIVE, tls);
          return FALSE;
        }
    }
}

static gboolean
tls_send_all (RankClientTransport *self, const guint8 *data, gsize len,
              GError **error)
{
  if (tls_over (self, error, THRIFT_TRANSPORT_ERROR_SEND))
    return FALSE;
  while (len > 0)
    {
      g_autoptr (GError) tls = NULL;
      struct iovec iov = { (void *) data, len };
      gsize wrote = 0;
      RankTlsStatus s = rank_tls_writev (self->tls, &iov, 1, &wrote, &tls);

      data += wrote;
      len -= wrote;
      if (s == RANK_TLS_OK)
        continue;
      if (s == RANK_TLS_WANT_READ || s == RANK_TLS_WANT_WRITE)
        {
          if (tls_wait (self->fd, s, self->timeout_ms))
            continue;
          set_error (error, THRIFT_TRANSPORT_ERROR_SEND,
                     "timed out after %d ms waiting for the peer to read",
                     self->timeout_ms);
          return FALSE;
        }
      /* A server that refused this client's certificate after the
       * handshake (TLS 1.3) sent an alert and closed: the alert says why,
       * the failed write does not. */
      {
        g_autoptr (GError) alert = NULL;
        guint8 b[256];
        gsize got;

        if (rank_tls_read (self->tls, b, sizeof b, &got, &alert)
                == RANK_TLS_FAILED
            && alert != NULL && strstr (alert->message, "alert") != NULL)
          {
            g_clear_error (&tls);
            tls = g_steal_pointer (&alert);
          }
      }
      if (tls == NULL)
        tls = g_error_new_literal (RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                                   "connection closed by peer");
      tls_error (self, error, THRIFT_TRANSPORT_ERROR_SEND, tls);
      return FALSE;
    }
  return TRUE;
}

/* OpenSSL writes to its socket with write(2), not send(MSG_NOSIGNAL): a
 * write to a connection the peer reset (a close_notify on closing, the
 * rest of a large request) raises SIGPIPE, whose default ends the process.
 * A process that speaks TLS through this transport ignores it instead
 * (rankd does the same); a handler of its own is left alone. */
static gpointer
ignore_sigpipe (gpointer unused)
{
  struct sigaction old;

  if (sigaction (SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL)
    signal (SIGPIPE, SIG_IGN);
  return NULL;
}

/* Runs the handshake on self's socket, all of it within timeout_ms (0: no
 * bound). */
static gboolean
tls_handshake (RankClientTransport *self, int timeout_ms, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;

  for (;;)
    {
      g_autoptr (GError) tls = NULL;
      RankTlsStatus s = rank_tls_handshake (self->tls, &tls);
      int left;

      if (s == RANK_TLS_OK)
        return TRUE;
      if (s != RANK_TLS_WANT_READ && s != RANK_TLS_WANT_WRITE)
        {
          if (s == RANK_TLS_CLOSED && tls == NULL)
            set_error (error, THRIFT_TRANSPORT_ERROR_CONNECT,
                       "TLS handshake failed: the peer closed the "
                       "connection");
          else
            tls_error (self, error, THRIFT_TRANSPORT_ERROR_CONNECT, tls);
          return FALSE;
        }
      left = 0;
      if (timeout_ms > 0)
        {
          gint64 us = deadline - g_get_monotonic_time ();

          if (us <= 0)
            left = -1;
          else
            left = (int) MAX ((us + 999) / 1000, 1);
        }
      if (left < 0 || !tls_wait (self->fd, s, left))
        {
          set_error (error, THRIFT_TRANSPORT_ERROR_CONNECT,
                     "TLS handshake timed out after %d ms", timeout_ms);
          return FALSE;
        }
    }
}

/* ---- reading ---- */

/* Receives more bytes, at least one, into rbuf. */
static gboolean
fill (RankClientTransport *self, gsize want, GError **error)
{
  ensure_capacity (self, MAX (want, (gsize) 1));
  if (self->tls != NULL)
    return tls_fill (self, error);
  for (;;)
    {
      ssize_t n = recv (self->fd, self->rbuf + self->rlen,
                        self->rcap - self->rlen, 0);

      if (n > 0)
        {
          self->rlen += (gsize) n;
          return TRUE;
        }
      if (n == 0)
        {
          set_error (error, THRIFT_TRANSPORT_ERROR_RECEIVE,
                     "connection closed by peer");
          return FALSE;
        }
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        {
          set_error (error, THRIFT_TRANSPORT_ERROR_RECEIVE,
                     "timed out after %d ms waiting for the peer to send",
                     self->timeout_ms);
          return FALSE;
        }
      set_error (error, THRIFT_TRANSPORT_ERROR_RECEIVE, "recv failed: %s",
                 g_strerror (errno));
      return FALSE;
    }
}

/* Makes sure n bytes are buffered. */
static gboolean
fill_to (RankClientTransport *self, gsize n, GError **error)
{
  while (self->rlen - self->rpos < n)
    if (!fill (self, n - (self->rlen - self->rpos), error))
      return FALSE;
  return TRUE;
}

/* Shrinks the read buffer after a large message. */
static void
trim_buffer (RankClientTransport *self)
{
  if (self->rcap > 16 * RANK_CONN_BUFFER_BYTES
      && self->rlen - self->rpos <= RANK_CONN_BUFFER_BYTES)
    {
      gsize left = self->rlen - self->rpos;
      guint8 *nb = g_malloc (RANK_CONN_BUFFER_BYTES);

      memcpy (nb, self->rbuf + self->rpos, left);
      g_free (self->rbuf);
      self->rbuf = nb;
      self->rcap = RANK_CONN_BUFFER_BYTES;
      self->rpos = 0;
      self->rlen = left;
    }
}

static gboolean
read_frame (RankClientTransport *self, GError **error)
{
  guint32 len;

  if (!fill_to (self, FRAME_HEADER, error))
    return FALSE;
  len = ((guint32) self->rbuf[self->rpos] << 24)
        | ((guint32) self->rbuf[self->rpos + 1] << 16)
        | ((guint32) self->rbuf[self->rpos + 2] << 8)
        | (guint32) self->rbuf[self->rpos + 3];
  if (len == 0 || len > self->max_frame)
    {
      set_error (error, THRIFT_TRANSPORT_ERROR_RECEIVE,
                 "frame length %u is outside 1..%u", len, self->max_frame);
      return FALSE;
    }
  if (!fill_to (self, FRAME_HEADER + (gsize) len, error))
    return FALSE;
  self->rpos += FRAME_HEADER;
  self->in_frame = TRUE;
  self->frame_left = len;
  return TRUE;
}

gboolean
rank_client_transport_begin_message (RankClientTransport *self, GError **error)
{
  self->msg_used = 0;
  if (self->framed)
    {
      self->in_frame = FALSE;
      return read_frame (self, error);
    }
  return TRUE;
}

gsize
rank_client_transport_remaining (RankClientTransport *self)
{
  if (self->framed)
    return self->in_frame ? self->frame_left : self->max_frame;
  return self->max_frame - MIN (self->msg_used, (gsize) self->max_frame);
}

static gint32
client_read (ThriftTransport *transport, gpointer buf, guint32 len,
             GError **error)
{
  RankClientTransport *self = RANK_CLIENT_TRANSPORT (transport);
  gsize n;

  if (len == 0)
    return 0;
  if (self->framed)
    {
      if (!self->in_frame && !read_frame (self, error))
        return -1;
      if (len > self->frame_left)
        {
          set_error (error, THRIFT_TRANSPORT_ERROR_RECEIVE,
                     "message reads %u bytes past the end of its frame",
                     (guint) (len - self->frame_left));
          return -1;
        }
      memcpy (buf, self->rbuf + self->rpos, len);
      self->rpos += len;
      self->frame_left -= len;
      return (gint32) len;
    }
  if (self->msg_used + len > self->max_frame)
    {
      set_error (error, THRIFT_TRANSPORT_ERROR_RECEIVE,
                 "message is longer than the %u-byte limit", self->max_frame);
      return -1;
    }
  if (!fill_to (self, 1, error))
    return -1;
  n = MIN ((gsize) len, self->rlen - self->rpos);
  memcpy (buf, self->rbuf + self->rpos, n);
  self->rpos += n;
  self->msg_used += n;
  return (gint32) n;
}

static gint32
client_read_all (ThriftTransport *transport, gpointer buf, guint32 len,
                 GError **error)
{
  guint32 have = 0;

  while (have < len)
    {
      gint32 n
          = client_read (transport, (guint8 *) buf + have, len - have, error);
      if (n < 0)
        return -1;
      have += (guint32) n;
    }
  return (gint32) have;
}

static gboolean
client_read_end (ThriftTransport *transport, GError **error)
{
  RankClientTransport *self = RANK_CLIENT_TRANSPORT (transport);

  if (self->framed && self->in_frame)
    {
      /* Bytes the reader did not ask for (unknown trailing data) are
       * dropped with the frame. */
      self->rpos += self->frame_left;
      self->frame_left = 0;
      self->in_frame = FALSE;
    }
  self->msg_used = 0;
  trim_buffer (self);
  return TRUE;
}

const guint8 *
rank_client_transport_message (RankClientTransport *self, gsize *len)
{
  if (!self->framed || !self->in_frame)
    return NULL;
  *len = self->frame_left;
  return self->rbuf + self->rpos;
}

void
rank_client_transport_end_message (RankClientTransport *self)
{
  client_read_end (THRIFT_TRANSPORT (self), NULL);
}

static gboolean
client_write (ThriftTransport *transport, const gpointer buf, const guint32 len,
              GError **error)
{
  RankClientTransport *self = RANK_CLIENT_TRANSPORT (transport);

  if ((gsize) (self->wbuf->len - self->frame_start) + len
      > (gsize) self->max_frame + FRAME_HEADER)
    {
      set_error (error, THRIFT_TRANSPORT_ERROR_SEND,
                 "message is longer than the %u-byte limit", self->max_frame);
      return FALSE;
    }
  g_byte_array_append (self->wbuf, buf, len);
  return TRUE;
}

static gboolean
send_all (RankClientTransport *self, const guint8 *data, gsize len,
          GError **error)
{
  if (self->tls != NULL)
    return tls_send_all (self, data, len, error);
  while (len > 0)
    {
      ssize_t n = send (self->fd, data, len, MSG_NOSIGNAL);

      if (n >= 0)
        {
          data += n;
          len -= (gsize) n;
          continue;
        }
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        {
          set_error (error, THRIFT_TRANSPORT_ERROR_SEND,
                     "timed out after %d ms waiting for the peer to read",
                     self->timeout_ms);
          return FALSE;
        }
      set_error (error, THRIFT_TRANSPORT_ERROR_SEND, "send failed: %s",
                 g_strerror (errno));
      return FALSE;
    }
  return TRUE;
}

static gboolean
client_flush (ThriftTransport *transport, GError **error)
{
  RankClientTransport *self = RANK_CLIENT_TRANSPORT (transport);
  gboolean ok;
  guint sent;

  if (self->framed)
    {
      guint8 *h = self->wbuf->data + self->frame_start;
      guint32 len = self->wbuf->len - self->frame_start - FRAME_HEADER;

      if (len == 0)
        return TRUE;
      h[0] = (guint8) (len >> 24);
      h[1] = (guint8) (len >> 16);
      h[2] = (guint8) (len >> 8);
      h[3] = (guint8) len;
    }
  else if (self->wbuf->len == 0)
    return TRUE;
  if (self->corked)
    {
      /* The message stays; the next one starts after it. */
      self->frame_start = self->wbuf->len;
      if (self->framed)
        g_byte_array_set_size (self->wbuf, self->wbuf->len + FRAME_HEADER);
      return TRUE;
    }
  sent = self->wbuf->len;
  ok = send_all (self, self->wbuf->data, self->wbuf->len, error);
  shed (self, sent);
  reset_write (self);
  return ok;
}

void
rank_client_transport_cork (RankClientTransport *self)
{
  self->corked = TRUE;
}

gboolean
rank_client_transport_uncork (RankClientTransport *self, GError **error)
{
  gsize len = self->framed ? self->frame_start : self->wbuf->len;
  guint sent = self->wbuf->len;
  gboolean ok = send_all (self, self->wbuf->data, len, error);

  self->corked = FALSE;
  shed (self, sent);
  reset_write (self);
  return ok;
}

static gboolean
client_write_end (ThriftTransport *transport, GError **error)
{
  return TRUE;
}

static gboolean
client_is_open (ThriftTransport *transport)
{
  return RANK_CLIENT_TRANSPORT (transport)->fd >= 0;
}

static gboolean
client_open (ThriftTransport *transport, GError **error)
{
  if (RANK_CLIENT_TRANSPORT (transport)->fd >= 0)
    return TRUE;
  set_error (error, THRIFT_TRANSPORT_ERROR_CONNECT,
             "transport has no socket; use rank_client_transport_connect");
  return FALSE;
}

static gboolean
client_close (ThriftTransport *transport, GError **error)
{
  RankClientTransport *self = RANK_CLIENT_TRANSPORT (transport);

  if (self->tls != NULL)
    {
      rank_tls_shutdown (self->tls);
      rank_tls_session_free (self->tls);
      self->tls = NULL;
    }
  if (self->fd >= 0)
    {
      close (self->fd);
      self->fd = -1;
    }
  return TRUE;
}

/* The protocols ask before reading a container whether its minimum size
 * fits in what is left of the message. */
static gboolean
client_check_available (ThriftTransport *transport, glong num_bytes,
                        GError **error)
{
  RankClientTransport *self = RANK_CLIENT_TRANSPORT (transport);

  if (num_bytes < 0
      || (gsize) num_bytes > rank_client_transport_remaining (self))
    {
      set_error (error, THRIFT_TRANSPORT_ERROR_MAX_MESSAGE_SIZE_REACHED,
                 "container claims more bytes than the message holds");
      return FALSE;
    }
  return TRUE;
}

static void
rank_client_transport_finalize (GObject *object)
{
  RankClientTransport *self = RANK_CLIENT_TRANSPORT (object);

  client_close (THRIFT_TRANSPORT (self), NULL);
  g_free (self->tls_failure);
  g_free (self->rbuf);
  g_byte_array_unref (self->wbuf);
  G_OBJECT_CLASS (rank_client_transport_parent_class)->finalize (object);
}

static void
rank_client_transport_class_init (RankClientTransportClass *klass)
{
  ThriftTransportClass *tt = THRIFT_TRANSPORT_CLASS (klass);

  G_OBJECT_CLASS (klass)->finalize = rank_client_transport_finalize;
  tt->is_open = client_is_open;
  tt->open = client_open;
  tt->close = client_close;
  tt->read = client_read;
  tt->read_all = client_read_all;
  tt->read_end = client_read_end;
  tt->write = client_write;
  tt->write_end = client_write_end;
  tt->flush = client_flush;
  tt->checkReadBytesAvailable = client_check_available;
  /* The protocols check every size read against what is left. */
  rank_protocol_register_sized (
      RANK_TYPE_CLIENT_TRANSPORT,
      (RankRemainingFunc) rank_client_transport_remaining);
}

static void
rank_client_transport_init (RankClientTransport *self)
{
  self->fd = -1;
  self->wbuf = g_byte_array_sized_new (256);
}

RankClientTransport *
rank_client_transport_new (int fd, gboolean framed, guint32 max_frame)
{
  RankClientTransport *self = g_object_new (RANK_TYPE_CLIENT_TRANSPORT, NULL);
  int one = 1;
  int flags = fcntl (fd, F_GETFL);

  /* Blocking, with SO_RCVTIMEO/SO_SNDTIMEO as the bound: one recv per
   * reply instead of recv, poll, recv. */
  if (flags >= 0)
    (void) fcntl (fd, F_SETFL, flags & ~O_NONBLOCK);
  (void) setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  self->fd = fd;
  self->framed = framed;
  self->max_frame = max_frame;
  reset_write (self);
  rank_client_transport_set_timeout (self, RANK_REQUEST_READ_TIMEOUT_MS);
  return self;
}

RankClientTransport *
rank_client_transport_connect (const char *host, guint16 port, gboolean framed,
                               int timeout_ms, GError **error)
{
  return rank_client_transport_connect_tls (host, port, framed, timeout_ms,
                                            NULL, NULL, error);
}

RankClientTransport *
rank_client_transport_connect_tls (const char *host, guint16 port,
                                   gboolean framed, int timeout_ms,
                                   RankTlsContext *tls, const char *server_name,
                                   GError **error)
{
  RankAddress address = { (char *) host, port, NULL };
  RankClientTransport *self;
  int fd = rank_address_connect (&address, timeout_ms, error);
  int flags;

  if (fd < 0)
    return NULL;
  self = rank_client_transport_new (fd, framed, RANK_MAX_MAX_FRAME);
  rank_client_transport_set_timeout (self, timeout_ms);
  if (tls == NULL)
    return self;
  {
    static GOnce once = G_ONCE_INIT;

    g_once (&once, ignore_sigpipe, NULL);
  }
  /* The session asks for each wait; poll bounds it. */
  flags = fcntl (fd, F_GETFL);
  if (flags >= 0)
    (void) fcntl (fd, F_SETFL, flags | O_NONBLOCK);
  self->tls = rank_tls_session_new (
      tls, fd,
      server_name != NULL && *server_name != '\0' ? server_name : host);
  if (!tls_handshake (self, timeout_ms, error))
    {
      g_object_unref (self);
      return NULL;
    }
  return self;
}

void
rank_client_transport_set_timeout (RankClientTransport *self, int timeout_ms)
{
  struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };

  self->timeout_ms = timeout_ms;
  (void) setsockopt (self->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  (void) setsockopt (self->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

gsize
rank_client_transport_memory (RankClientTransport *self)
{
  return self->rcap + self->wbuf->len;
}
