/* backend.h -- Redis as the store sees it: send a command (or one of
 * rankd's scripts) for a node, get its reply or an error, once.
 *
 * Behind this interface are two implementations: plain nodes
 * (backend_nodes.c: --redis, one link per node) and a Redis Cluster
 * (backend_cluster.c: the slot map, MOVED and ASK). What both share lives
 * in backend.c: assembling the links (AUTH and the scripts' SCRIPT LOAD
 * first on every connection), running scripts by EVALSHA and loading them
 * again after a NOSCRIPT, WAIT after a replicated write, and turning error
 * replies into errors of rankd's domain:
 *
 *   RANK_INVALID ...   RANK_ERROR_INVALID (a script refused the call)
 *   RANK_DAMAGED ...   RANK_ERROR_INTERNAL (a key of the wrong type; the
 *                      script changed nothing)
 *   WRONGTYPE          RANK_ERROR_INTERNAL
 *   NOGROUP, BUSYGROUP, ERR no such key
 *                      RANK_ERROR_NOT_FOUND (a stream's consumer group is
 *                      missing, or already there, or the stream is: the
 *                      queue's to handle)
 *   OOM, READONLY, BUSY, LOADING, MASTERDOWN, TRYAGAIN, CLUSTERDOWN,
 *   NOREPLICAS, MISCONF, NOAUTH, WRONGPASS, NOPERM
 *                      RANK_ERROR_UNAVAILABLE
 *   anything else      RANK_ERROR_INTERNAL (and a warning)
 *
 * A reply given to a callback is never an error reply. Every send gets its
 * callback exactly once, in the loop's thread, never from inside the send.
 * One backend per event loop.
 */
#ifndef RANK_BACKEND_H
#define RANK_BACKEND_H

#include <glib.h>

#include "address.h"
#include "command.h"
#include "loop.h"
#include "redis_tls.h"
#include "reply.h"

typedef struct _RankBackend RankBackend;

typedef struct
{
  const RankAddress *nodes; /* --redis nodes, or Cluster seeds */
  guint n_nodes;
  gboolean cluster;
  int timeout_ms;
  const char *user; /* AUTH, when password is set */
  const char *password;
  guint wait_replicas; /* WAIT after replicated writes (0: none) */
  /* Plain nodes: replicas[i] (n_replicas) is a replica of node
   * replica_of[i], for reads that allow one (rank_command_read_from). */
  const RankAddress *replicas;
  const guint *replica_of;
  guint n_replicas;
  /* Every link to a TCP node speaks TLS (NULL: plain; a unix socket never
   * does); the links take references. */
  RankRedisTls *tls;
} RankBackendConfig;

typedef void (*RankBackendFunc) (const RankReply *reply, const GError *error,
                                 gpointer data);

/* Sends of a write that must reach --wait-replicas replicas before it
 * counts: WAIT follows it on the same connection; too few replicas is
 * Unavailable. */
#define RANK_SEND_REPLICATED (1u << 0)

RankBackend *rank_backend_new (RankLoop *loop, const RankBackendConfig *config);

/* Connects (the loop runs the connections). */
void rank_backend_start (RankBackend *backend);

/* Waits (any thread) up to timeout_ms until every connection is up. */
gboolean rank_backend_wait_ready (RankBackend *backend, int timeout_ms,
                                  GError **error);

/* After the loop stopped: fails what is pending, frees the links. */
void rank_backend_free (RankBackend *backend);

/* The Redis nodes a worker's commands may reach, as they change: called
 * on the loop thread with every node of a Cluster's map (masters, then
 * replicas; cluster.h). */
typedef void (*RankBackendNodesFunc) (const RankAddress *nodes, guint n,
                                      gpointer data);

/* Redis Cluster: func hears of the map's nodes whenever they change (the
 * map is then read every few seconds); FALSE on plain nodes, whose nodes
 * are those configured. Before start. */
gboolean rank_backend_watch_nodes (RankBackend *backend,
                                   RankBackendNodesFunc func, gpointer data);

