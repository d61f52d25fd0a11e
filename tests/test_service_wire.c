/* test_service_wire.c -- the bytes of a call, end to end (a real
 * redis-server, a real rankd): hostile bytes close their own connection
 * only; calls written by hand, with the fields the generated client would
 * never send, are read by the generated reader's rules (codec_requests.c); a
 * pipelining client gets every reply in the order of its requests.
 */
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thrift/c_glib/thrift_application_exception.h>

#include "service.h"

/* ---- bad input on the socket ---- */

static void
send_and_expect_close (const void *bytes, gsize len)
{
  int fd = rank_test_connect_raw (rankd->port);
  g_autoptr (RankClient) bystander
      = rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY);
  g_autofree char *b = rank_test_unique ("bystander");

  g_assert_cmpint (send (fd, bytes, len, MSG_NOSIGNAL), ==, (gssize) len);
  g_assert_true (rank_test_wait_closed (fd, 20000));
  close (fd);
  /* A connection opened before the bad one is still served. */
  {
    g_auto (Result) r
        = update_on (bystander, b, "ann", 1, "x", NO_MODE, NO_TIME);
    assert_ok (&r);
  }
  assert_still_serving ();
}

static void
test_hostile_random_bytes (void)
{
  GRand *rand = g_rand_new_with_seed (7);
  guint8 junk[4096];

  for (int round = 0; round < 5; round++)
    {
      for (gsize i = 0; i < sizeof junk; i++)
        junk[i] = (guint8) g_rand_int (rand);
      /* A plausible small frame header, so the junk reaches the protocol. */
      junk[0] = 0;
      junk[1] = 0;
      junk[2] = 0x0f;
      junk[3] = 0xfc;
      send_and_expect_close (junk, sizeof junk);
    }
  g_rand_free (rand);
}

static void
test_hostile_zero_frame (void)
{
  send_and_expect_close ("\0\0\0\0", 4);
}

static void
test_hostile_huge_prefix (void)
{
  gsize before = rankd_rss ();

  for (int i = 0; i < 5; i++)
    send_and_expect_close ("\x7f\xff\xff\xff"
                           "abcdef",
                           10);
  send_and_expect_close ("\x80\x00\x00\x00", 4);
  /* Nothing near 2 GiB (or even the 1 MiB cap) was allocated. */
  g_assert_cmpuint (rankd_rss (), <, before + 8 * 1024);
}

static void
test_hostile_http (void)
{
  const char *get = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";

  send_and_expect_close (get, strlen (get));
}

/* Reads a reply that must be a TApplicationException of type with
 * message (NULL: any). */
static void
expect_app_exception (ThriftProtocol *p, gint32 want_seqid,
                      ThriftApplicationExceptionError want_type,
                      const char *want_message)
{
  g_autoptr (GError) error = NULL;
  ThriftApplicationException *x;
  gchar *name = NULL;
  ThriftMessageType type;
  gint32 seqid;

  g_assert_cmpint (
      thrift_protocol_read_message_begin (p, &name, &type, &seqid, &error), >,
      0);
  g_assert_cmpint (type, ==, T_EXCEPTION);
  g_assert_cmpint (seqid, ==, want_seqid);
  g_free (name);
  x = g_object_new (THRIFT_TYPE_APPLICATION_EXCEPTION, NULL);
  g_assert_cmpint (thrift_struct_read (THRIFT_STRUCT (x), p, &error), >, 0);
  thrift_transport_read_end (p->transport, NULL);
  g_assert_cmpint (x->type, ==, want_type);
  if (want_message != NULL)
    g_assert_cmpstr (x->message, ==, want_message);
  g_object_unref (x);
}

/* Hand-written calls: a field's header, whose value the caller writes
 * next (then field_end). */
static void
field (ThriftProtocol *p, ThriftType type, gint16 id)
{
  thrift_protocol_write_field_begin (p, "", type, id, NULL);
}

static void
string_field (ThriftProtocol *p, gint16 id, const char *s)
{
  field (p, T_STRING, id);
  thrift_protocol_write_string (p, s, NULL);
  thrift_protocol_write_field_end (p, NULL);
}

/* A field holding a struct, whose fields the caller writes next ... */
static void
struct_field (ThriftProtocol *p, gint16 id)
{
  field (p, T_STRUCT, id);
  thrift_protocol_write_struct_begin (p, "", NULL);
}

/* ... and ends. */
static void
struct_end (ThriftProtocol *p)
{
  thrift_protocol_write_field_stop (p, NULL);
  thrift_protocol_write_struct_end (p, NULL);
}

