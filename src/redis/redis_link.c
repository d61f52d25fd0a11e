/* redis_link.c -- a pipelined Redis connection on an event loop
 * (see redis_link.h).
 *
 * State: CONNECTING (a non-blocking connect, then the start-up commands --
 * AUTH, SCRIPT LOAD -- are under way; commands queue behind them), UP (every
 * start-up command succeeded), or DOWN (the last attempt failed; commands
 * fail at once until the back-off ends and the next attempt starts). The
 * back-off (RANK_RECONNECT_MIN_MS doubling to RANK_RECONNECT_MAX_MS) starts
 * again only once a connection is UP: a refused AUTH is a failed attempt like
 * a refused connect, logged once per attempt.
 *
 * Commands are formatted into obuf and recorded in a ring of pending entries
 * awaiting replies; the prepare hook writes obuf just before the loop sleeps,
 * so a whole iteration's commands go out in one send. An entry whose deadline
 * passed has its callback failed and stays in the ring without it (its
 * reply still comes and is dropped). If the oldest entry has waited longer
 * than RANK_REDIS_STALL_MS, the connection is presumed dead and replaced.
 *
 * TLS (redis_tls.h; never on a unix socket): once the TCP connect is done,
 * the handshake, within the same connect deadline, then the start-up
 * commands. Bytes go through the session: a read takes one TLS record at
 * a time, so reads go on until the session wants more from the socket (no
 * decrypted byte is left in it while the loop sleeps); a write that waits
 * for the socket to be readable (or a read for it to be writable) is
 * retried when it is. A connection that fails before it is up -- a
 * handshake or a verification that fails, or a Redis that closes it
 * because it wants a client certificate -- is a failed attempt like a
 * refused connect: logged, and retried after the back-off.
 */
#include "redis_link.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "constants.h"
#include "error.h"
#include "metrics.h"
#include "redis_tls.h"

typedef enum
{
  LINK_CONNECTING,
  LINK_UP,
  LINK_DOWN,
} LinkState;

typedef struct
{
  RankRedisReplyFunc func; /* NULL: start-up command, or abandoned */
  gpointer data;
  gint64 deadline; /* monotonic us */
  gboolean startup;
} Pending;

typedef struct
{
  RankRedisReplyFunc func;
  gpointer data;
  GError *error;
} Failure;

struct _RankRedisLink
{
  RankLoop *loop;
  RankAddress address;
  char *name;
  int timeout_ms;
  GPtrArray *startup; /* GString: formatted commands */
  /* gboolean per start-up command: a label (CLIENT SETNAME), whose
   * refusal (an ACL without it) leaves the connection serving. */
  GArray *startup_label;
  RankMetricsLink *metrics;
  RankRedisTls *tls; /* NULL: plain (and always on a unix socket) */

  /* Shared with rank_redis_link_wait_ready's thread. */
  GMutex lock;
  GCond changed;
  LinkState state;
  gboolean attempted;
  char *last_error;

  /* Loop thread only. */
  int fd;
  guint64 attempts; /* connections begun, ever: a new one, a new reader */
  gboolean tcp_up;  /* connected; start-up replies may still be due */
  RankTlsSession *session;   /* with tls, from the TCP connect on */
  gboolean tls_up;           /* the session's handshake is done */
  gboolean write_wants_read; /* a TLS write waits for the socket to read */
  gboolean read_wants_write; /* a TLS read waits for it to write */
  guint handshake_left;      /* start-up commands not answered yet */
  guint startup_next;        /* the index of the next start-up reply */
  RankLoopWatch *watch;
  gboolean want_write;
  gint64 connect_deadline;
  gint64 retry_at;
  int backoff_ms;
  redisReader *reader;
  GString *obuf;
  gsize opos;
  Pending *ring;
  gsize ring_cap, ring_head, ring_len;
  gsize expired;     /* leading entries already past their deadline */
  guint64 delivered; /* replies handed to their commands, ever */
  guint connections; /* handshakes done: a new one is a new session */
  RankRedisReplyFunc push_func; /* replies nothing asked for (a subscriber) */
  gpointer push_data;
  char rbuf[64 * 1024];
};