/* The nodes the shards of a board spread over: shard i goes to node i mod
 * this (plain nodes: their number; Cluster: RANK_SHARDS_MAX, each shard a
 * node of its own, since a command may not name keys of two slots). */
guint rank_backend_nodes (RankBackend *backend);

/* Sends cmd to node (Cluster: the node of its key's slot), taking over its
 * buffer; func gets the reply. flags: RANK_SEND_*. A read that allows a
 * replica (rank_command_read_from) goes to one of the node's replicas that
 * is up, fresh enough and lags little enough, when there is one; if the
 * replica fails to answer (down, timed out, an error reply), the primary
 * answers instead: a replica's trouble never reaches the caller. */
void rank_backend_send (RankBackend *backend, guint node, RankCommand *cmd,
                        guint flags, RankBackendFunc func, gpointer data);

/* Batches: the commands of a script that share a head -- the script, its
 * keys and the arguments that are the batch's -- and are sent for the same
 * node in one loop iteration leave as one command carrying every item's
 * own arguments after the head, in the order they came (at most
 * RANK_BATCH_MAX_ITEMS a command). The script answers an array, one reply
 * per item; each item's func gets its own (an error reply as an error,
 * classified as above). A batch of one is one command as before: an idle
 * board waits for nothing. head is copied; item's arguments are taken. */
void rank_backend_send_item (RankBackend *backend, guint node,
                             const RankCommand *head, RankCommand *item,
                             guint flags, RankBackendFunc func, gpointer data);

/* Items sent with this flag to rank_backend_send_item: the head is
 * "HMGET", a board's times hash, its sorted set and the board's prefix
 * length (one byte), each item a member's sorted-set key (prefix, then
 * member); the batch leaves as one transaction, MULTI, HMGET of every
 * member in the times hash, a ZRANK of each key, EXEC, so each member's
 * rank is exact at the score read with it (orderkey.h: the times hash
 * value ends with the sorted-set score; an HMGET costs Redis a fifth of
 * what a ZMSCORE, which formats each score with %.17g, does). Each item's
 * reply is an array {value or nil, rank or nil}; an error reply in the
 * transaction is the error of every item it concerns. */
#define RANK_SEND_RANKS (1u << 1)

/* Items sent with this flag to rank_backend_send_item are the updates of a
 * batch recorded as a whole: their head is theirs alone, and they leave
 * as one command of up to RANK_GROUP_MAX_ITEMS, never split. */
#define RANK_SEND_GROUP (1u << 2)

/* Items sent with this flag to rank_backend_send_item (with
 * RANK_SEND_GROUP) have one argument each, which says where it ends; their
 * batch carries them as one argument, one after another, as a script
 * costs Redis less per argument than per item (update.lua, sets). */
#define RANK_SEND_PACKED (1u << 3)

/* Items sent with this flag to rank_backend_send_item asked their script
 * for one element each (update.lua's answer 'applied'), not its flat
 * width: their head says so, so they never share a batch with others.
 * Their batches hold up to RANK_GROUP_MAX_ITEMS, as a group's do: only the
 * queue's drain, which no caller waits for, sends them. */
#define RANK_SEND_ONE_ELEMENT (1u << 4)

/* A write is about to be queued: func hears the hash tag of its keys
 * (the whole key if it has none) before the command is queued, so what
 * func sends goes to Redis before it. A write is any command but the
 * reads named in backend.c (read_only). NULL: none. One per backend. */
typedef void (*RankBackendWriteFunc) (const char *tag, gsize tag_len,
                                      gpointer data);
void rank_backend_watch_writes (RankBackend *backend, RankBackendWriteFunc func,
                                gpointer data);

/* For tests: hook sees every command as it is sent, before the backend
 * takes it (loop thread). NULL: none. */
typedef void (*RankBackendHook) (const RankCommand *cmd, gpointer data);
void rank_backend_set_hook (RankBackend *backend, RankBackendHook hook,
                            gpointer data);

#endif /* RANK_BACKEND_H */
