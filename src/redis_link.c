/* redis_link.c -- the shared pipelined Redis connection (see redis_link.h).
 *
 * Threads: callers only touch the submit queue (under lock) and their own
 * call's state word; everything else belongs to the I/O thread.
 *
 * Calls move: submit queue -> (I/O thread) formatted into obuf and recorded
 * in the ring of slots awaiting replies -> completed when their reply, an
 * error or their deadline comes. A slot whose deadline passed keeps its place
 * in the ring (its reply will still come and is dropped) but its call is
 * completed with an error and forgotten. If the oldest slot waits longer than
 * RANK_REDIS_STALL_MS, the connection is presumed dead and replaced.
 *
 * A caller sleeps on a futex in its own call: state PENDING -> SLEEPING by
 * the caller, -> DONE by the I/O thread, which wakes only sleeping callers.
 */
#include "redis_link.h"

#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "error.h"
#include "constants.h"

enum
{
  CALL_PENDING = 0,
  CALL_DONE = 1,
  CALL_SLEEPING = 2,
};

typedef enum
{
  LINK_CONNECTING, /* calls queue and wait for the attempt */
  LINK_UP,
  LINK_DOWN, /* last attempt failed: calls fail at once until the next */
} LinkState;

typedef struct
{
  RankRedisCall *call; /* NULL: startup command, or abandoned after timeout */
  gint64 deadline;     /* monotonic us */
  gboolean startup;
} Slot;

struct _RankRedisLink
{
  RankAddress address;
  char *name;
  int timeout_ms;
  GPtrArray *startup; /* GString: formatted commands */

  GMutex lock; /* guards the fields up to the I/O-thread-only ones */
  GCond changed;
  RankRedisCall *queue_head, *queue_tail;
  gboolean io_sleeping;
  LinkState state;
  gboolean attempted;
  gboolean stopping;
  char *last_error;

  int event_fd;
  GThread *thread;

  /* I/O thread only */
  int fd;
  redisReader *reader;
  GString *obuf;
  gsize opos;
  Slot *ring;
  gsize ring_cap, ring_head, ring_len;
  gsize expired; /* leading slots already past their deadline */
  char rbuf[64 * 1024];
};

/* ---- waiting ---- */