static void io_ready (gpointer data, guint32 events);

/* What read_input hands hiredis's reader at a time. */
#define FEED_BYTES 2048

/* The usual size of a link's output buffer. */
#define OBUF_BYTES (64 * 1024)

/* ---- state ---- */

static LinkState
get_state (RankRedisLink *link)
{
  LinkState s;

  g_mutex_lock (&link->lock);
  s = link->state;
  g_mutex_unlock (&link->lock);
  return s;
}

static void
set_state (RankRedisLink *link, LinkState state, const char *why)
{
  g_mutex_lock (&link->lock);
  if (state != link->state)
    {
      if (state == LINK_UP)
        g_message ("redis %s: connected", link->name);
      else if (why != NULL && (link->state == LINK_UP || !link->attempted))
        g_warning ("redis %s: unavailable: %s", link->name, why);
    }
  link->state = state;
  rank_metrics_link_up (link->metrics, state == LINK_UP);
  if (state != LINK_CONNECTING)
    link->attempted = TRUE;
  if (why != NULL)
    {
      g_free (link->last_error);
      link->last_error = g_strdup (why);
    }
  g_cond_broadcast (&link->changed);
  g_mutex_unlock (&link->lock);
}

/* ---- callbacks ---- */

static void
run_failure (gpointer data)
{
  Failure *f = data;

  f->func (NULL, f->error, f->data);
  g_error_free (f->error);
  g_free (f);
}

/* Fails a command later in this loop iteration, never inside the caller's
 * own rank_redis_link_send. */
static void
fail_later (RankRedisLink *link, RankRedisReplyFunc func, gpointer data,
            GError *error)
{
  Failure *f = g_new (Failure, 1);

  rank_metrics_link_failed (link->metrics);
  f->func = func;
  f->data = data;
  f->error = error;
  rank_loop_post (link->loop, run_failure, f);
}

static GError *unavailable (const char *fmt, ...) G_GNUC_PRINTF (1, 2);

static GError *
unavailable (const char *fmt, ...)
{
  va_list ap;
  GError *error;

  va_start (ap, fmt);
  error = g_error_new_valist (RANK_ERROR, RANK_ERROR_UNAVAILABLE, fmt, ap);
  va_end (ap);
  return error;
}

/* ---- commands awaiting replies ---- */

static Pending *
pending_at (RankRedisLink *link, gsize i)
{
  return &link->ring[(link->ring_head + i) % link->ring_cap];
}

static void
push_pending (RankRedisLink *link, RankRedisReplyFunc func, gpointer data,
              gboolean startup)
{
  Pending *s;

  if (link->ring_len == link->ring_cap)
    {
      gsize cap = MAX (link->ring_cap * 2, (gsize) 256);
      Pending *ring = g_new (Pending, cap);

      for (gsize i = 0; i < link->ring_len; i++)
        ring[i] = *pending_at (link, i);
      g_free (link->ring);
      link->ring = ring;
      link->ring_cap = cap;
      link->ring_head = 0;
    }
  s = pending_at (link, link->ring_len);
  s->func = func;
  s->data = data;
  s->startup = startup;
  s->deadline = g_get_monotonic_time () + (gint64) link->timeout_ms * 1000;
  link->ring_len++;
}

static Pending
pop_pending (RankRedisLink *link)
{
  Pending s = link->ring[link->ring_head];

  link->ring_head = (link->ring_head + 1) % link->ring_cap;
  link->ring_len--;
  if (link->expired > 0)
    link->expired--;
  /* Empty after a burst: back to the usual size. */
  if (link->ring_len == 0 && link->ring_cap > 4096)
    {
      g_free (link->ring);
      link->ring = NULL;
      link->ring_cap = link->ring_head = 0;
    }
  return s;
}

/* The most a header "<c><n>\r\n" takes: c, 20 digits, CRLF. */
#define HEADER_MAX (1 + 20 + 2)

/* "<c><n>\r\n" (the header of an array or a bulk string) at p; returns
 * its end. */
