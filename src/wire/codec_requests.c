/* codec_requests.c -- the busiest methods' arguments read into plain structs
 * (see codec_requests.h). */
#include "codec_requests.h"

#include <stddef.h>

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
    .has_with_rank = request->__isset_with_rank,
    .with_rank = request->with_rank,
  };
}

/* ---- a request struct, field by field, from a table ---- */

/* What a field holds, and so how it is read into its place. */
typedef enum
{
  KIND_NONE, /* no field of this id: skipped */
  KIND_STRING,
  KIND_I32,
  KIND_I64,
  KIND_BOOL,
  KIND_SUBSCORES, /* list<i64>, appended to a GArray */
  KIND_DATA,      /* map<string, string>, into a GHashTable */
  KIND_REQUESTS,  /* list<UpdateRequest>, appended to a GArray */
} Kind;

/* A field of a request struct, by id: its kind, where it goes (offset
 * into the plain struct), where a gboolean says it was given (isset: 0
 * for none; no field is at offset 0 with a flag), and its name if it is
 * required. */
typedef struct
{
  Kind kind;
  gsize offset;
  gsize isset;
  const char *required;
} FieldSpec;

/* The Thrift type of each kind. */
static const ThriftType kind_types[] = {
  [KIND_NONE] = T_STOP, [KIND_STRING] = T_STRING, [KIND_I32] = T_I32,
  [KIND_I64] = T_I64,   [KIND_BOOL] = T_BOOL,     [KIND_SUBSCORES] = T_LIST,
  [KIND_DATA] = T_MAP,  [KIND_REQUESTS] = T_LIST,
};

/* A request struct being read: its fields by id (1 .. n - 1), the plain
 * struct they go into, and which of them (bit id) were read. */
typedef struct
{
  const FieldSpec *specs;
  guint n;
  gpointer into;
  guint seen;
} RequestRead;

static gboolean
missing (const char *field, GError **error)
{
  g_set_error (error, THRIFT_PROTOCOL_ERROR, THRIFT_PROTOCOL_ERROR_INVALID_DATA,
               "missing required field '%s'", field);
  return FALSE;
}

/* A string into *into, which it replaces; TRUE once read. */
static gboolean
read_string (ThriftProtocol *in, char **into, GError **error)
{
  g_clear_pointer (into, g_free);
  return thrift_protocol_read_string (in, into, error) >= 0;
}

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

      if (thrift_protocol_read_i64 (in, &v, error) < 0)
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

static gboolean read_requests (ThriftProtocol *in, GArray *into,
                               GError **error);

/* A field, by its spec; one of another id or type is skipped. */
static gboolean
spec_field (ThriftProtocol *in, ThriftType type, gint16 id, gpointer data,
            GError **error)
{
  RequestRead *r = data;
  const FieldSpec *f;
  char *at;
  gboolean ok = FALSE;

  if (id < 1 || (guint) id >= r->n || r->specs[id].kind == KIND_NONE
      || type != kind_types[r->specs[id].kind])
    return rank_protocol_skip (in, type, error);
  f = &r->specs[id];
  at = (char *) r->into + f->offset;
  switch (f->kind)
    {
    case KIND_STRING:
      ok = read_string (in, (char **) at, error);
      break;
    case KIND_I32:
      ok = thrift_protocol_read_i32 (in, (gint32 *) at, error) >= 0;
      break;
    case KIND_I64:
      ok = thrift_protocol_read_i64 (in, (gint64 *) at, error) >= 0;
      break;
    case KIND_BOOL:
      ok = thrift_protocol_read_bool (in, (gboolean *) at, error) >= 0;
      break;
    case KIND_SUBSCORES:
      ok = read_subscores (in, (GArray **) at, error);
      break;
    case KIND_DATA:
      ok = read_data (in, (GHashTable **) at, error);
      break;
    case KIND_REQUESTS:
      ok = read_requests (in, *(GArray **) at, error);
      break;
    case KIND_NONE:
      g_assert_not_reached ();
    }
  if (!ok)
    return FALSE;
  r->seen |= 1u << id;
  if (f->isset != 0)
    *(gboolean *) ((char *) r->into + f->isset) = TRUE;
  return TRUE;
}

/* A request struct into into by specs (n of them, by id); then each
 * required field, in the generated reader's order (by id), must have been
 * read. What into holds is freed with it, whether the read succeeds or
 * not. */
