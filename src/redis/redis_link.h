/* redis_link.h -- one pipelined connection to one Redis node, driven by an
 * event loop.
 *
 * Commands sent during one loop iteration leave together in one write just
 * before the loop sleeps; replies are matched to their callbacks in order.
 * Under load the commands of many concurrent requests share each round trip
 * to Redis, which is where rankd's throughput comes from.
 *
 * Every command gets its callback exactly once, in the loop's thread: with
 * the reply, or with a RANK_ERROR_UNAVAILABLE error when Redis is
 * unreachable, the connection drops with the command in flight, or no reply
 * came within the link's timeout. The link reconnects by itself with
 * back-off and re-sends its start-up commands (SCRIPT LOAD, ...) first on
 * every new connection, after the TLS handshake when it speaks TLS.
 */
#ifndef RANK_REDIS_LINK_H
#define RANK_REDIS_LINK_H

#include <glib.h>

#include "address.h"
#include "loop.h"
#include "redis_tls.h"
#include "reply.h"

typedef struct _RankRedisLink RankRedisLink;

/* reply is NULL when error is set. The link frees both after the callback
 * returns; a Redis error reply is a reply (type RANK_REPLY_ERROR). */
typedef void (*RankRedisReplyFunc) (const RankReply *reply, const GError *error,
                                    gpointer data);

/* tls: speak TLS to a TCP address (a reference is taken); NULL, or a
 * unix-socket address: plain. */
RankRedisLink *rank_redis_link_new (RankLoop *loop, const RankAddress *address,
                                    int timeout_ms, RankRedisTls *tls);

/* Fails every command still pending. Call after the loop has stopped. */
void rank_redis_link_free (RankRedisLink *link);

/* A command sent first on every new connection. Call before start. Its
 * error reply makes the connection fail, but for CLIENT SETNAME's: a
 * name is a label, which a Redis may refuse (its ACL) and still serve. */
void rank_redis_link_add_startup (RankRedisLink *link, int argc,
                                  const char **argv, const size_t *argvlen);

/* Begins connecting (from any thread). */
void rank_redis_link_start (RankRedisLink *link);

/* Begins connecting now, so that commands sent from here on wait for the
 * connection instead of failing at once (loop thread, or before the loop
 * runs). */
void rank_redis_link_connect_now (RankRedisLink *link);

/* Queues a command; loop thread only. argv is copied. */
void rank_redis_link_send (RankRedisLink *link, int argc, const char **argv,
                           const size_t *argvlen, RankRedisReplyFunc func,
                           gpointer data);

/* Waits (any thread) up to timeout_ms for the link to be connected; FALSE
 * with the last connection error otherwise. */
gboolean rank_redis_link_wait_ready (RankRedisLink *link, int timeout_ms,
                                     GError **error);

/* A subscriber's link (SUBSCRIBE): a reply that arrives while no command
 * waits is a message, given to func (loop thread; reply lives during the
 * call) instead of closing the connection as a protocol error. */
void rank_redis_link_set_push (RankRedisLink *link, RankRedisReplyFunc func,
                               gpointer data);

/* How many connections have completed their start-up so far (loop
 * thread): a change means a new connection, with none of the old one's
 * session state (subscriptions, CLIENT TRACKING). */
guint rank_redis_link_connections (RankRedisLink *link);

/* Connected now (any thread). */
gboolean rank_redis_link_is_up (RankRedisLink *link);

/* "host:port" or "unix:path", for messages. */
const char *rank_redis_link_name (RankRedisLink *link);

#endif /* RANK_REDIS_LINK_H */