static char *
put_header (char *p, char c, gsize n)
{
  char digits[20], *d = digits + sizeof digits;

  do
    *--d = (char) ('0' + n % 10);
  while ((n /= 10) > 0);
  *p++ = c;
  memcpy (p, d, (gsize) (digits + sizeof digits - d));
  p += digits + sizeof digits - d;
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

/* The command in Redis's protocol, written straight into out: what
 * hiredis's redisFormatCommandArgv makes, without its allocation and
 * copy (rankd formats every command it sends). out grows once, for the
 * most the command can take; GString's appends, one per piece, were a
 * tenth of rankd's instructions per GetRank (callgrind). */
static void
format_command (GString *out, int argc, const char **argv,
                const size_t *argvlen)
{
  gsize start = out->len, most = HEADER_MAX;
  char *p;

  for (int i = 0; i < argc; i++)
    most += HEADER_MAX + 2 + (argvlen != NULL ? argvlen[i] : strlen (argv[i]));
  g_string_set_size (out, start + most);
  p = put_header (out->str + start, '*', (gsize) argc);
  for (int i = 0; i < argc; i++)
    {
      gsize len = argvlen != NULL ? argvlen[i] : strlen (argv[i]);

      p = put_header (p, '$', len);
      memcpy (p, argv[i], len);
      p += len;
      *p++ = '\r';
      *p++ = '\n';
    }
  g_string_truncate (out, (gsize) (p - out->str));
}

/* ---- connection ---- */

static void
set_write_interest (RankRedisLink *link, gboolean want)
{
  if (link->watch != NULL && want != link->want_write)
    {
      link->want_write = want;
      rank_loop_modify (link->watch, EPOLLIN | (want ? EPOLLOUT : 0));
    }
}

static void
disconnect (RankRedisLink *link, LinkState next, const char *why)
{
  rank_loop_unwatch (link->watch);
  link->watch = NULL;
  link->want_write = FALSE;
  if (link->fd >= 0)
    close (link->fd);
  g_clear_pointer (&link->session, rank_tls_session_free);
  link->tls_up = link->write_wants_read = link->read_wants_write = FALSE;
  link->fd = -1;
  link->tcp_up = FALSE;
  link->handshake_left = 0;
  g_clear_pointer (&link->reader, redisReaderFree);
  g_string_truncate (link->obuf, 0);
  link->opos = 0;
  rank_metrics_link_dropped (link->metrics);
  while (link->ring_len > 0)
    {
      Pending s = pop_pending (link);

      if (s.func != NULL)
        fail_later (link, s.func, s.data,
                    unavailable ("lost the connection to Redis at %s: %s",
                                 link->name, why));
    }
  link->expired = 0;
  if (next == LINK_DOWN)
    {
      link->retry_at
          = g_get_monotonic_time () + (gint64) link->backoff_ms * 1000;
      link->backoff_ms = MIN (link->backoff_ms * 2, RANK_RECONNECT_MAX_MS);
    }
  else
    link->retry_at = 0; /* reconnect at once */
  set_state (link, next, why);
}

/* An attempt that failed before the connection was up (a refused AUTH,
 * a TLS handshake): said once per attempt, and retried after the
 * back-off, which keeps growing. */
static void
attempt_failed (RankRedisLink *link, const char *why)
{
  g_warning ("redis %s: %s; retrying in %d ms", link->name, why,
             link->backoff_ms);
  /* Said: the state change need not say it again. */
  g_mutex_lock (&link->lock);
  link->attempted = TRUE;
  g_mutex_unlock (&link->lock);
  disconnect (link, LINK_DOWN, why);
}

/* The connection failed: before it was up, a failed attempt; after, a
 * lost connection, replaced at once. */
static void
drop (RankRedisLink *link, const char *why)
{
  if (get_state (link) == LINK_CONNECTING)
    attempt_failed (link, why);
  else
    disconnect (link, LINK_CONNECTING, why);
}

static void
begin_connect (RankRedisLink *link)
{
  g_autoptr (GError) error = NULL;

  link->attempts++;
  link->fd = rank_address_connect_start (&link->address, &error);
  if (link->fd < 0)
    {
      disconnect (link, LINK_DOWN, error->message);
      return;
    }
  set_state (link, LINK_CONNECTING, NULL);
  link->connect_deadline
      = g_get_monotonic_time () + (gint64) link->timeout_ms * 1000;
  link->watch = rank_loop_watch (link->loop, link->fd, EPOLLIN | EPOLLOUT,
                                 io_ready, link);
  link->want_write = TRUE;
  link->handshake_left = link->startup->len;
  link->reader = redisReaderCreateWithFunctions (rank_reply_functions ());
  /* The start-up commands go first, ahead of anything already queued. */
  for (guint i = link->startup->len; i > 0; i--)
    {
      GString *cmd = g_ptr_array_index (link->startup, i - 1);

      g_string_prepend_len (link->obuf, cmd->str, (gssize) cmd->len);
    }
  {
    /* Matching entries, in front of the queued ones. */
    gsize queued = link->ring_len;
    Pending *old = g_new (Pending, MAX (queued, (gsize) 1));

    for (gsize i = 0; i < queued; i++)
      old[i] = *pending_at (link, i);
    link->ring_len = 0;
    link->ring_head = 0;
    for (guint i = 0; i < link->startup->len; i++)
      push_pending (link, NULL, NULL, TRUE);
    link->startup_next = 0;
    for (gsize i = 0; i < queued; i++)
      {
        push_pending (link, old[i].func, old[i].data, FALSE);
        pending_at (link, link->ring_len - 1)->deadline = old[i].deadline;
      }
    g_free (old);
  }
}

/* The connection is up and every start-up command succeeded. */
static void
handshake_done (RankRedisLink *link)
{
  link->backoff_ms = RANK_RECONNECT_MIN_MS;
  link->connections++;
  set_state (link, LINK_UP, NULL);
}

static void
finish_connect (RankRedisLink *link)
{
  int err = 0;
  socklen_t len = sizeof err;

  if (getsockopt (link->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
    err = errno;
  if (err != 0)
    {
      g_autofree char *why = g_strdup_printf ("cannot connect to %s: %s",
                                              link->name, g_strerror (err));
      disconnect (link, LINK_DOWN, why);
      return;
    }
  link->tcp_up = TRUE;
  if (link->tls != NULL)
    link->session
        = rank_redis_tls_session (link->tls, link->fd, link->address.host);
  else if (link->handshake_left == 0)
    handshake_done (link);
}

/* Advances the TLS handshake: TRUE once it is done (the start-up commands
 * may go), FALSE while it waits for the socket or after it failed (the
 * link is then down). */
static gboolean
advance_tls (RankRedisLink *link)
{
  g_autoptr (GError) error = NULL;

  switch (rank_tls_handshake (link->session, &error))
    {
    case RANK_TLS_OK:
      link->tls_up = TRUE;
      if (link->handshake_left == 0)
        handshake_done (link);
      return TRUE;
    case RANK_TLS_WANT_READ:
      set_write_interest (link, FALSE);
      return FALSE;
    case RANK_TLS_WANT_WRITE:
      set_write_interest (link, TRUE);
      return FALSE;
    case RANK_TLS_CLOSED:
    case RANK_TLS_FAILED:
      break;
    }
  attempt_failed (link, error != NULL ? error->message
                                      : "TLS handshake failed: the "
                                        "connection was closed");
  return FALSE;
}

/* ---- I/O ---- */

/* The output buffer is empty: one that grew for a burst (thousands of
 * commands in one iteration) goes back to its usual size, so that a quiet
 * link holds little. */
static void
shrink_output (RankRedisLink *link)
{
  if (link->obuf->allocated_len > 4 * OBUF_BYTES)
    {
      g_string_free (link->obuf, TRUE);
      link->obuf = g_string_sized_new (OBUF_BYTES);
    }
  else
    g_string_truncate (link->obuf, 0);
}

/* The output is all written: the buffer back to its usual size, and no
 * more waiting for the socket to take more. */
static void
output_done (RankRedisLink *link)
{
  shrink_output (link);
  link->opos = 0;
  link->write_wants_read = FALSE;
  set_write_interest (link, FALSE);
}

/* flush_output through the TLS session. */
static gboolean
flush_tls (RankRedisLink *link)
{
  while (link->opos < link->obuf->len)
    {
      struct iovec iov
          = { link->obuf->str + link->opos, link->obuf->len - link->opos };
      g_autoptr (GError) error = NULL;
      gsize wrote = 0;
      RankTlsStatus s
          = rank_tls_writev (link->session, &iov, 1, &wrote, &error);

      /* A write that waits is retried from here, the same bytes first. */
      link->opos += wrote;
      switch (s)
        {
        case RANK_TLS_OK:
          continue;
        case RANK_TLS_WANT_WRITE:
          link->write_wants_read = FALSE;
          set_write_interest (link, TRUE);
          return TRUE;
        case RANK_TLS_WANT_READ:
          link->write_wants_read = TRUE;
          set_write_interest (link, FALSE);
          return TRUE;
        case RANK_TLS_CLOSED:
        case RANK_TLS_FAILED:
          {
            /* Redis may have said why before it closed (an alert: it
             * wants a client certificate); that is the reason to give. */
            g_autoptr (GError) alert = NULL;
            gsize got = 0;

            if (rank_tls_read (link->session, link->rbuf, sizeof link->rbuf,
                               &got, &alert)
                    == RANK_TLS_FAILED
                && strstr (alert->message, "alert") != NULL)
              {
                g_clear_error (&error);
                error = g_steal_pointer (&alert);
              }
            drop (link, error != NULL ? error->message
                                      : "connection closed by Redis");
            return FALSE;
          }
        }
    }
  output_done (link);
  return TRUE;
}

static gboolean
flush_output (RankRedisLink *link)
{
  rank_metrics_link_flushed (link->metrics);
  if (link->session != NULL)
    return flush_tls (link);
  while (link->opos < link->obuf->len)
    {
      ssize_t n
          = send (link->fd, link->obuf->str + link->opos,
                  link->obuf->len - link->opos, MSG_NOSIGNAL | MSG_DONTWAIT);

      if (n > 0)
        link->opos += (gsize) n;
      else if (n < 0 && errno == EINTR)
        continue;
      else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        {
          set_write_interest (link, TRUE);
          return TRUE;
        }
      else
        {
          g_autofree char *why
              = g_strdup_printf ("write failed: %s", g_strerror (errno));
          drop (link, why);
          return FALSE;
        }
    }
  output_done (link);
  return TRUE;
}

static void
deliver (RankRedisLink *link, RankReply *reply)
{
  Pending s;

  if (link->ring_len == 0 && link->push_func != NULL)
    {
      link->push_func (reply, NULL, link->push_data);
      rank_reply_free (reply);
      return;
    }
  if (link->ring_len == 0)
    {
      rank_reply_free (reply);
      disconnect (link, LINK_CONNECTING, "reply without a request");
      return;
    }
  s = pop_pending (link);
  link->delivered++;
  if (s.func != NULL)
    s.func (reply, NULL, s.data);
  else if (s.startup && reply->type == RANK_REPLY_ERROR
           && !g_array_index (link->startup_label, gboolean,
                              link->startup_next))
    {
      /* A connection whose AUTH or SCRIPT LOAD failed cannot serve: what
       * waits on it fails with Unavailable, naming the reply (never the
       * command: it may carry a password), and the link retries after the
       * back-off, which keeps growing. */
      gboolean auth = g_str_has_prefix (reply->str, "WRONGPASS")
                      || g_str_has_prefix (reply->str, "NOAUTH")
                      || g_str_has_prefix (reply->str, "ERR AUTH")
                      || strstr (reply->str, "invalid password") != NULL;
      g_autofree char *why = g_strdup_printf (
          "%s: %s", auth ? "authentication failed" : "start-up command failed",
          reply->str);

      rank_reply_free (reply);
      attempt_failed (link, why);
      return;
    }
  else if (s.startup)
    {
      if (reply->type == RANK_REPLY_ERROR)
        g_debug ("redis %s: a start-up label was refused: %s", link->name,
                 reply->str);
      link->startup_next++;
      if (--link->handshake_left == 0)
        handshake_done (link);
    }
  rank_reply_free (reply);
}

/* Hands n bytes of rbuf to the reader and delivers the replies they
 * complete: FALSE once the connection is gone or replaced. Fed a piece at
 * a time, each drained before the next: the reader moves what is left of
 * its buffer up once it has consumed 1 KiB, so a whole read of pipelined
 * replies fed at once was moved over and over (sdsrange: 7% of rankd's
 * instructions per GetTopN, callgrind). A reply's callback may drop the
 * connection, and even begin another: what is left of this read is not
 * for its reader. */
static gboolean
feed (RankRedisLink *link, gsize n)
{
  guint64 attempt = link->attempts;
  void *reply = NULL;

  for (gsize at = 0; at < n; at += FEED_BYTES)
    {
      gsize piece = MIN (FEED_BYTES, n - at);

      if (redisReaderFeed (link->reader, link->rbuf + at, piece) != REDIS_OK)
        {
          drop (link, "reply buffer error");
          return FALSE;
        }
      for (;;)
        {
          if (redisReaderGetReply (link->reader, &reply) != REDIS_OK)
            {
              g_autofree char *why = g_strdup_printf ("protocol error: %s",
                                                      link->reader->errstr);
              drop (link, why);
              return FALSE;
            }
          if (reply == NULL)
            break;
          deliver (link, reply);
          if (link->fd < 0 || link->attempts != attempt)
            return FALSE;
        }
    }
  return TRUE;
}

/* read_input through the TLS session: a read takes one record at a time,
 * so until the session has nothing left and the socket gave less than
 * asked (rank_tls_drained: the next bytes raise an event, as a short recv
 * says in plain), or it wants more from the socket. */
static void
read_tls (RankRedisLink *link)
{
  link->read_wants_write = FALSE;
  for (;;)
    {
      g_autoptr (GError) error = NULL;
      gsize got = 0;

      switch (rank_tls_read (link->session, link->rbuf, sizeof link->rbuf, &got,
                             &error))
        {
        case RANK_TLS_OK:
          if (!feed (link, got) || rank_tls_drained (link->session))
            return;
          continue;
        case RANK_TLS_WANT_READ:
          return;
        case RANK_TLS_WANT_WRITE:
          link->read_wants_write = TRUE;
          set_write_interest (link, TRUE);
          return;
        case RANK_TLS_CLOSED:
          drop (link, "connection closed by Redis");
          return;
        case RANK_TLS_FAILED:
          drop (link, error->message);
          return;
        }
    }
}

static void
read_input (RankRedisLink *link)
{
  if (link->session != NULL)
    {
      read_tls (link);
      return;
    }
  for (;;)
    {
      ssize_t n = recv (link->fd, link->rbuf, sizeof link->rbuf, MSG_DONTWAIT);

      if (n == 0)
        {
          drop (link, "connection closed by Redis");
          return;
        }
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          if (errno != EAGAIN && errno != EWOULDBLOCK)
            {
              g_autofree char *why
                  = g_strdup_printf ("read failed: %s", g_strerror (errno));
              drop (link, why);
            }
          return;
        }
      if (!feed (link, (gsize) n) || (size_t) n < sizeof link->rbuf)
        return;
    }
}

static void
io_ready (gpointer data, guint32 events)
{
  RankRedisLink *link = data;

  if (!link->tcp_up)
    {
      if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
        return;
      finish_connect (link);
      if (link->fd < 0)
        return;
    }
  if (link->session != NULL && !link->tls_up)
    {
      if (!advance_tls (link))
        return;
      /* Done: the start-up commands go now. */
      events |= EPOLLOUT;
    }
  if ((events & EPOLLOUT)
      || (link->write_wants_read && (events & (EPOLLIN | EPOLLERR))))
    if (!flush_output (link))
      return;
  if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP))
      || (link->read_wants_write && (events & EPOLLOUT)))
    read_input (link);
}