static void
futex_wait (int *addr, int val)
{
  syscall (SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void
futex_wake (int *addr)
{
  syscall (SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void
rank_redis_call_wait (RankRedisCall *call)
{
  int expected = CALL_PENDING;

  if (__atomic_compare_exchange_n (&call->state, &expected, CALL_SLEEPING,
                                   FALSE, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE))
    expected = CALL_SLEEPING;
  while (expected != CALL_DONE)
    {
      futex_wait (&call->state, CALL_SLEEPING);
      expected = __atomic_load_n (&call->state, __ATOMIC_ACQUIRE);
    }
}

static void
complete (RankRedisCall *call, redisReply *reply, GError *error)
{
  call->reply = reply;
  call->error = error;
  /* The caller may return (and reuse the call's memory) as soon as it sees
   * DONE; a wake on a reused address is harmless, waiters re-check. */
  if (__atomic_exchange_n (&call->state, CALL_DONE, __ATOMIC_RELEASE)
      == CALL_SLEEPING)
    futex_wake (&call->state);
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

static void
fail (RankRedisCall *call, GError *error)
{
  complete (call, NULL, error);
}

/* ---- submit side ---- */

static void
wake_io (RankRedisLink *link)
{
  guint64 one = 1;

  if (write (link->event_fd, &one, sizeof one) < 0 && errno != EAGAIN)
    g_warning ("redis link %s: cannot wake I/O thread: %s", link->name,
               g_strerror (errno));
}

void
rank_redis_link_submit (RankRedisLink *link, RankRedisCall *call)
{
  gboolean wake;

  call->reply = NULL;
  call->error = NULL;
  call->state = CALL_PENDING;
  call->next = NULL;
  g_mutex_lock (&link->lock);
  if (link->state == LINK_DOWN || link->stopping)
    {
      g_autofree char *why
          = g_strdup (link->stopping ? "rankd is stopping" : link->last_error);

      g_mutex_unlock (&link->lock);
      fail (call,
            unavailable ("Redis at %s is unavailable: %s", link->name, why));
      return;
    }
  if (link->queue_tail != NULL)
    link->queue_tail->next = call;
  else
    link->queue_head = call;
  link->queue_tail = call;
  wake = link->io_sleeping;
  link->io_sleeping = FALSE;
  g_mutex_unlock (&link->lock);
  if (wake)
    wake_io (link);
}

redisReply *
rank_redis_link_command (RankRedisLink *link, int argc, const char **argv,
                         const size_t *argvlen, GError **error)
{
  RankRedisCall call = { .argc = argc, .argv = argv, .argvlen = argvlen };

  rank_redis_link_submit (link, &call);
  rank_redis_call_wait (&call);
  if (call.error != NULL)
    {
      g_propagate_error (error, call.error);
      return NULL;
    }
  return call.reply;
}

/* ---- I/O thread ---- */

static void
format_command (GString *out, int argc, const char **argv,
                const size_t *argvlen)
{
  g_string_append_printf (out, "*%d\r\n", argc);
  for (int i = 0; i < argc; i++)
    {
      size_t len = argvlen != NULL ? argvlen[i] : strlen (argv[i]);

      g_string_append_printf (out, "$%zu\r\n", len);
      g_string_append_len (out, argv[i], (gssize) len);
      g_string_append_len (out, "\r\n", 2);
    }
}

static Slot *
slot_at (RankRedisLink *link, gsize i)
{
  return &link->ring[(link->ring_head + i) % link->ring_cap];
}

static void
push_slot (RankRedisLink *link, RankRedisCall *call, gboolean startup)
{
  if (link->ring_len == link->ring_cap)
    {
      gsize cap = MAX (link->ring_cap * 2, (gsize) 256);
      Slot *ring = g_new (Slot, cap);

      for (gsize i = 0; i < link->ring_len; i++)
        ring[i] = *slot_at (link, i);
      g_free (link->ring);
      link->ring = ring;
      link->ring_cap = cap;
      link->ring_head = 0;
    }
  Slot *s = &link->ring[(link->ring_head + link->ring_len) % link->ring_cap];
  s->call = call;
  s->startup = startup;
  s->deadline = g_get_monotonic_time () + (gint64) link->timeout_ms * 1000;
  link->ring_len++;
}

static Slot
pop_slot (RankRedisLink *link)
{
  Slot s = link->ring[link->ring_head];

  link->ring_head = (link->ring_head + 1) % link->ring_cap;
  link->ring_len--;
  if (link->expired > 0)
    link->expired--;
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
      else if (link->stopping)
        g_message ("redis %s: disconnected: %s", link->name, why);
      else if (link->state == LINK_UP || !link->attempted)
        g_warning ("redis %s: unavailable: %s", link->name, why);
    }
  link->state = state;
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

static RankRedisCall *
take_queue (RankRedisLink *link)
{
  RankRedisCall *head;

  g_mutex_lock (&link->lock);
  head = link->queue_head;
  link->queue_head = link->queue_tail = NULL;
  g_mutex_unlock (&link->lock);
  return head;
}

static void
fail_queue (RankRedisLink *link, const char *why)
{
  RankRedisCall *call = take_queue (link);

  while (call != NULL)
    {
      RankRedisCall *next = call->next;

      fail (call,
            unavailable ("Redis at %s is unavailable: %s", link->name, why));
      call = next;
    }
}

static void
disconnect (RankRedisLink *link, const char *why)
{
  if (link->fd >= 0)
    close (link->fd);
  link->fd = -1;
  g_clear_pointer (&link->reader, redisReaderFree);
  g_string_truncate (link->obuf, 0);
  link->opos = 0;
  while (link->ring_len > 0)
    {
      Slot s = pop_slot (link);

      if (s.call != NULL)
        fail (s.call, unavailable ("lost the connection to Redis at %s: %s",
                                   link->name, why));
    }
  link->expired = 0;
  set_state (link, LINK_CONNECTING, why);
}

static gboolean
connect_link (RankRedisLink *link)
{
  g_autoptr (GError) error = NULL;

  link->fd = rank_address_connect (&link->address, link->timeout_ms, &error);
  if (link->fd < 0)
    {
      set_state (link, LINK_DOWN, error->message);
      fail_queue (link, error->message);
      return FALSE;
    }
  link->reader = redisReaderCreate ();
  for (guint i = 0; i < link->startup->len; i++)
    {
      GString *cmd = g_ptr_array_index (link->startup, i);

      g_string_append_len (link->obuf, cmd->str, (gssize) cmd->len);
      push_slot (link, NULL, TRUE);
    }
  set_state (link, LINK_UP, NULL);
  return TRUE;
}

/* Sleeps for ms or until stopped. */
static void
backoff_sleep (RankRedisLink *link, int ms)
{
  struct pollfd pfd = { link->event_fd, POLLIN, 0 };
  guint64 drain;

  if (poll (&pfd, 1, ms) > 0)
    (void) read (link->event_fd, &drain, sizeof drain);
}

static gboolean
flush_output (RankRedisLink *link)
{
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
        return TRUE;
      else
        {
          g_autofree char *why
              = g_strdup_printf ("write failed: %s", g_strerror (errno));
          disconnect (link, why);
          return FALSE;
        }
    }
  g_string_truncate (link->obuf, 0);
  link->opos = 0;
  return TRUE;
}

static void
deliver (RankRedisLink *link, redisReply *reply)
{
  Slot s;

  if (link->ring_len == 0)
    {
      freeReplyObject (reply);
      disconnect (link, "reply without a request");
      return;
    }
  s = pop_slot (link);
  if (s.call != NULL)
    {
      complete (s.call, reply, NULL);
      return;
    }
  if (s.startup && reply->type == REDIS_REPLY_ERROR)
    g_warning ("redis %s: start-up command failed: %s", link->name, reply->str);
  freeReplyObject (reply);
}

static gboolean
read_input (RankRedisLink *link)
{
  for (;;)
    {
      ssize_t n = recv (link->fd, link->rbuf, sizeof link->rbuf, MSG_DONTWAIT);
      void *reply = NULL;

      if (n == 0)
        {
          disconnect (link, "connection closed by Redis");
          return FALSE;
        }
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK)
            return TRUE;
          g_autofree char *why
              = g_strdup_printf ("read failed: %s", g_strerror (errno));
          disconnect (link, why);
          return FALSE;
        }
      if (redisReaderFeed (link->reader, link->rbuf, (size_t) n) != REDIS_OK)
        {
          disconnect (link, "reply buffer error");
          return FALSE;
        }
      while (link->fd >= 0)
        {
          if (redisReaderGetReply (link->reader, &reply) != REDIS_OK)
            {
              g_autofree char *why = g_strdup_printf ("protocol error: %s",
                                                      link->reader->errstr);
              disconnect (link, why);
              return FALSE;
            }
          if (reply == NULL)
            break;
          deliver (link, reply);
        }
      if (link->fd < 0)
        return FALSE;
      if ((size_t) n < sizeof link->rbuf)
        return TRUE;
    }
}

/* Completes calls whose deadline passed; returns the poll timeout in ms
 * until the next deadline (-1: none). */
static int
expire (RankRedisLink *link)
{
  gint64 now = g_get_monotonic_time ();

  while (link->expired < link->ring_len)
    {
      Slot *s = slot_at (link, link->expired);

      if (s->deadline > now)
        break;
      if (s->call != NULL)
        {
          fail (s->call, unavailable ("Redis at %s did not answer within %d ms",
                                      link->name, link->timeout_ms));
          s->call = NULL;
        }
      link->expired++;
    }
  if (link->expired > 0
      && slot_at (link, 0)->deadline + (gint64) RANK_REDIS_STALL_MS * 1000
             < now)
    {
      disconnect (link, "no reply for too long");
      return 0;
    }
  if (link->expired < link->ring_len)
    return (int) ((slot_at (link, link->expired)->deadline - now) / 1000) + 1;
  if (link->expired > 0)
    return (int) ((slot_at (link, 0)->deadline
                   + (gint64) RANK_REDIS_STALL_MS * 1000 - now)
                  / 1000)
           + 1;
  return -1;
}

static gboolean
stopping (RankRedisLink *link)
{
  gboolean stop;

  g_mutex_lock (&link->lock);
  stop = link->stopping;
  g_mutex_unlock (&link->lock);
  return stop;
}

static void
send_queued (RankRedisLink *link)
{
  RankRedisCall *call = take_queue (link);

  while (call != NULL)
    {
      RankRedisCall *next = call->next;

      format_command (link->obuf, call->argc, call->argv, call->argvlen);
      push_slot (link, call, FALSE);
      call = next;
    }
}

static gpointer
io_main (gpointer data)
{
  RankRedisLink *link = data;
  int backoff = RANK_RECONNECT_MIN_MS;

  while (!stopping (link))
    {
      if (link->fd < 0)
        {
          if (!connect_link (link))
            {
              backoff_sleep (link, backoff);
              backoff = MIN (backoff * 2, RANK_RECONNECT_MAX_MS);
              continue;
            }
          backoff = RANK_RECONNECT_MIN_MS;
        }
      send_queued (link);
      if (!flush_output (link))
        continue;

      int timeout = expire (link);
      if (link->fd < 0)
        continue;
      g_mutex_lock (&link->lock);
      if (link->queue_head != NULL || link->stopping)
        timeout = 0;
      else
        link->io_sleeping = TRUE;
      g_mutex_unlock (&link->lock);

      struct pollfd pfd[2] = {
        { link->fd, POLLIN | (link->obuf->len > 0 ? POLLOUT : 0), 0 },
        { link->event_fd, POLLIN, 0 },
      };
      int rc = poll (pfd, 2, timeout);

      g_mutex_lock (&link->lock);
      link->io_sleeping = FALSE;
      g_mutex_unlock (&link->lock);
      if (rc < 0 && errno != EINTR)
        g_error ("redis link %s: poll failed: %s", link->name,
                 g_strerror (errno));
      if (rc <= 0)
        continue;
      if (pfd[1].revents & POLLIN)
        {
          guint64 drain;

          (void) read (link->event_fd, &drain, sizeof drain);
        }
      if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))
        read_input (link);
    }
  if (link->fd >= 0)
    disconnect (link, "rankd is stopping");
  fail_queue (link, "rankd is stopping");
  return NULL;
}

