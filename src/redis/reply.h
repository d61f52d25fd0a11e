/* reply.h -- a Redis reply, as rankd's modules see it.
 *
 * The Redis links parse replies with hiredis's reader, which builds these
 * directly (rank_reply_functions): nothing above the links sees hiredis. A
 * string is stored with its struct in one allocation, and an array with its
 * element pointers, so a reply costs no more allocations than hiredis's own
 * objects. A reply lives until the callback that receives it returns.
 */
#ifndef RANK_REPLY_H
#define RANK_REPLY_H

#include <glib.h>

typedef enum
{
  RANK_REPLY_STRING = 1,
  RANK_REPLY_ARRAY = 2,
  RANK_REPLY_INTEGER = 3,
  RANK_REPLY_NIL = 4,
  RANK_REPLY_STATUS = 5,
  RANK_REPLY_ERROR = 6,
} RankReplyType;

typedef struct _RankReply RankReply;

struct _RankReply
{
  RankReplyType type;
  long long integer;   /* INTEGER */
  gsize len;           /* STRING, STATUS, ERROR: bytes of str */
  char *str;           /* NUL-terminated (it may hold NULs too) */
  gsize elements;      /* ARRAY */
  RankReply **element; /* ARRAY: elements replies */
};

void rank_reply_free (RankReply *reply);

/* A copy that outlives the callback (free with rank_reply_free). */
RankReply *rank_reply_copy (const RankReply *reply);

/* The element i of an array if it is an integer: into out. */
gboolean rank_reply_int_at (const RankReply *reply, gsize i, gint64 *out);

/* The element i of an array, if it is a string. */
const RankReply *rank_reply_string_at (const RankReply *reply, gsize i);

/* hiredis's reader functions that build RankReply objects (a pointer to a
 * redisReplyObjectFunctions; reply.c is the one place that knows it). */
void *rank_reply_functions (void);

#endif /* RANK_REPLY_H */
