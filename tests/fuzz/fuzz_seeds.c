/* fuzz_seeds.c -- writes the fuzz target's seed corpus: valid requests of
 * every method, for each of its four servers (see fuzz_request.c), encoded
 * by the generated code and the stock c_glib protocols.
 * Usage: fuzz_seeds DIR
 */
#include <thrift/c_glib/protocol/thrift_binary_protocol.h>
#include <thrift/c_glib/protocol/thrift_compact_protocol.h>
#include <thrift/c_glib/transport/thrift_memory_buffer.h>

#include "rank_ranking.h"
#include "thrift_fixes.h"

/* One call: message header, args struct, end. */
static GByteArray *
encode (gboolean compact, const char *method, ThriftStruct *args)
{
  ThriftMemoryBuffer *mem
      = g_object_new (THRIFT_TYPE_MEMORY_BUFFER, "buf_size", 1 << 20, NULL);
  ThriftProtocol *p = g_object_new (compact ? THRIFT_TYPE_COMPACT_PROTOCOL
                                            : THRIFT_TYPE_BINARY_PROTOCOL,
                                    "transport", mem, NULL);
  GByteArray *out = g_byte_array_new ();

  g_assert_cmpint (
      thrift_protocol_write_message_begin (p, method, T_CALL, 1, NULL), >, 0);
  if (args != NULL)
    g_assert_cmpint (thrift_struct_write (args, p, NULL), >, 0);
  else
    {
      thrift_protocol_write_struct_begin (p, "args", NULL);
      thrift_protocol_write_field_stop (p, NULL);
      thrift_protocol_write_struct_end (p, NULL);
    }
  thrift_protocol_write_message_end (p, NULL);
  g_byte_array_append (out, mem->buf->data, mem->buf->len);
  g_object_unref (p);
  g_object_unref (mem);
  return out;
}

static void
write_seed (const char *dir, int *n, int server, const GByteArray *call)
{
  g_autofree char *path = g_strdup_printf ("%s/seed-%02d", dir, (*n)++);
  GByteArray *file = g_byte_array_new ();
  guint8 selector = (guint8) server;

  g_byte_array_append (file, &selector, 1);
  if (server < 2) /* framed */
    {
      guint32 len = GUINT32_TO_BE (call->len);

      g_byte_array_append (file, (const guint8 *) &len, 4);
    }
  g_byte_array_append (file, call->data, call->len);
  g_assert_true (
      g_file_set_contents (path, (const char *) file->data, file->len, NULL));
  g_byte_array_unref (file);
}

/* A method's args struct holding request (taken). */
static GObject *
args_of (GType args, gpointer request)
{
  GObject *a = g_object_new (args, "request", request, NULL);

  g_object_unref (request);
  return a;
}

