/* test_config.c -- the configuration file: every error names the file,
 * the line and the key; good files give the options they say. */
#include <glib/gstdio.h>
#include <string.h>

#include "config.h"
#include "constants.h"

static char *dir;

/* Writes text (len bytes, -1: up to its NUL) to a file of its own;
 * returns its path. */
static char *
write_conf_bytes (const char *text, gssize len)
{
  static int n;
  char *path = g_strdup_printf ("%s/c%d.conf", dir, n++);

  g_assert_true (g_file_set_contents (path, text, len, NULL));
  return path;
}

static char *
write_conf (const char *text)
{
  return write_conf_bytes (text, -1);
}

/* Loading text fails with a message containing every one of expected. */
static void
assert_fails (const char *text, gssize len, const char *const *expected)
{
  g_autofree char *path = write_conf_bytes (text, len);
  g_autoptr (GError) error = NULL;
  RankConfig *config = rank_config_load (path, &error);

  g_assert_null (config);
  g_assert_nonnull (error);
  g_assert_true (g_str_has_prefix (error->message, path));
  for (int i = 0; expected[i] != NULL; i++)
    if (strstr (error->message, expected[i]) == NULL)
      g_error ("'%s' lacks '%s'", error->message, expected[i]);
}

#define FAILS(text, ...)                                                       \
  assert_fails (text, -1, (const char *const[]){ __VA_ARGS__, NULL })
/* The same for text with NUL bytes in it: sizeof the literal, less its
 * terminating NUL. */
#define FAILS_BYTES(text, ...)                                                 \
  assert_fails (text, sizeof text - 1,                                         \
                (const char *const[]){ __VA_ARGS__, NULL })

