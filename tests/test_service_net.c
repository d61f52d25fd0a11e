/* test_service_net.c -- connections, end to end (a real redis-server, a
 * real rankd): the connection limits, clients that stall, never read or
 * half-close, 1,000 connections at once, every transport and protocol.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "constants.h"
#include "service.h"

/* ---- connection limits ---- */

/* A client whose connection rankd serves. Connecting may be refused
 * while rankd still counts a connection that just closed (the harness's
 * readiness probe, say): then try again, within a deadline. */
static RankClient *
served_client (guint16 port)
{
  gint64 end = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;

  for (;;)
    {
      RankClient *c = rank_test_client (port, TRUE, RANK_PROTOCOL_BINARY);
      rankEntry *entry = g_object_new (RANK_TYPE_ENTRY, NULL);
      rankInvalidArgument *invalid = NULL;
      rankNotFound *not_found = NULL;
      rankUnavailable *unavailable = NULL;
      GError *error = NULL;

      positional_get_rank (rank_client_iface (c), &entry, "b", "m", 0, &invalid,
                           &not_found, &unavailable, &error);
      g_object_unref (entry);
      g_clear_object (&invalid);
      g_clear_object (&unavailable);
      if (not_found != NULL)
        {
          g_object_unref (not_found);
          return c;
        }
      g_clear_error (&error);
      rank_client_free (c);
      g_assert_cmpint (g_get_monotonic_time (), <, end);
      g_usleep (20 * 1000);
    }
}

static void
test_max_connections (void)
{
  const char *args[] = { "--max-connections", "3", NULL };
  RankTestProcess *own = rank_test_rankd_start (redis->port, args);
  RankClient *clients[3];
  g_autofree char *b = rank_test_unique ("maxconn");
  int extra;

  for (int i = 0; i < 3; i++)
    clients[i] = served_client (own->port);
  extra = rank_test_connect_raw (own->port);
  /* Refused: closed at once, without a byte. */
  g_assert_true (rank_test_wait_closed (extra, 5000));
  close (extra);
  for (int i = 0; i < 3; i++)
    {
      g_autofree char *rid = g_strdup_printf ("c%d", i);
      g_auto (Result) u
          = update_on (clients[i], b, "ann", 1, rid, NO_MODE, NO_TIME);
      assert_ok (&u);
      g_assert_cmpint (u.score, ==, i + 1);
      rank_client_free (clients[i]);
    }
  stop_checked (own);
  rank_test_process_free (own);
}

static void
test_idle_timeout (void)
{
  const char *args[] = { "--idle-timeout", "1", NULL };
  RankTestProcess *own = rank_test_rankd_start (redis->port, args);
  g_autoptr (RankClient) busy
      = rank_test_client (own->port, TRUE, RANK_PROTOCOL_BINARY);
  g_autofree char *b = rank_test_unique ("idle");
  int idle = rank_test_connect_raw (own->port);
  gint64 start = g_get_monotonic_time ();

  /* The idle one is closed after about a second (the sweep runs once a
   * second); the busy one, calling every 100 ms, stays. */
  while (g_get_monotonic_time () - start < 2500 * 1000)
    {
      g_auto (Result) r = get_rank_on (busy, b, "nobody");
      assert_fails (&r, NOT_FOUND, NULL);
      g_usleep (100 * 1000); /* the client's own pace, not a wait */
    }
  g_assert_true (rank_test_wait_closed (idle, 3000));
  close (idle);
  {
    g_auto (Result) r = get_rank_on (busy, b, "nobody");
    assert_fails (&r, NOT_FOUND, NULL);
  }
  g_clear_pointer (&busy, rank_client_free);
  stop_checked (own);
  rank_test_process_free (own);
}

/* ---- client faults ---- */

/* A framed, strict-binary GetTopN(board, n, 0) call, encoded by hand. */
static GByteArray *
top_call_frame (const char *board, gint32 n, gint32 seqid)
{
  GByteArray *b = frame_begin ("GetTopN", seqid);

  frame_request (b);
  frame_field (b, 11, 1); /* 1: string board */
  frame_put_str (b, board);
  frame_field (b, 8, 2); /* 2: i32 n */
  frame_put_u32 (b, (guint32) n);
  frame_field (b, 8, 3); /* 3: i32 offset */
  frame_put_u32 (b, 0);
  frame_request_end (b);
  frame_end (b);
  return b;
}

/* A client that sends half a request and stalls holds its own connection
 * only: others are served meanwhile, and it is closed once the request has
 * not arrived whole within 10 s. */
static void
test_half_frame_stalls (void)
{
  g_autoptr (GByteArray) frame = top_call_frame ("stall", 10, 1);
  int fd = rank_test_connect_raw (rankd->port);
  gint64 start = g_get_monotonic_time ();

  g_assert_cmpint (write (fd, frame->data, frame->len / 2), ==, frame->len / 2);
  assert_still_serving ();
  g_assert_true (
      rank_test_wait_closed (fd, RANK_REQUEST_READ_TIMEOUT_MS + 5000));
  g_assert_cmpint (g_get_monotonic_time () - start, >=,
                   (RANK_REQUEST_READ_TIMEOUT_MS - 1000) * 1000);
  close (fd);
}