static void
struct_field_end (ThriftProtocol *p)
{
  struct_end (p);
  thrift_protocol_write_field_end (p, NULL);
}

/* A call of method: its args struct's fields come next ... */
static void
call_begin (ThriftProtocol *p, const char *method, gint32 seqid)
{
  thrift_protocol_write_message_begin (p, method, T_CALL, seqid, NULL);
  thrift_protocol_write_struct_begin (p, "args", NULL);
}

/* ... and it goes. */
static void
call_end (ThriftProtocol *p)
{
  struct_end (p);
  thrift_protocol_write_message_end (p, NULL);
  g_assert_true (thrift_transport_flush (p->transport, NULL));
}

/* Writes Update(request = {board: "b"}): member, value, request_id
 * missing. */
static void
write_update_missing_member (ThriftProtocol *p, gint32 seqid)
{
  call_begin (p, "Update", seqid);
  struct_field (p, 1);
  string_field (p, 1, "b");
  struct_field_end (p);
  call_end (p);
}

/* A framed binary client (*c), and a protocol on its transport to write
 * calls by hand and read their replies. */
static ThriftProtocol *
hand_protocol (RankClient **c)
{
  *c = rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY);
  return rank_protocol_new (RANK_PROTOCOL_BINARY,
                            THRIFT_TRANSPORT (rank_client_get_transport (*c)));
}

/* A call whose arguments do not decode gets an error that says why; with
 * framing the connection stays usable. */
static void
test_missing_required_field (void)
{
  g_autoptr (RankClient) c = NULL;
  g_autoptr (ThriftProtocol) p = hand_protocol (&c);

  write_update_missing_member (p, 7);
  expect_app_exception (p, 7, THRIFT_APPLICATION_EXCEPTION_ERROR_PROTOCOL_ERROR,
                        "missing required field 'member'");

  /* Same connection, next call. */
  {
    g_autofree char *b = rank_test_unique ("after-bad");
    g_auto (Result) r = update_on (c, b, "ann", 2, "y", NO_MODE, NO_TIME);
    assert_ok (&r);
  }
}

/* Reads a reply that must be T_REPLY to want_seqid into result. */
static void
read_reply (ThriftProtocol *p, gint32 want_seqid, gpointer result)
{
  g_autoptr (GError) error = NULL;
  gchar *name = NULL;
  ThriftMessageType type;
  gint32 seqid;

  g_assert_cmpint (
      thrift_protocol_read_message_begin (p, &name, &type, &seqid, &error), >,
      0);
  g_free (name);
  g_assert_cmpint (type, ==, T_REPLY);
  g_assert_cmpint (seqid, ==, want_seqid);
  g_assert_cmpint (thrift_struct_read (THRIFT_STRUCT (result), p, &error), >,
                   0);
  thrift_transport_read_end (p->transport, NULL);
}

/* UpdateBatch(request = {requests: [{board, member (unless NULL), value 5,
 * request_id}], with_rank: false}), in the generated reader's terms
 * awkward: an unknown field (99), a mode of the wrong type (a string,
 * skipped) and an unknown struct (77) in the request. */
static void
write_odd_batch (ThriftProtocol *p, gint32 seqid, const char *board,
                 const char *member)
{
  call_begin (p, "UpdateBatch", seqid);
  struct_field (p, 1);
  field (p, T_LIST, 1);
  thrift_protocol_write_list_begin (p, T_STRUCT, 1, NULL);
  thrift_protocol_write_struct_begin (p, "", NULL);
  string_field (p, 99, "unknown");
  string_field (p, 1, board);
  if (member != NULL)
    string_field (p, 2, member);
  field (p, T_I64, 3);
  thrift_protocol_write_i64 (p, 5, NULL);
  thrift_protocol_write_field_end (p, NULL);
  string_field (p, 4, "odd-1");
  string_field (p, 5, "SET");
  struct_field (p, 77);
  string_field (p, 1, "x");
  struct_field_end (p);
  struct_end (p);
  thrift_protocol_write_list_end (p, NULL);
  thrift_protocol_write_field_end (p, NULL);
  field (p, T_BOOL, 2);
  thrift_protocol_write_bool (p, FALSE, NULL);
  thrift_protocol_write_field_end (p, NULL);
  struct_field_end (p);
  call_end (p);
}

/* UpdateBatch's arguments, which rankd reads itself (codec_requests.c), by
 * the generated reader's rules: an unknown field or one of the wrong type
 * is skipped; a required field missing is a protocol error naming it, and
 * with framing the connection stays usable. */