static void
test_errors (void)
{
  g_autofree char *missing = g_strdup_printf ("%s/none.conf", dir);
  g_autoptr (GError) error = NULL;

  g_assert_null (rank_config_load (missing, &error));
  g_assert_nonnull (strstr (error->message, "none.conf"));

  FAILS ("[defaults]\nshards=\xff\n", "not valid UTF-8");
  FAILS ("[defaults\nshards=2\n", ":1: ", "'[name]'");
  FAILS ("[defaults] x\n", ":1: ", "'[name]'");
  FAILS ("# c\n\n[boards x]\n", ":3: ", "[boards x]", "unknown section");
  FAILS ("[defaults]\nshards=2\n[defaults]\n", ":3: ", "repeats", "line 1");
  FAILS ("shards=2\n", ":1: ", "before the first [section]");
  FAILS ("[defaults]\nshards\n", ":2: ", "expected key=value");
  FAILS ("[defaults]\nshard=2\n", ":2: ", "[defaults] shard", "unknown key",
         "shards, max_top_depth, order, rank, mode, dedup_window, cap, period");
  FAILS ("[board a]\nshards=2\n  shards = 3\n", ":3: ", "[board a] shards",
         "repeats", "line 2");
  FAILS ("[redis]\nshards=2\n", ":2: ", "[redis] shards", "unknown key",
         "nodes");
  FAILS ("[board a]\n\nshards=ten\n", ":3: ", "[board a] shards",
         "integer 1-64", "'ten'");
  FAILS ("[board a]\nshards=0\n", ":2: ", "integer 1-64", "'0'");
  FAILS ("[board a]\nshards=65\n", ":2: ", "'65'");
  FAILS ("[board a]\nshards=-1\n", ":2: ", "'-1'");
  FAILS ("[defaults]\nmax_top_depth=100001\n",
         ":2: ", "[defaults] max_top_depth", "1-100000");
  FAILS ("[board a]\norder=up\n", ":2: ", "[board a] order",
         "must be one of desc, asc, got 'up'");
  FAILS ("[defaults]\nrank=olympic\n", ":2: ", "[defaults] rank",
         "ordinal, competition, dense");
  FAILS ("[board a]\nmode=add\n", ":2: ", "increment, best, set", "'add'");
  FAILS ("[board a]\ndedup_window=0\n", ":2: ", "dedup_window",
         "integer 1-2592000");
  FAILS ("[board a]\ncap=0\n", ":2: ", "[board a] cap", "integer 1-10000000");
  FAILS ("[board a]\nshards=2\nrank=dense\ncap=5\n", ":4: ", "[board a] cap",
         "must have rank=ordinal");
  FAILS ("[defaults]\ncap=5\n[board a]\nshards=2\nrank=dense\n",
         ":3: ", "[board a]: a capped sharded board");
  FAILS ("[board a]\nperiod=yearly\n", ":2: ", "[board a] period",
         "none, hourly, daily, weekly, monthly, custom");
  FAILS ("[board a]\nperiod=daily\ntimezone=Mars/Olympus\n",
         ":3: ", "[board a] timezone",
         "'Mars/Olympus' is not an IANA time zone");
  FAILS ("[board a]\nperiod=custom\n", ":2: ", "[board a] period",
         "needs period_seconds");
  FAILS ("[board a]\nweek_start=someday\n", ":2: ", "monday, tuesday");
  FAILS ("[board a]\naccept_late=yes\n", ":2: ", "false, true", "'yes'");
  FAILS ("[board a]\nretention=10001\n", ":2: ", "integer 0-10000");
  FAILS ("[board a{b]\nshards=2\n", ":1: ", "[board a{b]", "'{'");
  FAILS ("[board ]\nshards=2\n", ":1: ", "board: must be 1-200 bytes");
  FAILS ("[redis]\nnodes=\n", ":2: ", "[redis] nodes", "at least one");
  FAILS ("[redis]\nnodes=127.0.0.1:1;127.0.0.1:99999\n", ":2: ", "node 2");
  {
    GString *many = g_string_new ("[redis]\nnodes=");

    for (int i = 0; i <= RANK_NODES_MAX; i++)
      g_string_append_printf (many, "127.0.0.1:%d;", 1000 + i);
    FAILS (many->str, ":2: ", "at most 64 nodes");
    g_string_free (many, TRUE);
  }
  FAILS ("[redis]\nnodes=a\\q:1\n", ":2: ", "[redis] nodes",
         "cannot be interpreted");
  FAILS ("[board a]\nread_cache=always\n", ":2: ", "[board a] read_cache",
         "off, tracked", "'always'");
  FAILS ("[board a]\nread_cache_ms=3600001\n", ":2: ", "integer 0-3600000");
  FAILS ("[defaults]\nread_from=anywhere\n", ":2: ", "[defaults] read_from",
         "primary, replica");
  FAILS ("[board a]\nmax_replica_lag_ms=0\n", ":2: ", "max_replica_lag_ms",
         "integer 1-3600000");
  FAILS ("[redis]\nreplicas=127.0.0.1:7000\n", ":2: ", "[redis] replicas",
         "entry 1", "PRIMARY=REPLICA");
  FAILS ("[redis]\nreplicas=127.0.0.1:7000=127.0.0.1:99999\n",
         ":2: ", "entry 1: replica 1");
  FAILS ("[redis]\nreplicas=127.0.0.1:7000=a:1;127.0.0.1:7000=b:1\n",
         ":2: ", "127.0.0.1:7000 is given twice");
  /* GKeyFile's own checks (a group name it refuses) still name the file. */
  FAILS ("[board a[b]\n", "group name");
}

