/* server.c -- accept loop, event-loop workers (see server.h); a worker's
 * connections are connection.c's.
 *
 * One thread accepts and hands each connection to a worker in turn; the
 * workers run an event loop each (rank_loop_start), with a handler, store
 * and Redis links of their own. The board viewer's reads (http.c) reach
 * the same workers in-process (call.c).
 *
 * Listeners: any number, plain or TLS, TCP or (plain) a unix socket; the
 * accept loop polls them all. A TLS connection takes a session of the
 * context current when it is accepted: a reload (SIGHUP) makes a new
 * context for the connections after it, and open ones keep theirs.
 *
 * Shutdown: the accept loop stops, and so do in-process calls; each worker
 * closes idle connections, serves requests already received, closes the
 * rest as their calls finish; then the workers stop.
 */
#include "server_private.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "constants.h"
#include "error.h"
#include "metrics.h"

/* ---- workers ---- */

typedef struct
{
  Worker *worker;
  int fd;
  RankTlsContext *tls; /* a reference, or NULL: plain */
  gboolean local;
} NewConn;

static void
take_conn (gpointer data)
{
  NewConn *n = data;

  rank_conn_add (n->worker, n->fd, n->tls, n->local);
  rank_tls_context_unref (n->tls);
  g_free (n);
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

/* RANKD_TEST_CLOCK_FILE: tests move rankd's clock (Unix ms, as decimal
 * text in that file, read at every call), for periods and rolling windows
 * across days without waiting for them. Never for production: main logs
 * it at start. */
static gint64
test_clock (gpointer data)
{
  g_autofree char *text = NULL;

  if (!g_file_get_contents (data, &text, NULL, NULL))
    return g_get_real_time () / 1000;
  return g_ascii_strtoll (text, NULL, 10);
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
    .tls = server->config.redis_tls,
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
    .tls = server->config.redis_tls,
  };

  w->server = server;
  w->loop = rank_loop_new ();
  g_queue_init (&w->ready);
  w->spare
      = g_ptr_array_new_with_free_func ((GDestroyNotify) g_byte_array_unref);
  rank_loop_add_prepare (w->loop, rank_worker_send_ready, w);
  w->backend = rank_backend_new (w->loop, &backend);
  w->store = rank_store_new (
      w->backend,
      server->config.random_seed ? server->config.random_seed + index : 0);
  w->handler = rank_handler_new (
      w->store, server->config.boards, server->config.dedup_window_ms,
      server->config.protocol, server->config.framed, rank_request_answered);
  rank_handler_set_cache (w->handler, server->cache);
  if (g_getenv ("RANKD_TEST_CLOCK_FILE") != NULL)
    rank_handler_set_clock (w->handler, test_clock,
                            (gpointer) g_getenv ("RANKD_TEST_CLOCK_FILE"));
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
  rank_loop_add_prepare (w->loop, rank_worker_sweep, w);
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
      rank_conn_free (w->conns.head->data);
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
accept_one (RankServer *server, Listener *l)
{
  NewConn *n;
  int fd = accept4 (l->fd, NULL, NULL, SOCK_CLOEXEC);

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
  n = g_new0 (NewConn, 1);
  n->worker
      = &server->workers[server->next_worker++ % server->config.io_threads];
  n->fd = fd;
  n->local = l->local;
  if (l->tls)
    {
      g_mutex_lock (&server->lock);
      n->tls = rank_tls_context_ref (server->tls);
      g_mutex_unlock (&server->lock);
    }
  rank_loop_post (n->worker->loop, take_conn, n);
}

/* A unix socket at path: a file left by a rankd that is gone is replaced,
 * one a live server listens on is not. */
static int
listen_unix (const char *path, GError **error)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  int fd;

  if (strlen (path) >= sizeof sa.sun_path)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "cannot listen on unix:%s: the path is longer than %zu "
                   "bytes",
                   path, sizeof sa.sun_path - 1);
      return -1;
    }
  strcpy (sa.sun_path, path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    goto fail;
  if (bind (fd, (struct sockaddr *) &sa, sizeof sa) < 0)
    {
      struct stat st;
      int probe;
      gboolean stale;

      if (errno != EADDRINUSE)
        goto fail;
      probe = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      stale = stat (path, &st) == 0 && S_ISSOCK (st.st_mode) && probe >= 0
              && connect (probe, (struct sockaddr *) &sa, sizeof sa) < 0
              && errno == ECONNREFUSED;
      if (probe >= 0)
        close (probe);
      if (!stale)
        {
          g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                       "cannot listen on unix:%s: in use", path);
          close (fd);
          return -1;
        }
      unlink (path);
      if (bind (fd, (struct sockaddr *) &sa, sizeof sa) < 0)
        goto fail;
    }
  if (listen (fd, 1024) < 0)
    goto fail;
  return fd;

