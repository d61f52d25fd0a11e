/* test_codec.c -- every struct of idl/ranking.thrift written and read by
 * the generated code, and by the hand codecs where there are some (the
 * request readers of codec_requests.c, UpdateBatch's encoder of codec_batch.c),
 * in the four transport and protocol pairs.
 *
 * The structs are found by parsing the IDL when the test runs, and filled
 * through their GObject properties, each field set or left unset at
 * random: a struct or field added to the IDL is tested without a line of
 * this file changing. A field the hand codecs do not know fails it: the
 * hand encoder leaves it out (bytes differ from the generated writer's),
 * the hand reader skips it (the struct read differs).
 *
 * Two structs are equal when the generated writer gives the same bytes
 * for both in the binary protocol, maps compared as sets of entries (a
 * hash table's order is not the struct's).
 */
#include <dlfcn.h>
#include <string.h>

#include <thrift/c_glib/protocol/thrift_binary_protocol.h>
#include <thrift/c_glib/protocol/thrift_compact_protocol.h>
#include <thrift/c_glib/transport/thrift_framed_transport.h>
#include <thrift/c_glib/transport/thrift_memory_buffer.h>

#include "api.h"
#include "codec_requests.h"
#include "codec.h"
#include "codec_batch.h"
#include "connbuf.h"
#include "protocol.h"
#include "thrift_fixes.h"

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ThriftStruct, g_object_unref)

/* Random structs per struct and pair. */
#define ITERATIONS 150
/* Elements of a random list or map, at most. */
#define MAX_ELEMENTS 4
/* A long string's length. */
#define LONG_STRING 3000
#define MAX_BYTES (64 * 1024 * 1024)

/* ---- the IDL ---- */

typedef struct
{
  char *name;
  char *type; /* as the IDL writes it: i64, list<i64>, UpdateRequest... */
  gboolean optional;
} IdlField;

typedef struct
{
  char *name;
  GType type;
  GPtrArray *fields; /* IdlField */
} IdlStruct;

static GPtrArray *idl_structs; /* IdlStruct */

static void
idl_field_free (gpointer p)
{
  IdlField *f = p;

  g_free (f->name);
  g_free (f->type);
  g_free (f);
}

static IdlStruct *
idl_struct_find (const char *name)
{
  for (guint i = 0; i < idl_structs->len; i++)
    {
      IdlStruct *s = idl_structs->pdata[i];

      if (strcmp (s->name, name) == 0)
        return s;
    }
  return NULL;
}

/* The field whose property is named name (GObject writes a field's
 * underscores as dashes). */
static IdlField *
idl_field_find (IdlStruct *s, const char *name)
{
  for (guint i = 0; i < s->fields->len; i++)
    {
      IdlField *f = s->fields->pdata[i];
      g_autofree char *dashed = g_strdelimit (g_strdup (f->name), "_", '-');

      if (strcmp (dashed, name) == 0)
        return f;
    }
  return NULL;
}

/* Every struct and exception of the IDL, their fields and types. */
static void
idl_parse (void)
{
  g_autofree char *path
      = g_build_filename (RANK_SOURCE_DIR, "idl", "ranking.thrift", NULL);
  g_autofree char *text = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GRegex) comments = NULL, structs = NULL, fields = NULL;
  g_autofree char *bare = NULL;
  GMatchInfo *m;

  g_assert_true (g_file_get_contents (path, &text, NULL, &error));
  comments
      = g_regex_new ("/\\*.*?\\*/|//[^\\n]*|#[^\\n]*", G_REGEX_DOTALL, 0, NULL);
  bare = g_regex_replace_literal (comments, text, -1, 0, " ", 0, NULL);
  structs = g_regex_new ("\\b(struct|exception)\\s+(\\w+)\\s*\\{([^}]*)\\}", 0,
                         0, NULL);
  fields = g_regex_new ("(\\d+)\\s*:\\s*(required|optional)?\\s*"
                        "(\\w+(?:\\s*<[^>]*>)?)\\s+(\\w+)",
                        0, 0, NULL);
  idl_structs = g_ptr_array_new ();
  g_regex_match (structs, bare, 0, &m);
  for (; g_match_info_matches (m); g_match_info_next (m, NULL))
    {
      IdlStruct *s = g_new0 (IdlStruct, 1);
      g_autofree char *body = g_match_info_fetch (m, 3);
      GMatchInfo *fm;

      s->name = g_match_info_fetch (m, 2);
      s->fields = g_ptr_array_new_with_free_func (idl_field_free);
      g_regex_match (fields, body, 0, &fm);
      for (; g_match_info_matches (fm); g_match_info_next (fm, NULL))
        {
          IdlField *f = g_new0 (IdlField, 1);
          g_autofree char *qualifier = g_match_info_fetch (fm, 2);

          f->type = g_match_info_fetch (fm, 3);
          f->name = g_match_info_fetch (fm, 4);
          f->optional = g_strcmp0 (qualifier, "optional") == 0;
          g_ptr_array_add (s->fields, f);
        }
      g_match_info_free (fm);
      g_ptr_array_add (idl_structs, s);
    }
  g_match_info_free (m);
  g_assert_cmpuint (idl_structs->len, >, 10);
}

/* The generated type of IDL struct name: rank_<name in snake case>_get_type
 * (the c_glib generator's rule), looked up in this program. 0 when there
 * is none. */
static GType
generated_type (const char *name)
{
  g_autoptr (GString) fn = g_string_new ("rank");
  GType (*get_type) (void);

  for (const char *p = name; *p != '\0'; p++)
    {
      if (g_ascii_isupper (*p))
        g_string_append_c (fn, '_');
      g_string_append_c (fn, g_ascii_tolower (*p));
    }
  g_string_append (fn, "_get_type");
  *(void **) &get_type = dlsym (RTLD_DEFAULT, fn->str);
  return get_type != NULL ? get_type () : 0;
}