int
main (int argc, char **argv)
{
  int n = 0;

  g_assert_cmpint (argc, ==, 2);
  rank_thrift_fixes_apply ();
  g_mkdir_with_parents (argv[1], 0700);
  for (int server = 0; server < 4; server++)
    {
      gboolean compact = server % 2;
      const char *boards[] = { "fz", "s", "p", "w" };

      /* On w, the board with a rolling window, the reads read it. */
      for (int b = 0; b < 4; b++)
        {
          rankUpdateRequest *req = g_object_new (
              RANK_TYPE_UPDATE_REQUEST, "board", boards[b], "member", "ann",
              "value", (gint64) 42, "request_id", "seed-1", "mode",
              RANK_UPDATE_MODE_BEST, "timestamp_ms", (gint64) 1763800000000,
              NULL);
          GObject *update = g_object_new (RANK_TYPE_RANKING_UPDATE_ARGS,
                                          "request", req, NULL);
          GObject *rank = args_of (
              RANK_TYPE_RANKING_GET_RANK_ARGS,
              g_object_new (RANK_TYPE_GET_RANK_REQUEST, "board", boards[b],
                            "member", "ann", "window", b == 3, NULL));
          GObject *top = args_of (
              RANK_TYPE_RANKING_GET_TOP_N_ARGS,
              g_object_new (RANK_TYPE_GET_TOP_N_REQUEST, "board", boards[b],
                            "n", 10, "offset", 0, "window", b == 3, NULL));
          struct
          {
            const char *method;
            GObject *args;
          } calls[] = { { "Update", update },
                        { "GetRank", rank },
                        { "GetTopN", top } };

          for (gsize i = 0; i < G_N_ELEMENTS (calls); i++)
            {
              GByteArray *call = encode (compact, calls[i].method,
                                         THRIFT_STRUCT (calls[i].args));

              write_seed (argv[1], &n, server, call);
              g_byte_array_unref (call);
              g_object_unref (calls[i].args);
            }
          g_object_unref (req);
        }
      /* Subscores and member data, on the board that has subscores. */
      {
        GHashTable *map
            = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
        GArray *subs = g_array_new (FALSE, FALSE, sizeof (gint64));
        gint64 values[] = { 3, -7 };
        rankUpdateRequest *req;
        GObject *args[5];
        const char *methods[] = { "Update", "SetMemberData", "GetMemberData",
                                  "GetTopN", "GetAround" };

        g_hash_table_insert (map, g_strdup ("name"), g_strdup ("Ann"));
        g_array_append_vals (subs, values, 2);
        req = g_object_new (RANK_TYPE_UPDATE_REQUEST, "board", "r", "member",
                            "ann", "value", (gint64) 42, "request_id", "seed-2",
                            "subscores", subs, "data", map, NULL);
        args[0] = g_object_new (RANK_TYPE_RANKING_UPDATE_ARGS, "request", req,
                                NULL);
        args[1]
            = args_of (RANK_TYPE_RANKING_SET_MEMBER_DATA_ARGS,
                       g_object_new (RANK_TYPE_SET_MEMBER_DATA_REQUEST, "board",
                                     "r", "member", "ann", "data", map, NULL));
        args[2] = args_of (RANK_TYPE_RANKING_GET_MEMBER_DATA_ARGS,
                           g_object_new (RANK_TYPE_GET_MEMBER_DATA_REQUEST,
                                         "board", "r", "member", "ann", NULL));
        args[3] = args_of (RANK_TYPE_RANKING_GET_TOP_N_ARGS,
                           g_object_new (RANK_TYPE_GET_TOP_N_REQUEST, "board",
                                         "r", "n", 10, "offset", 0, "with_data",
                                         TRUE, NULL));
        args[4] = args_of (RANK_TYPE_RANKING_GET_AROUND_ARGS,
                           g_object_new (RANK_TYPE_GET_AROUND_REQUEST, "board",
                                         "r", "member", "ann", "radius", 2,
                                         "with_data", TRUE, NULL));
        for (gsize i = 0; i < G_N_ELEMENTS (args); i++)
          {
            GByteArray *call
                = encode (compact, methods[i], THRIFT_STRUCT (args[i]));

            write_seed (argv[1], &n, server, call);
            g_byte_array_unref (call);
            g_object_unref (args[i]);
          }
        /* UpdateBatch, whose arguments rankd reads itself
         * (codec_requests.c): a plain update and the one above; and the
         * same recorded as a whole, on one board. */
        for (int whole = 0; whole < 2; whole++)
          {
            rankUpdateRequest *plain = g_object_new (
                RANK_TYPE_UPDATE_REQUEST, "board", "r", "member", "bob",
                "value", (gint64) 7, "request_id", "seed-5", NULL);
            rankUpdateBatchRequest *batch = g_object_new (
                RANK_TYPE_UPDATE_BATCH_REQUEST, "with_rank", FALSE, NULL);
            GObject *a;
            GByteArray *call;

            g_ptr_array_add (batch->requests, plain);
            g_ptr_array_add (batch->requests, g_object_ref (req));
            if (whole)
              g_object_set (batch, "request_id", "seed-6", NULL);
            a = args_of (RANK_TYPE_RANKING_UPDATE_BATCH_ARGS, batch);
            call = encode (compact, "UpdateBatch", THRIFT_STRUCT (a));
            write_seed (argv[1], &n, server, call);
            g_byte_array_unref (call);
            g_object_unref (a);
          }
        g_object_unref (req);
        g_array_unref (subs);
        g_hash_table_unref (map);
      }
      /* Board administration and Export. */
      {
        GObject *args[]
            = { args_of (RANK_TYPE_RANKING_LIST_BOARDS_ARGS,
                         g_object_new (RANK_TYPE_LIST_BOARDS_REQUEST, "after",
                                       "f", "limit", 5, NULL)),
                args_of (RANK_TYPE_RANKING_GET_BOARD_INFO_ARGS,
                         g_object_new (RANK_TYPE_GET_BOARD_INFO_REQUEST,
                                       "board", "s", NULL)),
                args_of (RANK_TYPE_RANKING_EXPORT_ARGS,
                         g_object_new (RANK_TYPE_EXPORT_REQUEST, "board", "s",
                                       "cursor", "1:0", "count", 3, NULL)),
                args_of (RANK_TYPE_RANKING_RESET_BOARD_ARGS,
                         g_object_new (RANK_TYPE_RESET_BOARD_REQUEST, "board",
                                       "p", "request_id", "seed-3", NULL)),
                args_of (RANK_TYPE_RANKING_DELETE_BOARD_ARGS,
                         g_object_new (RANK_TYPE_DELETE_BOARD_REQUEST, "board",
                                       "fz", "request_id", "seed-4", NULL)) };
        const char *methods[] = { "ListBoards", "GetBoardInfo", "Export",
                                  "ResetBoard", "DeleteBoard" };

        for (gsize i = 0; i < G_N_ELEMENTS (args); i++)
          {
            GByteArray *call
                = encode (compact, methods[i], THRIFT_STRUCT (args[i]));

            write_seed (argv[1], &n, server, call);
            g_byte_array_unref (call);
            g_object_unref (args[i]);
          }
      }
      {
        GByteArray *call = encode (compact, "Explode", NULL);

        write_seed (argv[1], &n, server, call);
        g_byte_array_unref (call);
      }
    }
  return 0;
}