/* Expires deadlines; returns ms until the next one (-1: none). */
static int
expire (RankRedisLink *link, gint64 now)
{
  while (link->expired < link->ring_len)
    {
      Pending *s = pending_at (link, link->expired);

      if (s->deadline > now)
        break;
      if (s->func != NULL)
        {
          fail_later (link, s->func, s->data,
                      unavailable ("Redis at %s did not answer within %d ms",
                                   link->name, link->timeout_ms));
          s->func = NULL;
        }
      link->expired++;
    }
  if (link->expired > 0
      && pending_at (link, 0)->deadline + (gint64) RANK_REDIS_STALL_MS * 1000
             < now)
    {
      disconnect (link, LINK_CONNECTING, "no reply for too long");
      return 0;
    }
  if (link->expired < link->ring_len)
    return (int) ((pending_at (link, link->expired)->deadline - now) / 1000)
           + 1;
  if (link->expired > 0)
    return (int) ((pending_at (link, 0)->deadline
                   + (gint64) RANK_REDIS_STALL_MS * 1000 - now)
                  / 1000)
           + 1;
  return -1;
}

/* Before the loop sleeps: connect if due, write what this iteration
 * queued, expire deadlines. */
static int
prepare (gpointer data)
{
  RankRedisLink *link = data;
  gint64 now = g_get_monotonic_time ();
  LinkState state = get_state (link);
  int timeout;

  if (link->fd < 0)
    {
      if (link->retry_at > now)
        return (int) ((link->retry_at - now) / 1000) + 1;
      begin_connect (link);
      if (link->fd < 0)
        return RANK_RECONNECT_MIN_MS;
      state = LINK_CONNECTING;
    }
  if (state == LINK_CONNECTING)
    {
      if (now > link->connect_deadline)
        {
          g_autofree char *why = g_strdup_printf (
              "%s %s: no answer within %d ms",
              link->session != NULL && !link->tls_up ? "TLS handshake with"
                                                     : "cannot connect to",
              link->name, link->timeout_ms);
          disconnect (link, LINK_DOWN, why);
          return (int) (link->backoff_ms);
        }
    }
  else
    {
      /* A reply that came while this thread was busy (other work of the
       * loop, a loaded machine) counts before a deadline does: Redis
       * answered. If any did, the loop goes round at once, so that what
       * their callbacks sent leaves (on every link), and expires the rest
       * then. */
      if (link->expired < link->ring_len
          && pending_at (link, link->expired)->deadline <= now)
        {
          guint64 delivered = link->delivered;

          read_input (link);
          if (link->fd < 0 || link->delivered != delivered)
            return 0;
        }
      if (link->obuf->len > link->opos && !link->want_write
          && !flush_output (link))
        return 0;
    }
  timeout = expire (link, now);
  if (state == LINK_CONNECTING)
    {
      int until = (int) ((link->connect_deadline - now) / 1000) + 1;

      timeout = timeout < 0 ? until : MIN (timeout, until);
    }
  return timeout;
}