/* Every struct and exception of the IDL has its generated type, named
 * rank<Name>Type (its C struct is rank<Name>), with one property for
 * each field and no other. */
static void
test_types (void)
{
  for (guint i = 0; i < idl_structs->len; i++)
    {
      IdlStruct *s = idl_structs->pdata[i];
      g_autofree char *type_name = g_strconcat ("rank", s->name, "Type", NULL);
      GObjectClass *klass;
      g_autofree GParamSpec **props = NULL;
      guint n;

      g_test_message ("%s", s->name);
      g_assert_cmpuint (s->type, !=, 0);
      g_assert_cmpstr (g_type_name (s->type), ==, type_name);
      g_assert_true (g_type_is_a (s->type, THRIFT_TYPE_STRUCT));
      klass = g_type_class_ref (s->type);
      props = g_object_class_list_properties (klass, &n);
      g_assert_cmpuint (n, ==, s->fields->len);
      for (guint k = 0; k < n; k++)
        g_assert_nonnull (idl_field_find (s, props[k]->name));
      g_type_class_unref (klass);
    }
}

/* ---- random values ---- */

static ThriftStruct *random_struct (IdlStruct *s, guint depth);

static char *
random_string (void)
{
  guint len;
  char *s;

  switch (g_test_rand_int_range (0, 8))
    {
    case 0:
      len = 0;
      break;
    case 1:
      len = LONG_STRING;
      break;
    default:
      len = (guint) g_test_rand_int_range (1, 24);
      break;
    }
  s = g_malloc (len + 1);
  for (guint i = 0; i < len; i++)
    /* Any byte but NUL, which a C string cannot hold. */
    s[i] = (char) (g_test_rand_bit () ? g_test_rand_int_range (' ', '~' + 1)
                                      : g_test_rand_int_range (1, 256));
  s[len] = '\0';
  return s;
}

static gint64
random_i64 (gint64 min, gint64 max)
{
  gint64 v;

  switch (g_test_rand_int_range (0, 7))
    {
    case 0:
      return min;
    case 1:
      return max;
    case 2:
      v = 0;
      break;
    case 3:
      v = -1;
      break;
    case 4:
      v = 1;
      break;
    case 5:
      v = g_test_rand_int ();
      break;
    default:
      v = (gint64) ((guint64) (guint32) g_test_rand_int () << 32
                    | (guint32) g_test_rand_int ());
      break;
    }
  return CLAMP (v, min, max);
}

static gdouble
random_double (void)
{
  static const gdouble special[] = { 0.0, -0.0, 1e308, -4.9e-324, 0.1 };

  if (g_test_rand_bit ())
    return special[g_test_rand_int_range (0, G_N_ELEMENTS (special))];
  return g_test_rand_double_range (-1e12, 1e12);
}

/* The element type of list<T> or set<T>; the key and value of map<K, V>. */
static char *
type_arg (const char *type, guint which)
{
  const char *open = strchr (type, '<');
  g_auto (GStrv) parts = NULL;

  g_assert_nonnull (open);
  parts = g_strsplit (open + 1, ",", 2);
  g_assert_cmpuint (which, <, g_strv_length (parts));
  return g_strstrip (g_strdelimit (g_strdup (parts[which]), ">", ' '));
}

static gboolean
type_is (const char *type, const char *base)
{
  return g_str_has_prefix (type, base) && type[strlen (base)] == '<';
}

/* A random list<elem>, as the generated code holds it. */
static gpointer
random_list (GType container, const char *elem, guint depth)
{
  guint n = (guint) g_test_rand_int_range (0, MAX_ELEMENTS + 1);
  IdlStruct *s = idl_struct_find (elem);

  if (container == G_TYPE_ARRAY)
    {
      GArray *a;

      if (strcmp (elem, "i64") == 0)
        {
          a = g_array_new (FALSE, TRUE, sizeof (gint64));
          for (guint i = 0; i < n; i++)
            {
              gint64 v = random_i64 (G_MININT64, G_MAXINT64);

              g_array_append_val (a, v);
            }
        }
      else if (strcmp (elem, "i32") == 0)
        {
          a = g_array_new (FALSE, TRUE, sizeof (gint32));
          for (guint i = 0; i < n; i++)
            {
              gint32 v = (gint32) random_i64 (G_MININT32, G_MAXINT32);

              g_array_append_val (a, v);
            }
        }
      else if (strcmp (elem, "double") == 0)
        {
          a = g_array_new (FALSE, TRUE, sizeof (gdouble));
          for (guint i = 0; i < n; i++)
            {
              gdouble v = random_double ();

              g_array_append_val (a, v);
            }
        }
      else
        g_error ("list<%s>: a GArray of what? Teach test_codec.c", elem);
      return a;
    }
  g_assert_true (container == G_TYPE_PTR_ARRAY);
  if (s != NULL)
    {
      GPtrArray *a = g_ptr_array_new_with_free_func (g_object_unref);

      for (guint i = 0; i < n; i++)
        g_ptr_array_add (a, random_struct (s, depth + 1));
      return a;
    }
  if (strcmp (elem, "string") == 0)
    {
      GPtrArray *a = g_ptr_array_new_with_free_func (g_free);

      for (guint i = 0; i < n; i++)
        g_ptr_array_add (a, random_string ());
      return a;
    }
  g_error ("list<%s>: a GPtrArray of what? Teach test_codec.c", elem);
}

static GHashTable *
random_map (const char *type)
{
  g_autofree char *key = type_arg (type, 0);
  g_autofree char *value = type_arg (type, 1);
  GHashTable *h;
  guint n = (guint) g_test_rand_int_range (0, MAX_ELEMENTS + 1);

  if (strcmp (key, "string") != 0 || strcmp (value, "string") != 0)
    g_error ("%s: teach test_codec.c", type);
  h = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  for (guint i = 0; i < n; i++)
    g_hash_table_insert (h, random_string (), random_string ());
  return h;
}