/* A client that sends requests and never reads the replies: rankd answers
 * one request at a time and reads no more while the reply is unsent, so the
 * client costs one reply's buffer, whatever it sends. */
static void
test_slow_reader (void)
{
  g_autofree char *b = rank_test_unique ("slowread");
  g_autoptr (GByteArray) frame = top_call_frame (b, RANK_TOP_N_MAX, 9);
  int fd = rank_test_connect_raw (rankd->port);
  gsize sent = 0, before, after;
  int frames = 0;

  for (int i = 0; i < RANK_TOP_N_MAX; i++)
    {
      g_autofree char *m = g_strdup_printf ("member-with-a-long-name-%04d", i);
      g_auto (Result) r = update (b, m, i, m, NO_MODE, NO_TIME);

      assert_ok (&r);
    }
  before = rankd_rss ();
  /* Send until the socket takes no more (rankd stopped reading). */
  fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) | O_NONBLOCK);
  while (sent < 64 * 1024 * 1024)
    {
      ssize_t n = write (fd, frame->data + sent % frame->len,
                         frame->len - sent % frame->len);

      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        {
          struct pollfd pfd = { fd, POLLOUT, 0 };

          if (poll (&pfd, 1, 500) == 0)
            break; /* nothing more accepted for 0.5 s: rankd stopped */
          continue;
        }
      g_assert_cmpint (n, >, 0);
      sent += (gsize) n;
      frames = (int) (sent / frame->len);
    }
  g_test_message ("%d requests (%zu KiB) sent, none read", frames, sent / 1024);
  /* Taken: the kernel's socket buffers and at most one max-size request
   * (1 MiB) buffered by rankd; then nothing more. */
  g_assert_cmpuint (sent, <, 32 * 1024 * 1024);
  assert_still_serving ();
  after = rankd_rss ();
  g_test_message ("rankd RSS %zu KiB -> %zu KiB", before, after);
#ifndef RANKD_SANITIZE /* ASan's quarantine holds freed memory */
  if (g_getenv ("RANKD_TEST_WRAPPER") == NULL)
    g_assert_cmpuint (after, <, before + 4096);
#endif
  close (fd);
  assert_still_serving ();
}

/* A client that sends its requests and half-closes (shutdown(SHUT_WR)) gets
 * every reply, then rankd closes the connection. Found by the fuzz target:
 * with edge-triggered events the FIN that came with the last request went
 * unseen, and the connection stayed open until the idle timeout. */
static void
test_half_close (void)
{
  g_autofree char *b = rank_test_unique ("halfclose");
  int fd = rank_test_connect_raw (rankd->port);
  GByteArray *all = g_byte_array_new ();
  guint8 buf[65536];
  gsize got = 0;
  gint64 start = g_get_monotonic_time ();

  for (int i = 0; i < 3; i++)
    {
      g_autoptr (GByteArray) f = top_call_frame (b, 10, i);

      g_byte_array_append (all, f->data, f->len);
    }
  /* One write, then FIN: they reach rankd together. */
  g_assert_cmpint (write (fd, all->data, all->len), ==, all->len);
  shutdown (fd, SHUT_WR);
  for (;;)
    {
      ssize_t n = read (fd, buf, sizeof buf);

      g_assert_cmpint (n, >=, 0); /* not a 10 s receive timeout */
      if (n == 0)
        break;
      got += (gsize) n;
    }
  /* Three empty pages: each a 4-byte frame length and a reply of 31 bytes
   * (header 19; the result struct with an empty list 9). */
  g_assert_cmpuint (got, ==, 3 * (4 + 19 + 9));
  g_assert_cmpint (g_get_monotonic_time () - start, <, 5 * G_USEC_PER_SEC);
  g_byte_array_unref (all);
  close (fd);
}

/* Reads exactly n bytes (10 s receive timeout): FALSE if the connection
 * closed first. */
static gboolean
read_exactly (int fd, guint8 *buf, gsize n)
{
  for (gsize got = 0; got < n;)
    {
      ssize_t r = read (fd, buf + got, n - got);

      if (r <= 0)
        return FALSE;
      got += (gsize) r;
    }
  return TRUE;
}

/* Unframed: a request that stops half-way, behind another request, then
 * the client half-closes. Reading the half request consumed every buffered
 * byte, and the buffer then reset itself under the message's start: the
 * rewind went past the end of the data and the next read ran off the
 * buffer (found by the fuzz target; ASan: heap-buffer-overflow). Now the
 * connection just closes after the first reply. */