/* ---- public ---- */

void
rank_redis_link_send (RankRedisLink *link, int argc, const char **argv,
                      const size_t *argvlen, RankRedisReplyFunc func,
                      gpointer data)
{
  if (get_state (link) == LINK_DOWN)
    {
      g_autofree char *why = NULL;

      if (func == NULL)
        return;
      g_mutex_lock (&link->lock);
      why = g_strdup (link->last_error);
      g_mutex_unlock (&link->lock);
      fail_later (
          link, func, data,
          unavailable ("Redis at %s is unavailable: %s", link->name, why));
      return;
    }
  format_command (link->obuf, argc, argv, argvlen);
  push_pending (link, func, data, FALSE);
  rank_metrics_link_queued (link->metrics);
}

static void
free_string (gpointer s)
{
  g_string_free (s, TRUE);
}

RankRedisLink *
rank_redis_link_new (RankLoop *loop, const RankAddress *address, int timeout_ms,
                     RankRedisTls *tls)
{
  RankRedisLink *link = g_new0 (RankRedisLink, 1);

  if (tls != NULL && address->path == NULL)
    link->tls = rank_redis_tls_ref (tls);
  link->loop = loop;
  link->address.host = g_strdup (address->host);
  link->address.port = address->port;
  link->address.path = g_strdup (address->path);
  link->name = rank_address_to_string (address);
  link->metrics = rank_metrics_link_new (link->name);
  link->timeout_ms = timeout_ms;
  link->startup = g_ptr_array_new_with_free_func (free_string);
  link->startup_label = g_array_new (FALSE, FALSE, sizeof (gboolean));
  g_mutex_init (&link->lock);
  g_cond_init (&link->changed);
  link->state = LINK_DOWN;
  link->last_error = g_strdup ("not connected yet");
  link->fd = -1;
  link->retry_at = G_MAXINT64; /* until started */
  link->backoff_ms = RANK_RECONNECT_MIN_MS;
  link->obuf = g_string_sized_new (OBUF_BYTES);
  rank_loop_add_prepare (loop, prepare, link);
  return link;
}

