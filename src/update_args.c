/* update_args.c -- UpdateBatch's arguments read into plain structs (see
 * update_args.h). */
#include "update_args.h"

#include "protocol.h"

void
rank_update_fields_of (const rankUpdateRequest *request,
                       RankUpdateFields *fields)
{
  *fields = (RankUpdateFields){
    .board = request->board,
    .member = request->member,
    .value = request->value,
    .request_id = request->request_id,
    .has_mode = request->__isset_mode,
    .mode = (gint32) request->mode,
    .has_timestamp_ms = request->__isset_timestamp_ms,
    .timestamp_ms = request->timestamp_ms,
    .subscores = request->__isset_subscores ? request->subscores : NULL,
    .data = request->__isset_data ? request->data : NULL,
  };
}

/* ---- reads ---- */

/* A string into *into, which it replaces; TRUE once read. */
static gboolean
read_string (ThriftProtocol *in, char **into, GError **error)
{
  g_clear_pointer (into, g_free);
  return thrift_protocol_read_string (in, into, error) >= 0;
}

static gboolean
read_i64 (ThriftProtocol *in, gint64 *into, GError **error)
{
  return thrift_protocol_read_i64 (in, into, error) >= 0;
}

static gboolean
missing (const char *field, GError **error)
{
  g_set_error (error, THRIFT_PROTOCOL_ERROR, THRIFT_PROTOCOL_ERROR_INVALID_DATA,
               "missing required field '%s'", field);
  return FALSE;
}

/* ---- UpdateRequest ---- */

/* subscores: list<i64>, appended to *into. */
static gboolean
read_subscores (ThriftProtocol *in, GArray **into, GError **error)
{
  ThriftType type;
  guint32 size;

  if (thrift_protocol_read_list_begin (in, &type, &size, error) < 0)
    return FALSE;
  if (*into == NULL)
    *into = g_array_new (FALSE, FALSE, sizeof (gint64));
  for (guint32 i = 0; i < size; i++)
    {
      gint64 v;

      if (!read_i64 (in, &v, error))
        return FALSE;
      g_array_append_val (*into, v);
    }
  return thrift_protocol_read_list_end (in, error) >= 0;
}

/* data: map<string, string>, into *into (a key given again replaces). */
static gboolean
read_data (ThriftProtocol *in, GHashTable **into, GError **error)
{
  ThriftType key_type, value_type;
  guint32 size;

  if (thrift_protocol_read_map_begin (in, &key_type, &value_type, &size, error)
      < 0)
    return FALSE;
  if (*into == NULL)
    *into = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  for (guint32 i = 0; i < size; i++)
    {
      char *key = NULL, *value = NULL;

      if (!read_string (in, &key, error))
        return FALSE;
      if (!read_string (in, &value, error))
        {
          g_free (key);
          return FALSE;
        }
      g_hash_table_insert (*into, key, value);
    }
  return thrift_protocol_read_map_end (in, error) >= 0;
}

static void
fields_clear (RankUpdateFields *f)
{
  g_free (f->board);
  g_free (f->member);
  g_free (f->request_id);
  if (f->subscores != NULL)
    g_array_unref (f->subscores);
  if (f->data != NULL)
    g_hash_table_unref (f->data);
}

/* An UpdateRequest being read: its fields, and which of the required ones
 * (bit id) were read. */
typedef struct
{
  RankUpdateFields *f;
  guint seen;
} UpdateRead;

/* The IDL's type of each field of UpdateRequest, by id. */
static const ThriftType update_types[] = {
  [1] = T_STRING, [2] = T_STRING, [3] = T_I64,  [4] = T_STRING,
  [5] = T_I32,    [6] = T_I64,    [7] = T_LIST, [8] = T_MAP,
};

/* A field of UpdateRequest; one of another id or type is skipped. */
static gboolean
update_field (ThriftProtocol *in, ThriftType type, gint16 id, gpointer data,
              GError **error)
{
  UpdateRead *r = data;
  RankUpdateFields *f = r->f;
  gboolean ok = FALSE;

  if (id < 1 || id >= (gint16) G_N_ELEMENTS (update_types)
      || type != update_types[id])
    return rank_protocol_skip (in, type, error);
  switch (id)
    {
    case 1:
      ok = read_string (in, &f->board, error);
      break;
    case 2:
      ok = read_string (in, &f->member, error);
      break;
    case 3:
      ok = read_i64 (in, &f->value, error);
      break;
    case 4:
      ok = read_string (in, &f->request_id, error);
      break;
    case 5:
      ok = f->has_mode = thrift_protocol_read_i32 (in, &f->mode, error) >= 0;
      break;
    case 6:
      ok = f->has_timestamp_ms = read_i64 (in, &f->timestamp_ms, error);
      break;
    case 7:
      ok = read_subscores (in, &f->subscores, error);
      break;
    case 8:
      ok = read_data (in, &f->data, error);
      break;
    }
  if (ok)
    r->seen |= 1u << id;
  return ok;
}