static void
test_good (void)
{
  g_autofree char *path
      = write_conf ("# a comment\n"
                    "[board hot]\n"
                    "shards = 10\n"
                    "[defaults]\n"
                    "max_top_depth=500\n"
                    "[board deep]\n"
                    "shards=4\n"
                    "max_top_depth=20000\n"
                    "order = asc\n"
                    "rank=dense\n"
                    "mode=set\n"
                    "dedup_window=60\n"
                    "period=weekly\n"
                    "week_start=sunday\n"
                    "timezone=Europe/Paris\n"
                    "accept_late=true\n"
                    "[board ünïcode/x]\n"
                    "shards=2\n"
                    "read_cache=tracked\n"
                    "read_from=replica\n"
                    "[board timed]\n"
                    "read_cache_ms=250\n"
                    "max_replica_lag_ms=20\n"
                    "[redis]\n"
                    "nodes=127.0.0.1:7000; unix:/tmp/r.sock ;[::1]:7002\n"
                    "replicas=127.0.0.1:7000=127.0.0.1:7100, 127.0.0.1:7101;"
                    "unix:/tmp/r.sock=unix:/tmp/r2.sock\n");
  g_autoptr (GError) error = NULL;
  RankConfig *config = rank_config_load (path, &error);
  const char *const *nodes;

  g_assert_no_error (error);
  g_assert_cmpuint (rank_config_board (config, "hot")->shards, ==, 10);
  /* [defaults] applies to boards whatever its place in the file. */
  g_assert_cmpuint (rank_config_board (config, "hot")->max_top_depth, ==, 500);
  g_assert_cmpuint (rank_config_board (config, "deep")->max_top_depth, ==,
                    20000);
  g_assert_cmpuint (rank_config_board (config, "ünïcode/x")->shards, ==, 2);
  g_assert_cmpint (rank_config_board (config, "deep")->order, ==,
                   RANK_ORDER_ASC);
  g_assert_cmpint (rank_config_board (config, "deep")->rank, ==,
                   RANK_KIND_DENSE);
  g_assert_cmpint (rank_config_board (config, "deep")->mode, ==, RANK_MODE_SET);
  g_assert_cmpuint (rank_config_board (config, "deep")->dedup_window_s, ==, 60);
  g_assert_cmpint (rank_config_board (config, "hot")->order, ==,
                   RANK_ORDER_DESC);
  g_assert_cmpint (rank_config_board (config, "hot")->rank, ==,
                   RANK_KIND_ORDINAL);
  g_assert_cmpint (rank_config_board (config, "hot")->mode, ==,
                   RANK_MODE_INCREMENT);
  g_assert_cmpuint (rank_config_board (config, "hot")->dedup_window_s, ==, 0);
  g_assert_cmpint (rank_config_board (config, "hot")->period.kind, ==,
                   RANK_PERIOD_NONE);
  g_assert_cmpuint (rank_config_board (config, "hot")->retention, ==, 1);
  g_assert_cmpint (rank_config_board (config, "deep")->period.kind, ==,
                   RANK_PERIOD_WEEKLY);
  g_assert_cmpint (rank_config_board (config, "deep")->period.week_start, ==,
                   7);
  g_assert_true (rank_config_board (config, "deep")->accept_late);
  g_assert_cmpstr (g_time_zone_get_identifier (
                       rank_config_board (config, "deep")->period.timezone),
                   ==, "Europe/Paris");
  g_assert_cmpuint (rank_config_board (config, "other")->shards, ==, 1);
  g_assert_cmpuint (rank_config_board (config, "other")->max_top_depth, ==,
                    500);
  nodes = rank_config_redis_nodes (config);
  g_assert_cmpuint (g_strv_length ((char **) nodes), ==, 3);
  g_assert_cmpstr (nodes[1], ==, "unix:/tmp/r.sock");
  g_assert_true (rank_config_board (config, "ünïcode/x")->read_cache_tracked);
  g_assert_true (rank_config_board (config, "ünïcode/x")->read_from_replica);
  g_assert_false (rank_config_board (config, "hot")->read_cache_tracked);
  g_assert_false (rank_config_board (config, "hot")->read_from_replica);
  g_assert_cmpuint (rank_config_board (config, "hot")->read_cache_ms, ==, 0);
  g_assert_cmpuint (rank_config_board (config, "hot")->max_replica_lag_ms, ==,
                    RANK_REPLICA_LAG_DEFAULT_MS);
  g_assert_cmpuint (rank_config_board (config, "timed")->read_cache_ms, ==,
                    250);
  g_assert_cmpuint (rank_config_board (config, "timed")->max_replica_lag_ms, ==,
                    20);
  /* Replicas by primary, compared as addresses. */
  nodes = rank_config_redis_replicas (config, "127.0.0.1:7000");
  g_assert_cmpuint (g_strv_length ((char **) nodes), ==, 2);
  g_assert_cmpstr (nodes[1], ==, "127.0.0.1:7101");
  nodes = rank_config_redis_replicas (config, "unix:/tmp/r.sock");
  g_assert_cmpstr (nodes[0], ==, "unix:/tmp/r2.sock");
  g_assert_null (rank_config_redis_replicas (config, "[::1]:7002"));
  g_assert_cmpuint (rank_config_redis_replica_sets (config), ==, 2);
  rank_config_unref (config);

  config = rank_config_new ();
  g_assert_cmpuint (rank_config_board (config, "x")->shards, ==, 1);
  g_assert_cmpuint (rank_config_board (config, "x")->max_top_depth, ==,
                    RANK_DEFAULT_MAX_TOP_DEPTH);
  g_assert_null (rank_config_redis_nodes (config)[0]);
  rank_config_unref (config);
}

