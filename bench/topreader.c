/* topreader.c -- GetTopN replies read in place (see topreader.h). */
#include "topreader.h"

#include <string.h>

#include <thrift/c_glib/protocol/thrift_protocol.h>

#define VERSION_1 0x80010000u
#define MAX_DEPTH 32

typedef struct
{
  const guint8 *p, *end;
} Cursor;

static gboolean
take (Cursor *c, gsize n, const guint8 **out)
{
  if ((gsize) (c->end - c->p) < n)
    return FALSE;
  if (out != NULL)
    *out = c->p;
  c->p += n;
  return TRUE;
}

static gboolean
get_u8 (Cursor *c, guint8 *v)
{
  const guint8 *b;

  if (!take (c, 1, &b))
    return FALSE;
  *v = b[0];
  return TRUE;
}

static gboolean
get_u32 (Cursor *c, guint32 *v)
{
  const guint8 *b;

  if (!take (c, 4, &b))
    return FALSE;
  *v = (guint32) b[0] << 24 | (guint32) b[1] << 16 | (guint32) b[2] << 8
       | (guint32) b[3];
  return TRUE;
}

static gboolean
get_i64 (Cursor *c, gint64 *v)
{
  guint32 hi, lo;

  if (!get_u32 (c, &hi) || !get_u32 (c, &lo))
    return FALSE;
  *v = (gint64) ((guint64) hi << 32 | lo);
  return TRUE;
}

/* A string: its bytes stay in the message. */
static gboolean
get_string (Cursor *c, const guint8 **s, gsize *len)
{
  guint32 n;

  if (!get_u32 (c, &n) || n > G_MAXINT32 || !take (c, n, s))
    return FALSE;
  *len = n;
  return TRUE;
}

/* A field's header: FALSE at the end of the bytes; *type T_STOP at the end
 * of the struct. */
static gboolean
get_field (Cursor *c, guint8 *type, gint16 *id)
{
  const guint8 *b;

  if (!get_u8 (c, type))
    return FALSE;
  if (*type == T_STOP)
    return TRUE;
  if (!take (c, 2, &b))
    return FALSE;
  *id = (gint16) ((guint16) b[0] << 8 | b[1]);
  return TRUE;
}

static gboolean skip (Cursor *c, guint8 type, int depth);

static gboolean
skip_struct (Cursor *c, int depth)
{
  guint8 type;
  gint16 id;

  for (;;)
    {
      if (!get_field (c, &type, &id))
        return FALSE;
      if (type == T_STOP)
        return TRUE;
      if (!skip (c, type, depth + 1))
        return FALSE;
    }
}

/* Steps over a value of type, checking its bytes are there. */
static gboolean
skip (Cursor *c, guint8 type, int depth)
{
  guint8 kt, vt;
  guint32 n;

  if (depth > MAX_DEPTH)
    return FALSE;
  switch (type)
    {
    case T_BOOL:
    case T_BYTE:
      return take (c, 1, NULL);
    case T_I16:
      return take (c, 2, NULL);
    case T_I32:
      return take (c, 4, NULL);
    case T_DOUBLE:
    case T_I64:
      return take (c, 8, NULL);
    case T_STRING:
      {
        const guint8 *s;
        gsize len;

        return get_string (c, &s, &len);
      }
    case T_STRUCT:
      return skip_struct (c, depth);
    case T_MAP:
      if (!get_u8 (c, &kt) || !get_u8 (c, &vt) || !get_u32 (c, &n))
        return FALSE;
      for (guint32 i = 0; i < n; i++)
        if (!skip (c, kt, depth + 1) || !skip (c, vt, depth + 1))
          return FALSE;
      return TRUE;
    case T_SET:
    case T_LIST:
      if (!get_u8 (c, &vt) || !get_u32 (c, &n))
        return FALSE;
      for (guint32 i = 0; i < n; i++)
        if (!skip (c, vt, depth + 1))
          return FALSE;
      return TRUE;
    default:
      return FALSE;
    }
}

/* An exception struct (declared or TApplicationException): its message,
 * field 1. */