static void
test_buffered_rewind_after_reset (void)
{
  const char *args[] = { "--transport", "buffered", "--io-threads", "1", NULL };
  RankTestProcess *own = rank_test_rankd_start (redis->port, args);
  g_autoptr (GByteArray) first = top_call_frame ("split", 10, 1);
  g_autoptr (GByteArray) second = top_call_frame ("split", 10, 2);
  int fd = rank_test_connect_raw (own->port);
  GByteArray *out = g_byte_array_new ();
  guint8 reply[28];

  /* Unframed: the messages without their 4-byte frame length. */
  g_byte_array_append (out, first->data + 4, first->len - 4);
  g_byte_array_append (out, second->data + 4, 30);
  g_assert_cmpint (write (fd, out->data, out->len), ==, out->len);
  g_assert_true (read_exactly (fd, reply, sizeof reply));
  /* The reply to the first; the half second is parsed and set aside. Now
   * the FIN alone. */
  shutdown (fd, SHUT_WR);
  /* EOF, and not a byte before it: there is no second request to answer.
   * (Before the fix rankd read stale buffer memory as the rest of it.) */
  g_assert_cmpint (read (fd, reply, sizeof reply), ==, 0);
  g_byte_array_unref (out);
  close (fd);
  assert_still_serving ();
  stop_checked (own);
  rank_test_process_free (own);
}

/* 1,000 connections at once, each served. */
static void
test_thousand_connections (void)
{
  g_autofree char *b = rank_test_unique ("thousand");
  GPtrArray *clients
      = g_ptr_array_new_with_free_func ((GDestroyNotify) rank_client_free);
  struct rlimit nofile;

  /* This process needs the descriptors too. */
  getrlimit (RLIMIT_NOFILE, &nofile);
  if (nofile.rlim_cur < 1200 && nofile.rlim_max >= 1200)
    {
      nofile.rlim_cur = MIN (nofile.rlim_max, 4096);
      setrlimit (RLIMIT_NOFILE, &nofile);
    }
  for (int i = 0; i < 1000; i++)
    g_ptr_array_add (
        clients, rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY));
  g_assert_cmpuint (clients->len, ==, 1000);
  for (guint i = 0; i < clients->len; i++)
    {
      g_autofree char *m = g_strdup_printf ("m%u", i);
      g_auto (Result) r = update_on (g_ptr_array_index (clients, i), b, m, 1, m,
                                     NO_MODE, NO_TIME);

      assert_ok (&r);
    }
  {
    g_autoptr (GPtrArray) page = top (b, RANK_TOP_N_MAX, 0);

    g_assert_cmpuint (page->len, ==, 1000);
  }
  g_ptr_array_unref (clients);
}

/* ---- transports and protocols ---- */

static void
check_transport (const char *transport, const char *protocol)
{
  const char *args[]
      = { "--transport", transport, "--protocol", protocol, NULL };
  RankTestProcess *own = rank_test_rankd_start (redis->port, args);
  RankProtocolKind kind;
  g_autofree char *b = rank_test_unique (transport);

  g_assert_true (rank_protocol_kind_parse (protocol, &kind));
  {
    g_autoptr (RankClient) c
        = rank_test_client (own->port, g_str_equal (transport, "framed"), kind);

    /* 200 members with long names: replies far over 512 bytes. */
    for (int i = 0; i < 200; i++)
      {
        g_autofree char *m = g_strdup_printf ("%0200d", i);
        g_autofree char *rid = g_strdup_printf ("r%d", i);
        g_auto (Result) u = update_on (c, b, m, i, rid, NO_MODE, NO_TIME);

        assert_ok (&u);
        g_assert_cmpint (u.rank, ==, 1);
      }
    g_auto (Result) r = { 0 };
    g_autoptr (GPtrArray) page = top_on (c, b, 200, 0, &r);
    g_assert_nonnull (page);
    g_assert_cmpuint (page->len, ==, 200);
    g_assert_cmpint (((rankEntry *) page->pdata[0])->score, ==, 199);
    g_auto (Result) g
        = get_rank_on (c, b, ((rankEntry *) page->pdata[5])->member);
    assert_ok (&g);
    g_assert_cmpint (g.rank, ==, 6);
  }
  stop_checked (own);
  rank_test_process_free (own);
}

static void
test_transport_framed_binary (void)
{
  check_transport ("framed", "binary");
}

static void
test_transport_framed_compact (void)
{
  check_transport ("framed", "compact");
}

static void
test_transport_buffered_binary (void)
{
  check_transport ("buffered", "binary");
}

static void
test_transport_buffered_compact (void)
{
  check_transport ("buffered", "compact");
}

int
main (int argc, char **argv)
{
  service_start (&argc, &argv);

  g_test_add_func ("/limits/max-connections", test_max_connections);
  g_test_add_func ("/limits/idle-timeout", test_idle_timeout);
  g_test_add_func ("/limits/half-frame-stalls", test_half_frame_stalls);
  g_test_add_func ("/limits/slow-reader", test_slow_reader);
  g_test_add_func ("/limits/1000-connections", test_thousand_connections);
  g_test_add_func ("/transport/half-close-gets-every-reply", test_half_close);
  g_test_add_func ("/transport/buffered-rewind-after-reset",
                   test_buffered_rewind_after_reset);
  g_test_add_func ("/transport/framed-binary", test_transport_framed_binary);
  g_test_add_func ("/transport/framed-compact", test_transport_framed_compact);
  g_test_add_func ("/transport/buffered-binary",
                   test_transport_buffered_binary);
  g_test_add_func ("/transport/buffered-compact",
                   test_transport_buffered_compact);
  return service_run ();
}