/* A random value of field f (its property pspec) into v. */
static void
random_value (IdlField *f, GParamSpec *pspec, GValue *v, guint depth)
{
  GType t = G_PARAM_SPEC_VALUE_TYPE (pspec);

  g_value_init (v, t);
  if (t == G_TYPE_STRING)
    g_value_take_string (v, random_string ());
  else if (t == G_TYPE_BOOLEAN)
    g_value_set_boolean (v, g_test_rand_bit ());
  else if (t == G_TYPE_INT)
    {
      GParamSpecInt *p = G_PARAM_SPEC_INT (pspec);

      g_value_set_int (v, (gint) random_i64 (p->minimum, p->maximum));
    }
  else if (t == G_TYPE_INT64)
    {
      GParamSpecInt64 *p = G_PARAM_SPEC_INT64 (pspec);

      g_value_set_int64 (v, random_i64 (p->minimum, p->maximum));
    }
  else if (t == G_TYPE_DOUBLE)
    g_value_set_double (v, random_double ());
  else if (t == G_TYPE_BYTE_ARRAY)
    {
      g_autofree char *s = random_string ();
      GByteArray *b = g_byte_array_new ();

      g_byte_array_append (b, (const guint8 *) s, (guint) strlen (s));
      g_value_take_boxed (v, b);
    }
  else if (t == G_TYPE_ARRAY || t == G_TYPE_PTR_ARRAY)
    {
      g_autofree char *elem = type_arg (f->type, 0);

      g_assert_true (type_is (f->type, "list"));
      g_value_take_boxed (v, random_list (t, elem, depth));
    }
  else if (t == G_TYPE_HASH_TABLE)
    {
      g_assert_true (type_is (f->type, "map"));
      g_value_take_boxed (v, random_map (f->type));
    }
  else if (g_type_is_a (t, THRIFT_TYPE_STRUCT))
    {
      IdlStruct *s = idl_struct_find (f->type);

      g_assert_nonnull (s);
      g_assert_true (s->type == t);
      g_value_take_object (v, random_struct (s, depth + 1));
    }
  else
    g_error ("%s %s: a property of type %s; teach test_codec.c", f->type,
             f->name, g_type_name (t));
}

/* A struct of s's type: every required field set, each optional one set
 * or left unset at random (a property set sets its isset; a new struct has
 * every optional field unset). */
static ThriftStruct *
random_struct (IdlStruct *s, guint depth)
{
  GObject *o = g_object_new (s->type, NULL);
  GObjectClass *klass = G_OBJECT_GET_CLASS (o);

  g_assert_cmpuint (depth, <, 8);
  for (guint i = 0; i < s->fields->len; i++)
    {
      IdlField *f = s->fields->pdata[i];
      GParamSpec *pspec = g_object_class_find_property (klass, f->name);
      GValue v = G_VALUE_INIT;

      g_assert_nonnull (pspec);
      if (f->optional && g_test_rand_bit ())
        continue;
      random_value (f, pspec, &v, depth);
      g_object_set_property (o, f->name, &v);
      g_value_unset (&v);
    }
  return THRIFT_STRUCT (o);
}

/* ---- transports and protocols ---- */

/* The four pairs: framed or buffered (bare), binary or compact. */
#define PAIRS 4
#define PAIR_FRAMED(pair) (((pair) &1) != 0)
#define PAIR_KIND(pair)                                                        \
  (((pair) &2) != 0 ? RANK_PROTOCOL_COMPACT : RANK_PROTOCOL_BINARY)

static const char *
pair_name (int pair)
{
  static const char *const names[] = { "buffered binary", "framed binary",
                                       "buffered compact", "framed compact" };

  return names[pair];
}

typedef struct
{
  ThriftMemoryBuffer *memory;
  ThriftTransport *transport; /* memory, or a framed transport over it */
  ThriftProtocol *protocol;
} Stream;

static void
stream_open (Stream *s, int pair)
{
  s->memory
      = g_object_new (THRIFT_TYPE_MEMORY_BUFFER, "buf_size", MAX_BYTES, NULL);
  s->transport = PAIR_FRAMED (pair)
                     ? g_object_new (THRIFT_TYPE_FRAMED_TRANSPORT, "transport",
                                     s->memory, NULL)
                     : g_object_ref (THRIFT_TRANSPORT (s->memory));
  s->protocol = g_object_new (PAIR_KIND (pair) == RANK_PROTOCOL_COMPACT
                                  ? THRIFT_TYPE_COMPACT_PROTOCOL
                                  : THRIFT_TYPE_BINARY_PROTOCOL,
                              "transport", s->transport, NULL);
}

/* The bytes written, after a flush (which writes a framed one's frame). */
static GBytes *
stream_close (Stream *s)
{
  GBytes *bytes;

  g_assert_true (thrift_transport_flush (s->transport, NULL));
  bytes = g_bytes_new (s->memory->buf->data, s->memory->buf->len);
  g_object_unref (s->protocol);
  g_object_unref (s->transport);
  g_object_unref (s->memory);
  return bytes;
}

static GBytes *
generated_write (ThriftStruct *o, int pair)
{
  Stream s;
  g_autoptr (GError) error = NULL;

  stream_open (&s, pair);
  g_assert_cmpint (thrift_struct_write (o, s.protocol, &error), >=, 0);
  g_assert_no_error (error);
  return stream_close (&s);
}

/* o as the argument struct of a call (its field 1), as a client sends it:
 * what the request readers read. */