static char *
exception_message (Cursor *c)
{
  guint8 type;
  gint16 id;
  char *message = NULL;

  for (;;)
    {
      if (!get_field (c, &type, &id))
        break;
      if (type == T_STOP)
        return message != NULL ? message : g_strdup ("an exception");
      if (id == 1 && type == T_STRING && message == NULL)
        {
          const guint8 *s;
          gsize len;

          if (!get_string (c, &s, &len))
            break;
          message = g_strndup ((const char *) s, len);
        }
      else if (!skip (c, type, 1))
        break;
    }
  g_free (message);
  return g_strdup ("a malformed exception");
}

/* One Entry: member (1), score (2) and rank (3) present; rank at least
 * *last_rank, which becomes it. */
static gboolean
read_entry (Cursor *c, gint64 *last_rank, char **why)
{
  guint8 type;
  gint16 id;
  gboolean member = FALSE, score = FALSE, ranked = FALSE;
  gint64 v;

  for (;;)
    {
      if (!get_field (c, &type, &id))
        {
          *why = g_strdup ("an Entry is cut short");
          return FALSE;
        }
      if (type == T_STOP)
        break;
      if (id == 1 && type == T_STRING)
        {
          const guint8 *s;
          gsize len;

          if (!get_string (c, &s, &len) || len == 0)
            {
              *why = g_strdup ("an Entry's member is empty or cut short");
              return FALSE;
            }
          member = TRUE;
        }
      else if ((id == 2 || id == 3) && type == T_I64)
        {
          if (!get_i64 (c, &v))
            {
              *why = g_strdup ("an Entry is cut short");
              return FALSE;
            }
          if (id == 2)
            score = TRUE;
          else
            {
              if (v < 1 || v < *last_rank)
                {
                  *why = g_strdup_printf ("rank %" G_GINT64_FORMAT
                                          " after rank %" G_GINT64_FORMAT,
                                          v, *last_rank);
                  return FALSE;
                }
              *last_rank = v;
              ranked = TRUE;
            }
        }
      else if (!skip (c, type, 1))
        {
          *why = g_strdup ("an Entry holds a malformed field");
          return FALSE;
        }
    }
  if (!member || !score || !ranked)
    {
      *why = g_strdup ("an Entry without its member, score or rank");
      return FALSE;
    }
  return TRUE;
}

gboolean
rank_bench_read_top (const guint8 *bytes, gsize len, gsize *entries, char **why)
{
  Cursor c = { bytes, bytes + len };
  guint32 version;
  const guint8 *name;
  gsize name_len;
  guint8 type;
  gint16 id;
  gboolean answered = FALSE;

  *entries = 0;
  *why = NULL;
  if (!get_u32 (&c, &version) || (version & 0xffff0000u) != VERSION_1
      || !get_string (&c, &name, &name_len) || !take (&c, 4, NULL))
    {
      *why = g_strdup ("not a binary-protocol message");
      return FALSE;
    }
  if ((version & 0xff) == T_EXCEPTION)
    {
      *why = exception_message (&c);
      return FALSE;
    }
  if ((version & 0xff) != T_REPLY || name_len != strlen ("GetTopN")
      || memcmp (name, "GetTopN", name_len) != 0)
    {
      *why = g_strdup_printf ("not a reply to GetTopN (type %u, \"%.*s\")",
                              version & 0xff, (int) MIN (name_len, 40),
                              (const char *) name);
      return FALSE;
    }
  for (;;)
    {
      if (!get_field (&c, &type, &id))
        {
          *why = g_strdup ("the reply is cut short");
          return FALSE;
        }
      if (type == T_STOP)
        break;
      if (id == 0 && type == T_LIST)
        {
          guint8 et;
          guint32 n;
          gint64 last_rank = 1;

          if (!get_u8 (&c, &et) || !get_u32 (&c, &n) || et != T_STRUCT)
            {
              *why = g_strdup ("the reply's success is not a list of structs");
              return FALSE;
            }
          for (guint32 i = 0; i < n; i++)
            if (!read_entry (&c, &last_rank, why))
              return FALSE;
          *entries = n;
          answered = TRUE;
        }
      else if (id > 0 && type == T_STRUCT)
        {
          *why = exception_message (&c);
          return FALSE;
        }
      else if (!skip (&c, type, 0))
        {
          *why = g_strdup ("the reply holds a malformed field");
          return FALSE;
        }
    }
  if (!answered)
    *why = g_strdup ("the reply has no success field");
  return answered;
}
