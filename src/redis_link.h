/* redis_link.h -- one shared, pipelined connection to one Redis node.
 *
 * A hiredis context is not thread-safe, and one connection per client
 * thread sends one command per round trip. A link instead owns one socket
 * and one I/O thread: any number of threads submit commands, the I/O thread
 * writes everything queued in one go and hands replies back in order. Under
 * load, the commands of concurrent requests travel to Redis together, which
 * is where the throughput comes from.
 *
 * Every submitted call completes exactly once: with a reply, or with
 * RANK_ERROR_UNAVAILABLE when Redis is unreachable, the connection drops
 * with the call in flight, or no reply came within the link's timeout. The
 * link reconnects by itself with back-off, and re-sends its start-up
 * commands (SCRIPT LOAD, ...) on every new connection.
 */
#ifndef RANK_REDIS_LINK_H
#define RANK_REDIS_LINK_H

#include <glib.h>
#include <hiredis/hiredis.h>

#include "address.h"

typedef struct _RankRedisLink RankRedisLink;
typedef struct _RankRedisCall RankRedisCall;

/* A command in flight. Lives in the caller's memory (the stack is fine):
 * the link never touches it after completing it. argv must stay valid until
 * rank_redis_call_wait returns. */
struct _RankRedisCall
{
  int argc;
  const char **argv;
  const size_t *argvlen;

  /* Results, valid after rank_redis_call_wait: exactly one is set. The
   * caller frees them (freeReplyObject, g_error_free). */
  redisReply *reply;
  GError *error;

  /* private */
  int state;
  RankRedisCall *next;
};

RankRedisLink *rank_redis_link_new (const RankAddress *address, int timeout_ms);
void rank_redis_link_free (RankRedisLink *link);

/* A command sent first on every new connection (before any call), e.g.
 * SCRIPT LOAD. Its error replies are logged. Call before the first submit. */
void rank_redis_link_add_startup (RankRedisLink *link, int argc,
                                  const char **argv, const size_t *argvlen);

/* Starts the I/O thread, which connects. Call after add_startup. */
void rank_redis_link_start (RankRedisLink *link);

/* Queues call; never blocks. */
void rank_redis_link_submit (RankRedisLink *link, RankRedisCall *call);

/* Blocks until the link completes call. */
void rank_redis_call_wait (RankRedisCall *call);

/* Submits and waits. Returns the reply (NULL with error set when Redis was
 * unavailable); Redis error replies are returned as replies. */
redisReply *rank_redis_link_command (RankRedisLink *link, int argc,
                                     const char **argv, const size_t *argvlen,
                                     GError **error);

/* Waits up to timeout_ms for the first connection; FALSE with the last
 * connection error if it did not come. */
gboolean rank_redis_link_wait_ready (RankRedisLink *link, int timeout_ms,
                                     GError **error);

/* "host:port" or "unix:path", for messages. */
const char *rank_redis_link_name (RankRedisLink *link);

#endif /* RANK_REDIS_LINK_H */