static GBytes *
generated_write_args (ThriftStruct *o, int pair)
{
  Stream s;
  ThriftProtocol *p;
  g_autoptr (GError) error = NULL;

  stream_open (&s, pair);
  p = s.protocol;
  g_assert_cmpint (thrift_protocol_write_struct_begin (p, "args", &error), >=,
                   0);
  g_assert_cmpint (
      thrift_protocol_write_field_begin (p, "request", T_STRUCT, 1, &error), >=,
      0);
  g_assert_cmpint (thrift_struct_write (o, p, &error), >=, 0);
  g_assert_cmpint (thrift_protocol_write_field_end (p, &error), >=, 0);
  g_assert_cmpint (thrift_protocol_write_field_stop (p, &error), >=, 0);
  g_assert_cmpint (thrift_protocol_write_struct_end (p, &error), >=, 0);
  g_assert_no_error (error);
  return stream_close (&s);
}

/* bytes read back by the generated reader into a new struct of type. */
static ThriftStruct *
generated_read (GType type, GBytes *bytes, int pair)
{
  Stream s;
  ThriftStruct *o = g_object_new (type, NULL);
  gsize len;
  const guint8 *data = g_bytes_get_data (bytes, &len);
  g_autoptr (GError) error = NULL;

  stream_open (&s, pair);
  g_byte_array_append (s.memory->buf, data, (guint) len);
  g_assert_cmpint (thrift_struct_read (o, s.protocol, &error), >=, 0);
  g_assert_no_error (error);
  /* All of it read. */
  g_assert_cmpuint (s.memory->buf->len, ==, 0);
  g_bytes_unref (stream_close (&s));
  return o;
}

/* A value of type from in, in a form where equal values have equal bytes:
 * fields by id, maps' entries by key. */
static void canon_value (ThriftProtocol *in, ThriftType type, GByteArray *out);

