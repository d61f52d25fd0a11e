/* loop.h -- an epoll event loop: file descriptors, posted functions, and a
 * hook run before every sleep.
 *
 * rankd runs a few of these, one thread each. Everything a loop owns
 * (connections, its Redis link) is touched only by its thread; other threads
 * talk to it with rank_loop_post.
 */
#ifndef RANK_LOOP_H
#define RANK_LOOP_H

#include <glib.h>

typedef struct _RankLoop RankLoop;

/* Called with the epoll events (EPOLLIN, EPOLLOUT, EPOLLERR, EPOLLHUP). */
typedef void (*RankLoopIoFunc) (gpointer data, guint32 events);

/* Runs before the loop sleeps; returns how long the loop may sleep in ms
 * (-1: as long as it likes). Used to flush batched output and to expire
 * deadlines. */
typedef int (*RankLoopPrepareFunc) (gpointer data);

typedef void (*RankLoopFunc) (gpointer data);

/* A handle on one watched file descriptor. */
typedef struct _RankLoopWatch RankLoopWatch;

RankLoop *rank_loop_new (void);
void rank_loop_free (RankLoop *loop);

/* Runs the loop in a new thread until rank_loop_quit. */
void rank_loop_start (RankLoop *loop, const char *name);
/* Makes the loop thread return after its current iteration, and joins it. */
void rank_loop_quit_and_join (RankLoop *loop);

RankLoopWatch *rank_loop_watch (RankLoop *loop, int fd, guint32 events,
                                RankLoopIoFunc func, gpointer data);
void rank_loop_modify (RankLoopWatch *watch, guint32 events);
/* Stops watching (does not close the fd); safe inside the watch's own
 * callback. */
void rank_loop_unwatch (RankLoopWatch *watch);

void rank_loop_add_prepare (RankLoop *loop, RankLoopPrepareFunc func,
                            gpointer data);

/* Runs func(data) in the loop's thread, soon; callable from any thread,
 * including the loop's own (then it runs after the current events). */
void rank_loop_post (RankLoop *loop, RankLoopFunc func, gpointer data);

/* Runs the posted functions now; for after the loop has stopped. */
void rank_loop_run_pending (RankLoop *loop);

#endif /* RANK_LOOP_H */