fail:
  g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
               "cannot listen on unix:%s: %s", path, g_strerror (errno));
  if (fd >= 0)
    close (fd);
  return -1;
}

static void
listener_close (Listener *l)
{
  if (l->fd >= 0)
    close (l->fd);
  l->fd = -1;
  if (l->path != NULL)
    unlink (l->path);
  g_clear_pointer (&l->path, g_free);
}

static gboolean
listener_open (Listener *l, const RankListenerConfig *config, GError **error)
{
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;

  l->tls = config->tls;
  l->local = config->address.path != NULL;
  l->fd = l->local ? listen_unix (config->address.path, error)
                   : rank_address_listen (&config->address, 1024, error);
  if (l->fd < 0)
    return FALSE;
  l->path = g_strdup (config->address.path);
  if (!l->local && getsockname (l->fd, (struct sockaddr *) &ss, &len) == 0)
    l->port = ntohs (ss.ss_family == AF_INET6
                         ? ((struct sockaddr_in6 *) &ss)->sin6_port
                         : ((struct sockaddr_in *) &ss)->sin_port);
  return TRUE;
}

RankServer *
rank_server_new (const RankServerConfig *config, GError **error)
{
  RankServer *server = g_new0 (RankServer, 1);
  RankListenerConfig plain = { .address = config->listen, .tls = FALSE };
  const RankListenerConfig *listeners
      = config->n_listeners > 0 ? config->listeners : &plain;
  guint n = MAX (config->n_listeners, 1);
  gboolean any_tls = FALSE;

  server->config = *config;
  server->config.listen.host = g_strdup (config->listen.host);
  server->config.listen.path = g_strdup (config->listen.path);
  server->config.listeners = NULL;
  server->config.tls.cert_file = g_strdup (config->tls.cert_file);
  server->config.tls.key_file = g_strdup (config->tls.key_file);
  server->config.tls.ca_file = g_strdup (config->tls.ca_file);
  if (server->config.io_threads < 1)
    server->config.io_threads = 1;
  g_mutex_init (&server->lock);
  g_cond_init (&server->drained_cond);
  server->wire_log = rank_wire_log_new ();
  server->listeners = g_new0 (Listener, n);
  for (guint i = 0; i < n; i++)
    server->listeners[i].fd = -1;
  for (guint i = 0; i < n; i++)
    any_tls |= listeners[i].tls;
  if (any_tls
      && (server->tls
          = rank_tls_server_context_new (&server->config.tls, error))
             == NULL)
    {
      g_prefix_error (error, "--tls-cert, --tls-key, --tls-ca: ");
      rank_server_free (server);
      return NULL;
    }
  if (any_tls)
    rank_metrics_tls_enabled ();
  for (guint i = 0; i < n; i++, server->n_listeners++)
    if (!listener_open (&server->listeners[i], &listeners[i], error))
      {
        rank_server_free (server);
        return NULL;
      }
  return server;
}