void
rank_redis_link_add_startup (RankRedisLink *link, int argc, const char **argv,
                             const size_t *argvlen)
{
  GString *cmd = g_string_new (NULL);
  gboolean label = argc == 3 && g_ascii_strcasecmp (argv[0], "CLIENT") == 0
                   && g_ascii_strcasecmp (argv[1], "SETNAME") == 0;

  format_command (cmd, argc, argv, argvlen);
  g_ptr_array_add (link->startup, cmd);
  g_array_append_val (link->startup_label, label);
}

static void
start_now (gpointer data)
{
  RankRedisLink *link = data;

  link->retry_at = 0;
}

void
rank_redis_link_start (RankRedisLink *link)
{
  rank_loop_post (link->loop, start_now, link);
}

void
rank_redis_link_set_push (RankRedisLink *link, RankRedisReplyFunc func,
                          gpointer data)
{
  link->push_func = func;
  link->push_data = data;
}

guint
rank_redis_link_connections (RankRedisLink *link)
{
  return link->connections;
}

gboolean
rank_redis_link_is_up (RankRedisLink *link)
{
  return get_state (link) == LINK_UP;
}

void
rank_redis_link_connect_now (RankRedisLink *link)
{
  if (link->fd >= 0)
    return;
  link->retry_at = 0;
  begin_connect (link);
}