static void
test_batch_args_as_generated (void)
{
  g_autoptr (RankClient) c = NULL;
  g_autoptr (ThriftProtocol) p = hand_protocol (&c);
  g_autofree char *b = rank_test_unique ("oddbatch");
  rankRankingUpdateBatchResult *result
      = g_object_new (RANK_TYPE_RANKING_UPDATE_BATCH_RESULT, NULL);
  rankUpdateResult *one;

  write_odd_batch (p, 11, b, NULL);
  expect_app_exception (p, 11,
                        THRIFT_APPLICATION_EXCEPTION_ERROR_PROTOCOL_ERROR,
                        "missing required field 'member'");
  write_odd_batch (p, 12, b, "ann");
  read_reply (p, 12, result);
  g_assert_true (result->__isset_success);
  g_assert_cmpuint (result->success->results->len, ==, 1);
  one = g_ptr_array_index (result->success->results, 0);
  g_assert_true (one->__isset_response);
  g_assert_cmpint (one->response->score, ==, 5);
  g_assert_true (one->response->applied);
  /* with_rank false: no rank. */
  g_assert_false (one->response->__isset_rank);
  g_object_unref (result);
  {
    g_auto (Result) r = get_rank_on (c, b, "ann");

    assert_ok (&r);
    g_assert_cmpint (r.score, ==, 5);
  }
}

static void
i32_field (ThriftProtocol *p, gint16 id, gint32 v)
{
  field (p, T_I32, id);
  thrift_protocol_write_i32 (p, v, NULL);
  thrift_protocol_write_field_end (p, NULL);
}

/* Update(request) given twice, with an unknown field (99) before: first
 * {board, member "zed", value 1, request_id rid0, mode SET}, then {board,
 * member "ann", value, request_id rid1, timestamp_ms as a string (of
 * the wrong type: skipped)}. The generated reader reads the second over
 * the first: an update of ann by value, in mode SET. */
static void
write_update_twice (ThriftProtocol *p, gint32 seqid, const char *board,
                    gint64 value, const char *rid0, const char *rid1)
{
  call_begin (p, "Update", seqid);
  string_field (p, 99, "unknown");
  for (int i = 0; i < 2; i++)
    {
      struct_field (p, 1);
      string_field (p, 1, board);
      string_field (p, 2, i == 0 ? "zed" : "ann");
      field (p, T_I64, 3);
      thrift_protocol_write_i64 (p, i == 0 ? 1 : value, NULL);
      thrift_protocol_write_field_end (p, NULL);
      string_field (p, 4, i == 0 ? rid0 : rid1);
      if (i == 0)
        i32_field (p, 5, RANK_UPDATE_MODE_SET);
      else
        string_field (p, 6, "soon");
      struct_field_end (p);
    }
  call_end (p);
}

/* Update, GetRank and GetTopN read their arguments into plain structs
 * (codec_requests.c), by the generated reader's rules: an unknown field or one
 * of the wrong type is skipped, the request given twice is read over the
 * first, a required field missing is a protocol error naming it, and the
 * request absent is refused as an empty board name. */
