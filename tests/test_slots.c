/* test_slots.c -- Redis Cluster routing's pure parts: slots of keys (known
 * vectors from the Redis Cluster specification and from CLUSTER KEYSLOT)
 * and redirect replies.
 */
#include <string.h>

#include "cluster.h"

static guint
slot_of (const char *key)
{
  return rank_cluster_slot (key, strlen (key));
}

static void
test_crc16 (void)
{
  /* The specification's check value for CRC16-XMODEM. */
  g_assert_cmpuint (rank_cluster_crc16 ("123456789", 9), ==, 0x31C3);
  g_assert_cmpuint (rank_cluster_crc16 ("", 0), ==, 0);
}

static void
test_slots (void)
{
  /* As CLUSTER KEYSLOT answers (Redis 7.0). */
  g_assert_cmpuint (slot_of ("foo"), ==, 12182);
  g_assert_cmpuint (slot_of ("{plain}"), ==, 7143);
  g_assert_cmpuint (slot_of ("rk:{plain}:z"), ==, 7143);
  g_assert_cmpuint (slot_of ("rk:{plain}:q:42:0:1"), ==, 7143);
  /* The specification's hash-tag rules. */
  g_assert_cmpuint (slot_of ("{user1000}.following"), ==,
                    slot_of ("{user1000}.followers"));
  g_assert_cmpuint (slot_of ("foo{}{bar}"), ==,
                    rank_cluster_crc16 ("foo{}{bar}", 10) % 16384);
  g_assert_cmpuint (slot_of ("foo{{bar}}zap"), ==,
                    rank_cluster_crc16 ("{bar", 4) % 16384);
  g_assert_cmpuint (slot_of ("foo{bar}{zap}"), ==, slot_of ("bar"));
  g_assert_cmpuint (slot_of ("no-close{abc"), ==,
                    rank_cluster_crc16 ("no-close{abc", 12) % 16384);
  /* A shard's keys share its own tag, not the board's. */
  g_assert_cmpuint (slot_of ("rk:s:{b/3}:z"), ==, slot_of ("b/3"));
  g_assert_cmpuint (slot_of ("rk:s:{b/3}:t"), ==, slot_of ("rk:s:{b/3}:z"));
}

static void
test_redirects (void)
{
  g_autofree char *host = NULL;
  gboolean ask = TRUE;
  guint slot = 0;
  guint16 port = 0;
  const char *bad[] = { "MOVED",
                        "MOVED 3999",
                        "MOVED x 127.0.0.1:6381",
                        "MOVED 16384 127.0.0.1:6381",
                        "MOVED 1 127.0.0.1",
                        "MOVED 1 127.0.0.1:0",
                        "MOVED 1 127.0.0.1:70000",
                        "MOVED 1 :6381",
                        "ASK  1 h:1",
                        "NOSCRIPT No matching script",
                        "ERR MOVED 1 h:1" };

  g_assert_true (rank_cluster_parse_redirect ("MOVED 3999 127.0.0.1:6381", &ask,
                                              &slot, &host, &port));
  g_assert_false (ask);
  g_assert_cmpuint (slot, ==, 3999);
  g_assert_cmpstr (host, ==, "127.0.0.1");
  g_assert_cmpuint (port, ==, 6381);
  g_clear_pointer (&host, g_free);
  g_assert_true (rank_cluster_parse_redirect ("ASK 0 ::1:7000", &ask, &slot,
                                              &host, &port));
  g_assert_true (ask);
  g_assert_cmpuint (slot, ==, 0);
  g_assert_cmpstr (host, ==, "::1");
  g_assert_cmpuint (port, ==, 7000);
  g_clear_pointer (&host, g_free);
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      if (rank_cluster_parse_redirect (bad[i], &ask, &slot, &host, &port))
        g_error ("'%s' taken for a redirect", bad[i]);
      g_assert_null (host);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cluster/crc16", test_crc16);
  g_test_add_func ("/cluster/slots", test_slots);
  g_test_add_func ("/cluster/redirects", test_redirects);
  return g_test_run ();
}