static gint
bytes_compare (gconstpointer a, gconstpointer b)
{
  GByteArray *x = *(GByteArray *const *) a, *y = *(GByteArray *const *) b;
  gint c = memcmp (x->data, y->data, MIN (x->len, y->len));

  return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

static void
append_sorted (GByteArray *out, GPtrArray *parts)
{
  g_ptr_array_sort (parts, bytes_compare);
  for (guint i = 0; i < parts->len; i++)
    {
      GByteArray *b = parts->pdata[i];

      g_byte_array_append (out, b->data, b->len);
    }
}

static void
canon_value (ThriftProtocol *in, ThriftType type, GByteArray *out)
{
  guint8 tag = (guint8) type;

  g_byte_array_append (out, &tag, 1);
  switch (type)
    {
    case T_BOOL:
      {
        gboolean v;
        guint8 b;

        g_assert_cmpint (thrift_protocol_read_bool (in, &v, NULL), >=, 0);
        b = v ? 1 : 0;
        g_byte_array_append (out, &b, 1);
        break;
      }
    case T_BYTE:
      {
        gint8 v;

        g_assert_cmpint (thrift_protocol_read_byte (in, &v, NULL), >=, 0);
        g_byte_array_append (out, (guint8 *) &v, 1);
        break;
      }
    case T_I16:
      {
        gint16 v;

        g_assert_cmpint (thrift_protocol_read_i16 (in, &v, NULL), >=, 0);
        g_byte_array_append (out, (guint8 *) &v, sizeof v);
        break;
      }
    case T_I32:
      {
        gint32 v;

        g_assert_cmpint (thrift_protocol_read_i32 (in, &v, NULL), >=, 0);
        g_byte_array_append (out, (guint8 *) &v, sizeof v);
        break;
      }
    case T_I64:
      {
        gint64 v;

        g_assert_cmpint (thrift_protocol_read_i64 (in, &v, NULL), >=, 0);
        g_byte_array_append (out, (guint8 *) &v, sizeof v);
        break;
      }
    case T_DOUBLE:
      {
        gdouble v;

        g_assert_cmpint (thrift_protocol_read_double (in, &v, NULL), >=, 0);
        g_byte_array_append (out, (guint8 *) &v, sizeof v);
        break;
      }
    case T_STRING:
      {
        gpointer data = NULL;
        guint32 len;

        g_assert_cmpint (thrift_protocol_read_binary (in, &data, &len, NULL),
                         >=, 0);
        g_byte_array_append (out, (guint8 *) &len, sizeof len);
        g_byte_array_append (out, data, len);
        g_free (data);
        break;
      }
    case T_STRUCT:
      {
        g_autoptr (GPtrArray) fields = g_ptr_array_new_with_free_func (
            (GDestroyNotify) g_byte_array_unref);
        char *name = NULL;

        g_assert_cmpint (thrift_protocol_read_struct_begin (in, &name, NULL),
                         >=, 0);
        g_free (name);
        for (;;)
          {
            ThriftType ft;
            gint16 id;
            GByteArray *f;

            name = NULL;
            g_assert_cmpint (
                thrift_protocol_read_field_begin (in, &name, &ft, &id, NULL),
                >=, 0);
            g_free (name);
            if (ft == T_STOP)
              break;
            f = g_byte_array_new ();
            /* Big-endian: the order of the bytes is the order of ids. */
            g_byte_array_append (f, (guint8[]){ id >> 8, id & 0xff }, 2);
            canon_value (in, ft, f);
            g_ptr_array_add (fields, f);
            g_assert_cmpint (thrift_protocol_read_field_end (in, NULL), >=, 0);
          }
        g_assert_cmpint (thrift_protocol_read_struct_end (in, NULL), >=, 0);
        append_sorted (out, fields);
        tag = T_STOP;
        g_byte_array_append (out, &tag, 1);
        break;
      }
    case T_MAP:
      {
        g_autoptr (GPtrArray) entries = g_ptr_array_new_with_free_func (
            (GDestroyNotify) g_byte_array_unref);
        ThriftType kt, vt;
        guint32 n;

        g_assert_cmpint (
            thrift_protocol_read_map_begin (in, &kt, &vt, &n, NULL), >=, 0);
        g_byte_array_append (out, (guint8 *) &n, sizeof n);
        for (guint32 i = 0; i < n; i++)
          {
            GByteArray *e = g_byte_array_new ();

            canon_value (in, kt, e);
            canon_value (in, vt, e);
            g_ptr_array_add (entries, e);
          }
        g_assert_cmpint (thrift_protocol_read_map_end (in, NULL), >=, 0);
        append_sorted (out, entries);
        break;
      }
    case T_LIST:
    case T_SET:
      {
        ThriftType et;
        guint32 n;
        g_autoptr (GPtrArray) elements = g_ptr_array_new_with_free_func (
            (GDestroyNotify) g_byte_array_unref);

        if (type == T_LIST)
          g_assert_cmpint (thrift_protocol_read_list_begin (in, &et, &n, NULL),
                           >=, 0);
        else
          g_assert_cmpint (thrift_protocol_read_set_begin (in, &et, &n, NULL),
                           >=, 0);
        g_byte_array_append (out, (guint8 *) &n, sizeof n);
        for (guint32 i = 0; i < n; i++)
          {
            GByteArray *e = g_byte_array_new ();

            canon_value (in, et, e);
            g_ptr_array_add (elements, e);
          }
        if (type == T_SET)
          append_sorted (out, elements);
        else
          for (guint i = 0; i < elements->len; i++)
            {
              GByteArray *e = elements->pdata[i];

              g_byte_array_append (out, e->data, e->len);
            }
        break;
      }
    default:
      g_error ("type %d: teach test_codec.c", type);
    }
}

/* o in the canonical form, hex-printable. */
static GByteArray *
canon (ThriftStruct *o)
{
  g_autoptr (GBytes) bytes = generated_write (o, 0);
  GByteArray *out = g_byte_array_new ();
  Stream s;

  stream_open (&s, 0);
  g_byte_array_append (s.memory->buf, g_bytes_get_data (bytes, NULL),
                       (guint) g_bytes_get_size (bytes));
  canon_value (s.protocol, T_STRUCT, out);
  g_bytes_unref (stream_close (&s));
  return out;
}

static gboolean
structs_equal (ThriftStruct *a, ThriftStruct *b)
{
  g_autoptr (GByteArray) x = canon (a);
  g_autoptr (GByteArray) y = canon (b);

  return x->len == y->len && memcmp (x->data, y->data, x->len) == 0;
}

/* Where a and b first differ, for the failure message. */
static char *
first_difference (GBytes *a, GBytes *b)
{
  gsize na, nb, at = 0;
  const guint8 *x = g_bytes_get_data (a, &na), *y = g_bytes_get_data (b, &nb);
  GString *s = g_string_new (NULL);

  while (at < na && at < nb && x[at] == y[at])
    at++;
  g_string_append_printf (s,
                          "%" G_GSIZE_FORMAT " and %" G_GSIZE_FORMAT
                          " bytes, first difference at %" G_GSIZE_FORMAT
                          ":\n  hand:      ",
                          na, nb, at);
  for (gsize i = at; i < na && i < at + 16; i++)
    g_string_append_printf (s, "%02x ", x[i]);
  g_string_append (s, "\n  generated: ");
  for (gsize i = at; i < nb && i < at + 16; i++)
    g_string_append_printf (s, "%02x ", y[i]);
  return g_string_free (s, FALSE);
}

/* ---- the hand codecs ---- */

/* One hand codec: the IDL struct it encodes or decodes; encode writes a
 * generated struct of that type with the hand encoder; decode reads, with
 * the hand reader, a call's argument struct holding one, and returns what
 * it read as a generated struct. defaulted: the optional fields the hand
 * reader gives without saying whether they were sent (absent, they read
 * as the IDL's default). */
typedef struct
{
  const char *name;
  gboolean (*encode) (ThriftProtocol *out, ThriftStruct *o, GError **error);
  ThriftStruct *(*decode) (ThriftProtocol *in, GError **error);
  const char *const *defaulted;
  /* Takes a random struct into what the hand encoder's plain values can
   * say (each case named where it is done), before anything is written;
   * NULL: every value. A field the IDL gains is never taken out here, so
   * it still fails the test until the codec learns it. */
  void (*within) (ThriftStruct *o);
} HandCodec;

static gboolean
encode_update (ThriftProtocol *out, ThriftStruct *o, GError **error)
{
  RankUpdateFields f;

  rank_update_fields_of (RANK_UPDATE_REQUEST (o), &f);
  return rank_codec_write_update (out, &f, error);
}

static gboolean
encode_update_batch (ThriftProtocol *out, ThriftStruct *o, GError **error)
{
  rankUpdateBatchRequest *b = RANK_UPDATE_BATCH_REQUEST (o);
  gboolean ok
      = rank_codec_write_update_batch_begin (out, b->requests->len, error);

  for (guint i = 0; ok && i < b->requests->len; i++)
    ok = encode_update (out, b->requests->pdata[i], error);
  return ok
         && rank_codec_write_update_batch_end (
             out, b->__isset_with_rank, b->with_rank,
             b->__isset_request_id ? b->request_id : NULL, error);
}

static rankUpdateRequest *
update_of_fields (const RankUpdateFields *f)
{
  rankUpdateRequest *r = g_object_new (
      RANK_TYPE_UPDATE_REQUEST, "board", f->board, "member", f->member, "value",
      f->value, "request_id", f->request_id, NULL);

  if (f->has_mode)
    g_object_set (r, "mode", (gint) f->mode, NULL);
  if (f->has_timestamp_ms)
    g_object_set (r, "timestamp_ms", f->timestamp_ms, NULL);
  if (f->subscores != NULL)
    g_object_set (r, "subscores", f->subscores, NULL);
  if (f->data != NULL)
    g_object_set (r, "data", f->data, NULL);
  if (f->has_with_rank)
    g_object_set (r, "with_rank", f->with_rank, NULL);
  return r;
}

static ThriftStruct *
decode_update (ThriftProtocol *in, GError **error)
{
  RankUpdateFields *f = rank_update_args_read (in, error);
  rankUpdateRequest *r;

  if (f == NULL)
    return NULL;
  r = update_of_fields (f);
  rank_update_args_free (f);
  return THRIFT_STRUCT (r);
}

static ThriftStruct *
decode_update_batch (ThriftProtocol *in, GError **error)
{
  RankUpdateBatchArgs *a = rank_update_batch_args_read (in, error);
  g_autoptr (GPtrArray) requests = NULL;
  rankUpdateBatchRequest *b;

  if (a == NULL)
    return NULL;
  requests = g_ptr_array_new_with_free_func (g_object_unref);
  for (guint i = 0; i < a->requests->len; i++)
    g_ptr_array_add (requests, update_of_fields (&g_array_index (
                                   a->requests, RankUpdateFields, i)));
  b = g_object_new (RANK_TYPE_UPDATE_BATCH_REQUEST, "requests", requests, NULL);
  if (a->has_with_rank)
    g_object_set (b, "with_rank", a->with_rank, NULL);
  if (a->request_id != NULL)
    g_object_set (b, "request_id", a->request_id, NULL);
  rank_update_batch_args_free (a);
  return THRIFT_STRUCT (b);
}

static ThriftStruct *
decode_get_rank (ThriftProtocol *in, GError **error)
{
  RankGetRankArgs *a = rank_get_rank_args_read (in, error);
  GObject *o;

  if (a == NULL)
    return NULL;
  o = g_object_new (RANK_TYPE_GET_RANK_REQUEST, "board", a->board, "member",
                    a->member, "periods_back", a->periods_back, "window",
                    a->window, NULL);
  rank_get_rank_args_free (a);
  return THRIFT_STRUCT (o);
}

static ThriftStruct *
decode_get_top_n (ThriftProtocol *in, GError **error)
{
  RankGetTopNArgs *a = rank_get_top_n_args_read (in, error);
  GObject *o;

  if (a == NULL)
    return NULL;
  o = g_object_new (RANK_TYPE_GET_TOP_N_REQUEST, "board", a->board, "n", a->n,
                    "offset", a->offset, "periods_back", a->periods_back,
                    "with_data", a->with_data, "window", a->window, NULL);
  rank_get_top_n_args_free (a);
  return THRIFT_STRUCT (o);
}

/* ---- the reply encoders (codec.c) ---- */

/* A set optional list<i64> with no element: rankd's replies leave
 * subscores out instead, and the plain values say "none" with n 0. */
static void
within_subscores (GArray *subscores, gboolean *isset)
{
  if (*isset && (subscores == NULL || subscores->len == 0))
    *isset = FALSE;
}

static void
within_update_response (ThriftStruct *o)
{
  rankUpdateResponse *r = RANK_UPDATE_RESPONSE (o);

  /* rank 0 is "not ranked" to the plain values: ranks start at 1. */
  if (r->__isset_rank && r->rank <= 0)
    r->rank = 1;
  within_subscores (r->subscores, &r->__isset_subscores);
}

static void
update_response_of (rankUpdateResponse *r, RankCodecUpdateResponse *c)
{
  c->score = r->score;
  c->rank = r->__isset_rank ? r->rank : 0;
  c->applied = r->applied;
  c->n_subscores = r->__isset_subscores ? r->subscores->len : 0;
  c->subscores
      = c->n_subscores > 0 ? (const gint64 *) r->subscores->data : NULL;
}

static gboolean
encode_update_response (ThriftProtocol *out, ThriftStruct *o, GError **error)
{
  RankCodecUpdateResponse c;

  update_response_of (RANK_UPDATE_RESPONSE (o), &c);
  return rank_codec_write_update_response (out, &c, error);
}

static void
within_update_result (ThriftStruct *o)
{
  rankUpdateResult *r = RANK_UPDATE_RESULT (o);

  /* Exactly one field set, as UpdateBatch answers each update: the first
   * one set, or an InvalidArgument if none was. */
  if (r->__isset_response)
    r->__isset_invalid = r->__isset_unavailable = FALSE;
  else if (r->__isset_invalid)
    r->__isset_unavailable = FALSE;
  else if (!r->__isset_unavailable)
    {
      g_autoptr (GObject) invalid
          = g_object_new (RANK_TYPE_INVALID_ARGUMENT, "message", "", NULL);

      g_object_set (r, "invalid", invalid, NULL);
    }
  if (r->__isset_response)
    within_update_response (THRIFT_STRUCT (r->response));
}

static void
update_result_of (rankUpdateResult *r, RankCodecUpdateResult *c)
{
  memset (c, 0, sizeof *c);
  if (r->__isset_response)
    {
      c->field = RANK_CODEC_UPDATE_RESPONSE;
      update_response_of (r->response, &c->response);
    }
  else if (r->__isset_invalid)
    {
      c->field = RANK_CODEC_UPDATE_INVALID;
      c->message = r->invalid->message;
    }
  else
    {
      c->field = RANK_CODEC_UPDATE_UNAVAILABLE;
      c->message = r->unavailable->message;
    }
}

static gboolean
encode_update_result (ThriftProtocol *out, ThriftStruct *o, GError **error)
{
  RankCodecUpdateResult c;

  update_result_of (RANK_UPDATE_RESULT (o), &c);
  return rank_codec_write_update_result (out, &c, error);
}

static void
within_update_batch_response (ThriftStruct *o)
{
  GPtrArray *results = RANK_UPDATE_BATCH_RESPONSE (o)->results;

  for (guint i = 0; i < results->len; i++)
    within_update_result (results->pdata[i]);
}

static gboolean
encode_update_batch_response (ThriftProtocol *out, ThriftStruct *o,
                              GError **error)
{
  GPtrArray *results = RANK_UPDATE_BATCH_RESPONSE (o)->results;
  g_autofree RankCodecUpdateResult *c
      = g_new0 (RankCodecUpdateResult, results->len + 1);

  for (guint i = 0; i < results->len; i++)
    update_result_of (results->pdata[i], &c[i]);
  return rank_codec_write_update_batch_response (out, c, results->len, error);
}

/* Member data within what rankd's encoding can hold (memberdata.h): at
 * most RANK_DATA_KEYS_MAX keys of at most 255 bytes, values of at most
 * 65,535. rankd stores no other, so it never writes any other. */
static void
within_data (GHashTable *data)
{
  GHashTableIter it;
  gpointer k, v;
  guint kept = 0;

  g_hash_table_iter_init (&it, data);
  while (g_hash_table_iter_next (&it, &k, &v))
    if (strlen (k) > 255 || strlen (v) > 65535 || kept++ >= RANK_DATA_KEYS_MAX)
      g_hash_table_iter_remove (&it);
}

static void
within_entry (ThriftStruct *o)
{
  rankEntry *e = RANK_ENTRY (o);

  within_subscores (e->subscores, &e->__isset_subscores);
  /* A row holds a board's subscores: at most RANK_SUBSCORES_MAX. */
  if (e->__isset_subscores && e->subscores->len > RANK_SUBSCORES_MAX)
    g_array_set_size (e->subscores, RANK_SUBSCORES_MAX);
  if (e->__isset_data)
    within_data (e->data);
}

/* A row as the store gives it, from an Entry: its data encoded as rankd
 * stores member data (memberdata.h), the pairs in the map's own order,
 * which the generated writer follows too. */
static gboolean
encode_entry (ThriftProtocol *out, ThriftStruct *o, GError **error)
{
  rankEntry *e = RANK_ENTRY (o);
  g_autoptr (GByteArray) data = g_byte_array_new ();
  RankRow row = {
    .member = e->member,
    .member_len = strlen (e->member),
    .score = e->score,
    .rank = e->rank,
  };

  if (e->__isset_subscores)
    {
      row.n_subscores = e->subscores->len;
      g_assert_cmpuint (row.n_subscores, <=, RANK_SUBSCORES_MAX);
      memcpy (row.subscores, e->subscores->data,
              row.n_subscores * sizeof (gint64));
    }
  if (e->__isset_data)
    {
      GHashTableIter it;
      gpointer k, v;

      g_hash_table_iter_init (&it, e->data);
      while (g_hash_table_iter_next (&it, &k, &v))
        {
          guint8 kl = (guint8) strlen (k), vl[2];
          gsize vlen = strlen (v);

          vl[0] = (guint8) (vlen >> 8);
          vl[1] = (guint8) vlen;
          g_byte_array_append (data, &kl, 1);
          g_byte_array_append (data, k, kl);
          g_byte_array_append (data, vl, 2);
          g_byte_array_append (data, v, (guint) vlen);
        }
      /* An empty map is data too: an empty encoding, not NULL. */
      row.data = data->len > 0 ? (const char *) data->data : "";
      row.data_len = data->len;
    }
  return rank_codec_write_entry (out, &row, error);
}

static const char *const get_rank_defaulted[]
    = { "periods_back", "window", NULL };
static const char *const get_top_n_defaulted[]
    = { "offset", "periods_back", "with_data", "window", NULL };

/* One entry per hand codec: a new one (a reply encoder) is one line here
 * and its adapters. */
static const HandCodec hand_codecs[] = {
  { "UpdateRequest", encode_update, decode_update, NULL, NULL },
  { "UpdateBatchRequest", encode_update_batch, decode_update_batch, NULL,
    NULL },
  { "GetRankRequest", NULL, decode_get_rank, get_rank_defaulted, NULL },
  { "GetTopNRequest", NULL, decode_get_top_n, get_top_n_defaulted, NULL },
  { "UpdateResponse", encode_update_response, NULL, NULL,
    within_update_response },
  { "UpdateResult", encode_update_result, NULL, NULL, within_update_result },
  { "UpdateBatchResponse", encode_update_batch_response, NULL, NULL,
    within_update_batch_response },
  { "Entry", encode_entry, NULL, NULL, within_entry },
};

static const HandCodec *
hand_codec_of (const char *name)
{
  for (guint i = 0; i < G_N_ELEMENTS (hand_codecs); i++)
    if (strcmp (hand_codecs[i].name, name) == 0)
      return &hand_codecs[i];
  return NULL;
}

static GBytes *
hand_write (const HandCodec *h, ThriftStruct *o, int pair)
{
  Stream s;
  g_autoptr (GError) error = NULL;

  stream_open (&s, pair);
  g_assert_true (h->encode (s.protocol, o, &error));
  g_assert_no_error (error);
  return stream_close (&s);
}

/* bytes (a call's argument struct) read by h's reader as rankd reads a
 * request: from a RankRequestReader, with rankd's protocols. */
static ThriftStruct *
hand_read (const HandCodec *h, GBytes *bytes, int pair)
{
  RankRequestReader *reader
      = rank_request_reader_new (PAIR_FRAMED (pair), MAX_BYTES);
  ThriftProtocol *in
      = rank_protocol_new (PAIR_KIND (pair), THRIFT_TRANSPORT (reader));
  g_autoptr (GError) error = NULL;
  ThriftStruct *o;
  gsize len;
  const guint8 *data = g_bytes_get_data (bytes, &len);

  rank_request_reader_feed (reader, data, len);
  g_assert_true (rank_request_reader_ready (reader, &error));
  g_assert_true (rank_request_reader_begin (reader, &error));
  o = h->decode (in, &error);
  g_assert_no_error (error);
  g_assert_nonnull (o);
  /* All of it read: what is left of the frame, or of the largest message
   * when buffered. */
  if (PAIR_FRAMED (pair))
    g_assert_cmpuint (rank_request_reader_remaining (reader), ==, 0);
  else
    g_assert_cmpuint (MAX_BYTES - rank_request_reader_remaining (reader), ==,
                      len);
  g_object_unref (in);
  g_object_unref (reader);
  return o;
}

/* The struct a hand reader should give for one the generated reader read
 * (back): its defaulted fields set, to the IDL default when absent. */
static void
mark_defaulted (const HandCodec *h, ThriftStruct *back)
{
  for (const char *const *f = h->defaulted; f != NULL && *f != NULL; f++)
    {
      GValue v = G_VALUE_INIT;

      g_object_get_property (G_OBJECT (back), *f, &v);
      g_object_set_property (G_OBJECT (back), *f, &v);
      g_value_unset (&v);
    }
}

/* ---- the test of one struct ---- */

static void
test_struct (gconstpointer data)
{
  IdlStruct *s = (IdlStruct *) data;
  const HandCodec *h = hand_codec_of (s->name);

  for (guint i = 0; i < ITERATIONS; i++)
    {
      g_autoptr (ThriftStruct) o = random_struct (s, 0);

      if (h != NULL && h->within != NULL)
        h->within (o);

      for (int pair = 0; pair < PAIRS; pair++)
        {
          g_autoptr (GBytes) generated = generated_write (o, pair);
          g_autoptr (ThriftStruct) back
              = generated_read (s->type, generated, pair);

          if (!structs_equal (o, back))
            {
              g_test_fail_printf ("%s, %s: the generated reader does not "
                                  "read back what the generated writer wrote",
                                  s->name, pair_name (pair));
              return;
            }
          if (h != NULL && h->encode != NULL)
            {
              g_autoptr (GBytes) hand = hand_write (h, o, pair);
              g_autoptr (ThriftStruct) read = NULL;

              if (!g_bytes_equal (hand, generated))
                {
                  g_autofree char *diff = first_difference (hand, generated);

                  g_test_fail_printf ("%s, %s, iteration %u: the hand "
                                      "encoder's bytes are not the generated "
                                      "encoder's: %s",
                                      s->name, pair_name (pair), i, diff);
                  return;
                }
              read = generated_read (s->type, hand, pair);
              if (!structs_equal (o, read))
                {
                  g_test_fail_printf ("%s, %s: the generated reader reads "
                                      "another struct from the hand encoder",
                                      s->name, pair_name (pair));
                  return;
                }
            }
          if (h != NULL && h->decode != NULL)
            {
              g_autoptr (GBytes) args = generated_write_args (o, pair);
              g_autoptr (ThriftStruct) read = hand_read (h, args, pair);

              mark_defaulted (h, back);
              if (!structs_equal (back, read))
                {
                  g_autoptr (GBytes) want = generated_write (back, 0);
                  g_autoptr (GBytes) got = generated_write (read, 0);
                  g_autofree char *diff = first_difference (got, want);

                  g_test_fail_printf ("%s, %s, iteration %u: the hand reader "
                                      "reads another struct than the "
                                      "generated reader (binary, hand reader "
                                      "as 'hand'): %s",
                                      s->name, pair_name (pair), i, diff);
                  return;
                }
            }
        }
    }
}

/* api.h's RANK_API_IDL_VERSION is the IDL's IDL_VERSION (the generated
 * constant allocates, so the C code uses api.h's). */
static void
test_idl_version (void)
{
  g_autofree char *path
      = g_build_filename (RANK_SOURCE_DIR, "idl", "ranking.thrift", NULL);
  g_autofree char *text = NULL;
  g_autofree char *quoted = g_strdup_printf (
      "const string IDL_VERSION = \"%s\"", RANK_API_IDL_VERSION);

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_assert_nonnull (strstr (text, quoted));
}

int
main (int argc, char **argv)
{
  /* A fixed seed, unless one is given: the same structs every run. */
  g_autoptr (GPtrArray) args = g_ptr_array_new ();
  gboolean seeded = FALSE;
  char **av;
  int ac;

  for (int i = 0; i < argc; i++)
    {
      seeded = seeded || g_str_has_prefix (argv[i], "--seed");
      g_ptr_array_add (args, argv[i]);
    }
  if (!seeded)
    g_ptr_array_add (args,
                     (gpointer) "--seed=R02S00000000000000000000000000000050");
  g_ptr_array_add (args, NULL);
  av = (char **) args->pdata;
  ac = (int) args->len - 1;

  g_test_init (&ac, &av, NULL);
  rank_thrift_fixes_apply ();
  idl_parse ();
  g_test_add_func ("/codec/every-idl-struct-generated", test_types);
  g_test_add_func ("/codec/idl-version", test_idl_version);
  for (guint i = 0; i < idl_structs->len; i++)
    {
      IdlStruct *s = idl_structs->pdata[i];
      g_autofree char *path = g_strconcat ("/codec/", s->name, NULL);

      s->type = generated_type (s->name);
      if (s->type != 0)
        g_test_add_data_func (path, s, test_struct);
    }
  /* Every hand codec names a struct of the IDL. */
  for (guint i = 0; i < G_N_ELEMENTS (hand_codecs); i++)
    g_assert_nonnull (idl_struct_find (hand_codecs[i].name));
  return g_test_run ();
}