static void
test_args_as_generated (void)
{
  g_autoptr (RankClient) c = NULL;
  g_autoptr (ThriftProtocol) p = hand_protocol (&c);
  g_autofree char *b = rank_test_unique ("oddargs");

  /* ann gets 5, then 3: the mode (SET) of the first read is kept, where
   * INCREMENT would make 8 and BEST keep 5. */
  for (int i = 0; i < 2; i++)
    {
      rankRankingUpdateResult *r
          = g_object_new (RANK_TYPE_RANKING_UPDATE_RESULT, NULL);

      write_update_twice (p, 20 + i, b, i == 0 ? 5 : 3, i == 0 ? "o0" : "o2",
                          i == 0 ? "o1" : "o3");
      read_reply (p, 20 + i, r);
      g_assert_true (r->__isset_success);
      g_assert_cmpint (r->success->score, ==, i == 0 ? 5 : 3);
      g_assert_true (r->success->applied);
      g_object_unref (r);
    }

  /* GetRank: the request twice, the first of another board; in the
   * second an unknown struct (77) and periods_back as a string. */
  {
    rankRankingGetRankResult *r
        = g_object_new (RANK_TYPE_RANKING_GET_RANK_RESULT, NULL);

    call_begin (p, "GetRank", 30);
    struct_field (p, 1);
    string_field (p, 1, "not-this-board");
    string_field (p, 2, "zed");
    struct_field_end (p);
    struct_field (p, 1);
    string_field (p, 1, b);
    struct_field (p, 77);
    string_field (p, 1, "x");
    struct_field_end (p);
    string_field (p, 2, "ann");
    string_field (p, 3, "0");
    struct_field_end (p);
    call_end (p);
    read_reply (p, 30, r);
    g_assert_true (r->__isset_success);
    g_assert_cmpstr (r->success->member, ==, "ann");
    g_assert_cmpint (r->success->score, ==, 3);
    g_assert_cmpint (r->success->rank, ==, 1);
    g_object_unref (r);
  }

  /* GetRank without its member; then without its request. */
  call_begin (p, "GetRank", 31);
  struct_field (p, 1);
  string_field (p, 1, b);
  struct_field_end (p);
  call_end (p);
  expect_app_exception (p, 31,
                        THRIFT_APPLICATION_EXCEPTION_ERROR_PROTOCOL_ERROR,
                        "missing required field 'member'");
  {
    rankRankingGetRankResult *r
        = g_object_new (RANK_TYPE_RANKING_GET_RANK_RESULT, NULL);

    call_begin (p, "GetRank", 32);
    string_field (p, 99, "unknown");
    call_end (p);
    read_reply (p, 32, r);
    g_assert_false (r->__isset_success);
    g_assert_true (r->__isset_invalid);
    g_assert_true (g_str_has_prefix (r->invalid->message, "board: "));
    g_object_unref (r);
  }

  /* GetTopN with n of the wrong type: n is missing. */
  call_begin (p, "GetTopN", 40);
  struct_field (p, 1);
  string_field (p, 1, b);
  string_field (p, 2, "10");
  struct_field_end (p);
  call_end (p);
  expect_app_exception (p, 40,
                        THRIFT_APPLICATION_EXCEPTION_ERROR_PROTOCOL_ERROR,
                        "missing required field 'n'");

  /* GetTopN: with_data as an i32 is skipped (no data), offset given twice
   * keeps the last (0). */
  {
    rankRankingGetTopNResult *r
        = g_object_new (RANK_TYPE_RANKING_GET_TOP_N_RESULT, NULL);
    rankEntry *top;

    call_begin (p, "GetTopN", 41);
    struct_field (p, 1);
    string_field (p, 1, b);
    i32_field (p, 2, 10);
    i32_field (p, 3, 1);
    i32_field (p, 3, 0);
    i32_field (p, 5, 1);
    struct_field_end (p);
    call_end (p);
    read_reply (p, 41, r);
    g_assert_true (r->__isset_success);
    g_assert_cmpuint (r->success->len, ==, 1);
    top = g_ptr_array_index (r->success, 0);
    g_assert_cmpstr (top->member, ==, "ann");
    g_assert_cmpint (top->score, ==, 3);
    g_assert_false (top->__isset_data);
    g_object_unref (r);
  }
}

/* A pipelining client: 48 calls in one write, three times as many as a
 * connection runs at once. GetTopN with data takes two rounds to Redis and
 * the GetRank behind it one, so rankd completes them out of order; every
 * reply still comes back in the order of its request (the generated client
 * checks each reply's method name), a call whose arguments do not decode
 * gets its error in its turn, and each GetRank sees the Update sent before
 * it. */
