/* reply.c -- Redis replies built by hiredis's reader (see reply.h). */
#include "reply.h"

#include <hiredis/read.h>
#include <string.h>

/* Links a new reply into its parent array, as hiredis's own objects do. */
static void *
attach (const redisReadTask *task, RankReply *r)
{
  if (task->parent != NULL)
    {
      RankReply *parent = task->parent->obj;

      g_assert (parent->type == RANK_REPLY_ARRAY
                && (gsize) task->idx < parent->elements);
      parent->element[task->idx] = r;
    }
  return r;
}

static void *
create_string (const redisReadTask *task, char *str, size_t len)
{
  RankReply *r = g_malloc (sizeof (RankReply) + len + 1);

  r->type = (RankReplyType) task->type;
  r->integer = 0;
  r->len = len;
  r->str = (char *) (r + 1);
  memcpy (r->str, str, len);
  r->str[len] = '\0';
  r->elements = 0;
  r->element = NULL;
  return attach (task, r);
}

static void *
create_array (const redisReadTask *task, int elements)
{
  gsize n = elements > 0 ? (gsize) elements : 0;
  RankReply *r = g_malloc0 (sizeof (RankReply) + n * sizeof (RankReply *));

  r->type = RANK_REPLY_ARRAY;
  r->elements = n;
  r->element = (RankReply **) (r + 1);
  return attach (task, r);
}

static void *
create_integer (const redisReadTask *task, long long value)
{
  RankReply *r = g_malloc0 (sizeof (RankReply));

  r->type = RANK_REPLY_INTEGER;
  r->integer = value;
  return attach (task, r);
}

static void *
create_nil (const redisReadTask *task)
{
  RankReply *r = g_malloc0 (sizeof (RankReply));

  r->type = RANK_REPLY_NIL;
  return attach (task, r);
}

void
rank_reply_free (RankReply *reply)
{
  if (reply == NULL)
    return;
  for (gsize i = 0; i < reply->elements; i++)
    rank_reply_free (reply->element[i]);
  g_free (reply);
}

RankReply *
rank_reply_copy (const RankReply *reply)
{
  RankReply *r;

  if (reply->type == RANK_REPLY_ARRAY)
    {
      r = g_malloc0 (sizeof (RankReply)
                     + reply->elements * sizeof (RankReply *));
      r->type = RANK_REPLY_ARRAY;
      r->elements = reply->elements;
      r->element = (RankReply **) (r + 1);
      for (gsize i = 0; i < reply->elements; i++)
        r->element[i] = rank_reply_copy (reply->element[i]);
      return r;
    }
  r = g_malloc (sizeof (RankReply) + reply->len + 1);
  *r = *reply;
  r->str = (char *) (r + 1);
  if (reply->str != NULL)
    memcpy (r->str, reply->str, reply->len + 1);
  else
    r->str[0] = '\0';
  return r;
}

static void
free_object (void *reply)
{
  rank_reply_free (reply);
}

void *
rank_reply_functions (void)
{
  static redisReplyObjectFunctions functions = {
    create_string, create_array, create_integer, create_nil, free_object,
  };

  return &functions;
}

gboolean
rank_reply_int_at (const RankReply *reply, gsize i, gint64 *out)
{
  if (reply->type != RANK_REPLY_ARRAY || i >= reply->elements
      || reply->element[i]->type != RANK_REPLY_INTEGER)
    return FALSE;
  *out = reply->element[i]->integer;
  return TRUE;
}

const RankReply *
rank_reply_string_at (const RankReply *reply, gsize i)
{
  if (reply->type != RANK_REPLY_ARRAY || i >= reply->elements
      || reply->element[i]->type != RANK_REPLY_STRING)
    return NULL;
  return reply->element[i];
}