/* An UpdateRequest into f (zeroed; what it holds is freed with it,
 * whether the read succeeds or not). */
static gboolean
read_update (ThriftProtocol *in, RankUpdateFields *f, GError **error)
{
  static const char *const required[]
      = { [1] = "board", [2] = "member", [3] = "value", [4] = "request_id" };
  UpdateRead r = { f, 0 };

  if (!rank_protocol_read_struct (in, update_field, &r, error))
    return FALSE;
  /* In the generated reader's order. */
  for (guint id = 1; id < G_N_ELEMENTS (required); id++)
    if ((r.seen & (1u << id)) == 0)
      return missing (required[id], error);
  return TRUE;
}

/* ---- UpdateBatchRequest, UpdateBatch's arguments ---- */

/* requests: list<UpdateRequest>, appended to a->requests. */
static gboolean
read_requests (ThriftProtocol *in, RankUpdateBatchArgs *a, GError **error)
{
  ThriftType type;
  guint32 size;

  if (thrift_protocol_read_list_begin (in, &type, &size, error) < 0)
    return FALSE;
  for (guint32 i = 0; i < size; i++)
    {
      guint at = a->requests->len;

      /* Zeroed, and in the array before it is read: freed with it. */
      g_array_set_size (a->requests, at + 1);
      if (!read_update (in, &g_array_index (a->requests, RankUpdateFields, at),
                        error))
        return FALSE;
    }
  return thrift_protocol_read_list_end (in, error) >= 0;
}

/* An UpdateBatchRequest being read, and whether its requests were. */
typedef struct
{
  RankUpdateBatchArgs *a;
  gboolean requests;
} BatchRead;

static gboolean
batch_field (ThriftProtocol *in, ThriftType type, gint16 id, gpointer data,
             GError **error)
{
  BatchRead *r = data;
  RankUpdateBatchArgs *a = r->a;

  if (id == 1 && type == T_LIST)
    return r->requests = read_requests (in, a, error);
  if (id == 2 && type == T_BOOL)
    return a->has_with_rank
           = thrift_protocol_read_bool (in, &a->with_rank, error) >= 0;
  if (id == 3 && type == T_STRING)
    return read_string (in, &a->request_id, error);
  return rank_protocol_skip (in, type, error);
}

/* UpdateBatch's arguments: field 1 its UpdateBatchRequest (given twice,
 * the second is read over the first, as the generated reader does). */
static gboolean
args_field (ThriftProtocol *in, ThriftType type, gint16 id, gpointer data,
            GError **error)
{
  BatchRead r = { data, FALSE };

  if (id != 1 || type != T_STRUCT)
    return rank_protocol_skip (in, type, error);
  return rank_protocol_read_struct (in, batch_field, &r, error)
         && (r.requests || missing ("requests", error));
}

static RankUpdateBatchArgs *
batch_args_new (void)
{
  RankUpdateBatchArgs *a = g_new0 (RankUpdateBatchArgs, 1);

  a->requests = g_array_new (FALSE, TRUE, sizeof (RankUpdateFields));
  /* The IDL's default. */
  a->with_rank = TRUE;
  return a;
}

void
rank_update_batch_args_free (RankUpdateBatchArgs *args)
{
  if (args == NULL)
    return;
  for (guint i = 0; i < args->requests->len; i++)
    fields_clear (&g_array_index (args->requests, RankUpdateFields, i));
  g_array_unref (args->requests);
  g_free (args->request_id);
  g_free (args);
}

RankUpdateBatchArgs *
rank_update_batch_args_read (ThriftProtocol *in, GError **error)
{
  RankUpdateBatchArgs *a = batch_args_new ();

  if (rank_protocol_read_struct (in, args_field, a, error))
    return a;
  rank_update_batch_args_free (a);
  return NULL;
}
