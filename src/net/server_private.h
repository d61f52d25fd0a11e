/* server_private.h -- what the server's files share (see server.h):
 *
 *   server.c      the workers' start and stop, accepting, drain, reloads
 *   connection.c  a worker's connections: requests in, replies out
 *   call.c        calls made in-process (rank_server_call), no socket
 *
 * A worker's loop thread alone touches its connections, handler and store;
 * other threads reach a worker only through rank_loop_post.
 */
#ifndef RANK_SERVER_PRIVATE_H
#define RANK_SERVER_PRIVATE_H

#include "backend.h"
#include "cache.h"
#include "connbuf.h"
#include "handler.h"
#include "loop.h"
#include "drain.h"
#include "server.h"
#include "tls.h"
#include "store.h"
#include "tracking.h"
#include "wire.h"

typedef struct _Worker Worker;
typedef struct _Conn Conn;
typedef struct _RankCall RankCall;

/* One request, from its decoding until its reply is sent (or dropped): the
 * handler writes the reply into reply and says when it is done. A request
 * of a connection has conn; one made in-process has call instead. */
typedef struct
{
  Conn *conn;
  RankCall *call;    /* in-process (call.c); conn is NULL */
  GList link;        /* in conn->requests */
  GByteArray *reply; /* the call's own buffer */
  gsize reserved;    /* counted in conn->held until answered */
  gboolean answered; /* reply is whole */
} Request;

struct _Conn
{
  Worker *worker;
  GList node;           /* in worker->conns */
  GList ready_node;     /* in worker->ready while it may have replies to send */
  int fd;               /* -1 once the socket is closed */
  RankPeer peer;        /* who is connected */
  RankTlsSession *tls;  /* NULL: plain */
  gboolean handshaking; /* TLS: no request read before it is done */
  gboolean tls_failed;  /* TLS: the session is dead, no shutdown */
  gboolean read_wants_write; /* TLS: a read waits for EPOLLOUT */
  gboolean write_wants_read; /* TLS: a write waits for EPOLLIN */
  char *tls_peer;            /* TLS: the client's address, for the log */
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

/* A listening socket. */
typedef struct
{
  int fd;
  gboolean tls;
  gboolean local; /* a unix socket: peers are "uid:N" */
  char *path;     /* a unix socket's file, removed on close */
  guint16 port;
} Listener;

struct _RankServer
{
  RankServerConfig config;
  Listener *listeners;
  guint n_listeners;
  RankAddress *nodes;
  guint n_nodes;
  RankAddress *replicas; /* of nodes replica_of[i] */
  guint *replica_of;
  guint n_replicas;
  RankTlsContext *tls; /* new TLS connections' (under lock; NULL: none) */
  gint64 last_tls_log; /* under lock: handshake failures logged */
  guint tls_unlogged;  /* under lock: failures since, not logged */
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

  /* In-process calls (call.c): posted to the workers only while open
   * (under lock), so none reaches a loop that has stopped. */
  gboolean calls_open;
  guint next_call_worker; /* under lock */
};

/* ---- connection.c ---- */

/* Takes fd, accepted, as a new connection of w (in w's thread): TLS with
 * a session of tls (NULL: plain), or from a unix socket (local). */
void rank_conn_add (Worker *w, int fd, RankTlsContext *tls, gboolean local);

/* Frees c and its requests (once w's loop has stopped). */
void rank_conn_free (Conn *c);

/* The handler's RankAnsweredFunc for every request, a connection's or an
 * in-process one. */
void rank_request_answered (gpointer data, gboolean ok);

/* w's loop hooks: replies out before it sleeps; idle connections swept. */
int rank_worker_send_ready (gpointer data);
int rank_worker_sweep (gpointer data);

/* Posted to w by rank_server_drain: serves what its connections sent,
 * then closes them. */
void rank_worker_start_drain (gpointer data);

/* ---- call.c ---- */

/* An in-process request's reply is whole (ok) or lost (!ok). */
void rank_call_answered (Request *r, gboolean ok);

/* rank_server_call fails from now on (RANK_ERROR_UNAVAILABLE): the
 * workers are about to stop. */
void rank_server_close_calls (RankServer *server);

#endif /* RANK_SERVER_PRIVATE_H */