static gboolean
read_request (ThriftProtocol *in, const FieldSpec *specs, guint n,
              gpointer into, GError **error)
{
  RequestRead r = { specs, n, into, 0 };

  g_assert (n <= 32);
  if (!rank_protocol_read_struct (in, spec_field, &r, error))
    return FALSE;
  for (guint id = 1; id < n; id++)
    if (specs[id].required != NULL && (r.seen & (1u << id)) == 0)
      return missing (specs[id].required, error);
  return TRUE;
}

/* A method's arguments: field 1 its request, read by specs into into (the
 * request given twice is read over the first, as the generated reader
 * does); any other field is skipped. */
typedef struct
{
  const FieldSpec *specs;
  guint n;
  gpointer into;
} ArgsRead;

static gboolean
args_field (ThriftProtocol *in, ThriftType type, gint16 id, gpointer data,
            GError **error)
{
  const ArgsRead *a = data;

  if (id != 1 || type != T_STRUCT)
    return rank_protocol_skip (in, type, error);
  return read_request (in, a->specs, a->n, a->into, error);
}

static gboolean
read_args (ThriftProtocol *in, const FieldSpec *specs, guint n, gpointer into,
           GError **error)
{
  ArgsRead a = { specs, n, into };

  return rank_protocol_read_struct (in, args_field, &a, error);
}

#define FIELD(kind, type, member, required)                                    \
  {                                                                            \
    kind, offsetof (type, member), 0, required                                 \
  }
#define FIELD_ISSET(kind, type, member, isset)                                 \
  {                                                                            \
    kind, offsetof (type, member), offsetof (type, isset), NULL                \
  }

#define SPECS(specs) (specs), G_N_ELEMENTS (specs)

static void fields_clear (RankUpdateFields *f);

/* Frees what the fields of into, by specs, hold (NULL ones and numbers
 * hold nothing): the table says what each field owns, as it says how it
 * is read. */
static void
spec_clear (const FieldSpec *specs, guint n, gpointer into)
{
  for (guint id = 1; id < n; id++)
    {
      gpointer *at = (gpointer *) ((char *) into + specs[id].offset);
      GArray *requests;

      switch (specs[id].kind)
        {
        case KIND_STRING:
          g_free (*at);
          break;
        case KIND_SUBSCORES:
          if (*at != NULL)
            g_array_unref (*at);
          break;
        case KIND_DATA:
          if (*at != NULL)
            g_hash_table_unref (*at);
          break;
        case KIND_REQUESTS:
          requests = *at;
          for (guint i = 0; i < requests->len; i++)
            fields_clear (&g_array_index (requests, RankUpdateFields, i));
          g_array_unref (requests);
          break;
        case KIND_NONE:
        case KIND_I32:
        case KIND_I64:
        case KIND_BOOL:
          break;
        }
    }
}

/* A plain arguments struct (NULL: none) and what its fields hold. */
static void
args_free (const FieldSpec *specs, guint n, gpointer args)
{
  if (args == NULL)
    return;
  spec_clear (specs, n, args);
  g_free (args);
}

/* A method's arguments read into args (zeroed, with the IDL's defaults),
 * which it returns; NULL with error set, args freed, if they do not
 * decode. */
static gpointer
args_read (ThriftProtocol *in, const FieldSpec *specs, guint n, gpointer args,
           GError **error)
{
  if (read_args (in, specs, n, args, error))
    return args;
  args_free (specs, n, args);
  return NULL;
}

/* ---- UpdateRequest, and Update's arguments ---- */

static const FieldSpec update_specs[] = {
  [1] = FIELD (KIND_STRING, RankUpdateFields, board, "board"),
  [2] = FIELD (KIND_STRING, RankUpdateFields, member, "member"),
  [3] = FIELD (KIND_I64, RankUpdateFields, value, "value"),
  [4] = FIELD (KIND_STRING, RankUpdateFields, request_id, "request_id"),
  [5] = FIELD_ISSET (KIND_I32, RankUpdateFields, mode, has_mode),
  [6]
  = FIELD_ISSET (KIND_I64, RankUpdateFields, timestamp_ms, has_timestamp_ms),
  [7] = FIELD (KIND_SUBSCORES, RankUpdateFields, subscores, NULL),
  [8] = FIELD (KIND_DATA, RankUpdateFields, data, NULL),
  [9] = FIELD_ISSET (KIND_BOOL, RankUpdateFields, with_rank, has_with_rank),
};