/* A NUL byte cut the file short (what followed it was silently dropped:
 * "\0[board hot]..." started with no boards, "shards=3\0garbage" read 3);
 * it is an error with its line, and so is any other control character. */
static void
test_text_only (void)
{
  g_autoptr (RankConfig) crlf = NULL;
  g_autofree char *path = NULL;

  FAILS_BYTES ("\0[board hot]\nshards=10\n", ":1: ", "NUL byte",
               "must be text");
  FAILS_BYTES ("[defaults]\nshards=3\0garbage\n", ":2: ", "NUL byte");
  FAILS_BYTES ("[board a]\n\nshards=3\n\0", ":4: ", "NUL byte");
  FAILS ("[defaults]\nshards=3\x01\n", ":2: ", "control character", "0x01");
  FAILS ("[defaults]\x1b[2J\nshards=3\n", ":1: ", "control character");
  /* Windows line ends are text. */
  path = write_conf ("[board a]\r\nshards=3\r\n");
  crlf = rank_config_load (path, NULL);
  g_assert_nonnull (crlf);
  g_assert_cmpuint (rank_config_board (crlf, "a")->shards, ==, 3);
}

/* timezone= takes IANA names only; GLib would open a path (and print a
 * CRITICAL on a file that is not a zone file, which g_test makes fatal
 * here). */
static void
test_timezone_names (void)
{
  g_autoptr (RankConfig) paris = NULL;
  g_autofree char *path = NULL;

  FAILS ("[board p]\nperiod=daily\ntimezone=/etc/passwd\n",
         ":3: ", "[board p] timezone", "not an IANA time zone name");
  FAILS ("[board p]\ntimezone=../../../etc/passwd\n", ":2: ", "timezone");
  FAILS ("[board p]\ntimezone=Europe/../../etc/passwd\n", ":2: ", "timezone");
  FAILS ("[board p]\ntimezone=+01:00\n", ":2: ", "timezone");
  FAILS ("[board p]\ntimezone=Mars/Olympus\n", ":2: ", "timezone");
  if (g_file_test ("/usr/share/zoneinfo/leapseconds", G_FILE_TEST_EXISTS))
    FAILS ("[board p]\ntimezone=leapseconds\n", ":2: ", "timezone");
  path = write_conf ("[board p]\nperiod=daily\ntimezone=Europe/Paris\n");
  paris = rank_config_load (path, NULL);
  g_assert_nonnull (paris);
}

/* [grant NAME] sections and --grant options (access.h): who has which
 * role on which boards; the defaults without any; what whoami lists. */