gboolean
rank_redis_link_wait_ready (RankRedisLink *link, int timeout_ms, GError **error)
{
  gint64 end = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  gboolean up;

  g_mutex_lock (&link->lock);
  while (link->state != LINK_UP
         && g_cond_wait_until (&link->changed, &link->lock, end))
    ;
  up = link->state == LINK_UP;
  if (!up)
    g_set_error (error, RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                 "Redis at %s is unavailable: %s", link->name,
                 link->last_error);
  g_mutex_unlock (&link->lock);
  return up;
}

const char *
rank_redis_link_name (RankRedisLink *link)
{
  return link->name;
}

void
rank_redis_link_free (RankRedisLink *link)
{
  if (link == NULL)
    return;
  g_message ("redis %s: disconnected: rankd is stopping", link->name);
  while (link->ring_len > 0)
    {
      Pending s = pop_pending (link);
      g_autoptr (GError) error
          = unavailable ("Redis at %s: rankd is stopping", link->name);

      if (s.func != NULL)
        s.func (NULL, error, s.data);
    }
  rank_loop_unwatch (link->watch); /* freed with the loop */
  rank_tls_session_free (link->session);
  rank_redis_tls_unref (link->tls);
  if (link->fd >= 0)
    close (link->fd);
  g_clear_pointer (&link->reader, redisReaderFree);
  g_free (link->ring);
  g_string_free (link->obuf, TRUE);
  g_ptr_array_unref (link->startup);
  g_array_unref (link->startup_label);
  g_free (link->last_error);
  g_free (link->name);
  rank_metrics_link_free (link->metrics);
  rank_address_clear (&link->address);
  g_cond_clear (&link->changed);
  g_mutex_clear (&link->lock);
  g_free (link);
}