static void
fields_clear (RankUpdateFields *f)
{
  spec_clear (SPECS (update_specs), f);
}

void
rank_update_args_free (RankUpdateFields *args)
{
  args_free (SPECS (update_specs), args);
}

RankUpdateFields *
rank_update_args_read (ThriftProtocol *in, GError **error)
{
  return args_read (in, SPECS (update_specs), g_new0 (RankUpdateFields, 1),
                    error);
}

/* ---- UpdateBatchRequest, UpdateBatch's arguments ---- */

/* requests: list<UpdateRequest>, appended to into. */
static gboolean
read_requests (ThriftProtocol *in, GArray *into, GError **error)
{
  ThriftType type;
  guint32 size;

  if (thrift_protocol_read_list_begin (in, &type, &size, error) < 0)
    return FALSE;
  for (guint32 i = 0; i < size; i++)
    {
      guint at = into->len;

      /* Zeroed, and in the array before it is read: freed with it. */
      g_array_set_size (into, at + 1);
      if (!read_request (in, SPECS (update_specs),
                         &g_array_index (into, RankUpdateFields, at), error))
        return FALSE;
    }
  return thrift_protocol_read_list_end (in, error) >= 0;
}

static const FieldSpec batch_specs[] = {
  [1] = FIELD (KIND_REQUESTS, RankUpdateBatchArgs, requests, "requests"),
  [2] = FIELD_ISSET (KIND_BOOL, RankUpdateBatchArgs, with_rank, has_with_rank),
  [3] = FIELD (KIND_STRING, RankUpdateBatchArgs, request_id, NULL),
};

void
rank_update_batch_args_free (RankUpdateBatchArgs *args)
{
  args_free (SPECS (batch_specs), args);
}

RankUpdateBatchArgs *
rank_update_batch_args_read (ThriftProtocol *in, GError **error)
{
  RankUpdateBatchArgs *a = g_new0 (RankUpdateBatchArgs, 1);

  a->requests = g_array_new (FALSE, TRUE, sizeof (RankUpdateFields));
  /* The IDL's default. */
  a->with_rank = TRUE;
  return args_read (in, SPECS (batch_specs), a, error);
}

/* ---- GetRankRequest, GetRank's arguments ---- */

static const FieldSpec get_rank_specs[] = {
  [1] = FIELD (KIND_STRING, RankGetRankArgs, board, "board"),
  [2] = FIELD (KIND_STRING, RankGetRankArgs, member, "member"),
  [3] = FIELD (KIND_I32, RankGetRankArgs, periods_back, NULL),
  [4] = FIELD (KIND_BOOL, RankGetRankArgs, window, NULL),
};

void
rank_get_rank_args_free (RankGetRankArgs *args)
{
  args_free (SPECS (get_rank_specs), args);
}

RankGetRankArgs *
rank_get_rank_args_read (ThriftProtocol *in, GError **error)
{
  return args_read (in, SPECS (get_rank_specs), g_new0 (RankGetRankArgs, 1),
                    error);
}

/* ---- GetTopNRequest, GetTopN's arguments ---- */

static const FieldSpec get_top_n_specs[] = {
  [1] = FIELD (KIND_STRING, RankGetTopNArgs, board, "board"),
  [2] = FIELD (KIND_I32, RankGetTopNArgs, n, "n"),
  [3] = FIELD (KIND_I32, RankGetTopNArgs, offset, NULL),
  [4] = FIELD (KIND_I32, RankGetTopNArgs, periods_back, NULL),
  [5] = FIELD (KIND_BOOL, RankGetTopNArgs, with_data, NULL),
  [6] = FIELD (KIND_BOOL, RankGetTopNArgs, window, NULL),
};

void
rank_get_top_n_args_free (RankGetTopNArgs *args)
{
  args_free (SPECS (get_top_n_specs), args);
}

RankGetTopNArgs *
rank_get_top_n_args_read (ThriftProtocol *in, GError **error)
{
  return args_read (in, SPECS (get_top_n_specs), g_new0 (RankGetTopNArgs, 1),
                    error);
}
