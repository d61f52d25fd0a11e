/* server.c -- accept loop, event-loop workers (see server.h); a worker's
 * connections are connection.c's.
 *
 * One thread accepts and hands each connection to a worker in turn; the
 * workers run an event loop each (rank_loop_start), with a handler, store
 * and Redis links of their own. The board viewer's reads (http.c) reach
 * the same workers in-process (call.c).
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
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "constants.h"
#include "metrics.h"

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

  rank_conn_add (n->worker, n->fd);
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

  /* As the port closes, in-process calls stop: those in flight still
   * answer (the workers serve them, or answer Unavailable as they stop). */
  rank_server_close_calls (server);
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
  if (server->listen_fd >= 0)
    close (server->listen_fd);
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