/* ---- life cycle ---- */

static void
free_string (gpointer s)
{
  g_string_free (s, TRUE);
}

RankRedisLink *
rank_redis_link_new (const RankAddress *address, int timeout_ms)
{
  RankRedisLink *link = g_new0 (RankRedisLink, 1);

  link->address.host = g_strdup (address->host);
  link->address.port = address->port;
  link->address.path = g_strdup (address->path);
  link->name = rank_address_to_string (address);
  link->timeout_ms = timeout_ms;
  link->startup = g_ptr_array_new_with_free_func (free_string);
  g_mutex_init (&link->lock);
  g_cond_init (&link->changed);
  link->state = LINK_CONNECTING;
  link->last_error = g_strdup ("not connected yet");
  link->event_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (link->event_fd < 0)
    g_error ("eventfd: %s", g_strerror (errno));
  link->fd = -1;
  link->obuf = g_string_sized_new (64 * 1024);
  return link;
}

void
rank_redis_link_add_startup (RankRedisLink *link, int argc, const char **argv,
                             const size_t *argvlen)
{
  GString *cmd = g_string_new (NULL);

  format_command (cmd, argc, argv, argvlen);
  g_ptr_array_add (link->startup, cmd);
}

void
rank_redis_link_start (RankRedisLink *link)
{
  g_mutex_lock (&link->lock);
  if (link->thread == NULL)
    link->thread = g_thread_new ("redis-link", io_main, link);
  g_mutex_unlock (&link->lock);
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
  g_mutex_lock (&link->lock);
  link->stopping = TRUE;
  g_mutex_unlock (&link->lock);
  if (link->thread != NULL)
    {
      wake_io (link);
      g_thread_join (link->thread);
    }
  else
    fail_queue (link, "rankd is stopping");
  close (link->event_fd);
  g_free (link->ring);
  g_string_free (link->obuf, TRUE);
  g_ptr_array_unref (link->startup);
  g_free (link->last_error);
  g_free (link->name);
  rank_address_clear (&link->address);
  g_cond_clear (&link->changed);
  g_mutex_clear (&link->lock);
  g_free (link);
}