static void
test_pipelined_in_order (void)
{
  g_autofree char *b = rank_test_unique ("pipe");
  g_autoptr (RankClient) c
      = rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY);
  RankClientTransport *t = rank_client_get_transport (c);
  rankRankingIf *iface = rank_client_iface (c);
  g_autoptr (ThriftProtocol) p
      = rank_protocol_new (RANK_PROTOCOL_BINARY, THRIFT_TRANSPORT (t));
  const int n = 48;

  rank_client_transport_cork (t);
  for (int i = 0; i < n; i++)
    {
      g_autofree char *member = g_strdup_printf ("p%02d", i / 4);
      g_autofree char *rid = g_strdup_printf ("r%d", i);
      gboolean ok = TRUE;

      switch (i % 4)
        {
        case 0:
          {
            rankUpdateRequest *req = update_request_new (b, member, 100 + i,
                                                         rid, NO_MODE, NO_TIME);

            g_hash_table_insert (req->data, g_strdup ("k"), g_strdup (rid));
            req->__isset_data = TRUE;
            ok = rank_ranking_client_send_update (iface, req, NULL);
            g_object_unref (req);
            break;
          }
        case 1:
          ok = positional_send_get_top_n (iface, b, 3, 0, 0, TRUE, NULL);
          break;
        case 2:
          ok = positional_send_get_rank (iface, b, member, 0, NULL);
          break;
        default:
          write_update_missing_member (p, 1000 + i);
          break;
        }
      g_assert_true (ok);
    }
  g_assert_true (rank_client_transport_uncork (t, NULL));

  for (int i = 0; i < n; i++)
    {
      g_autoptr (GError) error = NULL;
      rankInvalidArgument *invalid = NULL;
      rankPermissionDenied *denied = NULL;
      rankNotFound *not_found = NULL;
      rankUnavailable *unavailable = NULL;
      int k = i / 4; /* members p00..p<k> are on the board, p<k> best */

      switch (i % 4)
        {
        case 0:
          {
            rankUpdateResponse *r
                = g_object_new (RANK_TYPE_UPDATE_RESPONSE, NULL);

            g_assert_true (rank_ranking_client_recv_update (
                iface, &r, &invalid, &unavailable, &denied, &error));
            g_assert_cmpint (r->score, ==, 100 + i);
            g_assert_cmpint (r->rank, ==, 1);
            g_object_unref (r);
            break;
          }
        case 1:
          {
            g_autoptr (GPtrArray) page
                = g_ptr_array_new_with_free_func (g_object_unref);
            rankEntry *top;

            g_assert_true (rank_ranking_client_recv_get_top_n (
                iface, &page, &invalid, &unavailable, &denied, &error));
            g_assert_cmpuint (page->len, ==, MIN (k + 1, 3));
            top = page->pdata[0];
            g_assert_cmpint (top->score, ==, 100 + 4 * k);
            g_assert_true (top->__isset_data);
            {
              g_autofree char *rid = g_strdup_printf ("r%d", 4 * k);

              g_assert_cmpstr (g_hash_table_lookup (top->data, "k"), ==, rid);
            }
            break;
          }
        case 2:
          {
            rankEntry *e = g_object_new (RANK_TYPE_ENTRY, NULL);

            g_assert_true (rank_ranking_client_recv_get_rank (
                iface, &e, &invalid, &not_found, &unavailable, &denied,
                &error));
            g_assert_cmpint (e->score, ==, 100 + 4 * k);
            g_assert_cmpint (e->rank, ==, 1);
            g_object_unref (e);
            break;
          }
        default:
          expect_app_exception (
              p, 1000 + i, THRIFT_APPLICATION_EXCEPTION_ERROR_PROTOCOL_ERROR,
              "missing required field 'member'");
          break;
        }
    }
}

static void
test_unknown_method (void)
{
  g_autoptr (RankClient) c
      = rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY);
  RankClientTransport *t = rank_client_get_transport (c);
  g_autoptr (ThriftProtocol) p
      = rank_protocol_new (RANK_PROTOCOL_BINARY, THRIFT_TRANSPORT (t));

  thrift_protocol_write_message_begin (p, "Explode", T_CALL, 3, NULL);
  thrift_protocol_write_struct_begin (p, "args", NULL);
  thrift_protocol_write_field_stop (p, NULL);
  thrift_protocol_write_struct_end (p, NULL);
  thrift_protocol_write_message_end (p, NULL);
  g_assert_true (thrift_transport_flush (THRIFT_TRANSPORT (t), NULL));
  expect_app_exception (p, 3, THRIFT_APPLICATION_EXCEPTION_ERROR_UNKNOWN_METHOD,
                        NULL);
  {
    g_autofree char *b = rank_test_unique ("after-unknown");
    g_auto (Result) r = get_rank_on (c, b, "ann");
    assert_fails (&r, NOT_FOUND, NULL);
  }
}

int
main (int argc, char **argv)
{
  service_start (&argc, &argv);

  g_test_add_func ("/hostile/random-bytes", test_hostile_random_bytes);
  g_test_add_func ("/hostile/zero-length-frame", test_hostile_zero_frame);
  g_test_add_func ("/hostile/2GiB-length-prefix", test_hostile_huge_prefix);
  g_test_add_func ("/hostile/http-request", test_hostile_http);
  g_test_add_func ("/hostile/args-as-generated", test_args_as_generated);
  g_test_add_func ("/hostile/batch-args-as-generated",
                   test_batch_args_as_generated);
  g_test_add_func ("/hostile/missing-required-field",
                   test_missing_required_field);
  g_test_add_func ("/hostile/unknown-method", test_unknown_method);
  /* Its path is kept (-s names it); it is here for the calls written by
   * hand, which it mixes with the generated client's. */
  g_test_add_func ("/transport/pipelined-replies-in-order",
                   test_pipelined_in_order);
  return service_run ();
}
