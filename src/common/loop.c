/* loop.c -- epoll event loop (see loop.h).
 *
 * An iteration: run the prepare hooks (they flush output and tell how long
 * we may sleep), epoll_wait, dispatch events, then run posted functions.
 * Watches removed during dispatch are freed only after it, so an event
 * already fetched for a closed connection is dropped safely.
 */
#include "loop.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define MAX_EVENTS 256

struct _RankLoopWatch
{
  RankLoop *loop;
  int fd;
  RankLoopIoFunc func;
  gpointer data;
  gboolean removed;
};

typedef struct
{
  RankLoopPrepareFunc func;
  gpointer data;
} Prepare;

typedef struct
{
  RankLoopFunc func;
  gpointer data;
} Posted;

struct _RankLoop
{
  int epoll_fd;
  int wake_fd;
  RankLoopWatch wake_watch;
  GArray *prepares;
  GPtrArray *graveyard; /* watches removed during this iteration */
  GMutex lock;
  GArray *posted; /* under lock */
  GArray *running;
  gboolean quit;
  GThread *thread;
};

static void
drain_wake (gpointer data, guint32 events)
{
  RankLoop *loop = data;
  guint64 n;

  (void) events;
  while (read (loop->wake_fd, &n, sizeof n) > 0)
    ;
}

RankLoop *
rank_loop_new (void)
{
  RankLoop *loop = g_new0 (RankLoop, 1);
  struct epoll_event ev = { .events = EPOLLIN };

  loop->epoll_fd = epoll_create1 (EPOLL_CLOEXEC);
  loop->wake_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (loop->epoll_fd < 0 || loop->wake_fd < 0)
    g_error ("cannot create event loop: %s", g_strerror (errno));
  loop->wake_watch
      = (RankLoopWatch){ loop, loop->wake_fd, drain_wake, loop, FALSE };
  ev.data.ptr = &loop->wake_watch;
  epoll_ctl (loop->epoll_fd, EPOLL_CTL_ADD, loop->wake_fd, &ev);
  loop->prepares = g_array_new (FALSE, FALSE, sizeof (Prepare));
  loop->graveyard = g_ptr_array_new_with_free_func (g_free);
  loop->posted = g_array_new (FALSE, FALSE, sizeof (Posted));
  loop->running = g_array_new (FALSE, FALSE, sizeof (Posted));
  g_mutex_init (&loop->lock);
  return loop;
}

void
rank_loop_free (RankLoop *loop)
{
  if (loop == NULL)
    return;
  close (loop->epoll_fd);
  close (loop->wake_fd);
  g_array_unref (loop->prepares);
  g_ptr_array_unref (loop->graveyard);
  g_array_unref (loop->posted);
  g_array_unref (loop->running);
  g_mutex_clear (&loop->lock);
  g_free (loop);
}

RankLoopWatch *
rank_loop_watch (RankLoop *loop, int fd, guint32 events, RankLoopIoFunc func,
                 gpointer data)
{
  RankLoopWatch *w = g_new0 (RankLoopWatch, 1);
  struct epoll_event ev = { .events = events, .data.ptr = w };

  w->loop = loop;
  w->fd = fd;
  w->func = func;
  w->data = data;
  if (epoll_ctl (loop->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0)
    g_error ("epoll_ctl ADD %d: %s", fd, g_strerror (errno));
  return w;
}

void
rank_loop_modify (RankLoopWatch *w, guint32 events)
{
  struct epoll_event ev = { .events = events, .data.ptr = w };

  if (epoll_ctl (w->loop->epoll_fd, EPOLL_CTL_MOD, w->fd, &ev) < 0)
    g_error ("epoll_ctl MOD %d: %s", w->fd, g_strerror (errno));
}

void
rank_loop_unwatch (RankLoopWatch *w)
{
  if (w == NULL)
    return;
  epoll_ctl (w->loop->epoll_fd, EPOLL_CTL_DEL, w->fd, NULL);
  w->removed = TRUE;
  g_ptr_array_add (w->loop->graveyard, w);
}

void
rank_loop_add_prepare (RankLoop *loop, RankLoopPrepareFunc func, gpointer data)
{
  Prepare p = { func, data };

  g_array_append_val (loop->prepares, p);
}

void
rank_loop_post (RankLoop *loop, RankLoopFunc func, gpointer data)
{
  Posted p = { func, data };
  guint64 one = 1;
  gboolean first;

  g_mutex_lock (&loop->lock);
  first = loop->posted->len == 0;
  g_array_append_val (loop->posted, p);
  g_mutex_unlock (&loop->lock);
  if (first && write (loop->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
    g_warning ("cannot wake event loop: %s", g_strerror (errno));
}

static void
run_posted (RankLoop *loop)
{
  GArray *swap;

  g_mutex_lock (&loop->lock);
  swap = loop->posted;
  loop->posted = loop->running;
  loop->running = swap;
  g_mutex_unlock (&loop->lock);
  for (guint i = 0; i < loop->running->len; i++)
    {
      Posted *p = &g_array_index (loop->running, Posted, i);

      p->func (p->data);
    }
  g_array_set_size (loop->running, 0);
}

void
rank_loop_run_pending (RankLoop *loop)
{
  run_posted (loop);
  g_ptr_array_set_size (loop->graveyard, 0);
}

static void
quit_now (gpointer data)
{
  ((RankLoop *) data)->quit = TRUE;
}

static gpointer
loop_main (gpointer data)
{
  RankLoop *loop = data;
  struct epoll_event events[MAX_EVENTS];

  while (!loop->quit)
    {
      int timeout = -1, n;

      for (guint i = 0; i < loop->prepares->len; i++)
        {
          Prepare *p = &g_array_index (loop->prepares, Prepare, i);
          int t = p->func (p->data);

          if (t >= 0 && (timeout < 0 || t < timeout))
            timeout = t;
        }
      g_mutex_lock (&loop->lock);
      if (loop->posted->len > 0)
        timeout = 0;
      g_mutex_unlock (&loop->lock);

      n = epoll_wait (loop->epoll_fd, events, MAX_EVENTS, timeout);
      if (n < 0 && errno != EINTR)
        g_error ("epoll_wait: %s", g_strerror (errno));
      for (int i = 0; i < n; i++)
        {
          RankLoopWatch *w = events[i].data.ptr;

          if (!w->removed)
            w->func (w->data, events[i].events);
        }
      g_ptr_array_set_size (loop->graveyard, 0);
      run_posted (loop);
      g_ptr_array_set_size (loop->graveyard, 0);
    }
  return NULL;
}

void
rank_loop_start (RankLoop *loop, const char *name)
{
  loop->thread = g_thread_new (name, loop_main, loop);
}

void
rank_loop_quit_and_join (RankLoop *loop)
{
  if (loop->thread == NULL)
    return;
  rank_loop_post (loop, quit_now, loop);
  g_thread_join (loop->thread);
  loop->thread = NULL;
}