static void
test_grants (void)
{
  g_autofree char *path
      = write_conf ("[grant web]\nread=*\nwrite = season_* ; daily_?;\n"
                    "[grant anonymous]\nread=public\n"
                    "[grant uid:1000]\n");
  g_autoptr (GError) error = NULL;
  g_autoptr (RankConfig) config = rank_config_load (path, &error);
  g_autoptr (RankConfig) none = rank_config_new ();
  const RankGrants *g;
  g_auto (GStrv) web = NULL, anon = NULL, nobody = NULL, defaults = NULL;

  g_assert_no_error (error);
  g = rank_config_grants (config);
  g_assert_true (rank_grants_configured (g));
  g_assert_true (rank_grants_allow (g, "web", RANK_ROLE_READ, "anything"));
  g_assert_true (rank_grants_allow (g, "web", RANK_ROLE_WRITE, "season_12"));
  g_assert_true (rank_grants_allow (g, "web", RANK_ROLE_WRITE, "daily_7"));
  g_assert_false (rank_grants_allow (g, "web", RANK_ROLE_WRITE, "daily_17"));
  g_assert_false (rank_grants_allow (g, "web", RANK_ROLE_WRITE, "season"));
  g_assert_false (rank_grants_allow (g, "web", RANK_ROLE_ADMIN, "season_1"));
  g_assert_true (rank_grants_allow (g, NULL, RANK_ROLE_READ, "public"));
  g_assert_false (rank_grants_allow (g, NULL, RANK_ROLE_READ, "public2"));
  /* A certificate named "anonymous" is not the anonymous caller. */
  g_assert_false (rank_grants_allow (g, "anonymous", RANK_ROLE_READ, "public"));
  /* An identity without a section, or with an empty one: nothing. */
  g_assert_false (rank_grants_allow (g, "db", RANK_ROLE_READ, "public"));
  g_assert_false (rank_grants_any (g, "uid:1000", RANK_ROLE_READ));
  g_assert_true (rank_grants_allow (g, "db", RANK_ROLE_NONE, "x"));
  web = rank_grants_describe (g, "web");
  g_assert_cmpstrv (web, ((const char *const[]){ "read:*", "write:daily_?",
                                                 "write:season_*", NULL }));
  anon = rank_grants_describe (g, NULL);
  g_assert_cmpstrv (anon, ((const char *const[]){ "read:public", NULL }));
  nobody = rank_grants_describe (g, "uid:1000");
  g_assert_cmpuint (g_strv_length (nobody), ==, 0);

  /* No grant at all: read and write for everyone, admin for nobody. */
  g = rank_config_grants (none);
  g_assert_false (rank_grants_configured (g));
  g_assert_true (rank_grants_allow (g, NULL, RANK_ROLE_WRITE, "b"));
  g_assert_true (rank_grants_allow (g, "web", RANK_ROLE_READ, "b"));
  g_assert_false (rank_grants_allow (g, NULL, RANK_ROLE_ADMIN, "b"));
  defaults = rank_grants_describe (g, NULL);
  g_assert_cmpstrv (defaults,
                    ((const char *const[]){ "read:*", "write:*", NULL }));

  /* --grant: roles on every board, added to the file's. */
  g_assert_true (rank_config_add_grant_option (config, "web=admin", &error));
  g_assert_true (rank_grants_allow (rank_config_grants (config), "web",
                                    RANK_ROLE_ADMIN, "x"));
  g_assert_false (rank_config_add_grant_option (none, "web", &error));
  g_assert_nonnull (strstr (error->message, "NAME=ROLE"));
  g_clear_error (&error);
  g_assert_false (rank_config_add_grant_option (none, "web=read,sudo", &error));
  g_assert_nonnull (strstr (error->message, "'sudo' is not a role"));
  g_clear_error (&error);
  g_assert_false (rank_grants_configured (rank_config_grants (none)));

  FAILS ("[grant web]\nread=*\nexecute=*\n",
         ":3: [grant web] execute: unknown key");
  FAILS ("[grant web]\nwrite=ok;bad{\n",
         ":2: [grant web] write: board pattern 'bad{'");
  FAILS ("[grant web]\nadmin= \n",
         ":2: [grant web] admin: name at least one board pattern");
  FAILS ("[grant  web]\n", ":1: [grant  web]: NAME must be");
  FAILS ("[grants web]\n", ":1: [grants web]: unknown section", "[grant NAME]");
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  dir = g_dir_make_tmp ("rankd-config-XXXXXX", NULL);
  g_test_add_func ("/config/errors", test_errors);
  g_test_add_func ("/config/good", test_good);
  g_test_add_func ("/config/text-only", test_text_only);
  g_test_add_func ("/config/timezone-names", test_timezone_names);
  g_test_add_func ("/config/grants", test_grants);
  status = g_test_run ();
  {
    g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
    const char *name;

    while (d != NULL && (name = g_dir_read_name (d)) != NULL)
      {
        g_autofree char *p = g_build_filename (dir, name, NULL);

        g_unlink (p);
      }
  }
  g_rmdir (dir);
  g_free (dir);
  return status;
}