gboolean
rank_server_reload_tls (RankServer *server, GError **error)
{
  RankTlsContext *fresh, *old;

  if (server->tls == NULL)
    return TRUE;
  fresh = rank_tls_server_context_new (&server->config.tls, error);
  if (fresh == NULL)
    return FALSE;
  g_mutex_lock (&server->lock);
  old = server->tls;
  server->tls = fresh;
  g_mutex_unlock (&server->lock);
  /* Open sessions hold their own reference to the old one's SSL_CTX. */
  rank_tls_context_unref (old);
  return TRUE;
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
  g_mutex_lock (&server->lock);
  server->calls_open = TRUE;
  g_mutex_unlock (&server->lock);
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
  return server->listeners[0].port;
}

guint16
rank_server_listener_port (RankServer *server, guint i)
{
  return i < server->n_listeners ? server->listeners[i].port : 0;
}

guint
rank_server_connections (RankServer *server)
{
  return (guint) g_atomic_int_get (&server->connections);
}

int
rank_server_accept (RankServer *server, int signal_fd)
{
  guint n = server->n_listeners;
  g_autofree struct pollfd *pfd = g_new0 (struct pollfd, n + 1);

  for (guint i = 0; i < n; i++)
    pfd[i] = (struct pollfd){ server->listeners[i].fd, POLLIN, 0 };
  pfd[n] = (struct pollfd){ signal_fd, POLLIN, 0 };
  for (;;)
    {
      int rc = poll (pfd, n + 1, -1);

      if (rc < 0 && errno == EINTR)
        continue;
      if (rc < 0)
        g_error ("poll on the listening sockets failed: %s",
                 g_strerror (errno));
      if (pfd[n].revents & POLLIN)
        {
          struct signalfd_siginfo info;

          if (read (signal_fd, &info, sizeof info) == sizeof info)
            return (int) info.ssi_signo;
        }
      for (guint i = 0; i < n; i++)
        if (pfd[i].revents & POLLIN)
          accept_one (server, &server->listeners[i]);
    }
}

void
rank_server_drain (RankServer *server)
{
  gint64 deadline;
  guint n = server->config.io_threads;

  /* As the port closes, in-process calls stop: those in flight still
   * answer (the workers serve them, or answer Unavailable as they stop). */
  rank_server_close_calls (server);
  /* Connections the kernel already accepted may carry requests sent before
   * the signal: take them too, so that draining answers them. */
  for (guint i = 0; i < server->n_listeners; i++)
    {
      Listener *l = &server->listeners[i];

      fcntl (l->fd, F_SETFL, fcntl (l->fd, F_GETFL) | O_NONBLOCK);
      for (;;)
        {
          struct pollfd last = { l->fd, POLLIN, 0 };

          if (poll (&last, 1, 0) <= 0)
            break;
          accept_one (server, l);
        }
      listener_close (l);
    }
  if (rank_server_connections (server) > 0)
    g_message ("draining %u connections", rank_server_connections (server));
  for (guint i = 0; i < n; i++)
    rank_loop_post (server->workers[i].loop, rank_worker_start_drain,
                    &server->workers[i]);
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
  for (guint i = 0; i < server->n_listeners; i++)
    listener_close (&server->listeners[i]);
  g_free (server->listeners);
  if (server->workers != NULL)
    {
      /* Every loop stops before any worker goes: they share the cache,
       * and worker 0's tracking session. No in-process call is posted
       * once they stop. */
      rank_server_close_calls (server);
      for (guint i = 0; i < server->config.io_threads; i++)
        rank_loop_quit_and_join (server->workers[i].loop);
      for (guint i = 0; i < server->config.io_threads; i++)
        worker_clear (&server->workers[i]);
      g_free (server->workers);
    }
  rank_read_cache_free (server->cache);
  rank_address_clear (&server->config.listen);
  g_free ((char *) server->config.tls.cert_file);
  g_free ((char *) server->config.tls.key_file);
  g_free ((char *) server->config.tls.ca_file);
  rank_tls_context_unref (server->tls);
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
